/* store.c -- tuned-config entries as JSON files: one file per key, atomic rename,
 * checksummed, validated on every read.
 *
 * File: <cache dir>/configs/<16 hex digits of FNV-1a(key text)>.json holding
 *   {"schema": 1, "key": {...}, "complete": true, "best": {...}, "candidates": [...],
 *    ..., "checksum": "fnv1a64:<hex>"}
 * The checksum covers the compact, key-sorted JSON text of every other member, so an
 * entry survives reformatting by jansson but not a changed value. Writers create a temp
 * file in the same directory (O_EXCL, unique per host/process/thread), fsync it and
 * rename it over the entry: readers see the old or the new file, never a mix, also on
 * NFS (rename is atomic there, and close-to-open consistency covers the data). */
#include "autotune.h"
#include "fsutil.h"
#include "ops.h"

#include <jansson.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAX_FILE (16 << 20)

static const char *const k_verdicts[CG_TV_COUNT] = {"ok", "compile", "resources", "launch", "wrong", "timeout"};

const char *cg__tune_verdict_name(cg_tune_verdict v) { return (unsigned)v < CG_TV_COUNT ? k_verdicts[v] : "unknown"; }

int cg__tune_verdict_parse(const char *s, cg_tune_verdict *out) {
    for (int i = 0; i < CG_TV_COUNT; i++)
        if (!strcmp(s, k_verdicts[i])) {
            *out = (cg_tune_verdict)i;
            return 0;
        }
    return -1;
}

/* ----------------------------------------------------------------- entries */

void cg__tune_entry_free(cg_tune_entry *e) {
    if (!e) return;
    free(e->cand);
    e->cand = NULL;
    e->ncand = 0;
}

cg_status cg__tune_entry_copy(cg_tune_entry *dst, const cg_tune_entry *src) {
    *dst = *src;
    dst->cand = NULL;
    if (src->ncand) {
        dst->cand = malloc((size_t)src->ncand * sizeof *dst->cand);
        if (!dst->cand) {
            dst->ncand = 0;
            return CG_ENOMEM;
        }
        memcpy(dst->cand, src->cand, (size_t)src->ncand * sizeof *dst->cand);
    }
    return CG_OK;
}

cg_status cg__tune_entry_add(cg_tune_entry *e, const cg_tune_cand *c) {
    cg_tune_cand *n = realloc(e->cand, (size_t)(e->ncand + 1) * sizeof *n);
    if (!n) return CG_ENOMEM;
    e->cand = n;
    e->cand[e->ncand++] = *c;
    return CG_OK;
}

cg_tune_cand *cg__tune_entry_find(cg_tune_entry *e, const char *cfg) {
    for (int i = 0; i < e->ncand; i++)
        if (!strcmp(e->cand[i].cfg, cfg)) return &e->cand[i];
    return NULL;
}

/* --------------------------------------------------------------- selection */

int cg__tune_select(const cg_tune_cand *c, int n, double rel_tol, int *runner_up) {
    int fastest = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].verdict != CG_TV_OK) continue;
        if (fastest < 0 || c[i].median_ms < c[fastest].median_ms ||
            (c[i].median_ms == c[fastest].median_ms && c[i].order < c[fastest].order))
            fastest = i;
    }
    int win = fastest;
    if (fastest >= 0) {
        const double m0 = c[fastest].median_ms;
        /* The noise band is the fastest's IQR, at least rel_tol and at most
         * CG_TUNE_TIE_MAX of its median; a candidate's own spread does not widen it, so a
         * noisy slow candidate cannot tie its way in. */
        double noise = c[fastest].iqr_ms;
        if (noise > CG_TUNE_TIE_MAX * m0) noise = CG_TUNE_TIE_MAX * m0;
        if (noise < rel_tol * m0) noise = rel_tol * m0;
        for (int i = 0; i < n; i++) {
            if (c[i].verdict != CG_TV_OK) continue;
            if (c[i].median_ms - m0 <= noise && c[i].order < c[win].order) win = i;
        }
    }
    if (runner_up) {
        int r = -1;
        for (int i = 0; i < n; i++) {
            if (i == win || c[i].verdict != CG_TV_OK) continue;
            if (r < 0 || c[i].median_ms < c[r].median_ms ||
                (c[i].median_ms == c[r].median_ms && c[i].order < c[r].order))
                r = i;
        }
        *runner_up = r;
    }
    return win;
}

/* -------------------------------------------------------------------- JSON */

static json_t *real_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* The shape's op family in schema 1: a boolean member named by each family but the op
 * table's first (cg__tune_family_at(f), f >= 1), true for the shape's own. The second
 * family's member is always written (schema 1 began with two families and wrote it, true
 * or false: old files write back as they were read); a later family's only when true.
 * (The key's "op" names the family too; the shape is informational:
 * cg__tune_entry_check_space uses the key's own shape when the two disagree.) */
static void shape_family_to_json(json_t *sj, int fam) {
    const cg_op_desc *d;
    for (int f = 1; sj && (d = cg__tune_family_at(f)) != NULL; f++)
        if (f == 1 || fam == f) /* a later family's member only when true (absent reads as false): */
            json_object_set_new(sj, d->family, json_boolean(fam == f)); /* entries stay as they were written */
}

static json_t *key_to_json(const cg_tune_key *k) {
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:s, s:s, s:s}",
        "backend", k->backend, "op", k->op, "dir", k->dir, "dk", (json_int_t)k->dk, "dv", (json_int_t)k->dv, "H",
        (json_int_t)k->H, "D", (json_int_t)k->D, "N", (json_int_t)k->N, "G", (json_int_t)k->G, "dtype", k->dtype,
        "precision", k->precision, "seq_bucket", (json_int_t)k->seq_bucket, "device", k->device, "cc", k->cc,
        "sm_count", k->sm_count, "threads", k->threads, "par", k->par, "nvrtc", k->nvrtc, "driver", k->driver,
        "version", k->version);
    if (o && k->varlen) json_object_set_new(o, "varlen", json_integer((json_int_t)k->varlen)); /* docs/varlen.md */
    return o;
}

static json_t *timing_json(const char *cfg, double med, double iqr, int reps) {
    return json_pack("{s:s, s:o, s:o, s:i}", "config", cfg, "median_ms", real_or_null(med), "iqr_ms", real_or_null(iqr),
                     "reps", reps);
}

static char *canonical_text(json_t *obj) {
    json_t *c = json_copy(obj); /* shallow: members shared */
    if (!c) return NULL;
    json_object_del(c, "checksum");
    char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(c);
    return s;
}

static void checksum_of(json_t *obj, char *out, size_t cap) {
    char *s = canonical_text(obj);
    uint64_t h = s ? cg__tune_hash(s, strlen(s), 0) : 0;
    snprintf(out, cap, "fnv1a64:%016llx", (unsigned long long)h);
    free(s);
}

json_t *cg__tune_entry_to_json(const cg_tune_entry *e) {
    json_t *cands = json_array();
    json_t *o = json_object();
    if (!cands || !o) goto fail;
    for (int i = 0; i < e->ncand; i++) {
        const cg_tune_cand *c = &e->cand[i];
        json_t *j = json_pack("{s:s, s:i, s:s}", "config", c->cfg, "order", c->order, "verdict",
                              cg__tune_verdict_name(c->verdict));
        if (!j) goto fail;
        if (c->verdict == CG_TV_OK) {
            json_object_set_new(j, "median_ms", real_or_null(c->median_ms));
            json_object_set_new(j, "iqr_ms", real_or_null(c->iqr_ms));
            json_object_set_new(j, "reps", json_integer(c->reps));
        }
        json_object_set_new(j, "err", real_or_null(c->err));
        if (c->detail[0]) json_object_set_new(j, "detail", json_string(c->detail));
        if (json_array_append_new(cands, j)) goto fail;
    }
    int ru = -1;
    int best = cg__tune_select(e->cand, e->ncand, CG_TUNE_TIE_REL, &ru);
    if (e->best >= 0 && e->best < e->ncand) best = e->best; /* as recorded */
    else best = -1;
    const cg_tune_shape *s = &e->shape;
    json_object_set_new(o, "schema", json_integer(CG_TUNE_SCHEMA));
    json_object_set_new(o, "key", key_to_json(&e->key));
    json_object_set_new(o, "complete", json_boolean(e->complete));
    json_object_set_new(o, "truncated", json_boolean(e->truncated));
    json_object_set_new(o, "kernel", json_string(e->kernel));
    const int64_t *dim = s->shape.dim; /* the schema-1 names; "T" is the sequence (T or L) */
    json_t *sj =
        json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name", s->name, "B", (json_int_t)dim[CG_SYM_B], "T",
                  (json_int_t)cg__tune_shape_seq(s), "G", (json_int_t)dim[CG_SYM_G], "H", (json_int_t)dim[CG_SYM_H],
                  "dk", (json_int_t)dim[CG_SYM_DK], "dv", (json_int_t)dim[CG_SYM_DV], "D", (json_int_t)dim[CG_SYM_D],
                  "N", (json_int_t)dim[CG_SYM_N]);
    shape_family_to_json(sj, cg__tune_shape_family(s));
    json_object_set_new(o, "shape", sj);
    char sig[32];
    cg__tune_shape_sig(s, sig, sizeof sig);
    if (strcmp(sig, "f32")) /* f32 shapes are written as before #15 */
        json_object_set_new(json_object_get(o, "shape"), "dtype", json_string(sig));
    json_object_set_new(o, "verify_T", json_integer(e->verify_T));
    json_object_set_new(
        o, "best",
        best >= 0 ? timing_json(e->cand[best].cfg, e->cand[best].median_ms, e->cand[best].iqr_ms, e->cand[best].reps)
                  : json_null());
    if (ru == best) ru = -1;
    json_object_set_new(o, "runner_up",
                        ru >= 0
                            ? timing_json(e->cand[ru].cfg, e->cand[ru].median_ms, e->cand[ru].iqr_ms, e->cand[ru].reps)
                            : json_null());
    json_object_set_new(o, "default", timing_json(e->default_cfg, e->default_ms, e->default_iqr_ms, 0));
    json_object_set_new(o, "space_size", json_integer(e->space_size));
    json_object_set_new(o, "candidates", cands);
    cands = NULL;
    json_object_set_new(o, "created", json_string(e->created));
    json_object_set_new(o, "host", json_string(e->host));
    char sum[40];
    checksum_of(o, sum, sizeof sum);
    json_object_set_new(o, "checksum", json_string(sum));
    return o;
fail:
    json_decref(cands);
    json_decref(o);
    return NULL;
}

/* ---- validation helpers: each returns 0 or fills why and returns -1 */

static int bad_fmt(char *why, size_t whycap, const char *fmt, ...) CG_PRINTF(3, 4);
static int bad_fmt(char *why, size_t whycap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whycap, fmt, ap);
    va_end(ap);
    return -1;
}
#define BAD(...) bad_fmt(why, whycap, __VA_ARGS__)

static int get_str(json_t *o, const char *name, char *dst, size_t cap, int required, int word, char *why,
                   size_t whycap) {
    json_t *v = json_object_get(o, name);
    if (!v) {
        if (required) return BAD("missing \"%s\"", name);
        dst[0] = '\0';
        return 0;
    }
    if (!json_is_string(v)) return BAD("\"%s\" must be a string", name);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n >= cap || strlen(s) != n) return BAD("\"%s\" is too long or holds a NUL", name);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) return BAD("\"%s\" holds a control character", name);
        if (word && !(isalnum(c) || c == '_' || c == '.' || c == '-'))
            return BAD("\"%s\" = \"%s\" is not a word", name, s);
    }
    memcpy(dst, s, n + 1);
    return 0;
}

static int get_int(json_t *o, const char *name, int64_t lo, int64_t hi, int64_t *dst, int required, char *why,
                   size_t whycap) {
    json_t *v = json_object_get(o, name);
    if (!v) {
        if (required) return BAD("missing \"%s\"", name);
        *dst = 0;
        return 0;
    }
    if (!json_is_integer(v)) return BAD("\"%s\" must be an integer", name);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return BAD("\"%s\" = %lld is outside [%lld, %lld]", name, (long long)x, (long long)lo, (long long)hi);
    *dst = (int64_t)x;
    return 0;
}

/* A number >= 0, or null (stored as NaN). */
static int get_ms(json_t *o, const char *name, double *dst, int required, char *why, size_t whycap) {
    json_t *v = json_object_get(o, name);
    if (!v || json_is_null(v)) {
        if (required) return BAD("missing \"%s\"", name);
        *dst = NAN;
        return 0;
    }
    if (!json_is_number(v)) return BAD("\"%s\" must be a number", name);
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0) return BAD("\"%s\" must be a finite number >= 0", name);
    *dst = x;
    return 0;
}

static int get_bool(json_t *o, const char *name, int *dst, char *why, size_t whycap) {
    json_t *v = json_object_get(o, name);
    if (!v) {
        *dst = 0;
        return 0;
    }
    if (!json_is_boolean(v)) return BAD("\"%s\" must be true or false", name);
    *dst = json_is_true(v);
    return 0;
}

/* The shape's family from its boolean members (shape_family_to_json); absent ones are false,
 * all false is the first family. */
static int shape_family_from_json(json_t *sj, int *fam, char *why, size_t whycap) {
    const cg_op_desc *d;
    *fam = 0;
    for (int f = 1; (d = cg__tune_family_at(f)) != NULL; f++) {
        int on = 0;
        if (get_bool(sj, d->family, &on, why, whycap)) return -1;
        if (on && *fam) return BAD("\"shape\": more than one op family is true");
        if (on) *fam = f;
    }
    return 0;
}

/* "k=v,k=v" with word keys and values, parseable as a config pin. */
static int check_cfg(const char *s, int allow_empty, char *why, size_t whycap) {
    if (!*s) return allow_empty ? 0 : BAD("empty config");
    for (const char *c = s; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '=' || *c == ',' || *c == '-'))
            return BAD("config \"%s\" holds '%c'", s, *c);
    cg_cfg cfg;
    if (cg__cfg_parse(NULL, s, &cfg) != CG_OK) return BAD("config \"%s\" is not k=v,k=v", s);
    return 0;
}

static int key_from_json(json_t *o, cg_tune_key *k, char *why, size_t whycap) {
    memset(k, 0, sizeof *k);
    if (!o) return BAD("missing \"key\"");
    if (!json_is_object(o)) return BAD("\"key\" must be an object");
    const int64_t DIM = (int64_t)1 << 40;
    int64_t cc = 0, sm = 0, th = 0, par = 0;
    if (get_str(o, "backend", k->backend, sizeof k->backend, 1, 1, why, whycap) ||
        get_str(o, "op", k->op, sizeof k->op, 1, 1, why, whycap) ||
        get_str(o, "dir", k->dir, sizeof k->dir, 1, 1, why, whycap) ||
        get_int(o, "dk", 0, DIM, &k->dk, 1, why, whycap) || get_int(o, "dv", 0, DIM, &k->dv, 1, why, whycap) ||
        get_int(o, "H", 0, DIM, &k->H, 1, why, whycap) || get_int(o, "D", 0, DIM, &k->D, 1, why, whycap) ||
        get_int(o, "N", 0, DIM, &k->N, 1, why, whycap) || get_int(o, "G", 1, DIM, &k->G, 1, why, whycap) ||
        get_str(o, "dtype", k->dtype, sizeof k->dtype, 1, 1, why, whycap) ||
        get_str(o, "precision", k->precision, sizeof k->precision, 1, 1, why, whycap) ||
        get_int(o, "seq_bucket", 1, (int64_t)1 << 62, &k->seq_bucket, 1, why, whycap) ||
        get_str(o, "device", k->device, sizeof k->device, 1, 0, why, whycap) ||
        get_int(o, "cc", 0, 10000, &cc, 1, why, whycap) || get_int(o, "sm_count", 0, 1 << 20, &sm, 1, why, whycap) ||
        get_int(o, "threads", 0, 1 << 20, &th, 1, why, whycap) ||
        get_int(o, "par", 0, 1 << 20, &par, 0, why, whycap) || /* absent in stores before 0.1.x: 0 */
        get_str(o, "nvrtc", k->nvrtc, sizeof k->nvrtc, 1, 0, why, whycap) ||
        get_str(o, "driver", k->driver, sizeof k->driver, 1, 0, why, whycap) ||
        get_str(o, "version", k->version, sizeof k->version, 1, 1, why, whycap) ||
        get_int(o, "varlen", 1, (int64_t)1 << 62, &k->varlen, 0, why, whycap)) /* varlen keys only */
        return -1;
    if (k->varlen & (k->varlen - 1)) return BAD("key.varlen %lld is not a power of two", (long long)k->varlen);
    k->cc = (int)cc, k->sm_count = (int)sm, k->threads = (int)th, k->par = (int)par;
    if (strcmp(k->backend, "cpu") && strcmp(k->backend, "cuda") && strcmp(k->backend, "emulate"))
        return BAD("key.backend \"%s\" is not cpu, cuda or emulate", k->backend);
    const cg_op_desc *d = cg__tune_key_family(k);
    if (!d) return BAD("key.op \"%s\" is not an op family of this chunkgen", k->op);
    if (strcmp(k->dir, "fwd") && strcmp(k->dir, "bwd")) return BAD("key.dir \"%s\" is not fwd or bwd", k->dir);
    if (k->seq_bucket & (k->seq_bucket - 1))
        return BAD("key.seq_bucket %lld is not a power of two", (long long)k->seq_bucket);
    /* the op table's key column: its extents >= 1 (and its divisibility rule), every other field 0 */
    static const cg_sym k_fields[] = {CG_SYM_DK, CG_SYM_DV, CG_SYM_H, CG_SYM_D, CG_SYM_N, CG_SYM_G};
    int fits = d->divisible == CG_SYM_NONE || !cg__tune_key_dim(k, d->divisor) ||
               cg__tune_key_dim(k, d->divisible) % cg__tune_key_dim(k, d->divisor) == 0;
    for (size_t i = 0; i < sizeof k_fields / sizeof k_fields[0]; i++) {
        int in_key = 0;
        for (int j = 0; j < d->nkey; j++) in_key |= d->key[j] == k_fields[i];
        const int64_t v = cg__tune_key_dim(k, k_fields[i]);
        fits &= in_key ? v >= 1 : v == 0;
    }
    if (!fits)
        return BAD("key: dimensions do not fit op %s (dk=%lld dv=%lld H=%lld D=%lld N=%lld G=%lld)", k->op,
                   (long long)k->dk, (long long)k->dv, (long long)k->H, (long long)k->D, (long long)k->N,
                   (long long)k->G);
    if (!k->device[0]) return BAD("key.device is empty");
    return 0;
}

static int timing_from_json(json_t *o, const char *what, char *cfg, double *med, double *iqr, int *reps, int need_ms,
                            char *why, size_t whycap) {
    if (!json_is_object(o)) return BAD("\"%s\" must be an object", what);
    int64_t r = 0;
    if (get_str(o, "config", cfg, CG_TUNE_CFG_TEXT, 1, 0, why, whycap) || check_cfg(cfg, 1, why, whycap) ||
        get_ms(o, "median_ms", med, need_ms, why, whycap) || get_ms(o, "iqr_ms", iqr, 0, why, whycap) ||
        get_int(o, "reps", 0, 1 << 30, &r, 0, why, whycap))
        return -1;
    if (reps) *reps = (int)r;
    return 0;
}

cg_status cg__tune_entry_from_json(json_t *o, int require_checksum, cg_tune_entry *e, char *why, size_t whycap) {
    memset(e, 0, sizeof *e);
    e->best = -1;
    if (!json_is_object(o)) return (BAD("an entry must be a JSON object"), CG_EINVAL);
    int64_t schema = 0;
    if (get_int(o, "schema", 0, 1 << 30, &schema, 1, why, whycap)) return CG_EINVAL;
    if (schema != CG_TUNE_SCHEMA)
        return (BAD("schema %lld, this chunkgen reads schema %d", (long long)schema, CG_TUNE_SCHEMA), CG_EINVAL);
    json_t *cs = json_object_get(o, "checksum");
    if (cs || require_checksum) {
        if (!json_is_string(cs)) return (BAD("missing or non-string \"checksum\""), CG_EINVAL);
        char want[40];
        checksum_of(o, want, sizeof want);
        if (strcmp(want, json_string_value(cs)))
            return (BAD("checksum mismatch (file says %.40s, content gives %s)", json_string_value(cs), want),
                    CG_EINVAL);
    }
    if (key_from_json(json_object_get(o, "key"), &e->key, why, whycap)) return CG_EINVAL;
    int64_t v = 0;
    if (get_bool(o, "complete", &e->complete, why, whycap) || get_bool(o, "truncated", &e->truncated, why, whycap) ||
        get_str(o, "kernel", e->kernel, sizeof e->kernel, 0, 1, why, whycap) ||
        get_str(o, "created", e->created, sizeof e->created, 0, 0, why, whycap) ||
        get_str(o, "host", e->host, sizeof e->host, 0, 0, why, whycap) ||
        get_int(o, "verify_T", 0, (int64_t)1 << 40, &e->verify_T, 0, why, whycap) ||
        get_int(o, "space_size", 0, 1 << 24, &v, 0, why, whycap))
        return CG_EINVAL;
    e->space_size = (int)v;
    json_t *sh = json_object_get(o, "shape");
    if (sh) {
        if (!json_is_object(sh)) return (BAD("\"shape\" must be an object"), CG_EINVAL);
        cg_tune_shape *s = &e->shape;
        const int64_t DIM = (int64_t)1 << 40;
        int fam = 0;
        char sig[32] = "";
        if (shape_family_from_json(sh, &fam, why, whycap)) return CG_EINVAL;
        const cg_op_desc *d = cg__tune_family_at(fam);
        cg__tune_shape_init(s, d->op);
        int64_t *dim = s->shape.dim; /* the schema-1 names; "T" is the sequence (T or L) */
        if (get_str(sh, "name", s->name, sizeof s->name, 0, 0, why, whycap) ||
            get_int(sh, "B", 0, DIM, &dim[CG_SYM_B], 0, why, whycap) ||
            get_int(sh, "T", 0, DIM, &dim[d->seq], 0, why, whycap) ||
            get_int(sh, "G", 0, DIM, &dim[CG_SYM_G], 0, why, whycap) ||
            get_int(sh, "H", 0, DIM, &dim[CG_SYM_H], 0, why, whycap) ||
            get_int(sh, "dk", 0, DIM, &dim[CG_SYM_DK], 0, why, whycap) ||
            get_int(sh, "dv", 0, DIM, &dim[CG_SYM_DV], 0, why, whycap) ||
            get_int(sh, "D", 0, DIM, &dim[CG_SYM_D], 0, why, whycap) ||
            get_int(sh, "N", 0, DIM, &dim[CG_SYM_N], 0, why, whycap) ||
            get_str(sh, "dtype", sig, sizeof sig, 0, 0, why, whycap))
            return CG_EINVAL;
        if (sig[0] && cg__tune_shape_set_sig(NULL, s, sig) != CG_OK)
            return (BAD("\"shape\": dtype \"%s\" is not a dtype signature of %s", sig, d->name), CG_EINVAL);
    }
    json_t *def = json_object_get(o, "default");
    if (def && !json_is_null(def) &&
        timing_from_json(def, "default", e->default_cfg, &e->default_ms, &e->default_iqr_ms, NULL, 0, why, whycap))
        return CG_EINVAL;
    if (!isfinite(e->default_ms)) e->default_ms = 0;
    if (!isfinite(e->default_iqr_ms)) e->default_iqr_ms = 0;

    json_t *cands = json_object_get(o, "candidates");
    if (!json_is_array(cands)) return (BAD("\"candidates\" must be an array"), CG_EINVAL);
    size_t n = json_array_size(cands);
    if (n > (1u << 20)) return (BAD("too many candidates (%zu)", n), CG_EINVAL);
    if (n) {
        e->cand = calloc(n, sizeof *e->cand);
        if (!e->cand) return (BAD("out of memory"), CG_ENOMEM);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cands, i);
        cg_tune_cand *d = &e->cand[i];
        char verdict[16];
        int64_t ord = 0, reps = 0;
        if (!json_is_object(c)) {
            BAD("candidate %zu must be an object", i);
            goto bad;
        }
        /* "" is the default config (what an untuned call runs) */
        if (get_str(c, "config", d->cfg, sizeof d->cfg, 1, 0, why, whycap) || check_cfg(d->cfg, 1, why, whycap) ||
            get_int(c, "order", 0, 1 << 24, &ord, 1, why, whycap) ||
            get_str(c, "verdict", verdict, sizeof verdict, 1, 1, why, whycap) ||
            get_str(c, "detail", d->detail, sizeof d->detail, 0, 0, why, whycap) ||
            get_ms(c, "err", &d->err, 0, why, whycap))
            goto bad;
        if (cg__tune_verdict_parse(verdict, &d->verdict)) {
            BAD("candidate %zu: unknown verdict \"%s\"", i, verdict);
            goto bad;
        }
        d->order = (int)ord;
        if (d->verdict == CG_TV_OK) {
            if (get_ms(c, "median_ms", &d->median_ms, 1, why, whycap) ||
                get_ms(c, "iqr_ms", &d->iqr_ms, 1, why, whycap) ||
                get_int(c, "reps", 1, 1 << 30, &reps, 1, why, whycap))
                goto bad;
            if (d->median_ms <= 0) {
                BAD("candidate %zu: median_ms must be > 0", i);
                goto bad;
            }
            d->reps = (int)reps;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(e->cand[j].cfg, d->cfg)) {
                BAD("candidate %zu repeats config %s", i, d->cfg);
                goto bad;
            }
        e->ncand = (int)i + 1;
    }
    e->ncand = (int)n;
    json_t *best = json_object_get(o, "best");
    if (best && !json_is_null(best)) {
        char cfg[CG_TUNE_CFG_TEXT];
        double med, iqr;
        if (timing_from_json(best, "best", cfg, &med, &iqr, NULL, 1, why, whycap)) goto bad;
        for (int i = 0; i < e->ncand; i++)
            if (!strcmp(e->cand[i].cfg, cfg)) e->best = i;
        if (e->best < 0) {
            BAD("best config %s is not among the candidates", cfg);
            goto bad;
        }
        if (e->cand[e->best].verdict != CG_TV_OK) {
            BAD("best config %s was rejected", cfg);
            goto bad;
        }
    } else if (e->complete) {
        /* A complete entry where every candidate failed is legal: lookup uses the default. */
        for (int i = 0; i < e->ncand; i++)
            if (e->cand[i].verdict == CG_TV_OK) {
                BAD("\"best\" is missing although candidate %s passed", e->cand[i].cfg);
                goto bad;
            }
    }
    return CG_OK;
bad:
    cg__tune_entry_free(e);
    return CG_EINVAL;
}

/* -------------------------------------------------------------------- files */

int cg__tune_mkdirs(const char *path) {
    int e = cg__mkdirs(path);
    if (e) errno = e;
    return e ? -1 : 0;
}

const char *cg__tune_store_dir(cg_context *ctx) {
    static __thread char buf[4096];
    snprintf(buf, sizeof buf, "%s/configs", cg__cache_dir(ctx));
    return buf;
}

void cg__tune_entry_file(const cg_tune_key *k, char *buf, size_t cap) {
    char text[1024];
    cg__tune_key_text(k, 1, text, sizeof text);
    snprintf(buf, cap, "%016llx.json", (unsigned long long)cg__tune_hash(text, strlen(text), 0));
}

cg_status cg__tune_write_atomic(cg_context *ctx, const char *dir, const char *name, const void *data, size_t n) {
    if (cg__tune_mkdirs(dir) != 0)
        return cg__err(ctx, CG_EIO, "config store: cannot create directory %s: %s", dir, strerror(errno));
    char path[4400], why[4800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (cg__write_file_atomic(path, data, n, 1, why, sizeof why) != 0)
        return cg__err(ctx, CG_EIO, "config store: %s", why);
    return CG_OK;
}

cg_status cg__tune_store_put(cg_context *ctx, const char *dir, const cg_tune_entry *e) {
    json_t *o = cg__tune_entry_to_json(e);
    if (!o) return cg__err(ctx, CG_ENOMEM, "config store: out of memory building an entry");
    char *text = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!text) return cg__err(ctx, CG_ENOMEM, "config store: out of memory writing an entry");
    size_t n = strlen(text);
    char *buf = realloc(text, n + 2);
    if (!buf) {
        free(text);
        return cg__err(ctx, CG_ENOMEM, "config store: out of memory");
    }
    buf[n] = '\n';
    buf[n + 1] = '\0';
    char name[64];
    cg__tune_entry_file(&e->key, name, sizeof name);
    cg_status st = cg__tune_write_atomic(ctx, dir, name, buf, n + 1);
    free(buf);
    if (st == CG_OK) cg__tune_store_changed();
    return st;
}

cg_status cg__tune_store_read(const char *path, cg_tune_entry *e, char *why, size_t whycap) {
    memset(e, 0, sizeof *e);
    e->best = -1;
    int64_t size = 0;
    int fd = cg__open_regular(path, STORE_MAX_FILE, &size, why, whycap); /* a FIFO must not hang */
    if (fd < 0) return errno == ENOENT ? CG_ENOTFOUND : CG_EIO;
    size_t cap = (size_t)size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        snprintf(why, whycap, "out of memory");
        return CG_ENOMEM;
    }
    for (;;) {
        if (n == cap) break; /* grew while reading: the parse below sees a prefix and fails */
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    json_error_t jerr;
    json_t *o = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &jerr);
    free(buf);
    if (!o) {
        snprintf(why, whycap, "not valid JSON: %s (line %d)", jerr.text, jerr.line);
        return CG_EIO;
    }
    char inner[256];
    cg_status s = cg__tune_entry_from_json(o, 1, e, inner, sizeof inner);
    json_decref(o);
    if (s != CG_OK) {
        snprintf(why, whycap, "%s", inner);
        return s == CG_ENOMEM ? s : CG_EIO;
    }
    /* The file must sit under the name of its own key. */
    char want[64];
    cg__tune_entry_file(&e->key, want, sizeof want);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, want)) {
        snprintf(why, whycap, "holds the entry of another key (expected file name %s)", want);
        cg__tune_entry_free(e);
        return CG_EIO;
    }
    return CG_OK;
}

cg_status cg__tune_store_get(cg_context *ctx, const char *dir, const cg_tune_key *k, cg_tune_entry *e) {
    char name[64], path[4200], why[320];
    cg__tune_entry_file(k, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cg_status s = cg__tune_store_read(path, e, why, sizeof why);
    if (s == CG_ENOTFOUND) return s;
    if (s != CG_OK) return cg__err(ctx, s, "config store: %s: %s", path, why);
    char a[1024], b[1024];
    cg__tune_key_text(k, 1, a, sizeof a);
    cg__tune_key_text(&e->key, 1, b, sizeof b);
    if (strcmp(a, b)) { /* a hash collision */
        cg__tune_entry_free(e);
        return CG_ENOTFOUND;
    }
    return CG_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cg__tune_store_scan(const char *dir, cg_tune_visit_fn fn, void *arg) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        if (nm[0] == '.' || len < 6 || strcmp(nm + len - 5, ".json")) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) break;
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(nm))) break;
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    int visited = 0, stop = 0;
    for (size_t i = 0; i < n; i++) {
        if (!stop) {
            char path[4400], why[320];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            cg_tune_entry e;
            cg_status s = cg__tune_store_read(path, &e, why, sizeof why);
            if (s == CG_ENOTFOUND) { /* removed meanwhile */
                free(names[i]);
                continue;
            }
            visited++;
            stop = fn(arg, path, s == CG_OK ? &e : NULL, s == CG_OK ? "" : why);
            if (s == CG_OK) cg__tune_entry_free(&e);
        }
        free(names[i]);
    }
    free(names);
    return visited;
}

/* ------------------------------------------------------------ generation */

static atomic_uint g_store_gen;

unsigned cg__tune_store_gen(void) { return atomic_load(&g_store_gen); }

void cg__tune_store_changed(void) { atomic_fetch_add(&g_store_gen, 1); }

/* ------------------------------------------------------------ warn once */

static pthread_mutex_t g_warn_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *g_warned;
static size_t g_nwarned, g_capwarned;

void cg__tune_warn_once(const char *path, const char *why) {
    uint64_t h = cg__tune_hash(path, strlen(path), 0);
    pthread_mutex_lock(&g_warn_mu);
    for (size_t i = 0; i < g_nwarned; i++)
        if (g_warned[i] == h) {
            pthread_mutex_unlock(&g_warn_mu);
            return;
        }
    if (g_nwarned == g_capwarned) {
        size_t nc = g_capwarned ? g_capwarned * 2 : 16;
        uint64_t *nw = realloc(g_warned, nc * sizeof *nw);
        if (nw) {
            g_warned = nw;
            g_capwarned = nc;
        }
    }
    if (g_nwarned < g_capwarned) g_warned[g_nwarned++] = h;
    pthread_mutex_unlock(&g_warn_mu);
    cg__log(CG_LOG_WARN, "ignoring tuned-config entry %s: %s", path, why);
}
