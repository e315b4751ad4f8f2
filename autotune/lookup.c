/* lookup.c -- runtime lookup of tuned configs (the config source the autotuner installs).
 *
 * Order: a pin in $CHUNKGEN_CONFIG ("pinned-env"); the exact key ("exact"); the nearest
 * seq bucket with the rest of the key equal ("nearest-bucket", ties go to the larger
 * bucket); else the backend's default ("default", cfg left empty). With
 * CHUNKGEN_TUNE_ON_MISS=1 (or cg_context_set_tune_on_miss) an exact miss tunes that key
 * first ("tuned-on-miss").
 *
 * The store is read once into an in-memory index per cache directory (process-wide,
 * guarded by a mutex) and read again only when the directory's mtime changes (every
 * entry write is a rename into it; checked at most once a second) or this process wrote
 * into it. A lookup after the first is a clock read and a scan of the index. */
#include "autotune.h"
#include "env.h"
#include "ops.h"
#include "cpu/cpu_isa.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ----------------------------------------------------------- env pins
 * CHUNKGEN_CONFIG="k=v,k=v" pins every op; "ssd_fwd:k=v;sscan:k=v" scopes pins to an
 * op (ssd_fwd, ssd_bwd, sscan_fwd, sscan_bwd) or a family (ssd, sscan); the first part
 * that applies wins. */
static cg_status env_pin(cg_context *ctx, cg_op op, cg_cfg *cfg, int *found) {
    *found = 0;
    const char *env = cg__env(CG_ENV_CONFIG);
    if (!env || !*env) return CG_OK;
    char part[CG_CFG_MAX * 66 + 32], why[CG_ERRMSG_CAP];
    const int r = cg__cfg_scope(env, op, part, sizeof part, why, sizeof why);
    if (r < 0) return cg__err(ctx, CG_EINVAL, "CHUNKGEN_CONFIG: %s", why);
    if (r == 0) return CG_OK;
    cg_status st = cg__cfg_parse(ctx, part, cfg);
    if (st != CG_OK) {
        char msg[CG_ERRMSG_CAP];
        snprintf(msg, sizeof msg, "%s", ctx->errmsg);
        return cg__err(ctx, st, "CHUNKGEN_CONFIG: %s", msg);
    }
    *found = 1;
    return CG_OK;
}

/* ------------------------------------------------------------------ index */

typedef struct idx_item {
    char *family; /* key text without the seq bucket */
    int64_t bucket;
    char cfg[CG_TUNE_CFG_TEXT]; /* "" when every candidate failed: the default */
} idx_item;

typedef struct store_index {
    char *dir;
    int loaded;
    int missing;           /* dir did not exist at the last stat() */
    struct timespec mtime; /* of dir when loaded */
    unsigned store_gen;    /* cg__tune_store_gen() when loaded */
    int recheck;           /* dir changed within the mtime granularity of the load */
    double checked;        /* monotonic time of the last stat() */
    idx_item *items;
    int n, cap;
    struct store_index *next;
} store_index;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static store_index *g_indexes;
static atomic_uint g_gen; /* bumped whenever an index is reloaded or invalidated (lookup memo) */

static void index_clear(store_index *x) {
    for (int i = 0; i < x->n; i++) free(x->items[i].family);
    x->n = 0;
    x->loaded = 0;
}

static int add_item(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    store_index *x = arg;
    if (!e) {
        cg__tune_warn_once(path, why);
        return 0;
    }
    if (!e->complete) return 0; /* a tune in progress or interrupted */
    if (x->n == x->cap) {
        int nc = x->cap ? x->cap * 2 : 32;
        idx_item *ni = realloc(x->items, (size_t)nc * sizeof *ni);
        if (!ni) return 1;
        x->items = ni;
        x->cap = nc;
    }
    char fam[1024];
    cg__tune_key_text(&e->key, 0, fam, sizeof fam);
    idx_item *it = &x->items[x->n];
    if (!(it->family = strdup(fam))) return 1;
    it->bucket = e->key.seq_bucket;
    snprintf(it->cfg, sizeof it->cfg, "%s", e->best >= 0 ? e->cand[e->best].cfg : "");
    x->n++;
    return 0;
}

static int ts_eq(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

/* The up-to-date index of dir (g_mu held). NULL when dir does not exist. */
static store_index *index_get(const char *dir) {
    store_index *x = g_indexes;
    while (x && strcmp(x->dir, dir)) x = x->next;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x) return NULL;
        if (!(x->dir = strdup(dir))) {
            free(x);
            return NULL;
        }
        x->next = g_indexes;
        g_indexes = x;
    }
    /* Other processes' writes show within a second; this one's at once (invalidate). */
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    double tnow = (double)mono.tv_sec + 1e-9 * (double)mono.tv_nsec;
    /* (a missing store is looked for again after a second too: no stat per call) */
    /* This process's writes show at once: the store's generation moved. */
    const unsigned sgen = cg__tune_store_gen();
    if (x->store_gen != sgen) x->loaded = x->missing = 0;
    x->store_gen = sgen;
    if ((x->loaded || x->missing) && !x->recheck && tnow - x->checked < 1.0) return x->missing ? NULL : x;
    x->checked = tnow;
    struct stat st;
    if (stat(dir, &st) != 0) {
        index_clear(x);
        x->missing = 1;
        return NULL;
    }
    x->missing = 0;
    if (x->loaded && !x->recheck && ts_eq(st.st_mtim, x->mtime)) return x;
    index_clear(x);
    atomic_fetch_add(&g_gen, 1);
    cg__tune_store_scan(dir, add_item, x);
    x->loaded = 1;
    x->mtime = st.st_mtim;
    /* A change in the same clock tick as this scan would not move the mtime: look again
     * next time while the directory is that fresh. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    x->recheck = (double)(now.tv_sec - st.st_mtim.tv_sec) + 1e-9 * (double)(now.tv_nsec - st.st_mtim.tv_nsec) < 2.0;
    return x;
}

/* Exact, then nearest bucket. Returns CG_SRC_EXACT, CG_SRC_NEAREST or CG_SRC_DEFAULT (a miss). */
static cg_cfg_source index_find(store_index *x, const cg_tune_key *k, char *cfg, size_t cap) {
    char fam[1024];
    cg__tune_key_text(k, 0, fam, sizeof fam);
    int best = -1;
    double bestd = 0;
    for (int i = 0; i < x->n; i++) {
        if (strcmp(x->items[i].family, fam)) continue;
        if (x->items[i].bucket == k->seq_bucket) {
            snprintf(cfg, cap, "%s", x->items[i].cfg);
            return CG_SRC_EXACT;
        }
        double d = fabs(log2((double)x->items[i].bucket) - log2((double)k->seq_bucket));
        if (best < 0 || d < bestd || (d == bestd && x->items[i].bucket > x->items[best].bucket)) {
            best = i;
            bestd = d;
        }
    }
    if (best < 0) return CG_SRC_DEFAULT;
    snprintf(cfg, cap, "%s", x->items[best].cfg);
    return CG_SRC_NEAREST;
}

cg_status cg__tune_lookup_key(cg_context *ctx, const cg_tune_key *k, char *cfg, size_t cap, cg_cfg_source *src) {
    const char *dir = cg__tune_store_dir(ctx);
    cfg[0] = '\0';
    pthread_mutex_lock(&g_mu);
    store_index *x = index_get(dir);
    *src = x ? index_find(x, k, cfg, cap) : CG_SRC_DEFAULT;
    pthread_mutex_unlock(&g_mu);
    return CG_OK;
}

/* ------------------------------------------------------------ tune on miss */

static __thread int t_tuning; /* no lookup-triggered tune inside a tune */

static int env_flag(cg_env_var name) {
    const char *v = cg__env(name);
    return v && (!strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on"));
}

static cg_status tune_now(cg_context *ctx, const char *backend, cg_op op, const cg_tune_shape *s) {
    cg_tune_opts o;
    cg__tune_opts_default(&o);
    o.dir_mask = cg__op_desc(op)->bwd ? 2 : 1;
    const char *b = cg__env(CG_ENV_TUNE_BUDGET);
    o.budget_s = b && *b ? atof(b) : 60.0;
    cg_tune_shape shape = *s;
    snprintf(shape.name, sizeof shape.name, "first call");
    cg_tune_sum sum;
    cg__log(CG_LOG_INFO, "no tuned config for this %s call: tuning it (CHUNKGEN_TUNE_ON_MISS=1)",
            cg__op_desc(op)->name);
    t_tuning = 1;
    cg_status st = cg__tune_run(ctx, backend, &shape, 1, &o, &sum);
    t_tuning = 0;
    return st;
}

/* -------------------------------------------------------------- the hook */

/* This thread's last answer: a warm call asks the same again, and the tuning key, the
 * device key and the index search cost about 2 us of a call. Valid while the store
 * generation is the same (this process's writes bump it at once) and for a quarter of a
 * second (other processes' writes then show within the index's second, plus that). */
typedef struct lookup_memo {
    int valid;
    const cg_context *ctx;
    int threads;
    const void *isa; /* the CPU variant (part of the CPU device key; tests switch it) */
    const char *backend;
    cg_op op;
    int64_t shape[10];
    unsigned gen, sgen; /* g_gen and cg__tune_store_gen() */
    double t;
    char dir[1024];
    char text[CG_TUNE_CFG_TEXT];
    cg_cfg_source lv;
} lookup_memo;
static __thread lookup_memo t_memo;

static void shape_words(const cg_tune_shape *s, int64_t w[10]) {
    const cg_shape *c = &s->shape;
    const uint64_t dt[3] = {(uint64_t)c->dtype, c->half, c->given}; /* what the dtype signature is made of */
    const int64_t v[10] = {(int64_t)cg__tune_shape_family(s) | c->longest << 16,
                           c->dim[CG_SYM_B],
                           cg__tune_shape_seq(s),
                           c->dim[CG_SYM_G],
                           c->dim[CG_SYM_H],
                           c->dim[CG_SYM_DK],
                           c->dim[CG_SYM_DV],
                           c->dim[CG_SYM_D],
                           c->dim[CG_SYM_N],
                           (int64_t)cg__tune_hash(dt, sizeof dt, 0)};
    memcpy(w, v, sizeof v);
}

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The store's answer for (backend, op, s) into text/lv: the memo, else key and index. */
static void lookup_cached(cg_context *ctx, const char *backend, cg_op op, const cg_tune_shape *s, char *text,
                          size_t cap, cg_cfg_source *lv, int *keyed, cg_tune_key *k) {
    lookup_memo *m = &t_memo;
    int64_t w[10];
    shape_words(s, w);
    const char *dir = cg__cache_dir(ctx);
    double now = mono_s();
    unsigned gen = atomic_load(&g_gen), sgen = cg__tune_store_gen();
    const void *isa = cg__cpu_isa_ops();
    if (m->valid && m->ctx == ctx && m->threads == ctx->threads && m->isa == isa && !strcmp(m->backend, backend) &&
        m->op == op && !memcmp(m->shape, w, sizeof w) && m->gen == gen && m->sgen == sgen && now - m->t < 0.25 &&
        !strcmp(m->dir, dir)) {
        size_t n = strnlen(m->text, cap - 1);
        memcpy(text, m->text, n);
        text[n] = '\0';
        *lv = m->lv;
        *keyed = 0;
        return;
    }
    m->valid = 0;
    *keyed = 1;
    text[0] = '\0';
    *lv = CG_SRC_DEFAULT;
    /* No device identity (e.g. no driver): nothing tuned applies. */
    if (cg__tune_key_make(ctx, backend, s, cg__op_desc(op)->bwd, k) != CG_OK) {
        ctx->errmsg[0] = '\0';
        *keyed = -1;
    } else {
        cg__tune_lookup_key(ctx, k, text, cap, lv);
    }
    if (strlen(dir) >= sizeof m->dir || strlen(text) >= sizeof m->text) return;
    *m = (lookup_memo){.valid = 1,
                       .ctx = ctx,
                       .threads = ctx->threads,
                       .isa = isa,
                       .backend = backend,
                       .op = op,
                       .gen = gen,
                       .sgen = sgen,
                       .t = now,
                       .lv = *lv};
    memcpy(m->shape, w, sizeof w);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    snprintf(m->text, sizeof m->text, "%s", text);
}

static cg_status tuned_lookup(cg_context *ctx, const char *backend, cg_op op, const void *prob, cg_cfg *cfg,
                              cg_cfg_source *src) {
    int pinned;
    cg_status st = env_pin(ctx, op, cfg, &pinned);
    if (st != CG_OK) return st;
    if (pinned) {
        *src = CG_SRC_PINNED_ENV;
        return CG_OK;
    }
    memset(cfg, 0, sizeof *cfg);
    *src = CG_SRC_DEFAULT;
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda") && strcmp(backend, "emulate")) return CG_OK;
    cg_tune_shape s;
    cg__tune_shape_of(op, prob, &s);
    cg_tune_key k;
    char text[CG_TUNE_CFG_TEXT];
    cg_cfg_source lv;
    int keyed;
    lookup_cached(ctx, backend, op, &s, text, sizeof text, &lv, &keyed, &k);
    if (keyed < 0) return CG_OK;
    const int on_miss = ctx->tune_on_miss >= 0 ? ctx->tune_on_miss : env_flag(CG_ENV_TUNE_ON_MISS);
    if (lv != CG_SRC_EXACT && !t_tuning && on_miss && !s.shape.longest) { /* no varlen tuner problems yet */
        t_memo.valid = 0;
        if (!keyed && cg__tune_key_make(ctx, backend, &s, cg__op_desc(op)->bwd, &k) != CG_OK) {
            ctx->errmsg[0] = '\0';
            return CG_OK;
        }
        if (tune_now(ctx, backend, op, &s) == CG_OK) {
            cg_cfg_source lv2;
            cg__tune_lookup_key(ctx, &k, text, sizeof text, &lv2);
            if (lv2 == CG_SRC_EXACT) lv = CG_SRC_TUNED_ON_MISS;
        } else {
            cg__log(CG_LOG_WARN, "tune on miss failed (%s); using %s", ctx->errmsg, cg__cfg_source_name(lv));
        }
        ctx->errmsg[0] = '\0';
    }
    if (lv == CG_SRC_DEFAULT) return CG_OK;
    if (cg__cfg_parse(ctx, text, cfg) != CG_OK) { /* validated on read: cannot happen */
        memset(cfg, 0, sizeof *cfg);
        ctx->errmsg[0] = '\0';
        return CG_OK;
    }
    *src = lv;
    return CG_OK;
}

cg_status cg__tune_lookup_shape(cg_context *ctx, const char *backend, cg_op op, const cg_tune_shape *s, char *cfg,
                                size_t cap, cg_cfg_source *src, cg_tune_key *k) {
    cfg[0] = '\0';
    *src = CG_SRC_DEFAULT;
    cg_status st = cg__tune_key_make(ctx, backend, s, cg__op_desc(op)->bwd, k);
    if (st != CG_OK) return st; /* no device identity here: nothing tuned applies */
    cg_cfg pin;
    int pinned;
    if ((st = env_pin(ctx, op, &pin, &pinned)) != CG_OK) return st;
    if (pinned) {
        cg__cfg_text(&pin, cfg, cap);
        *src = CG_SRC_PINNED_ENV;
        return CG_OK;
    }
    return cg__tune_lookup_key(ctx, k, cfg, cap, src);
}

/* The autotuner's config source: $CHUNKGEN_CONFIG pins, then the store, then tune on miss. */
const cg_config_source cg__tune_config_source = {"autotune", tuned_lookup};
