/* exchange.c -- importing tuned configs (`chunkgen import A [B ...]`): validate every
 * entry, refuse malformed, unfinished, foreign-device ones and configs the kernel's Lua
 * constraints refuse, with a message; then merge by the merge rule (agree.c) over the
 * store's entry and every imported entry of the same key at once, so the result does
 * not depend on the order of the files. Sources are export documents, entry objects,
 * arrays of entries, or store directories (a cache directory or its configs/). Never
 * trusts the input: everything goes through cg__tune_entry_from_json or the store's
 * validated reader. */
#include "autotune.h"

#include <jansson.h>

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One message about an entry: a CG_PROGRESS_MESSAGE (subject: where it came from; task:
 * the key in brief, "" when unknown) on the context's progress callback. */
static void say(cg_context *ctx, cg_tune_import_stats *s, cg_log_level level, const char *where, const char *brief,
                const char *fmt, ...) CG_PRINTF(6, 7);
static void say(cg_context *ctx, cg_tune_import_stats *s, cg_log_level level, const char *where, const char *brief,
                const char *fmt, ...) {
    s->messages++;
    if (!ctx->progress) return;
    char text[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    cg__progress(
        ctx, (cg_progress){.kind = CG_PROGRESS_MESSAGE, .level = level, .task = brief, .subject = where, .text = text});
}

typedef struct incoming {
    cg_tune_entry e;
    char where[128];
    char key[1024]; /* full key text: the group */
} incoming;

typedef struct import_set {
    incoming *v;
    int n, cap;
    int allow_foreign;
    cg_tune_import_stats *s;
} import_set;

/* Take e (owned) into the set when it passes every check; else free it with a message. */
static void admit(cg_context *ctx, import_set *is, cg_tune_entry *e, const char *where) {
    cg_tune_import_stats *s = is->s;
    char brief[200], why[400];
    cg__tune_key_brief(&e->key, brief, sizeof brief);
    if (!e->complete) {
        say(ctx, s, CG_LOG_WARN, where, brief, "rejected: an unfinished tune");
        goto reject;
    }
    /* Foreign: another CPU model, or another GPU (name, compute capability, SM count).
     * Thread counts and versions are part of the key: such entries are inert until they
     * match, not foreign. */
    cg_tune_key here;
    memset(&here, 0, sizeof here);
    cg_status st = cg__tune_device_key(ctx, e->key.backend, &here);
    int foreign = st != CG_OK || strcmp(here.device, e->key.device) ||
                  (strcmp(e->key.backend, "cpu") && (here.cc != e->key.cc || here.sm_count != e->key.sm_count));
    if (foreign && !is->allow_foreign) {
        if (st != CG_OK)
            say(ctx, s, CG_LOG_WARN, where, brief,
                "rejected: measured on \"%s\" and this machine has no %s device (%s)", e->key.device, e->key.backend,
                cg_errmsg(ctx));
        else
            say(ctx, s, CG_LOG_WARN, where, brief,
                "rejected: measured on a foreign device \"%s\" (this machine: \"%s\"); allow foreign entries "
                "(--allow-foreign) to import it anyway",
                e->key.device, here.device);
        ctx->errmsg[0] = '\0';
        goto reject;
    }
    ctx->errmsg[0] = '\0';
    /* The same Lua validity check as a tuned config. */
    if (cg__tune_entry_check_space(ctx, e, why, sizeof why) != CG_OK) {
        say(ctx, s, CG_LOG_WARN, where, brief, "rejected: %s", why);
        ctx->errmsg[0] = '\0';
        goto reject;
    }
    if (is->n == is->cap) {
        int nc = is->cap ? 2 * is->cap : 16;
        incoming *nv = realloc(is->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            say(ctx, s, CG_LOG_WARN, where, brief, "rejected: out of memory");
            goto reject;
        }
        is->v = nv;
        is->cap = nc;
    }
    incoming *in = &is->v[is->n++];
    in->e = *e;
    snprintf(in->where, sizeof in->where, "%s", where);
    cg__tune_key_text(&e->key, 1, in->key, sizeof in->key);
    return;
reject:
    s->rejected++;
    cg__tune_entry_free(e);
}

static void admit_json(cg_context *ctx, import_set *is, json_t *j, const char *where) {
    cg_tune_entry e;
    char why[320];
    if (cg__tune_entry_from_json(j, 0, &e, why, sizeof why) != CG_OK) {
        say(ctx, is->s, CG_LOG_WARN, where, "", "rejected: %s", why);
        is->s->rejected++;
        return;
    }
    admit(ctx, is, &e, where);
}

static cg_status collect_json(cg_context *ctx, import_set *is, json_t *doc, const char *what) {
    json_t *entries = NULL;
    if (json_is_array(doc)) {
        entries = doc;
    } else if (json_is_object(doc) && json_object_get(doc, "entries")) {
        json_t *schema = json_object_get(doc, "schema");
        json_t *kind = json_object_get(doc, "kind");
        entries = json_object_get(doc, "entries");
        if (!json_is_integer(schema) || json_integer_value(schema) != CG_TUNE_SCHEMA)
            return cg__err(ctx, CG_EINVAL, "%s: \"schema\" must be %d (the export schema this chunkgen reads)", what,
                           CG_TUNE_SCHEMA);
        if (kind && (!json_is_string(kind) || strcmp(json_string_value(kind), "chunkgen-configs")))
            return cg__err(ctx, CG_EINVAL, "%s: \"kind\" must be \"chunkgen-configs\"", what);
        if (!json_is_array(entries)) return cg__err(ctx, CG_EINVAL, "%s: \"entries\" must be an array", what);
    } else if (!json_is_object(doc)) {
        return cg__err(ctx, CG_EINVAL, "%s: expected an export document, an entry object or an array of entries", what);
    }
    if (!entries) {
        char where[128];
        snprintf(where, sizeof where, "%.100s: entry", what);
        admit_json(ctx, is, doc, where);
        return CG_OK;
    }
    for (size_t i = 0; i < json_array_size(entries); i++) {
        char where[128];
        snprintf(where, sizeof where, "%.90s: entry %zu", what, i);
        admit_json(ctx, is, json_array_get(entries, i), where);
    }
    return CG_OK;
}

typedef struct dir_visit {
    cg_context *ctx;
    import_set *is;
} dir_visit;

static int visit_store(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    dir_visit *dv = arg;
    if (!e) {
        say(dv->ctx, dv->is->s, CG_LOG_WARN, path, "", "rejected: %s", why);
        dv->is->s->rejected++;
        return 0;
    }
    cg_tune_entry c;
    if (cg__tune_entry_copy(&c, e) != CG_OK) {
        dv->is->s->rejected++;
        return 0;
    }
    admit(dv->ctx, dv->is, &c, path);
    return 0;
}

/* Whether path's last component is "configs" (a store's own directory, maybe empty). */
static int named_configs(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    return n >= 7 && !strncmp(path + n - 7, "configs", 7) && (n == 7 || path[n - 8] == '/');
}

/* A store directory: DIR/configs when it exists (a cache directory), else DIR itself when
 * it holds entry files or is named configs (a store's own directory). Any other directory
 * is refused by name: importing it would report success having found nothing. */
static cg_status collect_dir(cg_context *ctx, import_set *is, const char *path) {
    char dir[4200];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/configs", path);
    const int cache = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (!cache) snprintf(dir, sizeof dir, "%s", path);
    dir_visit dv = {ctx, is};
    const int n = cg__tune_store_scan(dir, visit_store, &dv);
    if (n < 0) return cg__err(ctx, CG_EINVAL, "%s: cannot read the store directory", dir);
    if (n == 0 && !cache && !named_configs(path))
        return cg__err(ctx, CG_EINVAL,
                       "%s: not a store directory (no configs/ in it and no tuned-config entry); "
                       "expected a cache directory, its configs/, or a file written by chunkgen export",
                       path);
    return CG_OK;
}

static int cmp_incoming(const void *a, const void *b) {
    return strcmp(((const incoming *)a)->key, ((const incoming *)b)->key);
}

/* Merge: per key, the merge rule over the store's entry and every imported one. */
static void commit(cg_context *ctx, import_set *is, int dry) {
    cg_tune_import_stats *s = is->s;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", cg__tune_store_dir(ctx));
    if (is->n) qsort(is->v, (size_t)is->n, sizeof *is->v, cmp_incoming);
    for (int a = 0, b; a < is->n; a = b) {
        for (b = a + 1; b < is->n && !strcmp(is->v[a].key, is->v[b].key);) b++;
        const cg_tune_entry **set = malloc((size_t)(b - a + 1) * sizeof *set);
        if (!set) {
            s->rejected += b - a;
            continue;
        }
        cg_tune_entry old;
        int have_old = cg__tune_store_get(ctx, dir, &is->v[a].e.key, &old) == CG_OK;
        ctx->errmsg[0] = '\0';
        int n = 0;
        if (have_old) set[n++] = &old;
        for (int i = a; i < b; i++) set[n++] = &is->v[i].e;
        int w = cg__tune_entry_pick(set, n);
        char brief[200];
        cg__tune_key_brief(&is->v[a].e.key, brief, sizeof brief);
        if (have_old && w == 0) {
            double om = old.best >= 0 ? old.cand[old.best].median_ms : NAN;
            for (int i = a; i < b; i++) {
                const cg_tune_entry *e = &is->v[i].e;
                say(ctx, s, CG_LOG_INFO, is->v[i].where, brief,
                    "kept the store's entry (%.4g ms vs %.4g ms: faster, or within the noise and first by the tie "
                    "rule)",
                    om, e->best >= 0 ? e->cand[e->best].median_ms : NAN);
                s->kept++;
            }
        } else {
            int wi = a + w - have_old;
            for (int i = a; i < b; i++)
                if (i != wi) {
                    say(ctx, s, CG_LOG_INFO, is->v[i].where, brief, "superseded by %s", is->v[wi].where);
                    s->kept++;
                }
            if (!dry && cg__tune_store_put(ctx, dir, &is->v[wi].e) != CG_OK) {
                say(ctx, s, CG_LOG_ERROR, is->v[wi].where, brief, "not written: %s", cg_errmsg(ctx));
                s->rejected++; /* counted once: the write failed */
                ctx->errmsg[0] = '\0';
            } else if (have_old) {
                s->replaced++;
            } else {
                s->added++; /* absent, or a bad file that this entry replaces */
            }
        }
        if (have_old) cg__tune_entry_free(&old);
        free(set);
    }
}

static void set_free(import_set *is) {
    for (int i = 0; i < is->n; i++) cg__tune_entry_free(&is->v[i].e);
    free(is->v);
}

cg_status cg__tune_import_json(cg_context *ctx, json_t *doc, const char *what, int allow_foreign, int dry_run,
                               cg_tune_import_stats *s) {
    memset(s, 0, sizeof *s);
    import_set is = {NULL, 0, 0, allow_foreign, s};
    cg_status st = collect_json(ctx, &is, doc, what);
    if (st == CG_OK) commit(ctx, &is, dry_run);
    set_free(&is);
    return st;
}

cg_status cg__tune_import_files(cg_context *ctx, const char *const *paths, int npaths, int allow_foreign, int dry_run,
                                cg_tune_import_stats *s) {
    memset(s, 0, sizeof *s);
    import_set is = {NULL, 0, 0, allow_foreign, s};
    cg_status st = CG_OK;
    for (int i = 0; st == CG_OK && i < npaths; i++) {
        const char *path = paths[i];
        struct stat sb;
        if (strcmp(path, "-") && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            st = collect_dir(ctx, &is, path);
            continue;
        }
        if (strcmp(path, "-") && (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))) {
            st = cg__err(ctx, CG_EINVAL, "%s: not a regular file or a store directory", path);
            break;
        }
        json_error_t jerr;
        json_t *doc = !strcmp(path, "-") ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                                         : json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc) {
            st = cg__err(ctx, CG_EINVAL, "%s: not valid JSON: %s (line %d, column %d)", path, jerr.text, jerr.line,
                         jerr.column);
            break;
        }
        st = collect_json(ctx, &is, doc, path);
        json_decref(doc);
    }
    /* nothing is written when a source cannot be read */
    if (st == CG_OK) commit(ctx, &is, dry_run);
    set_free(&is);
    return st;
}

cg_status cg__tune_import_file(cg_context *ctx, const char *path, int allow_foreign, int dry_run,
                               cg_tune_import_stats *s) {
    return cg__tune_import_files(ctx, &path, 1, allow_foreign, dry_run, s);
}
