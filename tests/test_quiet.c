/* test_quiet.c -- the library prints nothing (#34): with the logger off, the calls that
 * used to print or warn -- a tune with progress on, a tune on a miss inside an op call, an
 * import with rejected entries, a corrupt store entry read, the cache administration --
 * write nothing to stdout or stderr (both captured at the file descriptor, so a stray
 * printf, fprintf or write anywhere in the library shows), while the progress and log
 * callbacks receive what they said. */
#include "cg_test.h"
#include "cli_testlib.h"
#include "tune_testlib.h"
#include "fsutil.h"

#include <fcntl.h>
#include <unistd.h>

/* File descriptors 1 and 2 onto one temp file while capturing. */
typedef struct capture {
    int saved_out, saved_err;
    FILE *tmp;
} capture;

static void capture_begin(capture *c) {
    fflush(stdout);
    fflush(stderr);
    c->tmp = tmpfile();
    c->saved_out = dup(1);
    c->saved_err = dup(2);
    if (!c->tmp || c->saved_out < 0 || c->saved_err < 0 || dup2(fileno(c->tmp), 1) < 0 || dup2(fileno(c->tmp), 2) < 0)
        abort();
}

/* What was written while capturing (at most cap - 1 bytes) into buf; its length. */
static long capture_end(capture *c, char *buf, size_t cap) {
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, 1);
    dup2(c->saved_err, 2);
    close(c->saved_out);
    close(c->saved_err);
    long n = lseek(fileno(c->tmp), 0, SEEK_END);
    lseek(fileno(c->tmp), 0, SEEK_SET);
    ssize_t r = read(fileno(c->tmp), buf, cap - 1);
    buf[r > 0 ? r : 0] = '\0';
    fclose(c->tmp);
    return n;
}

/* The log callback of the test: records, prints nothing. */
typedef struct logged {
    int n, warn, info;
    char text[8192];
} logged;

static void record_log(cg_log_level level, const char *msg, void *user) {
    logged *l = user;
    l->n++;
    l->warn += level == CG_LOG_WARN;
    l->info += level == CG_LOG_INFO;
    size_t k = strlen(l->text);
    snprintf(l->text + k, sizeof l->text - k, "%d %s\n", (int)level, msg);
}

/* An SSD forward on the CPU (B 1, T t <= 200, G 1, H 2, dk dv 8) through the public call. */
static cg_status ssd_call(cg_context *ctx, int64_t t) {
    enum { B = 1, T = 200, G = 1, H = 2, DK = 8, DV = 8 };
    static float q[B * T * G * DK], k[B * T * G * DK], v[B * T * H * DV], la[B * T * H], o[B * T * H * DV];
    for (int i = 0; i < B * T * G * DK; i++) q[i] = (float)((i % 7) - 3) * 0.1f, k[i] = (float)((i % 5) - 2) * 0.1f;
    for (int i = 0; i < B * T * H * DV; i++) v[i] = (float)((i % 3) - 1) * 0.2f;
    for (int i = 0; i < B * T * H; i++) la[i] = -0.05f;
    const int64_t sq[] = {B, t, G, DK}, sv[] = {B, t, H, DV}, sl[] = {B, t, H};
    cg_ssd_fwd_args a = CG_SSD_FWD_ARGS_INIT;
    a.q = cg_tensor_contiguous(q, CG_F32, 4, sq);
    a.k = cg_tensor_contiguous(k, CG_F32, 4, sq);
    a.v = cg_tensor_contiguous(v, CG_F32, 4, sv);
    a.log_alpha = cg_tensor_contiguous(la, CG_F32, 3, sl);
    a.o = cg_tensor_contiguous(o, CG_F32, 4, sv);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = CG_BACKEND_CPU;
    return cg_ssd_fwd(ctx, &a, &ex);
}

CG_TEST(quiet_library_prints_nothing) {
    char dir[4096], dir2[4096], dir3[4096];
    if (mk_tmpdir(dir, sizeof dir) || mk_tmpdir(dir2, sizeof dir2) || mk_tmpdir(dir3, sizeof dir3)) return;
    setenv("CHUNKGEN_TUNE_FAKE_TIMING", "1", 1); /* fixed timings: the tunes take a moment */
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    unsetenv("CHUNKGEN_CONFIG");
    logged lg;
    memset(&lg, 0, sizeof lg);
    cg_set_log_callback(record_log, &lg);
    cg_context *ctx = tune_test_ctx(dir);
    cg_context_set_threads(ctx, 1);
    tune_test_events ev_tune, ev_miss, ev_import, ev_cache;
    char out[4096];
    capture cap;
    capture_begin(&cap);

    /* 1. a tune with progress on (a key, then the same key again: already tuned) */
    tune_test_listen(ctx, &ev_tune);
    cg_tune_options o = CG_TUNE_OPTIONS_INIT;
    o.backend = CG_BACKEND_CPU, o.max_candidates = 3;
    cg_shape s = {.size = sizeof s};
    cg_status st_tune = cg_shape_parse(ctx, "ssd_fwd:B=1,T=64,G=1,H=2,dk=8,dv=8", &s);
    cg_tune_summary sum = CG_TUNE_SUMMARY_INIT, sum2 = CG_TUNE_SUMMARY_INIT;
    if (st_tune == CG_OK) st_tune = cg_tune(ctx, &s, 1, &o, &sum);
    cg_status st_tune2 = cg_tune(ctx, &s, 1, &o, &sum2);

    /* 2. a tune on a miss inside an op call */
    tune_test_listen(ctx, &ev_miss);
    cg_context_set_tune_on_miss(ctx, 1);
    cg_status st_miss = ssd_call(ctx, 200); /* T bucket 256: not tuned above */
    char dispatch[512];
    snprintf(dispatch, sizeof dispatch, "%s", cg_last_dispatch(ctx));
    cg_context_set_tune_on_miss(ctx, 0);

    /* 3. an import with rejected entries */
    tune_test_listen(ctx, &ev_import);
    const char doc[] = "{\"schema\": 1, \"kind\": \"chunkgen-configs\", \"entries\": [{\"schema\": 1}, 7, "
                       "{\"schema\": 1, \"key\": {\"backend\": \"cpu\"}}]}";
    cg_import_stats is = CG_IMPORT_STATS_INIT;
    cg_status st_import = cg_config_import_json(ctx, doc, strlen(doc), "doc", NULL, &is);

    /* 4. a corrupt store entry read by an op call: the call's key's file is not JSON */
    cg_context *c2 = tune_test_ctx(dir2);
    cg_context_set_threads(c2, 1);
    cg_tune_shape cs;
    cg__tune_shape_init(&cs, CG_OP_SSD_FWD);
    int64_t *x = cs.shape.dim;
    cg__tune_shape_set_seq(&cs, 40);
    x[CG_SYM_B] = 1, x[CG_SYM_G] = 1, x[CG_SYM_H] = 2, x[CG_SYM_DK] = 8,
    x[CG_SYM_DV] = 8;
    cg_tune_key key;
    char name[64], sdir[4200];
    CG_CHECK_OK(c2, cg__tune_key_make(c2, "cpu", &cs, 0, &key));
    cg__tune_entry_file(&key, name, sizeof name);
    snprintf(sdir, sizeof sdir, "%s", cg_config_store_dir(c2));
    const int mk = cg__mkdirs(sdir);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", sdir, name);
    FILE *f = fopen(path, "w");
    if (f) fputs("{\"broken\": ", f), fclose(f);
    const int warned_before = lg.warn;
    cg_status st_corrupt = ssd_call(c2, 40);
    const int warned = lg.warn - warned_before;

    /* 5. the cache administration over the corrupt entry */
    tune_test_listen(c2, &ev_cache);
    cg_cache_report rv = CG_CACHE_REPORT_INIT, rp = CG_CACHE_REPORT_INIT;
    cg_status st_verify = cg_cache_verify(c2, &rv);
    cg_status st_prune = cg_cache_prune(c2, 0, &rp);

    /* 6. the same again with the logger off altogether */
    cg_set_log_callback(cg_log_silent, NULL);
    cg_context *c3 = tune_test_ctx(dir3);
    cg_context_set_threads(c3, 1);
    snprintf(sdir, sizeof sdir, "%s", cg_config_store_dir(c3));
    snprintf(path, sizeof path, "%s/%s", sdir, name);
    f = cg__mkdirs(sdir) == 0 ? fopen(path, "w") : NULL;
    if (f) fputs("not json", f), fclose(f);
    cg_status st_silent = ssd_call(c3, 40);
    char dispatch3[512];
    snprintf(dispatch3, sizeof dispatch3, "%s", cg_last_dispatch(c3));

    const long written = capture_end(&cap, out, sizeof out);
    cg_set_log_callback(NULL, NULL);
    CG_CHECK(written == 0, "the library wrote %ld bytes to stdout/stderr: %s", written, out);

    CG_CHECK(st_tune == CG_OK && sum.tuned == 1, "tune: %s (%d tuned): %s", cg_status_str(st_tune), sum.tuned,
             cg_errmsg(ctx));
    CG_CHECK(ev_tune.start == 2 && ev_tune.step >= 2 && ev_tune.done == 2, "tune events: %d start, %d step, %d done:\n%s",
             ev_tune.start, ev_tune.step, ev_tune.done, ev_tune.text);
    CG_CHECK(st_tune2 == CG_OK && sum2.cached == 1 && strstr(ev_tune.text, "already tuned"), "second tune: %d cached",
             sum2.cached);
    CG_CHECK(st_miss == CG_OK && strstr(dispatch, "tuned-on-miss"), "tune on miss: %s: %s\n%s", cg_status_str(st_miss),
             dispatch, ev_miss.text);
    CG_CHECK(ev_miss.start >= 1 && ev_miss.done >= 1 && strstr(ev_miss.text, "first call"),
             "tune on miss: its progress events:\n%s", ev_miss.text);
    CG_CHECK(strstr(lg.text, "tuning it"), "tune on miss: said through the log callback:\n%s", lg.text);
    CG_CHECK(st_import == CG_OK && is.rejected == 3 && is.messages == 3, "import: %s, %d rejected, %d messages: %s",
             cg_status_str(st_import), is.rejected, is.messages, cg_errmsg(ctx));
    CG_CHECK(ev_import.message == 3 && strstr(ev_import.text, "doc: entry 1") && strstr(ev_import.text, "rejected"),
             "import: one message per rejected entry:\n%s", ev_import.text);
    CG_CHECK(mk == 0 && st_corrupt == CG_OK && warned == 1 && strstr(lg.text, "ignoring tuned-config entry") &&
                 strstr(lg.text, name),
             "corrupt entry: one warning to the log callback (%d):\n%s", warned, lg.text);
    CG_CHECK(st_verify == CG_OK && rv.configs.bad == 1 && strstr(ev_cache.text, name), "verify: %lld bad:\n%s",
             (long long)rv.configs.bad, ev_cache.text);
    CG_CHECK(st_prune == CG_OK && rp.configs.removed == 1, "prune: %lld removed", (long long)rp.configs.removed);
    CG_CHECK(f && st_silent == CG_OK && strstr(dispatch3, "source=default"), "the call with the logger off: %s: %s",
             cg_errmsg(c3), dispatch3);
    unsetenv("CHUNKGEN_TUNE_FAKE_TIMING");
    cg_context_free(c3);
    cg_context_free(c2);
    cg_context_free(ctx);
    rm_tree(dir);
    rm_tree(dir2);
    rm_tree(dir3);
}
