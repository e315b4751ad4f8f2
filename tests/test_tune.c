/* test_tune.c -- the autotuner and its config store: selection and ties, seq buckets and
 * lookup order, env pins, the CPU spaces in Lua, store validation, 8 processes writing one
 * store, kill -9 in the middle of a tune, import of broken JSON. No timing assertions. */
#include "cg_test.h"
#include "../autotune/autotune.h"
#include "tune_testlib.h"
#include "cli_testlib.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The autotuner's config source, with the source as its name (the dispatch line's word). */
static cg_status tuned_lookup(cg_context *ctx, const char *backend, cg_op op, const void *prob, cg_cfg *cfg,
                              const char **level) {
    cg_cfg_source src = CG_SRC_DEFAULT;
    cg_status st = cg__tune_config_source.lookup(ctx, backend, op, prob, cfg, &src);
    *level = cg__cfg_source_name(src);
    return st;
}

/* ------------------------------------------------------------ helpers */

static void tmpdir(char *buf, size_t cap) {
    snprintf(buf, cap, "/tmp/cg_tune_test_XXXXXX");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
}

static cg_context *ctx_in(const char *dir) { return tune_test_ctx(dir); }
/* A new temp directory (into dir) and a context whose cache it is. */
static cg_context *tmp_ctx(char *dir, size_t cap) {
    tmpdir(dir, cap);
    return ctx_in(dir);
}
/* tmp_ctx, and its store directory copied into sdir. */
static cg_context *tmp_store_ctx(char *dir, size_t cap, char *sdir, size_t scap) {
    cg_context *ctx = tmp_ctx(dir, cap);
    snprintf(sdir, scap, "%s", cg__tune_store_dir(ctx));
    return ctx;
}

static cg_tune_shape ssd_shape(int64_t T, int64_t dv) {
    cg_tune_shape s;
    cg__tune_shape_init(&s, CG_OP_SSD_FWD);
    int64_t *x = s.shape.dim;
    cg__tune_shape_set_seq(&s, T);
    x[CG_SYM_B] = 1, x[CG_SYM_G] = 1, x[CG_SYM_H] = 2, x[CG_SYM_DK] = 16,
    x[CG_SYM_DV] = dv;
    snprintf(s.name, sizeof s.name, "test_dv%lld", (long long)dv);
    return s;
}

/* A complete entry for this machine with one passing candidate. */
static void fake_entry(cg_context *ctx, cg_tune_entry *e, int64_t T, int64_t dv, int bwd, double ms, const char *cfg) {
    tune_test_entry(ctx, e, T, dv, bwd, cfg, 0, ms, ms * 0.01);
    e->default_ms = ms * 1.5;
    snprintf(e->default_cfg, sizeof e->default_cfg, "chunk=64,block_dv=16,threads=0");
}

typedef struct scan_count {
    int good, bad, complete;
} scan_count;

static int count_visit(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    scan_count *c = arg;
    if (e) {
        c->good++;
        c->complete += e->complete;
    } else {
        c->bad++;
        fprintf(stderr, "  bad entry %s: %s\n", path, why);
    }
    return 0;
}

static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) n += !strncmp(de->d_name, ".tmp.", 5);
    if (d) closedir(d);
    return n;
}

/* ---------------------------------------------------------- selection */


CG_TEST(tune_select_ties) {
    int ru;
    /* within 2 %: a tie, the first in the space's order wins */
    cg_tune_cand a[] = {tune_test_cand("a", 0, CG_TV_OK, 1.000, 0.001),
                        tune_test_cand("b", 1, CG_TV_OK, 0.995, 0.001)};
    CG_CHECK(cg__tune_select(a, 2, CG_TUNE_TIE_REL, &ru) == 0, "a tie goes to order 0");
    CG_CHECK(ru == 1, "runner-up is the other one, got %d", ru);
    /* clearly faster wins */
    a[1].median_ms = 0.90;
    CG_CHECK(cg__tune_select(a, 2, CG_TUNE_TIE_REL, &ru) == 1, "10%% faster wins");
    CG_CHECK(ru == 0, "runner-up %d", ru);
    /* a noisy fastest (large IQR) widens the tie band beyond the relative tolerance ... */
    cg_tune_cand b[] = {tune_test_cand("a", 0, CG_TV_OK, 1.00, 0.01), tune_test_cand("b", 1, CG_TV_OK, 0.95, 0.20)};
    CG_CHECK(cg__tune_select(b, 2, CG_TUNE_TIE_REL, NULL) == 0, "within the fastest's IQR: tie");
    /* ... but by at most CG_TUNE_TIE_MAX */
    b[0].median_ms = 1.06;
    CG_CHECK(cg__tune_select(b, 2, CG_TUNE_TIE_REL, NULL) == 1, "11.6%% slower never ties");
    /* a noisy slow candidate does not tie through its own spread */
    cg_tune_cand b2[] = {tune_test_cand("noisy", 0, CG_TV_OK, 1.30, 1.00),
                         tune_test_cand("steady", 1, CG_TV_OK, 1.00, 0.01)};
    CG_CHECK(cg__tune_select(b2, 2, CG_TUNE_TIE_REL, NULL) == 1, "a noisy slow candidate loses");
    /* the order field decides, not the array position; and it is reproducible under
     * permutation of the array */
    cg_tune_cand c[] = {tune_test_cand("late", 5, CG_TV_OK, 1.00, 0.0), tune_test_cand("early", 2, CG_TV_OK, 1.01, 0.0),
                        tune_test_cand("slow", 0, CG_TV_OK, 3.00, 0.0),
                        tune_test_cand("bad", 1, CG_TV_WRONG, 0.10, 0.0)};
    int w = cg__tune_select(c, 4, CG_TUNE_TIE_REL, &ru);
    CG_CHECK(w == 1, "tie between late and early goes to order 2 (early), got %d", w);
    CG_CHECK(ru == 0, "runner-up is late (1.00 ms), got %d", ru);
    cg_tune_cand d[] = {c[3], c[2], c[1], c[0]};
    w = cg__tune_select(d, 4, CG_TUNE_TIE_REL, NULL);
    CG_CHECK(w >= 0 && !strcmp(d[w].cfg, "early"), "same winner after permuting, got %s", w >= 0 ? d[w].cfg : "none");
    /* rejected candidates never win, even when "fast" */
    cg_tune_cand e[] = {tune_test_cand("x", 0, CG_TV_TIMEOUT, 0.01, 0), tune_test_cand("y", 1, CG_TV_COMPILE, 0.01, 0),
                        tune_test_cand("z", 2, CG_TV_OK, 5.0, 0)};
    CG_CHECK(cg__tune_select(e, 3, CG_TUNE_TIE_REL, &ru) == 2, "only z passed");
    CG_CHECK(ru == -1, "no runner-up");
    e[2].verdict = CG_TV_WRONG;
    CG_CHECK(cg__tune_select(e, 3, CG_TUNE_TIE_REL, &ru) == -1, "none passed");
    /* ties are not transitive chains: only candidates within noise of the fastest tie */
    cg_tune_cand f[] = {tune_test_cand("p", 0, CG_TV_OK, 1.030, 0), tune_test_cand("q", 1, CG_TV_OK, 1.015, 0),
                        tune_test_cand("r", 2, CG_TV_OK, 1.000, 0)};
    w = cg__tune_select(f, 3, CG_TUNE_TIE_REL, NULL);
    CG_CHECK(w == 1, "p is 3%% slower than r (no tie), q 1.5%% (tie): q wins, got %d", w);
}

/* ------------------------------------------------- buckets and lookup order */

static const char *lookup(cg_context *ctx, cg_op op, int64_t T, int64_t dv, cg_cfg *cfg) {
    cg_ssd_prob p;
    memset(&p, 0, sizeof p);
    CG_DIM(&p, B) = 1, CG_DIM(&p, T) = T, CG_DIM(&p, G) = 1, CG_DIM(&p, H) = 2, CG_DIM(&p, DK) = 16, CG_DIM(&p, DV) = dv;
    const char *level = "?";
    cg_status st = tuned_lookup(ctx, "cpu", op, &p, cfg, &level);
    CG_CHECK(st == CG_OK, "lookup: %s", cg_errmsg(ctx));
    return level;
}

CG_TEST(tune_bucket_and_lookup_order) {
    CG_CHECK(cg__tune_bucket(1) == 1 && cg__tune_bucket(2) == 2 && cg__tune_bucket(3) == 4, "small buckets");
    CG_CHECK(cg__tune_bucket(512) == 512 && cg__tune_bucket(513) == 1024 && cg__tune_bucket(8191) == 8192,
             "powers of two round up");
    char dir[64];
    cg_context *ctx = tmp_ctx(dir, sizeof dir);
    cg_cfg cfg;
    unsetenv("CHUNKGEN_CONFIG");
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    CG_CHECK(!strcmp(lookup(ctx, CG_OP_SSD_FWD, 512, 16, &cfg), "default") && cfg.n == 0, "empty store: default");

    const char *store = cg__tune_store_dir(ctx);
    char sdir[4200];
    snprintf(sdir, sizeof sdir, "%s", store);
    cg_tune_entry e;
    fake_entry(ctx, &e, 512, 16, 0, 1.0, "chunk=32,block_dv=16,threads=0");
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, sdir, &e));
    cg__tune_entry_free(&e);
    fake_entry(ctx, &e, 8192, 16, 0, 9.0, "chunk=128,block_dv=16,threads=0");
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, sdir, &e));
    cg__tune_entry_free(&e);
    /* an unfinished tune of another bucket must be ignored */
    fake_entry(ctx, &e, 1024, 16, 0, 0.5, "chunk=16,block_dv=16,threads=1");
    e.complete = 0;
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, sdir, &e));
    cg__tune_entry_free(&e);

    const char *lv = lookup(ctx, CG_OP_SSD_FWD, 512, 16, &cfg);
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 32, "T=512: exact, got %s chunk=%lld", lv,
             (long long)cg__cfg_int(&cfg, "chunk", 0));
    lv = lookup(ctx, CG_OP_SSD_FWD, 300, 16, &cfg); /* bucket 512 */
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 32, "T=300 is in bucket 512: %s", lv);
    lv = lookup(ctx, CG_OP_SSD_FWD, 600, 16, &cfg); /* bucket 1024: 512 is 1 step away, 8192 3; 1024 unfinished */
    CG_CHECK(!strcmp(lv, "nearest-bucket") && cg__cfg_int(&cfg, "chunk", 0) == 32, "T=600: nearest 512, got %s %lld",
             lv, (long long)cg__cfg_int(&cfg, "chunk", 0));
    lv = lookup(ctx, CG_OP_SSD_FWD, 4096, 16, &cfg);
    CG_CHECK(!strcmp(lv, "nearest-bucket") && cg__cfg_int(&cfg, "chunk", 0) == 128, "T=4096: nearest 8192, got %s", lv);
    lv = lookup(ctx, CG_OP_SSD_FWD, 2048, 16, &cfg); /* 2 steps from both: the larger bucket */
    CG_CHECK(!strcmp(lv, "nearest-bucket") && cg__cfg_int(&cfg, "chunk", 0) == 128, "T=2048: tie -> 8192, got %s %lld",
             lv, (long long)cg__cfg_int(&cfg, "chunk", 0));
    lv = lookup(ctx, CG_OP_SSD_FWD, 1 << 20, 16, &cfg);
    CG_CHECK(!strcmp(lv, "nearest-bucket") && cg__cfg_int(&cfg, "chunk", 0) == 128, "huge T: 8192, got %s", lv);
    /* the rest of the key must be equal: another dv, the backward, another thread count */
    lv = lookup(ctx, CG_OP_SSD_FWD, 512, 24, &cfg);
    CG_CHECK(!strcmp(lv, "default") && cfg.n == 0, "dv 24: default, got %s", lv);
    lv = lookup(ctx, CG_OP_SSD_BWD, 512, 16, &cfg);
    CG_CHECK(!strcmp(lv, "default"), "backward: default, got %s", lv);
    cg_context_set_threads(ctx, cg__online_cores() + 3);
    lv = lookup(ctx, CG_OP_SSD_FWD, 512, 16, &cfg);
    CG_CHECK(!strcmp(lv, "default"), "other thread count: default, got %s", lv);
    cg_context_set_threads(ctx, 0);

    /* a new entry written by this process is seen at once (index invalidated) */
    fake_entry(ctx, &e, 2048, 16, 0, 2.0, "chunk=48,block_dv=16,threads=0");
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, sdir, &e));
    cg__tune_entry_free(&e);
    lv = lookup(ctx, CG_OP_SSD_FWD, 2048, 16, &cfg);
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 48, "new 2048 entry: %s", lv);
    /* ... and one written by another process within a second (the directory's mtime) */
    pid_t pid = fork();
    if (pid == 0) {
        cg_context *c2 = ctx_in(dir);
        cg_tune_entry e2;
        fake_entry(c2, &e2, 64, 16, 0, 0.1, "chunk=16,block_dv=16,threads=1");
        _exit(cg__tune_store_put(c2, sdir, &e2) == CG_OK ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child writer");
    usleep(1100 * 1000); /* the store directory is checked for changes at most once a second */
    lv = lookup(ctx, CG_OP_SSD_FWD, 64, 16, &cfg);
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 16, "entry from another process: %s", lv);

    /* CHUNKGEN_CONFIG pins, scoped or not */
    setenv("CHUNKGEN_CONFIG", "ssd_bwd:chunk=96;sscan:segment=32;chunk=256,threads=1", 1);
    lv = lookup(ctx, CG_OP_SSD_FWD, 512, 16, &cfg);
    CG_CHECK(!strcmp(lv, "pinned-env") && cg__cfg_int(&cfg, "chunk", 0) == 256 && cg__cfg_int(&cfg, "threads", 0) == 1,
             "unscoped pin for ssd_fwd: %s", lv);
    lv = lookup(ctx, CG_OP_SSD_BWD, 512, 16, &cfg);
    CG_CHECK(!strcmp(lv, "pinned-env") && cg__cfg_int(&cfg, "chunk", 0) == 96 && cfg.n == 1, "scoped pin: %s", lv);
    setenv("CHUNKGEN_CONFIG", "matmul:chunk=4", 1);
    cg_ssd_prob p;
    memset(&p, 0, sizeof p);
    CG_DIM(&p, B) = 1, CG_DIM(&p, T) = 8, CG_DIM(&p, G) = 1, CG_DIM(&p, H) = 1, CG_DIM(&p, DK) = 4, CG_DIM(&p, DV) = 4;
    const char *level;
    CG_CHECK(tuned_lookup(ctx, "cpu", CG_OP_SSD_FWD, &p, &cfg, &level) == CG_EINVAL &&
                 strstr(cg_errmsg(ctx), "CHUNKGEN_CONFIG"),
             "bad scope: %s", cg_errmsg(ctx));
    setenv("CHUNKGEN_CONFIG", "chunk", 1);
    CG_CHECK(tuned_lookup(ctx, "cpu", CG_OP_SSD_FWD, &p, &cfg, &level) == CG_EINVAL, "malformed pin");
    unsetenv("CHUNKGEN_CONFIG");
    cg_context_free(ctx);
    rm_tree(dir);
}

/* ---------------------------------------------------------------- store */

CG_TEST(tune_store_validation) {
    char dir[64], sdir[4200];
    cg_context *ctx = tmp_store_ctx(dir, sizeof dir, sdir, sizeof sdir);
    cg_tune_entry e, r;
    fake_entry(ctx, &e, 256, 40, 1, 1.25, "chunk=64,block_dv=64,threads=0");
    cg_tune_cand rej = tune_test_cand("chunk=16,block_dv=64,threads=0", 1, CG_TV_WRONG, 0, 0);
    snprintf(rej.detail, sizeof rej.detail, "dq: rel err 3e-3 > 1e-4");
    rej.err = 3e-3;
    cg__tune_entry_add(&e, &rej);
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, sdir, &e));
    CG_CHECK_OK(ctx, cg__tune_store_get(ctx, sdir, &e.key, &r));
    CG_CHECK(r.ncand == 2 && r.best == 0 && r.cand[0].median_ms == 1.25 && r.cand[1].verdict == CG_TV_WRONG &&
                 !strcmp(r.cand[1].detail, rej.detail) && r.complete && !strcmp(r.kernel, "ssd_cpu"),
             "round trip");
    cg__tune_entry_free(&r);

    char name[64], path[4300];
    cg__tune_entry_file(&e.key, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", sdir, name);
    FILE *f = fopen(path, "rb");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    CG_CHECK(n > 100, "entry file read");
    /* a changed value: checksum mismatch */
    char *m = strstr(buf, "1.25");
    CG_CHECK(m != NULL, "median in the file");
    if (m) {
        m[3] = '6';
        f = fopen(path, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        cg_status st = cg__tune_store_get(ctx, sdir, &e.key, &r);
        CG_CHECK(st == CG_EIO && strstr(cg_errmsg(ctx), "checksum"), "tampered: %s", cg_errmsg(ctx));
        m[3] = '5';
    }
    /* truncated */
    f = fopen(path, "wb");
    fwrite(buf, 1, n / 2, f);
    fclose(f);
    CG_CHECK(cg__tune_store_get(ctx, sdir, &e.key, &r) == CG_EIO, "truncated is bad");
    /* a bad entry is a miss for the lookup */
    cg_cfg cfg;
    cg_ssd_prob p;
    memset(&p, 0, sizeof p);
    CG_DIM(&p, B) = 1, CG_DIM(&p, T) = 256, CG_DIM(&p, G) = 1, CG_DIM(&p, H) = 2, CG_DIM(&p, DK) = 16, CG_DIM(&p, DV) = 40;
    const char *level;
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSD_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "default"), "bad entry: miss, got %s", level);
    /* the intact file under another key's name */
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    CG_CHECK_OK(ctx, cg__tune_store_get(ctx, sdir, &e.key, &r));
    cg__tune_entry_free(&r);
    cg_tune_entry other;
    fake_entry(ctx, &other, 256, 48, 1, 1.0, "chunk=64,block_dv=64,threads=0");
    char oname[64], opath[4300];
    cg__tune_entry_file(&other.key, oname, sizeof oname);
    snprintf(opath, sizeof opath, "%s/%s", sdir, oname);
    CG_CHECK(rename(path, opath) == 0, "rename");
    CG_CHECK(cg__tune_store_get(ctx, sdir, &other.key, &r) == CG_EIO && strstr(cg_errmsg(ctx), "another key"),
             "misplaced entry: %s", cg_errmsg(ctx));
    scan_count sc = {0, 0, 0};
    CG_CHECK(cg__tune_store_scan(sdir, count_visit, &sc) == 1 && sc.bad == 1, "scan sees one bad file");
    cg__tune_entry_free(&other);
    cg__tune_entry_free(&e);
    cg_context_free(ctx);
    rm_tree(dir);
}

CG_TEST(tune_store_8_processes) {
    char dir[64], sdir[4200];
    cg_context *ctx = tmp_store_ctx(dir, sizeof dir, sdir, sizeof sdir);
    enum { NPROC = 8, OWN = 10, SHARED = 10 };
    pid_t pids[NPROC];
    for (int c = 0; c < NPROC; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            cg_context *cc = ctx_in(dir);
            int bad = 0;
            /* interleave own and shared keys so the writers collide on the shared ones */
            for (int i = 0; i < OWN + SHARED; i++) {
                cg_tune_entry e;
                int64_t dv = i % 2 ? 200 + i / 2 : 8 + c * OWN + i / 2;
                fake_entry(cc, &e, 512, dv, 0, 1.0 + c, "chunk=64,block_dv=16,threads=0");
                for (int k = 0; k < 3; k++) /* rewrite: more renames over live files */
                    bad |= cg__tune_store_put(cc, sdir, &e) != CG_OK;
                cg__tune_entry_free(&e);
            }
            cg_context_free(cc);
            _exit(bad);
        }
    }
    int ok = 1;
    for (int c = 0; c < NPROC; c++) {
        int status = 0;
        waitpid(pids[c], &status, 0);
        ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    CG_CHECK(ok, "every writer succeeded");
    scan_count sc = {0, 0, 0};
    cg__tune_store_scan(sdir, count_visit, &sc);
    CG_CHECK(sc.good == NPROC * OWN + SHARED && sc.bad == 0, "%d good, %d bad entries (expected %d, 0)", sc.good, sc.bad,
             NPROC * OWN + SHARED);
    CG_CHECK(count_temp_files(sdir) == 0, "no temp files left");
    /* every process's own keys are there */
    for (int c = 0; c < NPROC; c++)
        for (int i = 0; i < OWN; i++) {
            cg_tune_entry e, r;
            fake_entry(ctx, &e, 512, 8 + c * OWN + i, 0, 1.0, "chunk=64,block_dv=16,threads=0");
            cg_status st = cg__tune_store_get(ctx, sdir, &e.key, &r);
            CG_CHECK(st == CG_OK && r.cand[0].median_ms == 1.0 + c, "process %d key %d", c, i);
            if (st == CG_OK) cg__tune_entry_free(&r);
            cg__tune_entry_free(&e);
        }
    cg_context_free(ctx);
    rm_tree(dir);
}

/* ------------------------------------------------------------ real tunes */

static void small_opts(cg_tune_opts *o) {
    cg__tune_opts_default(o);
    o->op_mask = 1;
        o->min_time_s = 0.01;
    o->min_reps = 3;
    o->max_reps = 20;
}

CG_TEST(tune_cpu_spaces) {
    char dir[64];
    cg_context *ctx = tmp_ctx(dir, sizeof dir);
    cg_devinfo dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "test cpu");
    dev.sm_count = 8;
    cg_shape ks = {.size = sizeof ks,
                   .dim = {[CG_SYM_B] = 2, [CG_SYM_T] = 100, [CG_SYM_G] = 2, [CG_SYM_H] = 4, [CG_SYM_DK] = 48,
                           [CG_SYM_DV] = 40}};
    for (int bwd = 0; bwd < 2; bwd++) {
        const int ksf = bwd ? CG_KS_BWD : 0;
        cg_cfg *cfgs = NULL, def;
        int n = 0;
        CG_CHECK_OK(ctx, cg__tune_cpu_space(ctx, "ssd_cpu", &ks, ksf, &dev, &cfgs, &n, &def));
        CG_CHECK(n > 4, "ssd space has %d configs", n);
        int64_t bdv0 = n ? cg__cfg_int(&cfgs[0], "block_dv", -1) : -1;
        for (int i = 0; i < n; i++) {
            int64_t chunk = cg__cfg_int(&cfgs[i], "chunk", -1), bdv = cg__cfg_int(&cfgs[i], "block_dv", -1),
                    th = cg__cfg_int(&cfgs[i], "threads", -1);
            const char *heads = cg__cfg_str(&cfgs[i], "heads", "");
            CG_CHECK(cfgs[i].n == 4 && chunk > 0 && bdv > 0 && th >= 0 && (!strcmp(heads, "group") || !strcmp(heads, "each")),
                     "config %d complete", i);
            CG_CHECK(chunk == 16 || chunk < 2 * ks.dim[CG_SYM_T], "chunk %lld pruned for T=100", (long long)chunk);
            CG_CHECK(th == 0 || th == 1 || (th >= 2 && th < 8), "threads %lld", (long long)th);
            if (bwd) CG_CHECK(bdv == bdv0, "backward: block_dv fixed");
            else CG_CHECK(bdv == 16 || bdv < 2 * ks.dim[CG_SYM_DV], "block_dv %lld pruned for dv=40", (long long)bdv);
        }
        CG_CHECK(cg__cfg_int(&def, "chunk", 0) == 64 && cg__cfg_int(&def, "block_dv", 0) == 64, "ssd default");
        free(cfgs);
    }
    memset(&ks, 0, sizeof ks);
    ks.dim[CG_SYM_B] = 1, ks.dim[CG_SYM_L] = 300, ks.dim[CG_SYM_D] = 96, ks.dim[CG_SYM_N] = 16, ks.dim[CG_SYM_G] = 1;
    for (int bwd = 0; bwd < 2; bwd++) {
        const int ksf = bwd ? CG_KS_BWD : 0;
        cg_cfg *cfgs = NULL, def;
        int n = 0;
        CG_CHECK_OK(ctx, cg__tune_cpu_space(ctx, "sscan_cpu", &ks, ksf, &dev, &cfgs, &n, &def));
        int segs[8] = {0}, nseg = 0;
        for (int i = 0; i < n; i++) {
            int s = (int)cg__cfg_int(&cfgs[i], "segment", -1), seen = 0;
            for (int j = 0; j < nseg; j++) seen |= segs[j] == s;
            if (!seen && nseg < 8) segs[nseg++] = s;
            CG_CHECK(cg__cfg_int(&cfgs[i], "block_d", 0) < 2 * 96 || cg__cfg_int(&cfgs[i], "block_d", 0) == 16,
                     "block_d pruned");
        }
        CG_CHECK(n > 2 && (bwd ? nseg > 1 : nseg == 1), "sscan %s: %d configs, %d segment values", bwd ? "bwd" : "fwd", n,
                 nseg);
        free(cfgs);
    }
    cg_cfg *cfgs;
    int n;
    CG_CHECK(cg__tune_cpu_space(ctx, "no_such_space", &ks, 0, &dev, &cfgs, &n, NULL) == CG_ENOTFOUND, "unknown space");
    cg_context_free(ctx);
    rm_tree(dir);
}

/* Tune a small SSD shape in a child, SIGKILL it as soon as it has stored something, check
 * that the store is valid, then resume the tune to completion. */
CG_TEST(tune_kill9_resume) {
    char dir[64];
    cg_context *ctx = tmp_ctx(dir, sizeof dir);
    cg_context_set_threads(ctx, 2);
    char sdir[4200];
    snprintf(sdir, sizeof sdir, "%s", cg__tune_store_dir(ctx));
    cg_tune_shape s = ssd_shape(64, 16);
    cg_tune_opts o;
    small_opts(&o);
    o.min_time_s = 0.03; /* long enough that the kill lands in the middle */
    pid_t pid = fork();
    if (pid == 0) {
        cg_context *cc = ctx_in(dir);
        cg_context_set_threads(cc, 2);
        cg_tune_sum sum;
        cg_status st = cg__tune_run(cc, "cpu", &s, 1, &o, &sum);
        _exit(st == CG_OK ? 0 : 1);
    }
    /* wait for the first stored candidate */
    int seen = 0;
    for (int i = 0; i < 60000 && !seen; i++) {
        scan_count sc = {0, 0, 0};
        if (cg__tune_store_scan(sdir, count_visit, &sc) > 0 && sc.good > 0) seen = 1;
        else usleep(1000);
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CG_CHECK(seen, "the child stored something");
    CG_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "killed in the middle (status %d)", status);
    scan_count sc = {0, 0, 0};
    cg__tune_store_scan(sdir, count_visit, &sc);
    CG_CHECK(sc.good >= 1 && sc.bad == 0, "valid store after kill -9: %d good, %d bad", sc.good, sc.bad);
    CG_CHECK(sc.complete < 2, "the tune was not finished (%d complete)", sc.complete);
    cg_tune_key kf;
    cg_tune_entry before;
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &s, 0, &kf));
    int nbefore = cg__tune_store_get(ctx, sdir, &kf, &before) == CG_OK ? before.ncand : 0;
    if (nbefore) cg__tune_entry_free(&before);

    /* resume */
    cg_tune_sum sum;
    CG_CHECK_OK(ctx, cg__tune_run(ctx, "cpu", &s, 1, &o, &sum));
    CG_CHECK(sum.resumed + sum.cached >= 1 && sum.tuned + sum.cached == 2 && sum.failed == 0,
             "resumed %d, tuned %d, cached %d, failed %d", sum.resumed, sum.tuned, sum.cached, sum.failed);
    for (int bwd = 0; bwd < 2; bwd++) {
        cg_tune_key k;
        cg_tune_entry e;
        CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &s, bwd, &k));
        CG_CHECK_OK(ctx, cg__tune_store_get(ctx, sdir, &k, &e));
        /* every config of the space, plus the default config (an empty one) */
        CG_CHECK(e.complete && !e.truncated && e.ncand == e.space_size + 1 && e.space_size > 0,
                 "%s complete: %d of %d + 1", bwd ? "bwd" : "fwd", e.ncand, e.space_size);
        CG_CHECK(cg__tune_entry_find(&e, "") != NULL, "the default was measured");
        CG_CHECK(e.best >= 0, "%s: a candidate passed verification", bwd ? "bwd" : "fwd");
        if (!bwd) CG_CHECK(e.ncand >= nbefore, "kept the candidates measured before the kill");
        cg__tune_entry_free(&e);
    }
    /* a third run has nothing to do */
    CG_CHECK_OK(ctx, cg__tune_run(ctx, "cpu", &s, 1, &o, &sum));
    CG_CHECK(sum.cached == 2 && sum.tuned == 0, "rerun: %d cached", sum.cached);
    /* and the dispatcher's lookup finds the tuned configs */
    cg_ssd_prob p;
    memset(&p, 0, sizeof p);
    CG_DIM(&p, B) = 3, CG_DIM(&p, T) = 50, CG_DIM(&p, G) = 1, CG_DIM(&p, H) = 2, CG_DIM(&p, DK) = 16, CG_DIM(&p, DV) = 16;
    cg_cfg cfg;
    const char *level;
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSD_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "exact") && (cfg.n == 4 || cfg.n == 0), "lookup after the tune: %s, %d keys", level, cfg.n);
    cg_context_free(ctx);
    rm_tree(dir);
}

/* The recorded verdicts of a real tune are consistent: a passing candidate has a small
 * error and timings, a "wrong" one a large error and a reason, and the best passed. */
CG_TEST(tune_verdicts_consistent) {
    char dir[64], sdir[4200];
    cg_context *ctx = tmp_store_ctx(dir, sizeof dir, sdir, sizeof sdir);
    cg_tune_shape s = ssd_shape(40, 24);
    s.shape.dim[CG_SYM_DK] = 7;
    cg_tune_opts o;
    small_opts(&o);
    o.dir_mask = 2;
    cg_tune_sum sum;
    CG_CHECK_OK(ctx, cg__tune_run(ctx, "cpu", &s, 1, &o, &sum));
    cg_tune_key k;
    cg_tune_entry e;
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &s, 1, &k));
    CG_CHECK_OK(ctx, cg__tune_store_get(ctx, sdir, &k, &e));
    for (int i = 0; i < e.ncand; i++) {
        const cg_tune_cand *c = &e.cand[i];
        if (c->verdict == CG_TV_OK) CG_CHECK(c->err <= 1e-4 && c->median_ms > 0 && c->reps >= 3, "%s", c->cfg);
        if (c->verdict == CG_TV_WRONG) CG_CHECK(!(c->err <= 1e-4) && c->detail[0], "%s: %s", c->cfg, c->detail);
    }
    CG_CHECK(e.best < 0 || e.cand[e.best].verdict == CG_TV_OK, "best passed");
    cg__tune_entry_free(&e);
    cg_context_free(ctx);
    rm_tree(dir);
}

/* ---------------------------------------------------------------- import */

static int is_json(const char *name) {
    size_t n = strlen(name);
    return n > 5 && !strcmp(name + n - 5, ".json");
}

CG_TEST(tune_import_corpus) {
    char cdir[4096];
    snprintf(cdir, sizeof cdir, "%s/tests/data/json_corpus", CG_SOURCE_DIR);
    DIR *d = opendir(cdir);
    CG_CHECK(d != NULL, "corpus at %s", cdir);
    if (!d) return;
    char dir[64];
    cg_context *ctx = tmp_ctx(dir, sizeof dir);
    int files = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_json(de->d_name)) continue;
        files++;
        char path[8300];
        snprintf(path, sizeof path, "%s/%s", cdir, de->d_name);
        tune_test_events ev;
        tune_test_listen(ctx, &ev);
        cg_tune_import_stats s;
        ctx->errmsg[0] = 0;
        cg_status st = cg__tune_import_file(ctx, path, 0, 0, &s);
        tune_test_listen(ctx, NULL);
        const size_t len = strlen(ev.text);
        if (st != CG_OK) CG_CHECK(cg_errmsg(ctx)[0] != 0, "%s: a message for the failure", de->d_name);
        else CG_CHECK(s.rejected > 0 && len > 0, "%s: rejected with a message (%d rejected)", de->d_name, s.rejected);
        CG_CHECK(s.added == 0 && s.replaced == 0, "%s: nothing imported", de->d_name);
    }
    closedir(d);
    CG_CHECK(files >= 30, "corpus has %d files", files);
    scan_count sc = {0, 0, 0};
    cg__tune_store_scan(cg__tune_store_dir(ctx), count_visit, &sc);
    CG_CHECK(sc.good == 0 && sc.bad == 0, "the store stays empty");
    cg_context_free(ctx);
    rm_tree(dir);
}

/* Export -> import round trip with the merge rule: the faster entry stays. */
CG_TEST(tune_import_merge) {
    char dir[64], dir2[64];
    tmpdir(dir, sizeof dir);
    tmpdir(dir2, sizeof dir2);
    cg_context *ctx = ctx_in(dir);
    cg_tune_entry fast, slow;
    fake_entry(ctx, &fast, 1024, 32, 0, 1.0, "chunk=32,block_dv=32,threads=0");
    fake_entry(ctx, &slow, 1024, 32, 0, 2.0, "chunk=64,block_dv=32,threads=0");
    json_t *arr = json_array();
    json_array_append_new(arr, cg__tune_entry_to_json(&slow));
    json_t *doc = json_pack("{s:i, s:s, s:o}", "schema", CG_TUNE_SCHEMA, "kind", "chunkgen-configs", "entries", arr);
    cg_tune_import_stats s;
    CG_CHECK_OK(ctx, cg__tune_import_json(ctx, doc, "doc", 0, 0, &s));
    CG_CHECK(s.added == 1 && s.rejected == 0, "added %d rejected %d", s.added, s.rejected);
    json_decref(doc);
    json_t *one = cg__tune_entry_to_json(&fast);
    CG_CHECK_OK(ctx, cg__tune_import_json(ctx, one, "one", 0, 0, &s));
    CG_CHECK(s.replaced == 1, "the faster entry replaces the slower (%d)", s.replaced);
    json_decref(one);
    one = cg__tune_entry_to_json(&slow);
    CG_CHECK_OK(ctx, cg__tune_import_json(ctx, one, "one", 0, 0, &s));
    CG_CHECK(s.kept == 1 && s.replaced == 0, "the slower one does not replace (%d kept)", s.kept);
    json_decref(one);
    cg_tune_entry r;
    CG_CHECK_OK(ctx, cg__tune_store_get(ctx, cg__tune_store_dir(ctx), &fast.key, &r));
    CG_CHECK(r.best >= 0 && r.cand[r.best].median_ms == 1.0, "store holds the 1 ms entry");
    cg__tune_entry_free(&r);
    /* a foreign device is refused unless allowed */
    snprintf(slow.key.device, sizeof slow.key.device, "Imaginary CPU 9000");
    one = cg__tune_entry_to_json(&slow);
    CG_CHECK_OK(ctx, cg__tune_import_json(ctx, one, "one", 0, 0, &s));
    CG_CHECK(s.rejected == 1 && s.added == 0, "foreign refused");
    cg_context *ctx2 = ctx_in(dir2);
    CG_CHECK_OK(ctx2, cg__tune_import_json(ctx2, one, "one", 1, 0, &s));
    CG_CHECK(s.added == 1, "foreign allowed with --allow-foreign");
    json_decref(one);
    cg__tune_entry_free(&fast);
    cg__tune_entry_free(&slow);
    cg_context_free(ctx);
    cg_context_free(ctx2);
    rm_tree(dir);
    rm_tree(dir2);
}

/* CHUNKGEN_TUNE_ON_MISS=1: the first call of a key tunes it; the next is an exact hit. */
CG_TEST(tune_on_miss) {
    char dir[64];
    cg_context *ctx = tmp_ctx(dir, sizeof dir);
    cg_sscan_prob p;
    memset(&p, 0, sizeof p);
    CG_DIM(&p, B) = 1, CG_DIM(&p, L) = 40, CG_DIM(&p, D) = 20, CG_DIM(&p, N) = 3, CG_DIM(&p, G) = 1;
    cg_cfg cfg;
    const char *level;
    unsetenv("CHUNKGEN_CONFIG");
    setenv("CHUNKGEN_TUNE_ON_MISS", "1", 1);
    setenv("CHUNKGEN_TUNE_BUDGET", "20", 1);
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSCAN_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "tuned-on-miss"), "first call tunes: %s", level);
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSCAN_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "exact"), "second call: %s", level);
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    unsetenv("CHUNKGEN_TUNE_BUDGET");
    /* off by default: a miss stays a miss */
    CG_DIM(&p, D) = 24;
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSCAN_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "default"), "without the option: %s", level);
    /* the API setter, over the environment both ways */
    setenv("CHUNKGEN_TUNE_BUDGET", "20", 1);
    CG_CHECK(cg_context_set_tune_on_miss(ctx, 2) == CG_EINVAL && strstr(cg_errmsg(ctx), "on:"), "bad value");
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 1));
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSCAN_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "tuned-on-miss"), "set_tune_on_miss(1): %s", level);
    setenv("CHUNKGEN_TUNE_ON_MISS", "1", 1);
    CG_DIM(&p, D) = 28;
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 0));
    CG_CHECK_OK(ctx, tuned_lookup(ctx, "cpu", CG_OP_SSCAN_BWD, &p, &cfg, &level));
    CG_CHECK(!strcmp(level, "default"), "set_tune_on_miss(0) over the env: %s", level);
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    unsetenv("CHUNKGEN_TUNE_BUDGET");
    cg_context_free(ctx);
    rm_tree(dir);
}

/* A stored config that the problem's constraints refuse (here a key this version of the
 * CPU path does not know, as from an older store) must not fail the call: the dispatcher
 * runs the default config and says why on the dispatch line. */
CG_TEST(tune_refused_config_falls_back_to_default) {
    char dir[64];
    cg_context *ctx = tmp_ctx(dir, sizeof dir);
    unsetenv("CHUNKGEN_CONFIG");
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    char sdir[4200];
    snprintf(sdir, sizeof sdir, "%s", cg__tune_store_dir(ctx));
    cg_tune_entry e;
    fake_entry(ctx, &e, 512, 16, 0, 1.0, "chunk=32,block_dv=16,threads=0,retired_knob=3");
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, sdir, &e));
    cg__tune_entry_free(&e);

    const int64_t B = 1, T = 300, G = 1, H = 2, dk = 16, dv = 16;
    const int64_t sq[] = {B, T, G, dk}, sv[] = {B, T, H, dv}, sl[] = {B, T, H};
    float *mem[5];
    const int64_t n[5] = {B * T * G * dk, B * T * G * dk, B * T * H * dv, B * T * H, B * T * H * dv};
    cg_rng r = {3};
    for (int i = 0; i < 5; i++) {
        mem[i] = calloc((size_t)n[i], sizeof(float));
        for (int64_t j = 0; j < n[i] && i < 4; j++) mem[i][j] = (float)cg_rng_uniform(&r, i == 3 ? -0.3 : -1, i == 3 ? -0.01 : 1);
    }
    cg_ssd_fwd_args a;
    memset(&a, 0, sizeof a);
    a.layout = CG_LAYOUT_TOKEN_MAJOR;
    a.q = cg_tensor_contiguous(mem[0], CG_F32, 4, sq);
    a.k = cg_tensor_contiguous(mem[1], CG_F32, 4, sq);
    a.v = cg_tensor_contiguous(mem[2], CG_F32, 4, sv);
    a.log_alpha = cg_tensor_contiguous(mem[3], CG_F32, 3, sl);
    a.o = cg_tensor_contiguous(mem[4], CG_F32, 4, sv);
    cg_exec ex = {.backend = CG_BACKEND_CPU};
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &a, &ex));
    const char *d = cg_last_dispatch(ctx);
    CG_CHECK(strstr(d, "source=default") && strstr(d, "retired_knob") && strstr(d, "refused"),
             "dispatch line: %s", d);
    double mx = 0;
    for (int64_t j = 0; j < n[4]; j++) mx = fmax(mx, fabs(mem[4][j]));
    CG_CHECK(mx > 0 && isfinite(mx), "output computed (max |o| = %g)", mx);
    /* a pinned config with the same key is the caller's choice: refused, not replaced */
    ex.config = "chunk=32,retired_knob=3";
    CG_CHECK(cg_ssd_fwd(ctx, &a, &ex) == CG_EINVAL && strstr(cg_errmsg(ctx), "retired_knob"), "pinned: %s",
             cg_errmsg(ctx));
    for (int i = 0; i < 5; i++) free(mem[i]);
    cg_context_free(ctx);
    rm_tree(dir);
}
