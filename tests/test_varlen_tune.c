/* test_varlen_tune.c -- `chunkgen tune --varlen MAX` (docs/varlen.md, "Tuning"): the tuner
 * measures varlen problems (B = 1, a length mix packed along T) on the CPU backend and
 * stores them under the varlen key class; a varlen call then finds its key ("exact"), a
 * call without cu_seqlens of the same shape does not; the emulator (kernels reading the
 * offsets) tunes the key too. */
#include "cg_test.h"
#include "cli_testlib.h"

#include <stdlib.h>
#include <string.h>

/* A varlen (lens given) or plain ssd_fwd call, B = 1, T = 256, G = 1, H = 2, dk = dv = 8, on
 * the CPU backend at 1 thread, with the store in dir; its dispatch line into line. */
static void ssd_call(const char *dir, const int64_t *cu, int n, char *line, size_t cap) {
    cg_context *ctx = NULL;
    CG_CHECK(cg_context_create(&ctx) == CG_OK, "context");
    CG_CHECK(cg_context_set_cache_dir(ctx, dir) == CG_OK && cg_context_set_threads(ctx, 1) == CG_OK, "settings");
    const int64_t T = 256, qs[4] = {1, T, 1, 8}, vs[4] = {1, T, 2, 8}, ls[3] = {1, T, 2}, hs[4] = {n ? n : 1, 2, 8, 8};
    cg_tbuf q = cg_tbuf_new(CG_F32, 4, qs), k = cg_tbuf_new(CG_F32, 4, qs), v = cg_tbuf_new(CG_F32, 4, vs);
    cg_tbuf la = cg_tbuf_new(CG_F32, 3, ls), o = cg_tbuf_new(CG_F32, 4, vs), hT = cg_tbuf_new(CG_F32, 4, hs);
    cg_ssd_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = q.t, a.k = k.t, a.v = v.t, a.log_alpha = la.t, a.o = o.t, a.hT = hT.t;
    if (n) a.cu_seqlens = cg_tensor_contiguous((void *)cu, CG_I64, 1, (int64_t[]){n + 1});
    cg_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.backend = CG_BACKEND_CPU;
    CG_CHECK(cg_ssd_fwd(ctx, &a, &ex) == CG_OK, "ssd_fwd: %s", cg_errmsg(ctx));
    snprintf(line, cap, "%s", cg_last_dispatch(ctx));
    cg_tbuf *all[] = {&q, &k, &v, &la, &o, &hT};
    for (int i = 0; i < 6; i++) cg_tbuf_free(all[i]);
    cg_context_free(ctx);
}

CG_TEST(varlen_tune_cpu_key) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    const char *args[] = {"tune", "--backend", "cpu", "--op", "ssd", "--dir", "fwd", "--shape", "1,256,1,2,8,8",
                          "--varlen", "64", "--max-candidates", "3", "--min-time", "0.001", "--threads", "1",
                          "--cache-dir", dir, NULL};
    int rc = run_cli(dir, args);
    char *err = cli_stderr(dir);
    CG_CHECK(rc == 0 && strstr(err, "1 tuned"), "tune: exit %d: %s", rc, err);
    free(err);
    /* lengths of at most 64 (the key's bucket), summing to 256 (its T bucket) */
    const int64_t cu[6] = {0, 64, 100, 164, 200, 256};
    char line[1024];
    ssd_call(dir, cu, 5, line, sizeof line);
    CG_CHECK(strstr(line, "source=exact") && strstr(line, "varlen=5 sequences"), "varlen call: %s", line);
    ssd_call(dir, NULL, 0, line, sizeof line); /* not varlen: another key class */
    CG_CHECK(strstr(line, "source=default"), "plain call: %s", line);
    const int64_t cu1[2] = {0, 256}; /* one sequence of 256: the longest-sequence bucket differs */
    ssd_call(dir, cu1, 1, line, sizeof line);
    CG_CHECK(!strstr(line, "source=exact"), "varlen max 256 call: %s", line);
    rm_tree(dir);
}

CG_TEST(varlen_tune_usage_and_skip) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    const char *bad[] = {"tune", "--backend", "cpu", "--op", "ssd", "--shape", "2,256,1,2,8,8", "--varlen", "64",
                         "--cache-dir", dir, NULL};
    int rc = run_cli(dir, bad);
    char *err = cli_stderr(dir);
    CG_CHECK(rc == 2 && strstr(err, "--varlen: a shape with B = 2 but expected 1"), "B = 2: exit %d: %s", rc, err);
    free(err);
    const char *emu[] = {"tune", "--backend", "emulate", "--op", "sscan", "--dir", "fwd", "--shape", "1,64,4,4",
                         "--varlen", "16", "--cache-dir", dir, NULL};
    rc = run_cli(dir, emu); /* the generated kernels read cu_seqlens (vt->varlen_kernels): tuned */
    err = cli_stderr(dir);
    CG_CHECK(rc == 0 && strstr(err, "1 tuned") && !strstr(err, "does not take variable-length batches"),
             "emulate: exit %d: %s", rc, err);
    free(err);
    rm_tree(dir);
}
