/* test_tune_api.c -- the public front door of tuning and the store (include/chunkgen.h):
 * cg_tune on cg_shapes, cg_config_lookup of the tuned shape and of its neighbours,
 * cg_config_visit, cg_config_export / cg_config_import_json into another store, the
 * built-in sets, and bad arguments named in the message. Only public calls. */
#include "cg_test.h"
#include "cli_testlib.h"

#include <unistd.h>

static cg_context *ctx_at(const char *dir) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    cg_context_set_cache_dir(ctx, dir);
    cg_context_set_threads(ctx, 1);
    return ctx;
}

typedef struct seen {
    int n;
    char key[8][200], config[8][256];
    int has_json;
} seen;

static int keep(const cg_config_entry *e, void *user) {
    seen *s = user;
    if (s->n < 8) {
        snprintf(s->key[s->n], sizeof s->key[0], "%s", e->key);
        snprintf(s->config[s->n], sizeof s->config[0], "%s", e->config ? e->config : "(none)");
        s->has_json += e->json && e->json[0] == '{' && e->path && access(e->path, R_OK) == 0;
    }
    s->n++;
    return 0;
}

CG_TEST(tune_api_tune_lookup_visit_export_import) {
    char a[4096], b[4096];
    if (mk_tmpdir(a, sizeof a) || mk_tmpdir(b, sizeof b)) return;
    setenv("CHUNKGEN_TUNE_FAKE_TIMING", "1", 1);
    unsetenv("CHUNKGEN_CONFIG");
    cg_context *ctx = ctx_at(a), *c2 = ctx_at(b);
    cg_shape s[2] = {{.size = sizeof(cg_shape)}, {.size = sizeof(cg_shape)}};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "ssd_fwd:B=1,T=64,G=1,H=2,dk=8,dv=8", &s[0]));
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "sscan_bwd:B=1,L=40,D=8,N=4", &s[1]));

    /* before: the default, and the key and file the entry will have */
    cg_tuned_config tc = {.size = sizeof tc};
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &s[0], &tc));
    CG_CHECK(!strcmp(tc.source, "default") && !tc.config[0] && strstr(tc.key, "cpu ssd fwd dk8 dv8 G1 H2 T<=64"),
             "before the tune: %s %s [%s]", tc.source, tc.config, tc.key);

    cg_tune_options o = CG_TUNE_OPTIONS_INIT;
    o.backend = CG_BACKEND_CPU, o.max_candidates = 3;
    cg_tune_summary sum = CG_TUNE_SUMMARY_INIT;
    CG_CHECK_OK(ctx, cg_tune(ctx, s, 2, &o, &sum));
    CG_CHECK(sum.keys == 2 && sum.tuned == 2 && sum.backend == CG_BACKEND_CPU && sum.candidates >= 2,
             "summary: %d keys, %d tuned, %d candidates", sum.keys, sum.tuned, sum.candidates);

    /* the tuned key: exact, its file there; the next bucket: nearest; the other direction: default */
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &s[0], &tc));
    CG_CHECK(!strcmp(tc.source, "exact") && access(tc.path, R_OK) == 0, "after: %s, %s", tc.source, tc.path);
    char exact_cfg[256];
    snprintf(exact_cfg, sizeof exact_cfg, "%s", tc.config);
    cg_shape t = s[0];
    t.dim[CG_SYM_T] = 300;
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &t, &tc));
    CG_CHECK(!strcmp(tc.source, "nearest-bucket") && !strcmp(tc.config, exact_cfg), "T=300: %s %s", tc.source,
             tc.config);
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "ssd_bwd:B=1,T=64,G=1,H=2,dk=8,dv=8", &t));
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &t, &tc));
    CG_CHECK(!strcmp(tc.source, "default"), "the backward was not tuned: %s", tc.source);
    setenv("CHUNKGEN_CONFIG", "ssd_fwd:chunk=16", 1);
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &s[0], &tc));
    CG_CHECK(!strcmp(tc.source, "pinned-env") && !strcmp(tc.config, "chunk=16"), "pinned: %s %s", tc.source, tc.config);
    unsetenv("CHUNKGEN_CONFIG");

    /* visit: both entries, in key order (ssd before sscan? by op name: sscan < ssd) */
    seen v = {0};
    int bad = -1;
    CG_CHECK_OK(ctx, cg_config_visit(ctx, NULL, keep, &v, &bad));
    CG_CHECK(v.n == 2 && bad == 0 && v.has_json == 2, "visit: %d entries, %d bad, %d with JSON and file", v.n, bad,
             v.has_json);
    CG_CHECK(v.n == 2 && strstr(v.key[0], "sscan bwd D8 N4") && strstr(v.key[1], "ssd fwd dk8"), "order: %s | %s",
             v.key[0], v.n > 1 ? v.key[1] : "");
    cg_config_filter f = CG_CONFIG_FILTER_INIT;
    f.op = "ssd";
    seen w = {0};
    CG_CHECK_OK(ctx, cg_config_visit(ctx, &f, keep, &w, NULL));
    CG_CHECK(w.n == 1 && !strcmp(w.config[0], exact_cfg[0] ? exact_cfg : ""), "filtered: %d, %s", w.n, w.config[0]);

    /* export, import into another store: the same answer there */
    char *doc = NULL;
    size_t len = 0;
    int count = 0;
    CG_CHECK_OK(ctx, cg_config_export(ctx, &f, &doc, &len, &count));
    CG_CHECK(doc && count == 1 && len == strlen(doc) && strstr(doc, "\"chunkgen-configs\""), "export: %d entries",
             count);
    cg_import_stats is = CG_IMPORT_STATS_INIT;
    CG_CHECK_OK(c2, cg_config_import_json(c2, doc, len, "doc", NULL, &is));
    CG_CHECK(is.added == 1 && is.rejected == 0, "import: %d added, %d rejected", is.added, is.rejected);
    CG_CHECK_OK(c2, cg_config_lookup(c2, CG_BACKEND_CPU, &s[0], &tc));
    CG_CHECK(!strcmp(tc.source, "exact") && !strcmp(tc.config, exact_cfg), "imported: %s %s", tc.source, tc.config);
    cg_free(doc);
    /* a store directory as the source: the other key comes too; ours is kept */
    const char *src[] = {a};
    cg_import_options io = CG_IMPORT_OPTIONS_INIT;
    CG_CHECK_OK(c2, cg_config_import(c2, src, 1, &io, &is));
    CG_CHECK(is.added == 1 && is.kept == 1, "store import: %d added, %d kept", is.added, is.kept);

    /* the built-in sets; bad arguments */
    cg_shape set[64];
    set[0].size = sizeof set[0];
    int n = 0;
    CG_CHECK_OK(ctx, cg_tune_builtin_shapes(ctx, CG_BACKEND_CPU, set, 64, &n));
    /* the seeds at the CPU's lengths: ssd 4 x 2, sscan 3 x 1, gdr 3 x 2 */
    CG_CHECK(n == 17 && set[0].dim[CG_SYM_DK] == 128, "cpu set: %d shapes", n);
    CG_CHECK(cg_tune(ctx, s, 1, &(cg_tune_options){.backend = CG_BACKEND_REF}, NULL) == CG_EINVAL &&
                 strstr(cg_errmsg(ctx), "opts.backend"),
             "ref: %s", cg_errmsg(ctx));
    CG_CHECK(cg_tune(ctx, s, 1, &(cg_tune_options){.directions = 7}, NULL) == CG_EINVAL &&
                 strstr(cg_errmsg(ctx), "opts.directions"),
             "directions: %s", cg_errmsg(ctx));
    cg_shape z = s[0];
    z.dim[CG_SYM_DK] = 0;
    CG_CHECK(cg_config_lookup(ctx, CG_BACKEND_CPU, &z, &tc) == CG_EINVAL && strstr(cg_errmsg(ctx), "dk = 0"),
             "dk 0: %s", cg_errmsg(ctx));
    CG_CHECK(cg_config_lookup(ctx, CG_BACKEND_REF, &s[0], &tc) == CG_EINVAL && strstr(cg_errmsg(ctx), "backend"),
             "ref lookup: %s", cg_errmsg(ctx));
    unsetenv("CHUNKGEN_TUNE_FAKE_TIMING");
    cg_context_free(c2);
    cg_context_free(ctx);
    rm_tree(a);
    rm_tree(b);
}

/* The key's facts the CLI's --verbose line shows: the CPU key's thread count and device
 * (the CPU model and its ISA variant), the emulator's compute capability (its key holds
 * the host's threads too: its speed is the host's). */
CG_TEST(tune_api_lookup_key_facts) {
    const char *dir = "/tmp/cg_test_tune_api_facts";
    cg_context *ctx = ctx_at(dir);
    cg_shape s = {.size = sizeof s};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "ssd_fwd:B=1,T=64,G=1,H=2,dk=8,dv=8", &s));
    cg_device_info di = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_CPU, &di));
    char isa[32];
    snprintf(isa, sizeof isa, "[%s]", di.cpu_isa);
    for (int th = 1; th <= 3; th += 2) {
        CG_CHECK_OK(ctx, cg_context_set_threads(ctx, th));
        cg_tuned_config tc = {.size = sizeof tc};
        CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &s, &tc));
        CG_CHECK(tc.threads == th && tc.cc == 0 && strstr(tc.device, isa) && strstr(tc.key, "cpu ssd fwd"),
                 "cpu, %d threads: %d threads, cc %d, device \"%s\" (want %s), key %s", th, tc.threads, tc.cc,
                 tc.device, isa, tc.key);
    }
    cg_tuned_config te = {.size = sizeof te};
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_EMULATE, &s, &te));
    CG_CHECK(te.cc == 80 && te.threads == 3 && te.device[0], "emulate: cc %d, %d threads, device \"%s\"", te.cc,
             te.threads, te.device);
    cg_context_free(ctx);
}

/* The scoped config syntax through the front door: the part for an op, none, refusals. */
CG_TEST(tune_api_config_scope) {
    cg_op fwd, bwd, scan;
    CG_CHECK(cg_op_parse("ssd_fwd", &fwd) == CG_OK && cg_op_parse("ssd_bwd", &bwd) == CG_OK &&
                 cg_op_parse("sscan_fwd", &scan) == CG_OK, "ops");
    char out[32], err[512] = "";
    const char *text = "ssd_fwd:chunk=64;ssd:chunk=32";
    CG_CHECK(cg_config_scope(text, fwd, out, sizeof out, err, sizeof err) == CG_OK && !strcmp(out, "chunk=64"),
             "the op's own part first: %s", out);
    CG_CHECK(cg_config_scope(text, bwd, out, sizeof out, err, sizeof err) == CG_OK && !strcmp(out, "chunk=32"),
             "the family's part: %s", out);
    CG_CHECK(cg_config_scope(text, scan, out, sizeof out, err, sizeof err) == CG_ENOTFOUND && !out[0],
             "no part for sscan_fwd: \"%s\"", out);
    CG_CHECK(cg_config_scope("chunk=16", scan, out, sizeof out, err, sizeof err) == CG_OK && !strcmp(out, "chunk=16"),
             "unscoped: %s", out);
    CG_CHECK(cg_config_scope("sdd:chunk=64", fwd, out, sizeof out, err, sizeof err) == CG_EINVAL &&
                 strstr(err, "\"sdd\""), "unknown scope: %s", err);
    CG_CHECK(cg_config_scope("chunk=64", (cg_op)cg_op_count(), out, sizeof out, err, sizeof err) == CG_EINVAL &&
                 strstr(err, "op:"), "unknown op: %s", err);
    CG_CHECK(cg_config_scope("chunk=64,threads=2", fwd, out, 8, err, sizeof err) == CG_EINVAL &&
                 strstr(err, "too long"), "a part past cap: %s", err);
}
