/* dispatch_overhead.c -- the host-side cost of a warm call (validation, config lookup,
 * plan lookup, launch arguments) on a tiny shape (SSD T = 1, dk = dv = 8; selective scan
 * L = 1, D = 8, N = 8; the decode steps on the same, issue #36), per call, and the Lua
 * calls a warm call makes (cg__gen_stats: must be 0). Paths: the CPU backend (host pointers; the tiny op's arithmetic is part
 * of it), the emulator's launch path (the launcher of generated kernels with the SIMT
 * emulator as executor: includes running the tiny kernel on the CPU), and, when
 * CHUNKGEN_LIBCUDA names the mock driver of tests/cuda_mock, the CUDA launch path
 * through a driver that runs nothing (so: host cost only).
 * Usage: cg_bench_dispatch [--json FILE] [--calls N] [--only cpu|emulate|cuda]
 * (tests/perf/dispatch_overhead.sh). It counts the generator's Lua calls and allocates
 * device memory through the executor, internals, so it lives with the tests (docs/bench.md). */
#include "chunkgen.h"
#include "cuda/cg_cuda.h"
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

typedef struct bufs {
    int cuda;
    void *p[16];
    int n;
} bufs;

static cg_tensor tens(cg_context *ctx, bufs *b, int ndim, const int64_t *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    void *p = NULL;
    if (b->cuda) {
        if (cg__kexec_cuda.alloc(ctx, n * sizeof(float), &p) != CG_OK) p = NULL;
    } else {
        p = calloc(n, sizeof(float));
    }
    b->p[b->n++] = p;
    return cg_tensor_contiguous(p, CG_F32, ndim, shape);
}

static void bufs_free(cg_context *ctx, bufs *b) {
    for (int i = 0; i < b->n; i++) {
        if (b->cuda) cg__kexec_cuda.free(ctx, b->p[i]);
        else free(b->p[i]);
    }
    b->n = 0;
}

typedef struct result {
    const char *path, *op;
    double us_per_call;
    double lua_calls_per_call;
    cg_status st;
    char msg[256];
} result;

/* Time calls of one op: 10 warm-up calls, then the best of 5 batches of n. */
static void measure(cg_context *ctx, cg_op op, const void *args, const cg_exec *ex, int n, result *r) {
    cg_status st = CG_OK;
    for (int i = 0; i < 10 && st == CG_OK; i++)
        st = cg_run(ctx, op, args, ex);
    r->st = st;
    if (st != CG_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", cg_errmsg(ctx));
        return;
    }
    cg_gen_stats g0, g1;
    cg__gen_stats(ctx, &g0);
    double best = 1e30;
    for (int b = 0; b < 5; b++) {
        double t0 = now_us();
        for (int i = 0; i < n; i++) (void)cg_run(ctx, op, args, ex);
        double per = (now_us() - t0) / n;
        if (per < best) best = per;
    }
    cg__gen_stats(ctx, &g1);
    r->us_per_call = best;
    r->lua_calls_per_call = (double)(g1.resolves - g0.resolves + g1.spaces - g0.spaces) / (5.0 * n);
}

/* The decode steps (issue #36) on the same tiny shapes, one token, a cache of 2 slots, entry
 * 0 reading slot 1: ssd_step and gdr_step (dk = dv = 8), sscan_step (D = N = 8). gdr_step
 * has no generated kernel: the cpu path only. */
static void run_steps(cg_context *ctx, cg_backend be, const char *path, int n, result *out, int *nout) {
    bufs b = {.cuda = be == CG_BACKEND_CUDA};
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    const int64_t qk[4] = {1, 1, 1, 8}, g[3] = {1, 1, 1}, cache[4] = {2, 1, 8, 8}, one[1] = {1};
    int32_t host_idx = 1;
    void *idx = &host_idx;
    if (b.cuda && (cg__kexec_cuda.alloc(ctx, sizeof host_idx, &idx) != CG_OK ||
                   cg__kexec_cuda.copy(ctx, idx, &host_idx, sizeof host_idx, 0, NULL) != CG_OK))
        idx = NULL;
    const cg_tensor slots = cg_tensor_contiguous(idx, CG_I32, 1, one);
    cg_ssd_step_args d = CG_SSD_STEP_ARGS_INIT;
    d.q = tens(ctx, &b, 4, qk), d.k = tens(ctx, &b, 4, qk), d.v = tens(ctx, &b, 4, qk);
    d.log_alpha = tens(ctx, &b, 3, g), d.cache = tens(ctx, &b, 4, cache), d.o = tens(ctx, &b, 4, qk);
    d.state_indices = slots;
    result *r = &out[(*nout)++];
    r->path = path, r->op = "ssd_step";
    measure(ctx, CG_OP_SSD_STEP, &d, &ex, n, r);
    bufs_free(ctx, &b);
    if (be == CG_BACKEND_CPU) {
        cg_gdr_step_args a = CG_GDR_STEP_ARGS_INIT;
        a.q = tens(ctx, &b, 4, qk), a.k = tens(ctx, &b, 4, qk), a.v = tens(ctx, &b, 4, qk);
        a.g = tens(ctx, &b, 3, g), a.beta = tens(ctx, &b, 3, g), a.cache = tens(ctx, &b, 4, cache);
        a.o = tens(ctx, &b, 4, qk), a.state_indices = slots;
        r = &out[(*nout)++];
        r->path = path, r->op = "gdr_step";
        measure(ctx, CG_OP_GDR_STEP, &a, &ex, n, r);
        bufs_free(ctx, &b);
    }
    const int64_t bld[3] = {1, 1, 8}, dn[2] = {8, 8}, sc[3] = {2, 8, 8};
    cg_sscan_step_args s = CG_SSCAN_STEP_ARGS_INIT;
    s.x = tens(ctx, &b, 3, bld), s.delta = tens(ctx, &b, 3, bld), s.A = tens(ctx, &b, 2, dn);
    s.B = tens(ctx, &b, 3, bld), s.C = tens(ctx, &b, 3, bld), s.cache = tens(ctx, &b, 3, sc), s.y = tens(ctx, &b, 3, bld);
    s.state_indices = slots;
    r = &out[(*nout)++];
    r->path = path, r->op = "sscan_step";
    measure(ctx, CG_OP_SSCAN_STEP, &s, &ex, n, r);
    bufs_free(ctx, &b);
    if (b.cuda && idx) cg__kexec_cuda.free(ctx, idx);
}

static void run_path(cg_context *ctx, cg_backend be, const char *path, int n, result *out, int *nout) {
    bufs b = {.cuda = be == CG_BACKEND_CUDA};
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    /* SSD forward, token-major, B = G = H = 1, T = 1, dk = dv = 8 */
    const int64_t qk[4] = {1, 1, 1, 8}, la[3] = {1, 1, 1};
    cg_ssd_fwd_args f = CG_SSD_FWD_ARGS_INIT;
    f.layout = CG_LAYOUT_TOKEN_MAJOR;
    f.q = tens(ctx, &b, 4, qk);
    f.k = tens(ctx, &b, 4, qk);
    f.v = tens(ctx, &b, 4, qk);
    f.log_alpha = tens(ctx, &b, 3, la);
    f.o = tens(ctx, &b, 4, qk);
    result *r = &out[(*nout)++];
    r->path = path;
    r->op = "ssd_fwd";
    measure(ctx, CG_OP_SSD_FWD, &f, &ex, n, r);
    bufs_free(ctx, &b);
    /* selective scan forward, B = 1, L = 1, D = 8, N = 8 */
    const int64_t bld[3] = {1, 1, 8}, dn[2] = {8, 8}, bln[3] = {1, 1, 8};
    cg_sscan_fwd_args s = CG_SSCAN_FWD_ARGS_INIT;
    s.x = tens(ctx, &b, 3, bld);
    s.delta = tens(ctx, &b, 3, bld);
    s.A = tens(ctx, &b, 2, dn);
    s.B = tens(ctx, &b, 3, bln);
    s.C = tens(ctx, &b, 3, bln);
    s.y = tens(ctx, &b, 3, bld);
    r = &out[(*nout)++];
    r->path = path;
    r->op = "sscan_fwd";
    measure(ctx, CG_OP_SSCAN_FWD, &s, &ex, n, r);
    bufs_free(ctx, &b);
    run_steps(ctx, be, path, n, out, nout);
}

int main(int argc, char **argv) {
    const char *json = NULL, *only = NULL;
    int n = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: cg_bench_dispatch [--json FILE] [--calls N] [--only cpu|emulate|cuda]\n");
            return 2;
        }
    }
    if (n < 1) n = 1;
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return 1;
    cg_context_set_tune_on_miss(ctx, 0);
    result res[24];
    int nr = 0;
    if (!only || !strcmp(only, "cpu")) run_path(ctx, CG_BACKEND_CPU, "cpu", n, res, &nr);
    if (!only || !strcmp(only, "emulate"))
        run_path(ctx, CG_BACKEND_EMULATE, "emulate (runs the kernel on the CPU)", n / 20 + 1, res, &nr);
    const char *mock = getenv("CHUNKGEN_LIBCUDA");
    if ((!only || !strcmp(only, "cuda")) && mock && strstr(mock, "mock")) run_path(ctx, CG_BACKEND_CUDA, "cuda, mock driver (host cost only)", n, res, &nr);
    FILE *f = json ? fopen(json, "w") : NULL;
    if (f) fprintf(f, "{\"kind\": \"chunkgen-dispatch-overhead\", \"chunkgen\": \"%s\", \"shape\": \"ssd T=1 dk=dv=8; "
                      "sscan L=1 D=8 N=8; steps: one token, dk=dv=8 / D=N=8, 2 slots\", \"results\": [", cg_version());
    for (int i = 0; i < nr; i++) {
        const result *r = &res[i];
        if (r->st != CG_OK) printf("%-38s %-9s failed: %s\n", r->path, r->op, r->msg);
        else printf("%-38s %-9s %8.2f us/call  %.3f Lua calls/call\n", r->path, r->op, r->us_per_call,
                    r->lua_calls_per_call);
        if (f)
            fprintf(f, "%s\n {\"path\": \"%s\", \"op\": \"%s\", \"ok\": %s, \"us_per_call\": %.3f, "
                       "\"lua_calls_per_call\": %.4f}",
                    i ? "," : "", r->path, r->op, r->st == CG_OK ? "true" : "false", r->us_per_call,
                    r->lua_calls_per_call);
    }
    if (f) {
        fprintf(f, "\n]}\n");
        fclose(f);
    }
    cg_context_free(ctx);
    return 0;
}
