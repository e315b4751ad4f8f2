/* cmd_tune.c -- `chunkgen tune`, `show`, `export`, `import` and `cache`: the CLI of the
 * autotuner and its config store (autotune/). */
#include "chunkgen.h"
#include "cmd_tune.h"
#include "cli_args.h"
#include "cli_common.h"
#include "fsutil.h"
#include "../autotune/autotune.h"
#include "ops.h"
#include "cuda/kcache.h"
#include "kbundle.h"

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

/* Entry filters shared by show and export. */
typedef struct filter {
    const char *backend, *op, *dir, *device;
    int partial; /* include unfinished tunes */
} filter;

static int filter_match(const filter *f, const cg_tune_entry *e) {
    if (!e->complete && !f->partial) return 0;
    if (f->backend && strcmp(f->backend, "all") && strcmp(f->backend, e->key.backend)) return 0;
    if (f->op && strcmp(f->op, "all") && strcmp(f->op, e->key.op)) return 0;
    if (f->dir && strcmp(f->dir, "all") && strcmp(f->dir, e->key.dir)) return 0;
    if (f->device && !strstr(e->key.device, f->device)) return 0;
    return 1;
}

/* The filters as rows of a cg_cli_opt table over the filter `fld` of options struct T. */
#define CLI_FILTER_ROWS(T, fld)                                                                                  \
    {"--backend", 0, CG_CLI_STR, offsetof(T, fld.backend), "cpu|cuda|emulate", "only entries of this backend", 0,   \
     0, NULL},                                                                                                   \
    {"--op", 0, CG_CLI_STR, offsetof(T, fld.op), "ssd|sscan", "only this op", 0, 0, NULL},                        \
    {"--dir", 0, CG_CLI_STR, offsetof(T, fld.dir), "fwd|bwd", "only this direction", 0, 0, NULL},                 \
    {"--device", 0, CG_CLI_STR, offsetof(T, fld.device), "TEXT", "only devices whose name contains TEXT", 0, 0,   \
     NULL},                                                                                                      \
    {"--partial", 0, CG_CLI_FLAG, offsetof(T, fld.partial), NULL, "include unfinished (interrupted) tunes", 0, 0, \
     NULL}

/* Every valid entry of the store, in file-name order. */
typedef struct entry_list {
    cg_tune_entry *e;
    int n, cap, bad;
    const filter *f;
    int warn;
} entry_list;

static int collect(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    entry_list *l = arg;
    if (!e) {
        l->bad++;
        if (l->warn) fprintf(stderr, "chunkgen: warning: ignoring bad entry %s: %s\n", path, why);
        return 0;
    }
    if (l->f && !filter_match(l->f, e)) return 0;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 32;
        cg_tune_entry *ne = realloc(l->e, (size_t)nc * sizeof *ne);
        if (!ne) return 1;
        l->e = ne;
        l->cap = nc;
    }
    if (cg__tune_entry_copy(&l->e[l->n], e) != CG_OK) return 1;
    l->n++;
    return 0;
}

static void list_free(entry_list *l) {
    for (int i = 0; i < l->n; i++) cg__tune_entry_free(&l->e[i]);
    free(l->e);
}

static int cmp_entries(const void *a, const void *b) {
    const cg_tune_key *x = &((const cg_tune_entry *)a)->key, *y = &((const cg_tune_entry *)b)->key;
    int c;
    if ((c = strcmp(x->backend, y->backend)) || (c = strcmp(x->device, y->device)) || (c = strcmp(x->op, y->op)))
        return c;
    int64_t dx[] = {x->dk, x->dv, x->G, x->H, x->D, x->N, x->threads}, dy[] = {y->dk, y->dv, y->G, y->H, y->D, y->N, y->threads};
    for (int i = 0; i < 7; i++)
        if (dx[i] != dy[i]) return dx[i] < dy[i] ? -1 : 1;
    if ((c = strcmp(x->dir, y->dir))) return -c; /* fwd before bwd */
    if (x->seq_bucket != y->seq_bucket) return x->seq_bucket < y->seq_bucket ? -1 : 1;
    return strcmp(x->version, y->version);
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
    cg_tune_opts o;
    cli_common c;
    int quiet;
    const char *backend, *shapes_file;
    const char **shape_args; /* argc + 1 slots */
    int nshape_args;
    const char *dtype;       /* --dtype: the dtype signature of every shape (NULL: f32) */
    int64_t varlen;          /* --varlen MAX: every shape as a varlen key (docs/varlen.md); 0: none */
} tune_cli;

static int mask_opt(const char *v, const char *a, const char *b, int *mask, char *err, size_t errlen) {
    if (!strcmp(v, a)) *mask = 1;
    else if (!strcmp(v, b)) *mask = 2;
    else if (!strcmp(v, "all")) *mask = 3;
    else return snprintf(err, errlen, "unknown value '%s' (expected %s, %s or all)", v, a, b), -1;
    return 0;
}
static int op_opt(void *opts, const char *v, char *err, size_t errlen) {
    return mask_opt(v, "ssd", "sscan", &((tune_cli *)opts)->o.op_mask, err, errlen);
}
static int dir_opt(void *opts, const char *v, char *err, size_t errlen) {
    return mask_opt(v, "fwd", "bwd", &((tune_cli *)opts)->o.dir_mask, err, errlen);
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
    {"--op", 0, CG_CLI_FN, 0, "ssd|sscan|all", "ops to tune (default all)", 0, 0, op_opt},
    {"--dir", 0, CG_CLI_FN, 0, "fwd|bwd|all", "directions (default all)", 0, 0, dir_opt},
    {"--backend", 0, CG_CLI_FN, 0, "auto|cpu|cuda|emulate", "(default auto: cuda when a GPU is present, else cpu)", 0, 0,
     backend_opt},
    {"--shape", 0, CG_CLI_FN, 0, "S",
     "a shape, repeatable: B,T,G,H,dk,dv for ssd or B,L,D,N[,G]\nfor sscan (prefix ssd: or sscan: to be explicit)", 0, 0,
     shape_opt},
    {"--shapes", 0, CG_CLI_STR, TO(shapes_file), "FILE",
     "shapes, one a line in the same syntax (# comments)\n(default: the built-in set; smaller on the CPU backend)", 0, 0,
     NULL},
    {"--dtype", 0, CG_CLI_STR, TO(dtype), "SIG",
     "storage of the keys' tensors: f32 (default), bf16, f16, or one input\nset such as bf16-q-k (docs/dtypes.md); "
     "each dtype is a key of its own", 0, 0, NULL},
    {"--varlen", 0, CG_CLI_I64, TO(varlen), "MAX",
     "tune the varlen keys (cu_seqlens, docs/varlen.md) of the shapes:\nB = 1, T the packed total, sequences of "
     "at most MAX tokens\n(the problem: sequences of MAX, the last the remainder)", 1, (int64_t)1 << 40, NULL},
    {"--budget", 0, CG_CLI_F64, TO(o.budget_s), "SECONDS",
     "stop starting new work after this long; a key cut short\nis stored as truncated and resumed by the next run", 1e-9,
     1e12, NULL},
    {"--jobs", 0, CG_CLI_INT, TO(o.jobs), "N", "compile workers for cuda/emulate (default: all cores)", 1, 64, NULL},
    {"--force", 0, CG_CLI_FLAG, TO(o.force), NULL, "retune keys that are already tuned", 0, 0, NULL},
    {"--shard", 0, CG_CLI_FN, 0, "I/N",
     "tune only the keys of shard I of N (0 <= I < N; by a hash of\nthe key's shape, so any N works): one shard per "
     "job-array\ntask or rank, then `chunkgen import` the stores together",
     0, 0, shard_opt},
    {"--min-time", 0, CG_CLI_F64, TO(o.min_time_s), "SECONDS", "time each candidate at least this long", 1e-9, 60, NULL},
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

static int add_shape(const char *cmd, cg_context *ctx, const char *text, int op_mask, cg_tune_shape **v, int *n) {
    int sscan = -1;
    if (!strncmp(text, "ssd:", 4)) sscan = 0, text += 4;
    else if (!strncmp(text, "sscan:", 6)) sscan = 1, text += 6;
    if (sscan < 0) {
        int commas = 0;
        for (const char *c = text; *c; c++) commas += *c == ',';
        sscan = commas == 5 ? 0 : 1;
        if (sscan && op_mask == 1) sscan = 0; /* --op ssd: report the ssd syntax */
    }
    cg_tune_shape s;
    if (cg__tune_shape_parse(ctx, text, sscan, &s) != CG_OK) return cli_usage(cmd, "%s", cg_errmsg(ctx));
    cg_tune_shape *nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return cli_fail(cmd, "out of memory");
    *v = nv;
    nv[(*n)++] = s;
    return 0;
}

static int read_shapes(const char *cmd, cg_context *ctx, const char *path, int op_mask, cg_tune_shape **v, int *n) {
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) return cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
    char line[1024];
    int lineno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *tok[3];
        int nt = 0;
        for (char *t = strtok(line, " \t\r\n"); t && nt < 3; t = strtok(NULL, " \t\r\n")) tok[nt++] = t;
        if (!nt) continue;
        char buf[1100];
        const char *spec = tok[0];
        const char *name = nt > 1 ? tok[1] : NULL;
        if (!strcmp(tok[0], "ssd") || !strcmp(tok[0], "sscan")) {
            if (nt < 2) {
                rc = cli_usage(cmd, "%s:%d: expected numbers after '%s'", path, lineno, tok[0]);
                break;
            }
            snprintf(buf, sizeof buf, "%s:%s", tok[0], tok[1]);
            spec = buf;
            name = nt > 2 ? tok[2] : NULL;
        }
        if ((rc = add_shape(cmd, ctx, spec, op_mask, v, n)) != 0) {
            fprintf(stderr, "  (in %s, line %d)\n", path, lineno);
            break;
        }
        if (name) snprintf((*v)[*n - 1].name, sizeof (*v)[*n - 1].name, "%s", name);
    }
    if (f != stdin) fclose(f);
    return rc;
}

int cg_cmd_tune(int argc, char **argv) {
    const char *cmd = "tune";
    tune_cli t;
    memset(&t, 0, sizeof t);
    cg__tune_opts_default(&t.o);
    t.o.progress = isatty(fileno(stderr)) ? 1 : 0;
    t.backend = "auto";
    if (!(t.shape_args = calloc((size_t)argc + 1, sizeof *t.shape_args))) return cli_fail(cmd, "out of memory");
    int rc = cg_cli_parse(&k_tune_cmd, argc, argv, &t);
    if (rc) {
        free(t.shape_args);
        return rc < 0 ? 0 : rc; /* -1: --help */
    }
    cg_tune_opts o = t.o;
    if (t.quiet) o.progress = -1;
    const char *backend = t.backend, *shapes_file = t.shapes_file;
    const char **shape_args = t.shape_args;
    const int nshape_args = t.nshape_args;
    if (!rc && shapes_file && nshape_args) rc = cli_usage(cmd, "give --shapes FILE or --shape, not both");
    cg_context *ctx = rc ? NULL : cli_make_ctx(cmd, &t.c);
    if (!rc && !ctx) rc = 1;
    cg_tune_shape *shapes = NULL;
    int nshapes = 0;
    for (int i = 0; !rc && i < nshape_args; i++) rc = add_shape(cmd, ctx, shape_args[i], o.op_mask, &shapes, &nshapes);
    if (!rc && shapes_file) rc = read_shapes(cmd, ctx, shapes_file, o.op_mask, &shapes, &nshapes);
    free(shape_args);
    if (!rc && !strcmp(backend, "auto")) {
        cg_tune_key k;
        backend = cg__tune_device_key(ctx, "cuda", &k) == CG_OK ? "cuda" : "cpu";
        if (o.progress >= 0) fprintf(stderr, "chunkgen tune: backend %s\n", backend);
    }
    if (!rc && !nshapes && !shapes_file) {
        /* The built-in CPU set must finish within 5 minutes on a small machine, also when
         * it is busy: without --budget, keys share 280 s (a key cut short is stored as
         * truncated and a rerun continues it). */
        if (!strcmp(backend, "cpu") && !(o.budget_s > 0)) {
            o.budget_s = 280;
            if (o.progress >= 0) fprintf(stderr, "chunkgen tune: built-in CPU set: budget %.0f s (--budget changes it)\n", o.budget_s);
        }
        int n;
        const cg_tune_shape *d = cg__tune_default_shapes(backend, &n);
        if (!(shapes = malloc((size_t)n * sizeof *shapes))) rc = cli_fail(cmd, "out of memory");
        else memcpy(shapes, d, (size_t)n * sizeof *shapes), nshapes = n;
    }
    for (int i = 0; !rc && t.varlen && i < nshapes; i++) { /* varlen keys: B = 1, the longest sequence */
        if (shapes[i].B != 1)
            rc = cli_usage(cmd, "--varlen: a shape with B = %lld but expected 1 (the sequences are packed along %s)",
                           (long long)shapes[i].B, shapes[i].sscan ? "L" : "T");
        shapes[i].varlen_max = t.varlen < shapes[i].T ? t.varlen : shapes[i].T;
    }
    for (int i = 0; !rc && t.dtype && i < nshapes; i++) { /* the signature must fit each shape's ops */
        const cg_op fam = shapes[i].sscan ? CG_OP_SSCAN_FWD : CG_OP_SSD_FWD;
        int dt[CG_OP_MAX_TENSORS];
        for (int b = 0; !rc && b < 2; b++)
            if ((o.dir_mask >> b & 1) && cg__op_dtype_unsig(ctx, cg__op_desc((cg_op)(fam + b)), t.dtype, dt) != CG_OK)
                rc = cli_usage(cmd, "--dtype %s", cg_errmsg(ctx));
        snprintf(shapes[i].dtype, sizeof shapes[i].dtype, "%s", t.dtype);
    }
    if (!rc) {
        cg_tune_summary sum;
        if (o.progress >= 0)
            fprintf(stderr, "chunkgen tune: %d shape(s) on %s, store %s\n", nshapes, backend, cg__tune_store_dir(ctx));
        cg_status st = cg__tune_run(ctx, backend, shapes, nshapes, &o, &sum);
        char shard_note[64] = "";
        if (o.nshards > 1)
            snprintf(shard_note, sizeof shard_note, ", %d of other shards (shard %d/%d)", sum.other_shards, o.shard,
                     o.nshards);
        if (o.progress >= 0)
            fprintf(stderr,
                    "chunkgen tune: %d key(s): %d tuned (%d resumed), %d already tuned, %d not supported by the "
                    "backend, %d failed, %d left for a rerun%s; %d candidates measured, %d rejected; %.1f s\n",
                    sum.keys, sum.tuned, sum.resumed, sum.cached + sum.kept_other, sum.unsupported, sum.failed,
                    sum.skipped_budget, shard_note, sum.candidates, sum.rejected, sum.seconds);
        if (st != CG_OK) rc = cli_fail(cmd, "%s: %s", cg_status_str(st), cg_errmsg(ctx));
    }
    free(shapes);
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
    filter f;
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

/* --json: {"store": DIR, "exists": bool, "entries": [...], "bad": N}. */
static int show_json(const char *dir, int exists, const entry_list *l) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < l->n; i++)
        if (json_array_append_new(arr, cg__tune_entry_to_json(&l->e[i]))) {
            json_decref(arr);
            arr = NULL;
        }
    json_t *doc = arr ? json_pack("{s:s, s:b, s:o, s:i}", "store", dir, "exists", exists, "entries", arr, "bad", l->bad)
                      : NULL;
    int rc = !doc || json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII) != 0;
    if (!rc) putchar('\n');
    json_decref(doc);
    return rc ? cli_fail("show", "out of memory") : 0;
}

/* -v: the candidates of e under its line. */
static void show_cands(const cg_tune_entry *e) {
    for (int j = 0; j < e->ncand; j++) {
        const cg_tune_cand *c = &e->cand[j];
        printf("      %c %-40s %-8s", j == e->best ? '*' : ' ', c->cfg[0] ? c->cfg : "(default)",
               cg__tune_verdict_name(c->verdict));
        if (c->verdict == CG_TV_OK) printf(" %10.3f ms (IQR %.3f, %d reps)", c->median_ms, c->iqr_ms, c->reps);
        putchar('\n');
    }
}

int cg_cmd_show(int argc, char **argv) {
    show_opts o = {0};
    int rc = cg_cli_parse(&k_show_cmd, argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const filter *f = &o.f;
    cg_context *ctx = cli_make_ctx(k_show_cmd.name, &o.c);
    if (!ctx) return 1;
    const char *dir = cg__tune_store_dir(ctx);
    entry_list l;
    memset(&l, 0, sizeof l);
    l.f = f;
    l.warn = 1;
    int exists = cg__tune_store_scan(dir, collect, &l) >= 0;
    if (l.n) qsort(l.e, (size_t)l.n, sizeof *l.e, cmp_entries);
    if (o.json || !exists) {
        rc = o.json ? show_json(dir, exists, &l) : 0;
        if (!o.json) printf("no tuned configs (%s does not exist; run `chunkgen tune`)\n", dir);
        list_free(&l);
        cg_context_free(ctx);
        return rc;
    }
    printf("tuned configs in %s\n", dir);
    int wk = 3, wc = 6; /* column widths */
    for (int i = 0; i < l.n; i++) {
        char brief[200];
        cg__tune_key_brief(&l.e[i].key, brief, sizeof brief);
        const char *sp = strchr(brief, ' ');
        int n = (int)strlen(sp ? sp + 1 : brief);
        if (n > wk) wk = n;
        n = l.e[i].best >= 0 && l.e[i].cand[l.e[i].best].cfg[0] ? (int)strlen(l.e[i].cand[l.e[i].best].cfg) : 9;
        if (n > wc) wc = n;
    }
    const char *last_dev = NULL;
    for (int i = 0; i < l.n; i++) {
        const cg_tune_entry *e = &l.e[i];
        const cg_tune_key *k = &e->key;
        char dev[300];
        if (!strcmp(k->backend, "cuda"))
            snprintf(dev, sizeof dev, "cuda: %s (sm_%d, %d SMs), NVRTC %s, driver %s, chunkgen %s", k->device, k->cc,
                     k->sm_count, k->nvrtc, k->driver, k->version);
        else
            snprintf(dev, sizeof dev, "%s: %s, %d threads, chunkgen %s", k->backend, k->device, k->threads, k->version);
        if (!last_dev || strcmp(last_dev, dev)) {
            printf("\n%s\n  %-*s  %-*s %10s %10s %8s\n", dev, wk, "key", wc, "config", "median ms", "default ms",
                   "speed-up");
            static char keep[300];
            snprintf(keep, sizeof keep, "%s", dev);
            last_dev = keep;
        }
        char brief[200];
        cg__tune_key_brief(k, brief, sizeof brief);
        const char *sp = strchr(brief, ' '); /* the backend is in the group header */
        char status[48] = "";
        if (!e->complete) snprintf(status, sizeof status, "  (unfinished: %d candidates)", e->ncand);
        else if (e->truncated) snprintf(status, sizeof status, "  (truncated by the budget)");
        if (e->best >= 0) {
            const cg_tune_cand *b = &e->cand[e->best];
            char def[16] = "-", speed[16] = "-";
            if (e->default_ms > 0) {
                snprintf(def, sizeof def, "%.3f", e->default_ms);
                snprintf(speed, sizeof speed, "%.2fx", e->default_ms / b->median_ms);
            }
            printf("  %-*s  %-*s %10.3f %10s %8s%s\n", wk, sp ? sp + 1 : brief, wc, b->cfg[0] ? b->cfg : "(default)",
                   b->median_ms, def, speed, status);
        } else {
            printf("  %-*s  %-*s %10s %10s %8s%s\n", wk, sp ? sp + 1 : brief, wc, "(none passed)", "-", "-", "-", status);
        }
        if (o.verbose) show_cands(e);
    }
    if (!l.n) printf("  (none%s)\n", f->backend || f->op || f->dir || f->device ? " match the filters" : "");
    if (l.bad) printf("\n%d bad entr%s ignored (`chunkgen cache verify` lists them)\n", l.bad, l.bad == 1 ? "y" : "ies");
    list_free(&l);
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
    filter f;
    cli_common c;
    const char *out, *archs;
    int with_kernels;
} export_opts;

static const cg_cli_opt k_export_opts[] = {
    {"--json", 0, CG_CLI_STR, offsetof(export_opts, out), "FILE", "write the document to FILE (- for stdout)", 0, 0, NULL},
    {"--with-kernels", 0, CG_CLI_FLAG, offsetof(export_opts, with_kernels), NULL,
     "also the compiled kernels of the kernel cache (a bundle)", 0, 0, NULL},
    {"--arch", 0, CG_CLI_STR, offsetof(export_opts, archs), "LIST", "with --with-kernels: only kernels for these archs, e.g. 80,90",
     0, 0, NULL},
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
    const char *dir = cg__tune_store_dir(ctx);
    entry_list l;
    memset(&l, 0, sizeof l);
    l.f = &o.f;
    l.warn = 1;
    cg__tune_store_scan(dir, collect, &l); /* a missing store exports no entries */
    if (l.n) qsort(l.e, (size_t)l.n, sizeof *l.e, cmp_entries);
    json_t *arr = json_array();
    int rc = 0;
    for (int i = 0; arr && i < l.n; i++) {
        json_t *j = cg__tune_entry_to_json(&l.e[i]);
        if (!j || json_array_append_new(arr, j)) {
            rc = cli_fail(cmd, "out of memory");
            break;
        }
    }
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *doc = arr ? json_pack("{s:i, s:s, s:s, s:s, s:o}", "schema", CG_TUNE_SCHEMA, "kind", "chunkgen-configs",
                                  "chunkgen", cg_version(), "exported", when, "entries", arr)
                      : NULL;
    if (!rc && !doc) rc = cli_fail(cmd, "out of memory");
    int nkernels = 0;
    if (!rc && with_kernels) {
        char kdir[4200];
        snprintf(kdir, sizeof kdir, "%s/kernels", cg__cache_dir(ctx));
        if ((nkernels = cg_bundle_add_kernels(doc, kdir, archs)) < 0) rc = cli_fail(cmd, "out of memory");
    }
    if (!rc) {
        int flags = JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII;
        int bad;
        char why[4800] = "";
        if (!strcmp(out, "-")) {
            bad = json_dumpf(doc, stdout, flags) != 0;
            if (!bad) putchar('\n');
        } else {
            char *text = json_dumps(doc, flags);
            bad = !text;
            if (text) {
                /* temp (O_EXCL|O_NOFOLLOW) + rename: a reader never sees half a file and a
                 * planted symlink cannot redirect the write */
                size_t len = strlen(text);
                text[len] = '\n'; /* json_dumps's NUL becomes the final newline */
                bad = cg__write_file_atomic(out, text, len + 1, 1, why, sizeof why) != 0;
                free(text);
            }
        }
        if (bad) rc = cli_fail(cmd, "cannot write %s: %s", out, why[0] ? why : strerror(errno));
        else if (strcmp(out, "-"))
            fprintf(stderr, "chunkgen export: %d entr%s written to %s\n", l.n, l.n == 1 ? "y" : "ies", out);
        if (with_kernels && strcmp(out, "-"))
            fprintf(stderr, "chunkgen export: %d compiled kernel%s bundled\n", nkernels, nkernels == 1 ? "" : "s");
    }
    json_decref(doc);
    list_free(&l);
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
    cg_tune_import_stats s;
    cg_status st = cg__tune_import_files(ctx, files, nfiles, allow_foreign, dry, stderr, &s);
    if (st != CG_OK) rc = cli_fail(cmd, "%s", cg_errmsg(ctx));
    else {
        fprintf(stderr, "chunkgen import: %s%d added, %d replaced, %d kept (the merge rule kept another entry), %d rejected\n",
                dry ? "(dry run) " : "", s.added, s.replaced, s.kept, s.rejected);
        if (s.rejected) rc = 1;
        /* the bundles' compiled kernels (a file source: stdin was read once above) */
        char kdir[4200];
        snprintf(kdir, sizeof kdir, "%s/kernels", cg__cache_dir(ctx));
        cg_bundle_stats ks = {0};
        for (int i = 0; i < nfiles; i++) {
            struct stat sb;
            if (!strcmp(files[i], "-") || stat(files[i], &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
            json_t *doc = json_load_file(files[i], 0, NULL);
            cg_bundle_import_kernels(doc, files[i], kdir, dry, stderr, &ks);
            json_decref(doc);
        }
        if (ks.added || ks.kept || ks.rejected)
            fprintf(stderr, "chunkgen import: %skernels: %d added, %d already cached, %d rejected\n", dry ? "(dry run) " : "",
                    ks.added, ks.kept, ks.rejected);
        if (ks.rejected) rc = 1;
    }
    free(files);
    cg_context_free(ctx);
    return rc;
}
