/* exchange.c -- importing tuned configs (`chunkgen import`): validate every entry, refuse
 * malformed, unfinished and foreign-device ones with a message, merge keeping the faster
 * entry. Never trusts the input: everything goes through cg__tune_entry_from_json. */
#include "autotune.h"

#include <jansson.h>

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Per-entry messages of one import: the first CG_IMPORT_MSG_CAP, then one line saying how
 * many were left out (a huge import must not flood the terminal). */
#define CG_IMPORT_MSG_CAP 20

static void say(FILE *msg, cg_tune_import_stats *s, const char *fmt, ...) CG_PRINTF(3, 4);
static void say(FILE *msg, cg_tune_import_stats *s, const char *fmt, ...) {
    if (s->messages++ >= CG_IMPORT_MSG_CAP) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(msg, fmt, ap);
    va_end(ap);
}

static void import_one(cg_context *ctx, const char *dir, json_t *j, const char *where, int allow_foreign, int dry,
                       FILE *msg, cg_tune_import_stats *s) {
    cg_tune_entry e;
    char why[320];
    if (cg__tune_entry_from_json(j, 0, &e, why, sizeof why) != CG_OK) {
        say(msg, s, "chunkgen import: %s: rejected: %s\n", where, why);
        s->rejected++;
        return;
    }
    char brief[200];
    cg__tune_key_brief(&e.key, brief, sizeof brief);
    if (!e.complete) {
        say(msg, s, "chunkgen import: %s (%s): rejected: an unfinished tune\n", where, brief);
        s->rejected++;
        cg__tune_entry_free(&e);
        return;
    }
    /* Foreign: another CPU model, or another GPU (name, compute capability, SM count).
     * Thread counts and versions are part of the key: such entries are inert until they
     * match, not foreign. */
    cg_tune_key here;
    memset(&here, 0, sizeof here);
    cg_status st = cg__tune_device_key(ctx, e.key.backend, &here);
    int foreign = st != CG_OK || strcmp(here.device, e.key.device) ||
                  (strcmp(e.key.backend, "cpu") && (here.cc != e.key.cc || here.sm_count != e.key.sm_count));
    if (foreign && !allow_foreign) {
        if (st != CG_OK)
            say(msg, s, "chunkgen import: %s (%s): rejected: measured on \"%s\" and this machine has no %s device (%s)\n",
                    where, brief, e.key.device, e.key.backend, cg_errmsg(ctx));
        else
            fprintf(msg,
                    "chunkgen import: %s (%s): rejected: measured on a foreign device \"%s\" (this machine: \"%s\"); "
                    "--allow-foreign imports it anyway\n",
                    where, brief, e.key.device, here.device);
        ctx->errmsg[0] = '\0';
        s->rejected++;
        cg__tune_entry_free(&e);
        return;
    }
    cg_tune_entry old;
    st = cg__tune_store_get(ctx, dir, &e.key, &old);
    if (st == CG_OK) {
        double om = old.best >= 0 ? old.cand[old.best].median_ms : INFINITY;
        double nm = e.best >= 0 ? e.cand[e.best].median_ms : INFINITY;
        int keep = old.complete && om <= nm;
        cg__tune_entry_free(&old);
        if (keep) {
            say(msg, s, "chunkgen import: %s (%s): kept the store's entry (%.4g ms <= %.4g ms)\n", where, brief, om, nm);
            s->kept++;
            cg__tune_entry_free(&e);
            return;
        }
    }
    /* counted once: as added/replaced when written, as rejected when the write fails */
    ctx->errmsg[0] = '\0';
    if (!dry && cg__tune_store_put(ctx, dir, &e) != CG_OK) {
        say(msg, s, "chunkgen import: %s (%s): not written: %s\n", where, brief, cg_errmsg(ctx));
        s->rejected++;
    } else if (st == CG_OK) {
        s->replaced++;
    } else {
        s->added++; /* absent, or a bad file that this entry replaces */
    }
    cg__tune_entry_free(&e);
}

cg_status cg__tune_import_json(cg_context *ctx, json_t *doc, const char *what, int allow_foreign, int dry_run,
                               FILE *msg, cg_tune_import_stats *s) {
    memset(s, 0, sizeof *s);
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
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", cg__tune_store_dir(ctx));
    if (!entries) {
        import_one(ctx, dir, doc, "entry", allow_foreign, dry_run, msg, s);
        return CG_OK;
    }
    for (size_t i = 0; i < json_array_size(entries); i++) {
        char where[64];
        snprintf(where, sizeof where, "entry %zu", i);
        import_one(ctx, dir, json_array_get(entries, i), where, allow_foreign, dry_run, msg, s);
    }
    if (s->messages > CG_IMPORT_MSG_CAP)
        fprintf(msg, "chunkgen import: %s: %d more message(s) not shown\n", what, s->messages - CG_IMPORT_MSG_CAP);
    return CG_OK;
}

cg_status cg__tune_import_file(cg_context *ctx, const char *path, int allow_foreign, int dry_run, FILE *msg,
                               cg_tune_import_stats *s) {
    memset(s, 0, sizeof *s);
    json_error_t jerr;
    json_t *doc = !strcmp(path, "-") ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                                     : json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return cg__err(ctx, CG_EINVAL, "%s: not valid JSON: %s (line %d, column %d)", path, jerr.text, jerr.line,
                       jerr.column);
    cg_status st = cg__tune_import_json(ctx, doc, path, allow_foreign, dry_run, msg, s);
    json_decref(doc);
    return st;
}
