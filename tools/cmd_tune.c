/* cmd_tune.c -- `chunkgen tune`, `show`, `export`, `import` and `cache`: the CLI of the
 * autotuner and its config store (autotune/). */
#include "chunkgen.h"
#include "cmd_tune.h"
#include "cli_args.h"
#include "cli_common.h"
#include "kbundle.h"
#include "tune_ui.h"
#include "tune_shapes.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The filters of show and export as rows of a cg_cli_opt table over the cg_config_filter
 * `fld` of options struct T (a table: clang-format would re-indent its rows). */
// clang-format off
#define CLI_FILTER_ROWS(T, fld)                                                                                  \
    {"--backend", 0, CG_CLI_STR, offsetof(T, fld.backend), "cpu|cuda|emulate", "only entries of this backend", 0,   \
     0, NULL},                                                                                                   \
    {"--op", 0, CG_CLI_STR, offsetof(T, fld.op), "FAMILY", "only this op (ssd, sscan, gdr, ...)", 0, 0, NULL},    \
    {"--dir", 0, CG_CLI_STR, offsetof(T, fld.dir), "fwd|bwd", "only this direction", 0, 0, NULL},                 \
    {"--device", 0, CG_CLI_STR, offsetof(T, fld.device), "TEXT", "only devices whose name contains TEXT", 0, 0,   \
     NULL},                                                                                                      \
    {"--partial", 0, CG_CLI_FLAG, offsetof(T, fld.partial), NULL, "include unfinished (interrupted) tunes", 0, 0, \
     NULL}
// clang-format on

/* A bad store entry the library skipped (show, export). */
static void warn_bad(const cg_progress *ev, void *user) {
    (void)user;
    if (ev->kind == CG_PROGRESS_MESSAGE && ev->level >= CG_LOG_WARN)
        fprintf(stderr, "chunkgen: warning: ignoring bad entry %s: %s\n", ev->subject, ev->text);
}

/* ---------------------------------------------------------------- tune */

static const char k_tune_usage[] =
    "usage: chunkgen tune [options]\n"
    "\n"
    "Builds the tuned-config store: for every shape, forward and backward, enumerates the\n"
    "backend's Lua parameter space, verifies each candidate against the float64 reference\n"
    "on a reduced problem (same dk/dv/G/H or D/N/G, batch 1, a short T spanning several\n"
    "chunks), times it on the full shape and stores the fastest. Runtime calls then use the\n"
    "tuned config (exact key, else the nearest seq bucket). An interrupted tune keeps what\n"
    "it measured; running it again resumes.\n";

/* The options of `chunkgen tune` (the CLI's argument table, tools/cli_args.h). */
typedef struct tune_cli {
    cg_tune_options o;
    int dir_mask;          /* --dir: 1, 2, or 3 (all) */
    const char *op_family; /* --op: an op family of the op table ("gdr"); NULL: all */
    cli_common c;
    int quiet;
    const char *backend, *shapes_file;
    const char **shape_args; /* argc + 1 slots */
    int nshape_args;
    const char *dtype; /* --dtype: the dtype signature of every shape (NULL: f32) */
    int64_t varlen;    /* --varlen MAX: every shape as a varlen key (docs/varlen.md); 0: none */
} tune_cli;

static int mask_opt(const char *v, const char *a, const char *b, int *mask, char *err, size_t errlen) {
    if (!strcmp(v, a)) *mask = 1;
    else if (!strcmp(v, b)) *mask = 2;
    else if (!strcmp(v, "all")) *mask = 3;
    else return snprintf(err, errlen, "unknown value '%s' (expected %s, %s or all)", v, a, b), -1;
    return 0;
}
/* --op FAMILY: any op family of the op table (cg_op_describe), or all. */
static int op_opt(void *opts, const char *v, char *err, size_t errlen) {
    tune_cli *t = opts;
    char names[256] = "";
    for (int i = 0; i < cg_op_count(); i++) {
        cg_op_info in = {.size = sizeof in};
        if (cg_op_describe(NULL, (cg_op)i, &in) != CG_OK || in.bwd) continue;
        if (!strcmp(v, in.family)) {
            t->op_family = in.family;
            return 0;
        }
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s, ", in.family);
    }
    if (!strcmp(v, "all")) {
        t->op_family = NULL;
        return 0;
    }
    return snprintf(err, errlen, "unknown value '%s' (expected %sor all)", v, names), -1;
}
static int dir_opt(void *opts, const char *v, char *err, size_t errlen) {
    return mask_opt(v, "fwd", "bwd", &((tune_cli *)opts)->dir_mask, err, errlen);
}
static int backend_opt(void *opts, const char *v, char *err, size_t errlen) {
    if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "emulate"))
        return snprintf(err, errlen, "'%s' cannot be tuned (expected auto, cpu, cuda or emulate)", v), -1;
    ((tune_cli *)opts)->backend = v;
    return 0;
}
static int shape_opt(void *opts, const char *v, char *err, size_t errlen) {
    tune_cli *t = opts;
    t->shape_args[t->nshape_args++] = v; /* parsed once --op is known */
    (void)err, (void)errlen;
    return 0;
}
static int shard_opt(void *opts, const char *v, char *err, size_t errlen) {
    tune_cli *t = opts;
    long si = -1, sn = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    char *slash = strchr(buf, '/');
    if (slash) *slash = '\0';
    if (!slash || cli_parse_int(buf, 0, 1 << 20, &si) || cli_parse_int(slash + 1, 1, 1 << 20, &sn) || si >= sn)
        return snprintf(err, errlen, "expected I/N with 0 <= I < N (e.g. 3/8), got '%s'", v), -1;
    t->o.shard = (int)si, t->o.nshards = (int)sn;
    return 0;
}

#define TO(f) offsetof(tune_cli, f)
static const cg_cli_opt k_tune_opts[] = {
    {"--op", 0, CG_CLI_FN, 0, "FAMILY|all", "ops to tune: ssd, sscan, gdr, ... (default all)", 0, 0, op_opt},
    {"--dir", 0, CG_CLI_FN, 0, "fwd|bwd|all", "directions (default all)", 0, 0, dir_opt},
    {"--backend", 0, CG_CLI_FN, 0, "auto|cpu|cuda|emulate", "(default auto: cuda when a GPU is present, else cpu)", 0,
     0, backend_opt},
    {"--shape", 0, CG_CLI_FN, 0, "S",
     "a shape, repeatable, in the shape syntax of every command:\nOP:B=..,T=..,... (ssd_fwd:B=8,T=4096,G=2,H=8,dk=64,dv=64), or\n"
     "FAMILY:... (ssd:, sscan:) for the ops of --dir, or without a\nprefix with --op; deprecated: positional B,T,G,H,dk,dv (ssd)\n"
     "or B,L,D,N[,G] (sscan)",
     0, 0, shape_opt},
    {"--shapes", 0, CG_CLI_STR, TO(shapes_file), "FILE",
     "shapes, one a line in the same syntax (# comments)\n(default: the built-in set; smaller on the CPU backend)", 0,
     0, NULL},
    {"--dtype", 0, CG_CLI_STR, TO(dtype), "SIG",
     "storage of the keys' tensors: f32 (default), bf16, f16, or one input\nset such as bf16-q-k (docs/dtypes.md); "
     "each dtype is a key of its own",
     0, 0, NULL},
    {"--varlen", 0, CG_CLI_I64, TO(varlen), "MAX",
     "tune the varlen keys (cu_seqlens, docs/varlen.md) of the shapes:\nB = 1, T the packed total, sequences of "
     "at most MAX tokens\n(the problem: sequences of MAX, the last the remainder)",
     1, (int64_t)1 << 40, NULL},
    {"--budget", 0, CG_CLI_F64, TO(o.budget_s), "SECONDS",
     "stop starting new work after this long; a key cut short\nis stored as truncated and resumed by the next run",
     1e-9, 1e12, NULL},
    {"--jobs", 0, CG_CLI_INT, TO(o.jobs), "N", "compile workers for cuda/emulate (default: all cores)", 1, 64, NULL},
    {"--force", 0, CG_CLI_FLAG, TO(o.force), NULL, "retune keys that are already tuned", 0, 0, NULL},
    {"--shard", 0, CG_CLI_FN, 0, "I/N",
     "tune only the keys of shard I of N (0 <= I < N; by a hash of\nthe key's shape, so any N works): one shard per "
     "job-array\ntask or rank, then `chunkgen import` the stores together",
     0, 0, shard_opt},
    {"--min-time", 0, CG_CLI_F64, TO(o.min_time_s), "SECONDS", "time each candidate at least this long", 1e-9, 60,
     NULL},
    {"--verify-T", 0, CG_CLI_I64, TO(o.verify_T), "N", "seq length of the verification problem (default auto)", 1,
     1 << 20, NULL},
    {"--max-candidates", 0, CG_CLI_INT, TO(o.max_candidates), "N", "only the first N configs of each space", 1, 1 << 20,
     NULL},
    CG_CLI_OPT_THREADS(tune_cli, c.threads),
    {"--cache-dir", 0, CG_CLI_STR, TO(c.cache_dir), "DIR", "cache directory (default $CHUNKGEN_CACHE_DIR or XDG)", 0, 0,
     NULL},
    {"--quiet", 'q', CG_CLI_FLAG, TO(quiet), NULL, "no progress output", 0, 0, NULL},
    CG_CLI_OPT_END,
};
#undef TO
static const cg_cli_cmd k_tune_cmd = {"tune", k_tune_usage, k_tune_opts, NULL, NULL};

int cg_cmd_tune(int argc, char **argv) {
    const char *cmd = "tune";
    tune_cli t;
    memset(&t, 0, sizeof t);
    t.o = (cg_tune_options)CG_TUNE_OPTIONS_INIT;
    t.dir_mask = 3;
    t.backend = "auto";
    if (!(t.shape_args = calloc((size_t)argc + 1, sizeof *t.shape_args))) return cli_fail(cmd, "out of memory");
    int rc = cg_cli_parse(&k_tune_cmd, argc, argv, &t);
    if (rc) {
        free(t.shape_args);
        return rc < 0 ? 0 : rc; /* -1: --help */
    }
    cg_tune_options o = t.o;
    const int progress = t.quiet ? -1 : isatty(fileno(stderr)) ? 1 : 0; /* a bar, lines, nothing */
    if (t.shapes_file && t.nshape_args) rc = cli_usage(cmd, "give --shapes FILE or --shape, not both");
    cg_context *ctx = rc ? NULL : cli_make_ctx(cmd, &t.c);
    if (!rc && !ctx) rc = 1;
    cg_backend want = CG_BACKEND_AUTO;
    cg_backend_parse(t.backend, &want);
    if (!rc && cg_tune_backend(ctx, want, &o.backend) != CG_OK) rc = cli_fail(cmd, "%s", cg_errmsg(ctx));
    if (!rc && want == CG_BACKEND_AUTO && progress >= 0)
        fprintf(stderr, "chunkgen tune: backend %s\n", cg_backend_name(o.backend));
    const tune_shape_opts so = {t.op_family, t.dir_mask, t.dtype, t.varlen};
    tune_shapes shapes = {0};
    for (int i = 0; !rc && i < t.nshape_args; i++) rc = tune_shapes_add(cmd, ctx, t.shape_args[i], &so, &shapes);
    if (!rc && t.shapes_file) rc = tune_shapes_read(cmd, ctx, t.shapes_file, &so, &shapes);
    free(t.shape_args);
    if (!rc && !t.nshape_args && !t.shapes_file) {
        /* The built-in CPU set must finish within 5 minutes on a small machine, also when
         * it is busy: without --budget, keys share 280 s (a key cut short is stored as
         * truncated and a rerun continues it). */
        if (o.backend == CG_BACKEND_CPU && !(o.budget_s > 0)) {
            o.budget_s = 280;
            if (progress >= 0)
                fprintf(stderr, "chunkgen tune: built-in CPU set: budget %.0f s (--budget changes it)\n", o.budget_s);
        }
        rc = tune_shapes_builtin(cmd, ctx, o.backend, &so, &shapes);
    }
    if (!rc) {
        if (progress >= 0)
            fprintf(stderr, "chunkgen tune: %d shape(s) on %s, store %s\n", shapes.n, cg_backend_name(o.backend),
                    cg_config_store_dir(ctx));
        tune_ui ui = {.f = stderr, .mode = progress, .prefix = "tune"};
        cg_context_set_progress(ctx, tune_ui_event, &ui);
        cg_tune_summary sum = CG_TUNE_SUMMARY_INIT;
        cg_status st = shapes.n ? cg_tune(ctx, shapes.v, shapes.n, &o, &sum) : CG_OK;
        tune_ui_end(&ui);
        char shard_note[64] = "";
        if (o.nshards > 1)
            snprintf(shard_note, sizeof shard_note, ", %d of other shards (shard %d/%d)", sum.other_shards, o.shard,
                     o.nshards);
        if (progress >= 0)
            fprintf(stderr,
                    "chunkgen tune: %d key(s): %d tuned (%d resumed), %d already tuned, %d not supported by the "
                    "backend, %d failed, %d left for a rerun%s; %d candidates measured, %d rejected; %.1f s\n",
                    sum.keys, sum.tuned, sum.resumed, sum.cached, sum.unsupported, sum.failed, sum.skipped_budget,
                    shard_note, sum.candidates, sum.rejected, sum.seconds);
        if (st != CG_OK) rc = cli_fail(cmd, "%s: %s", cg_status_str(st), cg_errmsg(ctx));
    }
    free(shapes.v);
    cg_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- show */

static const char k_show_usage[] =
    "usage: chunkgen show [filters] [--json] [-v]\n"
    "\n"
    "Prints the tuned configs: key, config, median time, the default config's time and the\n"
    "speed-up over it. Entries are grouped by device.\n";

typedef struct show_opts {
    cli_common c;
    cg_config_filter f;
    int json, verbose;
} show_opts;

static const cg_cli_opt k_show_opts[] = {
    CLI_FILTER_ROWS(show_opts, f),
    CG_CLI_OPT_CACHE_DIR(show_opts, c.cache_dir),
    CG_CLI_OPT_JSON(show_opts, json, "the store's entries as JSON (each as `chunkgen export` writes it)"),
    CG_CLI_OPT_VERBOSE(show_opts, verbose, "also list each entry's candidates: config, verdict, median ms"),
    CG_CLI_OPT_END,
};
static const cg_cli_cmd k_show_cmd = {"show", k_show_usage, k_show_opts, NULL, NULL};

/* Every matching entry, copied out of the visit (show prints a table whose widths depend
 * on all of them). */
typedef struct shown {
    char key[200], group[400], config[300], status[64];
    double median_ms, default_ms;
    int has_best;
    char *json;
} shown;
typedef struct shown_list {
    shown *v;
    int n, cap, oom;
} shown_list;

static int keep_entry(const cg_config_entry *e, void *user) {
    shown_list *l = user;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 32;
        shown *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) return l->oom = 1;
        l->v = nv, l->cap = nc;
    }
    shown *x = &l->v[l->n];
    memset(x, 0, sizeof *x);
    const char *sp = strchr(e->key, ' '); /* the backend is in the group header */
    snprintf(x->key, sizeof x->key, "%s", sp ? sp + 1 : e->key);
    if (!strcmp(e->backend, "cuda"))
        snprintf(x->group, sizeof x->group, "cuda: %s (sm_%d, %d SMs), NVRTC %s, driver %s, chunkgen %s", e->device,
                 e->cc, e->sm_count, e->nvrtc, e->driver, e->version);
    else
        snprintf(x->group, sizeof x->group, "%s: %s, %d threads, chunkgen %s", e->backend, e->device, e->threads,
                 e->version);
    x->has_best = e->config != NULL;
    snprintf(x->config, sizeof x->config, "%s", !e->config ? "(none passed)" : e->config[0] ? e->config : "(default)");
    if (!e->complete) snprintf(x->status, sizeof x->status, "  (unfinished: %d candidates)", e->ncandidates);
    else if (e->truncated) snprintf(x->status, sizeof x->status, "  (truncated by the budget)");
    x->median_ms = e->median_ms;
    x->default_ms = e->default_ms;
    if (!(x->json = strdup(e->json))) return l->oom = 1;
    l->n++;
    return 0;
}

static void shown_free(shown_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].json);
    free(l->v);
}

/* --json: {"store": DIR, "exists": bool, "entries": [...], "bad": N}. */
static int show_json(const char *dir, int exists, const shown_list *l, int bad) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < l->n; i++)
        if (json_array_append_new(arr, json_loads(l->v[i].json, 0, NULL))) {
            json_decref(arr);
            arr = NULL;
        }
    json_t *doc =
        arr ? json_pack("{s:s, s:b, s:o, s:i}", "store", dir, "exists", exists, "entries", arr, "bad", bad) : NULL;
    int rc = !doc || json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII) != 0;
    if (!rc) putchar('\n');
    json_decref(doc);
    return rc ? cli_fail("show", "out of memory") : 0;
}

/* -v: the candidates of an entry (its JSON, the export format) under its line. */
static void show_cands(const char *json) {
    json_t *e = json_loads(json, 0, NULL);
    const char *best = json_string_value(json_object_get(json_object_get(e, "best"), "config"));
    json_t *cands = json_object_get(e, "candidates");
    for (size_t j = 0; j < json_array_size(cands); j++) {
        json_t *c = json_array_get(cands, j);
        const char *cfg = json_string_value(json_object_get(c, "config")),
                   *verdict = json_string_value(json_object_get(c, "verdict"));
        cfg = cfg ? cfg : "";
        printf("      %c %-40s %-8s", best && !strcmp(best, cfg) ? '*' : ' ', cfg[0] ? cfg : "(default)",
               verdict ? verdict : "?");
        if (verdict && !strcmp(verdict, "ok"))
            printf(" %10.3f ms (IQR %.3f, %d reps)", json_number_value(json_object_get(c, "median_ms")),
                   json_number_value(json_object_get(c, "iqr_ms")),
                   (int)json_integer_value(json_object_get(c, "reps")));
        putchar('\n');
    }
    json_decref(e);
}

int cg_cmd_show(int argc, char **argv) {
    show_opts o = {0};
    int rc = cg_cli_parse(&k_show_cmd, argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const cg_config_filter *f = &o.f;
    cg_context *ctx = cli_make_ctx(k_show_cmd.name, &o.c);
    if (!ctx) return 1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", cg_config_store_dir(ctx));
    shown_list l = {0};
    int bad = 0;
    cg_context_set_progress(ctx, warn_bad, NULL);
    cg_status st = cg_config_visit(ctx, f, keep_entry, &l, &bad);
    const int exists = st != CG_ENOTFOUND;
    if (st != CG_OK && st != CG_ENOTFOUND) rc = cli_fail("show", "%s", cg_errmsg(ctx));
    else if (l.oom) rc = cli_fail("show", "out of memory");
    else if (o.json) rc = show_json(dir, exists, &l, bad);
    else if (!exists) printf("no tuned configs (%s does not exist; run `chunkgen tune`)\n", dir);
    if (rc || o.json || !exists) {
        shown_free(&l);
        cg_context_free(ctx);
        return rc;
    }
    printf("tuned configs in %s\n", dir);
    int wk = 3, wc = 6; /* column widths */
    for (int i = 0; i < l.n; i++) {
        if ((int)strlen(l.v[i].key) > wk) wk = (int)strlen(l.v[i].key);
        if ((int)strlen(l.v[i].config) > wc && l.v[i].has_best) wc = (int)strlen(l.v[i].config);
    }
    for (int i = 0; i < l.n; i++) {
        const shown *e = &l.v[i];
        if (!i || strcmp(l.v[i - 1].group, e->group))
            printf("\n%s\n  %-*s  %-*s %10s %10s %8s\n", e->group, wk, "key", wc, "config", "median ms", "default ms",
                   "speed-up");
        if (e->has_best) {
            char def[16] = "-", speed[16] = "-";
            if (e->default_ms > 0) {
                snprintf(def, sizeof def, "%.3f", e->default_ms);
                snprintf(speed, sizeof speed, "%.2fx", e->default_ms / e->median_ms);
            }
            printf("  %-*s  %-*s %10.3f %10s %8s%s\n", wk, e->key, wc, e->config, e->median_ms, def, speed, e->status);
        } else {
            printf("  %-*s  %-*s %10s %10s %8s%s\n", wk, e->key, wc, e->config, "-", "-", "-", e->status);
        }
        if (o.verbose) show_cands(e->json);
    }
    if (!l.n) printf("  (none%s)\n", f->backend || f->op || f->dir || f->device ? " match the filters" : "");
    if (bad) printf("\n%d bad entr%s ignored (`chunkgen cache verify` lists them)\n", bad, bad == 1 ? "y" : "ies");
    shown_free(&l);
    cg_context_free(ctx);
    return 0;
}

/* --------------------------------------------------------------- export */

static const char k_export_usage[] =
    "usage: chunkgen export --json FILE [--with-kernels [--arch 80,90]] [filters]\n"
    "\n"
    "Writes every tuned entry (key fields, params, timings of every candidate, device and\n"
    "versions) as one JSON document {\"schema\": 1, \"kind\": \"chunkgen-configs\",\n"
    "\"entries\": [...]}. FILE - is stdout. `chunkgen import` reads it back.\n"
    "--with-kernels adds the compiled kernels of the kernel cache (CUBINs of this chunkgen\n"
    "version; --arch: of those archs only) as \"kernels\": a bundle that lets another\n"
    "machine run the tuned configs without compiling (`chunkgen build-kernels` fills the\n"
    "cache without a GPU).\n";

typedef struct export_opts {
    cg_config_filter f;
    cli_common c;
    const char *out, *archs;
    int with_kernels;
} export_opts;

static const cg_cli_opt k_export_opts[] = {{"--json", 0, CG_CLI_STR, offsetof(export_opts, out), "FILE",
                                            "write the document to FILE (- for stdout)", 0, 0, NULL},
                                           {"--with-kernels", 0, CG_CLI_FLAG, offsetof(export_opts, with_kernels), NULL,
                                            "also the compiled kernels of the kernel cache (a bundle)", 0, 0, NULL},
                                           {"--arch", 0, CG_CLI_STR, offsetof(export_opts, archs), "LIST",
                                            "with --with-kernels: only kernels for these archs, e.g. 80,90", 0, 0,
                                            NULL},
                                           CLI_FILTER_ROWS(export_opts, f),
                                           CG_CLI_OPT_CACHE_DIR(export_opts, c.cache_dir),
                                           CG_CLI_OPT_THREADS(export_opts, c.threads),
                                           CG_CLI_OPT_END};

static const cg_cli_cmd k_export_cmd = {"export", k_export_usage, k_export_opts, NULL, NULL};

int cg_cmd_export(int argc, char **argv) {
    export_opts o = {0};
    int prc = cg_cli_parse(&k_export_cmd, argc, argv, &o);
    if (prc) return prc < 0 ? 0 : prc;
    const char *cmd = k_export_cmd.name, *out = o.out, *archs = o.archs;
    const int with_kernels = o.with_kernels;
    if (!out) return cli_usage(cmd, "missing --json FILE");
    if (archs && !with_kernels) return cli_usage(cmd, "--arch selects the kernels of --with-kernels");
    cg_context *ctx = cli_make_ctx(cmd, &o.c);
    if (!ctx) return 1;
    cg_context_set_progress(ctx, warn_bad, NULL);
    char *text = NULL;
    size_t len = 0;
    int count = 0, nkernels = 0, rc = 0, mine = 0; /* mine: text is this file's, not the library's */
    if (cg_config_export(ctx, &o.f, &text, &len, &count) != CG_OK) rc = cli_fail(cmd, "%s", cg_errmsg(ctx));
    if (!rc && with_kernels) { /* the bundle: the kernel cache's entries added to the document */
        json_t *doc = json_loadb(text, len, 0, NULL);
        char kdir[4200];
        snprintf(kdir, sizeof kdir, "%s/kernels", cg_context_cache_dir(ctx));
        if (!doc || (nkernels = cg_bundle_add_kernels(doc, kdir, archs)) < 0) rc = cli_fail(cmd, "out of memory");
        char *t2 = rc ? NULL : json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        json_decref(doc);
        cg_free(text);
        text = NULL;
        mine = 1;
        if (!rc && !t2) rc = cli_fail(cmd, "out of memory");
        if (t2) {
            len = strlen(t2);
            if ((text = realloc(t2, len + 2))) text[len++] = '\n', text[len] = '\0';
            else rc = cli_fail(cmd, "out of memory"), free(t2);
        }
    }
    if (!rc && !strcmp(out, "-")) {
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout)) rc = cli_fail(cmd, "cannot write to stdout");
    } else if (!rc) {
        /* as the library writes its files: temp + rename, no symlink followed */
        if (cg_write_file(ctx, out, text, len) != CG_OK) rc = cli_fail(cmd, "%s", cg_errmsg(ctx));
        else fprintf(stderr, "chunkgen export: %d entr%s written to %s\n", count, count == 1 ? "y" : "ies", out);
        if (!rc && with_kernels)
            fprintf(stderr, "chunkgen export: %d compiled kernel%s bundled\n", nkernels, nkernels == 1 ? "" : "s");
    }
    if (mine) free(text);
    else cg_free(text);
    cg_context_free(ctx);
    return rc;
}

/* --------------------------------------------------------------- import */

static const char k_import_usage[] =
    "usage: chunkgen import SOURCE... [--allow-foreign] [--dry-run] [--cache-dir DIR]\n"
    "\n"
    "Merges tuned configs into the store. A SOURCE is a file written by `chunkgen export`\n"
    "(or one entry object, or an array of them), - for stdin, or a store directory (another\n"
    "cache directory, or its configs/): the stores of the shards or ranks of a tune.\n"
    "Each entry is validated; a malformed entry, an unfinished tune, a config the kernel's\n"
    "constraints refuse for its key, or one measured on another device (CPU model, or GPU\n"
    "name, compute capability and SM count) is rejected with a message (--allow-foreign\n"
    "keeps foreign ones). All entries of a key (the store's and every source's) are merged\n"
    "in one deterministic choice: the fastest stays unless the others are within its\n"
    "measured noise, then the tie rule (the space's order) decides -- whatever the order of\n"
    "the sources. Nothing is written when a source cannot be read. Exit status 1 when\n"
    "anything was rejected.\n"
    "A bundle's compiled kernels (`export --with-kernels`) go into the kernel cache: each\n"
    "is checked (format, checksum, built by this chunkgen version) and stored under its\n"
    "key, which names its arch and compiler build, so it is only ever loaded for those.\n";

typedef struct import_opts {
    const char **files;
    int nfiles, allow_foreign, dry;
    cli_common c;
} import_opts;

static int import_source(void *opts, const char *arg, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    import_opts *o = opts;
    o->files[o->nfiles++] = arg; /* files holds argc entries: never full */
    return 0;
}

static const cg_cli_opt k_import_opts[] = {
    {"--allow-foreign", 0, CG_CLI_FLAG, offsetof(import_opts, allow_foreign), NULL,
     "keep entries measured on another device", 0, 0, NULL},
    {"--dry-run", 0, CG_CLI_FLAG, offsetof(import_opts, dry), NULL, "check and report, write nothing", 0, 0, NULL},
    CG_CLI_OPT_CACHE_DIR(import_opts, c.cache_dir),
    CG_CLI_OPT_THREADS(import_opts, c.threads),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_import_cmd = {"import", k_import_usage, k_import_opts, import_source, NULL};

int cg_cmd_import(int argc, char **argv) {
    const char *cmd = k_import_cmd.name;
    import_opts o = {0};
    if (!(o.files = calloc((size_t)argc + 1, sizeof *o.files))) return cli_fail(cmd, "out of memory");
    int rc = cg_cli_parse(&k_import_cmd, argc, argv, &o);
    if (!rc && !o.nfiles) rc = cli_usage(cmd, "missing the FILE (or store directory) to import");
    cg_context *ctx = rc ? NULL : cli_make_ctx(cmd, &o.c);
    if (!ctx) {
        free(o.files);
        return rc < 0 ? 0 : rc ? rc : 1; /* -1: --help; 0: the context failed (message printed) */
    }
    const char **files = o.files;
    const int nfiles = o.nfiles, allow_foreign = o.allow_foreign, dry = o.dry;
    tune_ui ui = {.f = stderr, .mode = 0, .prefix = "chunkgen import", .subject_first = 1, .cap = 20};
    cg_context_set_progress(ctx, tune_ui_event, &ui);
    cg_import_options io = CG_IMPORT_OPTIONS_INIT;
    io.allow_foreign = allow_foreign, io.dry_run = dry;
    cg_import_stats s = CG_IMPORT_STATS_INIT;
    cg_status st = cg_config_import(ctx, files, nfiles, &io, &s);
    tune_ui_end(&ui);
    if (st != CG_OK) rc = cli_fail(cmd, "%s", cg_errmsg(ctx));
    else {
        fprintf(stderr,
                "chunkgen import: %s%d added, %d replaced, %d kept (the merge rule kept another entry), %d rejected\n",
                dry ? "(dry run) " : "", s.added, s.replaced, s.kept, s.rejected);
        if (s.rejected) rc = 1;
        /* the bundles' compiled kernels (a file source: stdin was read once above) */
        char kdir[4200];
        snprintf(kdir, sizeof kdir, "%s/kernels", cg_context_cache_dir(ctx));
        cg_bundle_stats ks = {0};
        for (int i = 0; i < nfiles; i++) {
            struct stat sb;
            if (!strcmp(files[i], "-") || stat(files[i], &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
            json_t *doc = json_load_file(files[i], 0, NULL);
            cg_bundle_import_kernels(doc, files[i], kdir, dry, stderr, &ks);
            json_decref(doc);
        }
        if (ks.added || ks.kept || ks.rejected)
            fprintf(stderr, "chunkgen import: %skernels: %d added, %d already cached, %d rejected\n",
                    dry ? "(dry run) " : "", ks.added, ks.kept, ks.rejected);
        if (ks.rejected) rc = 1;
    }
    free(files);
    cg_context_free(ctx);
    return rc;
}
