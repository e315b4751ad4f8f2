/* test_agree.c -- tuning that agrees (issue 17 items 5, 6, 9, 11): imported configs pass
 * the Lua constraints, the merge rule is deterministic and noise cannot flip it, --force
 * retunes, 4 concurrent shard processes merge into the store one unsharded tune gives
 * (with the same, fake, measurements), and `run --verbose` names the key it used. */
#include "cg_test.h"
#include "cli_testlib.h"
#include "npy.h"
#include "../autotune/autotune.h"
#include "tune_testlib.h"

#include <jansson.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ctx_in tune_test_ctx

/* A complete CPU SSD entry (dk 16, dv 32, T 1024) whose best is cfg at ms (order ord). */
static void entry_cfg(cg_context *ctx, cg_tune_entry *e, const char *cfg, int ord, double ms, double iqr) {
    tune_test_entry(ctx, e, 1024, 32, 0, cfg, ord, ms, iqr);
}

static void write_json(const char *path, json_t *j) {
    if (json_dump_file(j, path, JSON_INDENT(1) | JSON_SORT_KEYS)) cg_test_fail(__FILE__, __LINE__, "writing %s", path);
}

/* The stored best config and median of key's entry in dir ("" / 0 when absent). */
static void stored_best(cg_context *ctx, const cg_tune_key *k, char *cfg, size_t cap, double *ms) {
    cg_tune_entry r;
    cfg[0] = '\0';
    *ms = 0;
    if (cg__tune_store_get(ctx, cg__tune_store_dir(ctx), k, &r) == CG_OK) {
        if (r.best >= 0) {
            snprintf(cfg, cap, "%s", r.cand[r.best].cfg);
            *ms = r.cand[r.best].median_ms;
        }
        cg__tune_entry_free(&r);
    }
}

/* ------------------------------------------------------------ item 5 */

/* Configs the kernel's constraints refuse are rejected on import and never replace a
 * good entry, however fast they claim to be. */
CG_TEST(agree_import_checks_constraints) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    cg_context *ctx = ctx_in(S);
    const char *good = "chunk=32,block_dv=32,threads=0";
    cg_tune_entry g;
    entry_cfg(ctx, &g, good, 3, 1.0, 0.01);
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &g));
    const char *bad[] = {"chunk=0,block_dv=32,threads=0", "chunk=-16,block_dv=32,threads=0",
                         "chunk=32,block_dv=32,threads=0,warps=4", "chunk=32,block_dv=32,threads=100000"};
    for (int i = 0; i < 4; i++) {
        cg_tune_entry e;
        entry_cfg(ctx, &e, bad[i], 1, 0.4, 0.004);
        json_t *j = cg__tune_entry_to_json(&e);
        tune_test_events ev;
        tune_test_listen(ctx, &ev);
        cg_tune_import_stats s;
        CG_CHECK_OK(ctx, cg__tune_import_json(ctx, j, "bad", 0, 0, &s));
        tune_test_listen(ctx, NULL);
        const char *text = ev.text;
        CG_CHECK(s.rejected == 1 && s.replaced == 0 && s.added == 0, "%s: rejected (%d rejected, %d replaced)", bad[i],
                 s.rejected, s.replaced);
        CG_CHECK(strstr(text, "constraints") != NULL, "%s: the message names the constraints: %s", bad[i], text);
        char cfg[CG_TUNE_CFG_TEXT];
        double ms;
        stored_best(ctx, &g.key, cfg, sizeof cfg, &ms);
        CG_CHECK(!strcmp(cfg, good) && ms == 1.0, "%s: the good entry stays (%s, %g ms)", bad[i], cfg, ms);
        json_decref(j);
        cg__tune_entry_free(&e);
    }
    cg__tune_entry_free(&g);
    cg_context_free(ctx);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 9: merge rule */

/* Same key, three measurements: a (fastest, late in the space's order), b (within a's
 * noise, earlier in the order), c (slower by far). Whatever the order of the sources,
 * one import of all three -- or one after another -- keeps b. */
CG_TEST(agree_merge_rule_deterministic) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    cg_context *tmp = ctx_in(S);
    cg_tune_entry e[3];
    entry_cfg(tmp, &e[0], "chunk=64,block_dv=32,threads=0", 9, 1.000, 0.010);
    entry_cfg(tmp, &e[1], "chunk=32,block_dv=32,threads=0", 3, 1.012, 0.011);
    entry_cfg(tmp, &e[2], "chunk=16,block_dv=32,threads=0", 1, 1.500, 0.010);
    char files[3][4200];
    for (int i = 0; i < 3; i++) {
        snprintf(files[i], sizeof files[i], "%s/e%d.json", S, i);
        json_t *j = cg__tune_entry_to_json(&e[i]);
        write_json(files[i], j);
        json_decref(j);
    }
    static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int p = 0; p < 6; p++) {
        char d[4300];
        snprintf(d, sizeof d, "%s/store%d", S, p);
        cg_context *ctx = ctx_in(d);
        cg_tune_import_stats s;
        const char *paths[3] = {files[perm[p][0]], files[perm[p][1]], files[perm[p][2]]};
        CG_CHECK_OK(ctx, cg__tune_import_files(ctx, paths, 3, 0, 0, &s));
        CG_CHECK(s.added == 1 && s.kept == 2 && s.rejected == 0, "perm %d: %d added %d kept", p, s.added, s.kept);
        char cfg[CG_TUNE_CFG_TEXT];
        double ms;
        stored_best(ctx, &e[0].key, cfg, sizeof cfg, &ms);
        CG_CHECK(!strcmp(cfg, e[1].cand[0].cfg), "perm %d: one import keeps b, got %s", p, cfg);
        /* one source after the other */
        char d2[4300];
        snprintf(d2, sizeof d2, "%s/seq%d", S, p);
        cg_context *c2 = ctx_in(d2);
        for (int i = 0; i < 3; i++) CG_CHECK_OK(c2, cg__tune_import_file(c2, paths[i], 0, 0, &s));
        stored_best(c2, &e[0].key, cfg, sizeof cfg, &ms);
        CG_CHECK(!strcmp(cfg, e[1].cand[0].cfg), "perm %d: imports one by one keep b, got %s", p, cfg);
        cg_context_free(ctx);
        cg_context_free(c2);
    }
    /* noise cannot flip a stored winner: 1 % faster, within its 1 % IQR */
    char d[4300];
    snprintf(d, sizeof d, "%s/noise", S);
    cg_context *ctx = ctx_in(d);
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e[1]));
    cg_tune_entry n;
    entry_cfg(ctx, &n, "chunk=96,block_dv=32,threads=0", 12, 1.012 * 0.99, 0.011);
    json_t *j = cg__tune_entry_to_json(&n);
    cg_tune_import_stats s;
    CG_CHECK_OK(ctx, cg__tune_import_json(ctx, j, "noise", 0, 0, &s));
    CG_CHECK(s.kept == 1 && s.replaced == 0, "a win within the noise does not replace (%d replaced)", s.replaced);
    json_decref(j);
    /* a win by more than the noise does */
    cg__tune_entry_free(&n);
    entry_cfg(ctx, &n, "chunk=96,block_dv=32,threads=0", 12, 0.8, 0.008);
    j = cg__tune_entry_to_json(&n);
    CG_CHECK_OK(ctx, cg__tune_import_json(ctx, j, "faster", 0, 0, &s));
    CG_CHECK(s.replaced == 1, "a clear win replaces (%d replaced)", s.replaced);
    json_decref(j);
    cg__tune_entry_free(&n);
    for (int i = 0; i < 3; i++) cg__tune_entry_free(&e[i]);
    cg_context_free(ctx);
    cg_context_free(tmp);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 6 */

static cg_tune_shape small_ssd(int64_t T, int64_t dv) {
    cg_tune_shape s;
    cg__tune_shape_init(&s, CG_OP_SSD_FWD);
    int64_t *x = s.shape.dim;
    cg__tune_shape_set_seq(&s, T);
    x[CG_SYM_B] = 1, x[CG_SYM_G] = 1, x[CG_SYM_H] = 2, x[CG_SYM_DK] = 16,
    x[CG_SYM_DV] = dv;
    snprintf(s.name, sizeof s.name, "t%lld_dv%lld", (long long)T, (long long)dv);
    return s;
}

CG_TEST(agree_tune_force_retunes) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    setenv("CHUNKGEN_TUNE_FAKE_TIMING", "1", 1);
    cg_context *ctx = ctx_in(S);
    cg_tune_shape s = small_ssd(64, 16);
    cg_tune_opts o;
    cg__tune_opts_default(&o);
    o.op_mask = 1, o.dir_mask = 1, o.max_candidates = 3;
    cg_tune_sum sum;
    CG_CHECK_OK(ctx, cg__tune_run(ctx, "cpu", &s, 1, &o, &sum));
    CG_CHECK(sum.tuned == 1, "first tune: %d tuned", sum.tuned);
    CG_CHECK_OK(ctx, cg__tune_run(ctx, "cpu", &s, 1, &o, &sum));
    CG_CHECK(sum.cached == 1 && sum.tuned == 0, "second tune: already tuned (%d)", sum.cached);
    o.force = 1;
    CG_CHECK_OK(ctx, cg__tune_run(ctx, "cpu", &s, 1, &o, &sum));
    CG_CHECK(sum.tuned == 1 && sum.cached == 0 && sum.candidates == 4,
             "--force retunes: %d tuned, %d cached, %d candidates measured", sum.tuned, sum.cached, sum.candidates);
    unsetenv("CHUNKGEN_TUNE_FAKE_TIMING");
    cg_context_free(ctx);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 9: shards */

typedef struct entry_sig {
    char file[64];
    char text[4096]; /* best config and every candidate's config, verdict, median */
} entry_sig;

typedef struct sig_list {
    entry_sig v[64];
    int n, bad;
} sig_list;

static int sig_visit(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    sig_list *l = arg;
    (void)why;
    if (!e || l->n == 64) {
        l->bad++;
        return 0;
    }
    entry_sig *g = &l->v[l->n++];
    const char *b = strrchr(path, '/');
    snprintf(g->file, sizeof g->file, "%s", b ? b + 1 : path);
    size_t n = (size_t)snprintf(g->text, sizeof g->text, "complete=%d best=%s;", e->complete,
                                e->best >= 0 ? e->cand[e->best].cfg : "-");
    for (int i = 0; i < e->ncand && n < sizeof g->text; i++)
        n += (size_t)snprintf(g->text + n, sizeof g->text - n, "%s:%d:%.9g;", e->cand[i].cfg, (int)e->cand[i].verdict,
                              e->cand[i].median_ms);
    return 0;
}

static void store_sigs(const char *cache, sig_list *l) {
    memset(l, 0, sizeof *l);
    char d[9000];
    snprintf(d, sizeof d, "%.4300s/configs", cache);
    cg__tune_store_scan(d, sig_visit, l); /* name order */
}

/* 4 shard processes (`chunkgen tune --shard i/4`, each with its own store, as on 4
 * machines) at once, merged by one `chunkgen import` of the 4 stores, give the store of
 * one unsharded tune of the same keys, with the same measurements (fake timing). */
CG_TEST(agree_shards_merge_like_one_tune) {
    char S[4096], shapes[4300];
    if (mk_tmpdir_with(S, sizeof S, shapes, sizeof shapes, "shapes.txt")) return;
    FILE *f = fopen(shapes, "w");
    fputs("# small keys\nssd 1,40,1,2,16,16 a\nssd 1,70,1,2,16,24 b\nssd 1,33,1,2,8,16 c\nssd 1,100,1,4,16,8 d\n"
          "sscan 1,40,8,4 e\nsscan 1,65,12,4 f\n",
          f);
    fclose(f);
    setenv("CHUNKGEN_TUNE_FAKE_TIMING", "1", 1);
    unsetenv("CHUNKGEN_CACHE_DIR");
    pid_t pids[4];
    char dirs[4][4300];
    for (int i = 0; i < 4; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/shard%d", S, i);
        mkdir(dirs[i], 0755);
        fflush(stdout);
        fflush(stderr);
        pids[i] = fork();
        if (pids[i] == 0) {
            char sh[16];
            snprintf(sh, sizeof sh, "%d/4", i);
            const char *args[] = {"tune", "--backend", "cpu", "--shapes", shapes, "--shard", sh, "--max-candidates", "3",
                                  "--threads", "2", "--cache-dir", dirs[i], "--quiet", NULL};
            _exit(run_cli(dirs[i], args));
        }
    }
    int all_ok = 1;
    for (int i = 0; i < 4; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        all_ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CG_CHECK(all_ok, "the 4 shard tunes succeed");
    char one[4300], merged[4300];
    snprintf(one, sizeof one, "%s/one", S);
    snprintf(merged, sizeof merged, "%s/merged", S);
    mkdir(one, 0755);
    mkdir(merged, 0755);
    const char *args1[] = {"tune", "--backend", "cpu", "--shapes", shapes, "--max-candidates", "3", "--threads", "2",
                           "--cache-dir", one, "--quiet", NULL};
    CG_CHECK(run_cli(one, args1) == 0, "the unsharded tune succeeds");
    const char *argsm[] = {"import", dirs[0], dirs[1], dirs[2], dirs[3], "--cache-dir", merged, NULL};
    int rc = run_cli(merged, argsm);
    char *err = cli_stderr(merged);
    CG_CHECK(rc == 0, "import of the 4 stores: rc %d: %s", rc, err);
    free(err);
    unsetenv("CHUNKGEN_TUNE_FAKE_TIMING");

    sig_list a, b, sh;
    store_sigs(one, &a);
    store_sigs(merged, &b);
    CG_CHECK(a.n == 12 && a.bad == 0, "the unsharded tune stored %d keys (12 expected)", a.n);
    CG_CHECK(a.n == b.n && b.bad == 0, "merged store: %d entries, unsharded: %d", b.n, a.n);
    for (int i = 0; i < a.n && i < b.n; i++) {
        CG_CHECK(!strcmp(a.v[i].file, b.v[i].file), "entry %d: %s vs %s", i, a.v[i].file, b.v[i].file);
        CG_CHECK(!strcmp(a.v[i].text, b.v[i].text), "%s: merged %s\n  unsharded %s", a.v[i].file, b.v[i].text,
                 a.v[i].text);
    }
    /* every shard tuned only its own keys, and more than one shard had work */
    int total = 0, busy = 0;
    for (int i = 0; i < 4; i++) {
        store_sigs(dirs[i], &sh);
        total += sh.n;
        busy += sh.n > 0;
    }
    CG_CHECK(total == a.n && busy >= 2, "shards hold %d entries in all (%d shards busy)", total, busy);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 11 */

CG_TEST(agree_run_verbose_names_key) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    const int64_t sq[] = {1, 9, 1, 8}, sv[] = {1, 9, 2, 8}, sl[] = {1, 9, 2};
    const char *names[] = {"q", "k", "v", "log_alpha"};
    const int64_t *shp[] = {sq, sq, sv, sl};
    int nd[] = {4, 4, 4, 3};
    float vals[200];
    for (int i = 0; i < 200; i++) vals[i] = (float)((i % 7) - 3) * 0.1f;
    for (int i = 0; i < 4; i++) {
        char p[4300], e[256];
        snprintf(p, sizeof p, "%s/%s.npy", S, names[i]);
        if (i == 3)
            for (int j = 0; j < 18; j++) vals[j] = -0.1f;
        if (cg_npy_write(p, vals, nd[i], shp[i], e, sizeof e)) cg_test_fail(__FILE__, __LINE__, "%s", e);
    }
    char seen[2][512];
    const char *th[2] = {"1", "2"};
    for (int t = 0; t < 2; t++) {
        const char *args[] = {"run", "ssd", "--backend", "cpu", "--verbose", "--threads", th[t], S, NULL};
        int rc = run_cli(S, args);
        char *err = cli_stderr(S);
        const char *k = strstr(err, "tuned-config key");
        CG_CHECK(rc == 0 && k, "--threads %s: rc %d, names the key: %s", th[t], rc, err);
        snprintf(seen[t], sizeof seen[t], "%.*s", k ? (int)strcspn(k, "\n") : 0, k ? k : "");
        char want[64];
        snprintf(want, sizeof want, "%s thread", th[t]);
        CG_CHECK(strstr(seen[t], want) != NULL, "the key holds the thread count: %s", seen[t]);
        free(err);
    }
    CG_CHECK(strcmp(seen[0], seen[1]) != 0, "--threads 1 and 2 look up different keys");
    rm_tree(S);
}
