/* api.c -- the public front door of the config store (include/chunkgen.h, "the config
 * store"): list its entries, export them, import entries, and the few helpers a caller
 * needs around them (the cache directory, writing a file as the library does).
 * Everything here goes through store.c and exchange.c; nothing else in the library calls
 * into this file. */
#include "autotune.h"
#include "abi.h"
#include "fsutil.h"

#include <jansson.h>

#include <errno.h>
#include <string.h>
#include <time.h>

const char *cg_context_cache_dir(cg_context *ctx) { return ctx ? cg__cache_dir(ctx) : NULL; }

const char *cg_config_store_dir(cg_context *ctx) { return ctx ? cg__tune_store_dir(ctx) : NULL; }

cg_status cg_write_file(cg_context *ctx, const char *path, const void *data, size_t n) {
    if (!ctx) return CG_EINVAL;
    if (!path || !*path) return cg__err(ctx, CG_EINVAL, "path: expected a file name");
    if (!data && n) return cg__err(ctx, CG_EINVAL, "data: NULL with n = %zu", n);
    char why[4800] = "";
    if (cg__write_file_atomic(path, data ? data : "", n, 1, why, sizeof why) != 0)
        return cg__err(ctx, CG_EIO, "cannot write %s: %s", path, why[0] ? why : strerror(errno));
    return CG_OK;
}

/* ------------------------------------------------------------ entries */

static int match(const cg_config_filter *f, const cg_tune_entry *e) {
    if (!e->complete && !f->partial) return 0;
    if (f->backend && strcmp(f->backend, "all") && strcmp(f->backend, e->key.backend)) return 0;
    if (f->op && strcmp(f->op, "all") && strcmp(f->op, e->key.op)) return 0;
    if (f->dir && strcmp(f->dir, "all") && strcmp(f->dir, e->key.dir)) return 0;
    if (f->device && !strstr(e->key.device, f->device)) return 0;
    return 1;
}

/* The matching valid entries of a store, with their files. */
typedef struct elist {
    cg_context *ctx;
    const cg_config_filter *f;
    struct item {
        cg_tune_entry e;
        char *path;
    } * v;
    int n, cap, bad, oom;
} elist;

static int collect(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    elist *l = arg;
    if (!e) {
        l->bad++;
        cg__progress(
            l->ctx,
            (cg_progress){
                .kind = CG_PROGRESS_MESSAGE, .level = CG_LOG_WARN, .task = "configs", .subject = path, .text = why});
        return 0;
    }
    if (!match(l->f, e)) return 0;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 32;
        struct item *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) return l->oom = 1;
        l->v = nv;
        l->cap = nc;
    }
    struct item *it = &l->v[l->n];
    if (!(it->path = strdup(path))) return l->oom = 1;
    if (cg__tune_entry_copy(&it->e, e) != CG_OK) {
        free(it->path);
        return l->oom = 1;
    }
    l->n++;
    return 0;
}

static void elist_free(elist *l) {
    for (int i = 0; i < l->n; i++) {
        cg__tune_entry_free(&l->v[i].e);
        free(l->v[i].path);
    }
    free(l->v);
}

/* Key order: backend, device, op, extents, threads, fwd before bwd, seq bucket, version. */
static int cmp_items(const void *a, const void *b) {
    const cg_tune_key *x = &((const struct item *)a)->e.key, *y = &((const struct item *)b)->e.key;
    int c;
    if ((c = strcmp(x->backend, y->backend)) || (c = strcmp(x->device, y->device)) || (c = strcmp(x->op, y->op)))
        return c;
    const int64_t dx[] = {x->dk, x->dv, x->G, x->H, x->D, x->N, x->threads},
                  dy[] = {y->dk, y->dv, y->G, y->H, y->D, y->N, y->threads};
    for (int i = 0; i < 7; i++)
        if (dx[i] != dy[i]) return dx[i] < dy[i] ? -1 : 1;
    if ((c = strcmp(x->dir, y->dir))) return -c; /* fwd before bwd */
    if (x->seq_bucket != y->seq_bucket) return x->seq_bucket < y->seq_bucket ? -1 : 1;
    if (x->varlen != y->varlen) return x->varlen < y->varlen ? -1 : 1;
    if ((c = strcmp(x->dtype, y->dtype))) return c;
    return strcmp(x->version, y->version);
}

/* The store's matching entries, sorted; CG_ENOTFOUND when it does not exist. */
static cg_status load(cg_context *ctx, const cg_config_filter *fin, cg_config_filter *f, elist *l) {
    memset(l, 0, sizeof *l);
    cg_status st = cg__abi_in(ctx, "filter", f, sizeof *f, fin);
    if (st != CG_OK) return st;
    l->ctx = ctx;
    l->f = f;
    const char *dir = cg__tune_store_dir(ctx);
    if (cg__tune_store_scan(dir, collect, l) < 0)
        return cg__err(ctx, CG_ENOTFOUND, "the config store %s does not exist (nothing tuned or imported yet)", dir);
    if (l->oom) return cg__err(ctx, CG_ENOMEM, "config store: out of memory listing %s", dir);
    if (l->n) qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_items);
    return CG_OK;
}

cg_status cg_config_visit(cg_context *ctx, const cg_config_filter *filter, cg_config_visit_fn fn, void *user,
                          int *bad) {
    if (!ctx || cg__ctx_enter(ctx, "cg_config_visit") != CG_OK) return CG_EINVAL;
    if (bad) *bad = 0;
    cg_config_filter f;
    elist l = {0};
    cg_status st = fn ? load(ctx, filter, &f, &l) : cg__err(ctx, CG_EINVAL, "fn: expected a visit function");
    if (bad) *bad = l.bad;
    for (int i = 0; st == CG_OK && i < l.n; i++) {
        const cg_tune_entry *e = &l.v[i].e;
        const cg_tune_key *k = &e->key;
        char brief[200];
        cg__tune_key_brief(k, brief, sizeof brief);
        json_t *j = cg__tune_entry_to_json(e);
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;
        json_decref(j);
        if (!text) {
            st = cg__err(ctx, CG_ENOMEM, "config store: out of memory");
            break;
        }
        const cg_tune_cand *b = e->best >= 0 ? &e->cand[e->best] : NULL;
        /* the entry's fields, packed (clang-format would give each of the 22 a line) */
        // clang-format off
        cg_config_entry v = {.size = sizeof v, .key = brief, .backend = k->backend, .op = k->op, .dir = k->dir,
                             .device = k->device, .cc = k->cc, .sm_count = k->sm_count, .threads = k->threads,
                             .nvrtc = k->nvrtc, .driver = k->driver, .version = k->version, .complete = e->complete,
                             .truncated = e->truncated, .config = b ? b->cfg : NULL, .median_ms = b ? b->median_ms : 0,
                             .default_ms = e->default_ms, .ncandidates = e->ncand, .created = e->created,
                             .host = e->host, .path = l.v[i].path, .json = text};
        // clang-format on
        const int stop = fn(&v, user);
        free(text);
        if (stop) break;
    }
    if (l.f) elist_free(&l);
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_config_export(cg_context *ctx, const cg_config_filter *filter, char **json, size_t *len, int *count) {
    if (!ctx || cg__ctx_enter(ctx, "cg_config_export") != CG_OK) return CG_EINVAL;
    if (count) *count = 0;
    cg_config_filter f;
    elist l = {0};
    cg_status st = json ? load(ctx, filter, &f, &l) : cg__err(ctx, CG_EINVAL, "json: expected where to put the text");
    if (st == CG_ENOTFOUND) { /* a missing store exports no entries */
        st = CG_OK;
        ctx->errmsg[0] = '\0';
    }
    json_t *arr = st == CG_OK ? json_array() : NULL;
    for (int i = 0; arr && i < l.n; i++)
        if (json_array_append_new(arr, cg__tune_entry_to_json(&l.v[i].e))) {
            json_decref(arr);
            arr = NULL;
        }
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *doc = arr ? json_pack("{s:i, s:s, s:s, s:s, s:o}", "schema", CG_TUNE_SCHEMA, "kind", "chunkgen-configs",
                                  "chunkgen", cg_version(), "exported", when, "entries", arr)
                      : NULL;
    char *text = doc ? json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;
    json_decref(doc);
    if (st == CG_OK && !text) st = cg__err(ctx, CG_ENOMEM, "cg_config_export: out of memory");
    if (st == CG_OK) {
        size_t n = strlen(text);
        char *nl = realloc(text, n + 2); /* a text file: ends in a newline */
        if (!nl) {
            free(text);
            st = cg__err(ctx, CG_ENOMEM, "cg_config_export: out of memory");
        } else {
            nl[n] = '\n', nl[n + 1] = '\0';
            *json = nl;
            if (len) *len = n + 1;
            if (count) *count = l.n;
        }
    } else {
        free(text);
    }
    if (l.f) elist_free(&l);
    cg__ctx_leave(ctx);
    return st;
}

/* ------------------------------------------------------------ import */

/* An import's end: the importer's counts s into the caller's stats (if any), leave ctx. */
static cg_status import_done(cg_context *ctx, cg_status st, const cg_tune_import_stats *s, cg_import_stats *stats) {
    cg_import_stats out = {.size = sizeof out,
                           .added = s->added,
                           .replaced = s->replaced,
                           .kept = s->kept,
                           .rejected = s->rejected,
                           .messages = s->messages};
    if (stats && cg__abi_out(ctx, "stats", stats, &out, sizeof out) != CG_OK && st == CG_OK) st = CG_EINVAL;
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_config_import(cg_context *ctx, const char *const *sources, int nsources, const cg_import_options *opts,
                           cg_import_stats *stats) {
    if (!ctx || cg__ctx_enter(ctx, "cg_config_import") != CG_OK) return CG_EINVAL;
    cg_import_options o;
    cg_status st = cg__abi_in(ctx, "opts", &o, sizeof o, opts);
    if (st == CG_OK && (nsources < 1 || !sources))
        st = cg__err(ctx, CG_EINVAL, "sources: expected at least one file or store directory (got %d)", nsources);
    for (int i = 0; st == CG_OK && i < nsources; i++)
        if (!sources[i] || !*sources[i]) st = cg__err(ctx, CG_EINVAL, "sources[%d]: expected a path or \"-\"", i);
    cg_tune_import_stats s;
    memset(&s, 0, sizeof s);
    if (st == CG_OK) st = cg__tune_import_files(ctx, sources, nsources, o.allow_foreign, o.dry_run, &s);
    return import_done(ctx, st, &s, stats);
}

cg_status cg_config_import_json(cg_context *ctx, const char *json, size_t len, const char *what,
                                const cg_import_options *opts, cg_import_stats *stats) {
    if (!ctx || cg__ctx_enter(ctx, "cg_config_import_json") != CG_OK) return CG_EINVAL;
    cg_import_options o;
    cg_status st = cg__abi_in(ctx, "opts", &o, sizeof o, opts);
    if (!what) what = "json";
    json_t *doc = NULL;
    if (st == CG_OK && !json) st = cg__err(ctx, CG_EINVAL, "json: expected the document's text");
    if (st == CG_OK) {
        json_error_t jerr;
        if (!(doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr)))
            st = cg__err(ctx, CG_EINVAL, "%s: not valid JSON: %s (line %d, column %d)", what, jerr.text, jerr.line,
                         jerr.column);
    }
    cg_tune_import_stats s;
    memset(&s, 0, sizeof s);
    if (st == CG_OK) st = cg__tune_import_json(ctx, doc, what, o.allow_foreign, o.dry_run, &s);
    json_decref(doc);
    return import_done(ctx, st, &s, stats);
}
