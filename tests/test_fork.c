/* test_fork.c -- a process forked after the parent used the multithreaded CPU path
 * (issue #39 item 1): the child's first call on every context completes (the parent's
 * pools have no workers in the child; each is replaced on its next use) and gives the
 * parent's bits. The parent waits for the child with a deadline, so a regression fails
 * (the child is killed) instead of hanging the suite. */
#include "cg_test.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The shape: B=2, T=300, G=2, H=4, dk=8, dv=5, token-major, float32. */
typedef struct fork_fix {
    cg_tbuf q, k, v, la, o, hT;
} fork_fix;

static void fix_new(fork_fix *f) {
    cg_rng r = {7};
    int64_t sq[] = {2, 300, 2, 8}, sv[] = {2, 300, 4, 5}, sl[] = {2, 300, 4}, ss[] = {2, 4, 8, 5};
    f->q = cg_tbuf_new(CG_F32, 4, sq);
    f->k = cg_tbuf_new(CG_F32, 4, sq);
    f->v = cg_tbuf_new(CG_F32, 4, sv);
    f->la = cg_tbuf_new(CG_F32, 3, sl);
    f->o = cg_tbuf_new(CG_F32, 4, sv);
    f->hT = cg_tbuf_new(CG_F32, 4, ss);
    cg_tbuf_fill(&f->q, &r, -1, 1);
    cg_tbuf_fill(&f->k, &r, -1, 1);
    cg_tbuf_fill(&f->v, &r, -1, 1);
    cg_tbuf_fill(&f->la, &r, -0.5, 0);
}

static void fix_free(fork_fix *f) {
    cg_tbuf *all[] = {&f->q, &f->k, &f->v, &f->la, &f->o, &f->hT};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

/* The SSD forward on the CPU path into f->o, f->hT. */
static cg_status run_fwd(cg_context *ctx, fork_fix *f) {
    cg_ssd_fwd_args a = CG_SSD_FWD_ARGS_INIT;
    a.q = f->q.t;
    a.k = f->k.t;
    a.v = f->v.t;
    a.log_alpha = f->la.t;
    a.o = f->o.t;
    a.hT = f->hT.t;
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = CG_BACKEND_CPU;
    return cg_ssd_fwd(ctx, &a, &ex);
}

/* Wait for pid at most secs seconds; kill it past that. Returns its wait status, or -1
 * when it had to be killed (it hung). */
static int wait_deadline(pid_t pid, double secs) {
    struct timespec t0, now, nap = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int status = 0;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) return status;
        if (w < 0) return -2;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > secs) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

/* Child exit codes: 0 ok; 10 + n: call n failed; 20 + n: call n gave other bits. */
static int child_body(cg_context *used, cg_context *used2, cg_context *idle, fork_fix *f, const float *want_o) {
    const size_t bytes = (size_t)f->o.count * sizeof(float);
    cg_context *order[] = {used, used2};
    for (int n = 0; n < 2; n++) { /* every context that had a pool in the parent */
        memset(f->o.mem, 0, bytes);
        if (run_fwd(order[n], f) != CG_OK) return 10 + n;
        if (memcmp(f->o.mem, want_o, bytes)) return 20 + n;
    }
    /* a context whose pool the parent made is freed, resized, and used again */
    if (cg_context_set_threads(used, 3) != CG_OK) return 12;
    memset(f->o.mem, 0, bytes);
    if (run_fwd(used, f) != CG_OK) return 13;
    if (memcmp(f->o.mem, want_o, bytes)) return 23;
    cg_context_free(idle); /* the parent's pool is not joined here (its threads do not exist) */
    cg_context_free(used2);
    cg_context_free(used);
    return 0;
}

CG_TEST(fork_child_after_pool) {
    fork_fix f;
    fix_new(&f);
    cg_context *ctx = NULL, *ctx2 = NULL, *idle = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    CG_CHECK_OK(ctx2, cg_context_create(&ctx2));
    CG_CHECK_OK(idle, cg_context_create(&idle));
    /* pools with workers whatever the core count (the default is all cores) */
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 4));
    CG_CHECK_OK(ctx2, cg_context_set_threads(ctx2, 0));
    CG_CHECK_OK(idle, cg_context_set_threads(idle, 2));
    CG_CHECK_OK(ctx, run_fwd(ctx, &f));
    CG_CHECK_OK(ctx2, run_fwd(ctx2, &f));
    CG_CHECK_OK(idle, run_fwd(idle, &f)); /* a pool the child only frees */
    const size_t bytes = (size_t)f.o.count * sizeof(float);
    float *want = malloc(bytes);
    CG_CHECK(want != NULL, "out of memory");
    if (want && !cg_test_failures) {
        memcpy(want, f.o.mem, bytes);
        fflush(NULL);
        pid_t pid = fork();
        CG_CHECK(pid >= 0, "fork failed");
        if (pid == 0) _exit(child_body(ctx, ctx2, idle, &f, want));
        if (pid > 0) {
            int st = wait_deadline(pid, 60);
            CG_CHECK(st != -1, "the forked child did not finish its calls within 60 s (a hang: killed)");
            CG_CHECK(st < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
                     "the forked child failed: %s %d (exit 10+n: call n failed; 20+n: other bits)",
                     WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
        /* the parent's pools still work after the fork */
        memset(f.o.mem, 0, bytes);
        CG_CHECK_OK(ctx, run_fwd(ctx, &f));
        CG_CHECK(memcmp(f.o.mem, want, bytes) == 0, "the parent's call after the fork gave other bits");
    }
    free(want);
    cg_context_free(idle);
    cg_context_free(ctx2);
    cg_context_free(ctx);
    fix_free(&f);
}
