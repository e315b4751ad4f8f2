/* context.c -- contexts, status codes, messages, config pins. */
#include "internal.h"
#include "env.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>

const char *cg_status_str(cg_status status) {
    switch (status) {
#define CG__STATUS_STR(name, value, text)                                                                              \
    case CG_##name: return text;
        CG_STATUS_MAP(CG__STATUS_STR)
#undef CG__STATUS_STR
    }
    return "unknown status";
}

const char *cg_version(void) { return CG_VERSION_STRING; }

static const char *const k_backend_names[] = {"auto", "cpu", "cuda", "emulate", "ref"};

const char *cg_backend_name(cg_backend backend) {
    if ((unsigned)backend < sizeof k_backend_names / sizeof k_backend_names[0]) return k_backend_names[backend];
    return "unknown";
}

cg_status cg_backend_parse(const char *name, cg_backend *out) {
    if (!name || !out) return CG_EINVAL;
    for (unsigned i = 0; i < sizeof k_backend_names / sizeof k_backend_names[0]; i++) {
        if (strcmp(name, k_backend_names[i]) == 0) {
            *out = (cg_backend)i;
            return CG_OK;
        }
    }
    return CG_EINVAL;
}

cg_tensor cg_tensor_contiguous(void *data, cg_dtype dtype, int ndim, const int64_t *shape) {
    cg_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim < 0 ? 0 : (ndim > CG_MAX_DIMS ? CG_MAX_DIMS : ndim);
    int64_t s = 1;
    for (int i = t.ndim - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.stride[i] = s;
        /* checked: a shape whose strides overflow saturates them at INT64_MAX, which the
         * argument validation refuses with a message (offsets overflow 64 bits) */
        if (__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) s = INT64_MAX;
    }
    return t;
}

/* ------------------------------------------------------------ owner check */

static __thread char t_self;                 /* its address identifies the thread */
static __thread const cg_context *t_refused; /* the context this thread was refused */
static __thread char t_refused_msg[256];

cg_status cg__ctx_enter(cg_context *ctx, const char *fn) {
    uintptr_t me = (uintptr_t)&t_self, was = 0;
    if (atomic_compare_exchange_strong(&ctx->owner, &was, me)) {
        ctx->owner_depth = 1;
        t_refused = NULL;
        return CG_OK;
    }
    if (was == me) { /* nested call from the owner (e.g. tuning on a miss) */
        ctx->owner_depth++;
        return CG_OK;
    }
    t_refused = ctx;
    snprintf(t_refused_msg, sizeof t_refused_msg,
             "%s: the context is in use by another thread right now (a cg_context is not thread-safe: use one "
             "context per thread, or serialize the calls)",
             fn);
    return CG_EINVAL;
}

void cg__ctx_leave(cg_context *ctx) {
    if (--ctx->owner_depth <= 0) {
        ctx->owner_depth = 0;
        atomic_store(&ctx->owner, (uintptr_t)0);
    }
}

cg_status cg__context_new(cg_context **out) {
    if (!out) return CG_EINVAL;
    cg_context *ctx = calloc(1, sizeof *ctx);
    if (ctx) ctx->tune_on_miss = -1;
    *out = ctx;
    return ctx ? CG_OK : CG_ENOMEM;
}

void cg_context_free(cg_context *ctx) {
    if (!ctx) return;
    if (t_refused == ctx) t_refused = NULL;      /* a new context at this address has no refusal */
    for (int i = CG_PART_COUNT - 1; i >= 0; i--) /* each part frees its own state */
        if (ctx->part[i].p && ctx->part[i].free) ctx->part[i].free(ctx);
    cg__pool_free(ctx->pool);
    free(ctx->cache_dir);
    free(ctx);
}

const char *cg_errmsg(const cg_context *ctx) {
    if (!ctx) return "no context";
    if (t_refused == ctx) return t_refused_msg; /* this thread's refused call (cg__ctx_enter) */
    return ctx->errmsg;
}

const char *cg_last_dispatch(const cg_context *ctx) { return ctx ? ctx->dispatch : ""; }

static cg_status set_threads(cg_context *ctx, int threads) {
    if (threads < 0 || threads > CG__MAX_THREADS)
        return cg__err(ctx, CG_EINVAL, "threads: expected 0..%d (0 = all cores), got %d", CG__MAX_THREADS, threads);
    if (threads != ctx->threads) {
        cg__pool_free(ctx->pool); /* resized lazily on next use */
        ctx->pool = NULL;
    }
    ctx->threads = threads;
    return CG_OK;
}

cg_status cg_context_set_threads(cg_context *ctx, int threads) {
    if (!ctx || cg__ctx_enter(ctx, "cg_context_set_threads") != CG_OK) return CG_EINVAL;
    cg_status s = set_threads(ctx, threads);
    cg__ctx_leave(ctx);
    return s;
}

cg_status cg_context_set_tune_on_miss(cg_context *ctx, int on) {
    if (!ctx || cg__ctx_enter(ctx, "cg_context_set_tune_on_miss") != CG_OK) return CG_EINVAL;
    cg_status s = CG_OK;
    if (on < -1 || on > 1)
        s = cg__err(ctx, CG_EINVAL, "on: expected 1, 0 or -1 (follow $CHUNKGEN_TUNE_ON_MISS), got %d", on);
    else ctx->tune_on_miss = on;
    cg__ctx_leave(ctx);
    return s;
}

cg_status cg_context_set_progress(cg_context *ctx, cg_progress_fn fn, void *user) {
    if (!ctx || cg__ctx_enter(ctx, "cg_context_set_progress") != CG_OK) return CG_EINVAL;
    ctx->progress = fn;
    ctx->progress_user = fn ? user : NULL;
    cg__ctx_leave(ctx);
    return CG_OK;
}

static cg_status set_cache_dir(cg_context *ctx, const char *dir) {
    char *copy = NULL;
    if (dir) {
        if (!*dir) return cg__err(ctx, CG_EINVAL, "cache_dir: expected a non-empty path or NULL");
        copy = strdup(dir);
        if (!copy) return cg__err(ctx, CG_ENOMEM, "cache_dir: out of memory");
    }
    free(ctx->cache_dir);
    ctx->cache_dir = copy;
    return CG_OK;
}

cg_status cg_context_set_cache_dir(cg_context *ctx, const char *dir) {
    if (!ctx || cg__ctx_enter(ctx, "cg_context_set_cache_dir") != CG_OK) return CG_EINVAL;
    cg_status s = set_cache_dir(ctx, dir);
    cg__ctx_leave(ctx);
    return s;
}

const char *cg__cache_dir(cg_context *ctx) {
    static __thread char buf[4096];
    if (ctx->cache_dir) return ctx->cache_dir;
    const char *env = cg__env(CG_ENV_CACHE_DIR);
    if (env) return env;
    const char *xdg = cg__env(CG_ENV_XDG_CACHE_HOME);
    if (xdg) {
        snprintf(buf, sizeof buf, "%s/chunkgen", xdg);
        return buf;
    }
    const char *home = cg__env(CG_ENV_HOME);
    snprintf(buf, sizeof buf, "%s/.cache/chunkgen", home ? home : "/tmp");
    return buf;
}

cg_status cg__err(cg_context *ctx, cg_status status, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
        va_end(ap);
    }
    return status;
}

void cg__set_dispatch(cg_context *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->dispatch, sizeof ctx->dispatch, fmt, ap);
    va_end(ap);
}

void cg__dispatch_detail(cg_context *ctx, const char *fmt, ...) {
    size_t n = strlen(ctx->dispatch);
    if (n + 3 >= sizeof ctx->dispatch) return;
    memcpy(ctx->dispatch + n, " | ", 4);
    n += 3;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->dispatch + n, sizeof ctx->dispatch - n, fmt, ap);
    va_end(ap);
}

cg_pool *cg__ctx_pool(cg_context *ctx) {
    if (ctx->pool && cg__pool_stale(ctx->pool)) { /* a forked child: the parent's pool has no workers here */
        cg__pool_free(ctx->pool);
        ctx->pool = NULL;
    }
    if (!ctx->pool) {
        int n = ctx->threads > 0 ? ctx->threads : cg__online_cores();
        ctx->pool = cg__pool_create(n);
    }
    return ctx->pool;
}

/* ------------------------------------------------------------ config pins */

void cg__cfg_text(const cg_cfg *c, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < c->n && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s=%s", i ? "," : "", c->kv[i].key, c->kv[i].val);
}

cg_status cg__cfg_parse(cg_context *ctx, const char *text, cg_cfg *out) {
    memset(out, 0, sizeof *out);
    if (!text) return CG_OK;
    const char *s = text;
    while (*s) {
        while (*s == ',' || *s == ' ') s++;
        if (!*s) break;
        const char *eq = strchr(s, '=');
        const char *end = strchr(s, ',');
        if (!end) end = s + strlen(s);
        if (!eq || eq > end || eq == s)
            return cg__err(ctx, CG_EINVAL, "config: expected key=value pairs separated by commas, got \"%s\"", text);
        size_t klen = (size_t)(eq - s), vlen = (size_t)(end - eq - 1);
        if (out->n == CG_CFG_MAX)
            return cg__err(ctx, CG_EINVAL, "config: more than %d keys in \"%s\"", CG_CFG_MAX, text);
        if (klen >= sizeof out->kv[0].key || vlen >= sizeof out->kv[0].val || vlen == 0)
            return cg__err(ctx, CG_EINVAL, "config: key or value empty or too long in \"%s\"", text);
        memcpy(out->kv[out->n].key, s, klen);
        memcpy(out->kv[out->n].val, eq + 1, vlen);
        for (int i = 0; i < out->n; i++)
            if (strcmp(out->kv[i].key, out->kv[out->n].key) == 0)
                return cg__err(ctx, CG_EINVAL, "config: key \"%s\" given twice", out->kv[i].key);
        out->n++;
        s = end;
    }
    return CG_OK;
}

const char *cg__cfg_str(const cg_cfg *cfg, const char *key, const char *def) {
    if (cfg)
        for (int i = 0; i < cfg->n; i++)
            if (strcmp(cfg->kv[i].key, key) == 0) return cfg->kv[i].val;
    return def;
}

int64_t cg__cfg_int(const cg_cfg *cfg, const char *key, int64_t def) {
    const char *v = cg__cfg_str(cfg, key, NULL);
    if (!v) return def;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end) return def;
    return (int64_t)x;
}

cg_status cg__cfg_only(cg_context *ctx, const cg_cfg *cfg, const char *what, const char *const *known, int n) {
    if (!cfg) return CG_OK;
    for (int i = 0; i < cfg->n; i++) {
        int ok = 0;
        for (int k = 0; k < n; k++) ok |= strcmp(cfg->kv[i].key, known[k]) == 0;
        if (!ok) {
            char list[256] = "";
            for (int k = 0, m = 0; k < n && m < (int)sizeof list; k++)
                m += snprintf(list + m, sizeof list - (size_t)m, "%s%s", k ? ", " : "", known[k]);
            return cg__err(ctx, CG_EINVAL, "%s: unknown config key \"%s\" (expected one of %s)", what, cfg->kv[i].key,
                           list);
        }
    }
    return CG_OK;
}

cg_status cg__cfg_pin_int(cg_context *ctx, const cg_cfg *cfg, const char *key, int64_t lo, int64_t hi, const char *what,
                          int64_t *val, int *set) {
    const char *s = cg__cfg_str(cfg, key, NULL);
    if (set) *set = 0;
    if (!s) return CG_OK;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || end == s || x < lo || x > hi)
        return cg__err(ctx, CG_EINVAL, "%s: config %s=%s: expected an integer in [%lld, %lld]", what, key, s,
                       (long long)lo, (long long)hi);
    *val = x;
    if (set) *set = 1;
    return CG_OK;
}

void *cg__aligned_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? (bytes + 63) / 64 * 64 : 64)) return NULL;
    return p;
}

void cg__aligned_free(void *p) { free(p); }
