/* lru_cpu.c -- the CPU path of the diagonal linear recurrence (docs/lru.md; the semantics:
 * runtime/ref/ref_lru.c), h_t = a_t h_{t-1} + b_t x_t, y_t = h_t, in float32.
 *
 * Memory bound (a few flops per element read): a task is (b, block of W channels: all D
 * up to 1024 when the batch feeds every thread), its state h [W] in a stack buffer; per token the rows a, b, x of the block are read once
 * and y is written once, the loop over the block's channels vectorized. Rows of float32
 * tensors with unit channel stride are used in place; 16-bit rows go through the running
 * ISA variant's row converters (cpu_half.h); other strides (head-major, [B, D, L]) are
 * gathered element by element. Backward: the states h_{t-1} are checkpointed every seg ~
 * sqrt(L) tokens by a forward pass; each segment is recomputed into a buffer (its rows
 * then sit in L2) and walked backwards with g = dy_t + g; da = g h_{t-1}; db = g x;
 * dx = g b; g = a_t g (so g_t = dy_t + a_{t+1} g_{t+1}); dh0 = g.
 * Every channel's arithmetic is the same whatever the block, task order or thread count:
 * results are bitwise deterministic. Threads over the tasks through the context's pool; a
 * small call runs on the calling thread. Pins: threads, block (channels per task).
 * Compiled once (not per ISA). */
#include "cpu_half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LRU_WMAX 1024 /* most channels per task (the stack buffers) */

typedef void (*ld_fn)(float *restrict, const void *restrict, cg_dtype, int64_t);
typedef void (*st_fn)(void *restrict, cg_dtype, const float *restrict, int64_t);

typedef struct lru_run {
    const cg_lru_prob *p;
    int64_t W, nblk;   /* channels per task, blocks per batch entry */
    int64_t seg, nseg; /* backward: tokens per checkpoint segment, segments */
    float *ws;         /* backward: per thread (nseg + seg) * W floats */
    ld_fn ld;
    st_fn st;
} lru_run;

/* Row (b, t, d0 .. d0 + n) of v as float32: in place (float32, unit stride) or into buf. */
static const float *get_row(const lru_run *r, const cg_view *v, int64_t b, int64_t t, int64_t d0, int64_t n,
                            float *buf) {
    const int64_t off = b * v->s[0] + t * v->s[1] + d0 * v->s[2];
    if (v->s[2] == 1) {
        if (v->dt == CG_F32) return (const float *)v->p + off;
        r->ld(buf, cg__vat(v, off), v->dt, n);
        return buf;
    }
    for (int64_t j = 0; j < n; j++) buf[j] = cg__ld1(v->p, off + j * v->s[2], v->dt);
    return buf;
}
/* Row (b, t, d0 ..) of v from src. */
static void put_row(const lru_run *r, const cg_view *v, int64_t b, int64_t t, int64_t d0, int64_t n, const float *src) {
    const int64_t off = b * v->s[0] + t * v->s[1] + d0 * v->s[2];
    if (v->s[2] == 1) {
        if (v->dt == CG_F32) memcpy((float *)v->p + off, src, (size_t)n * sizeof(float));
        else r->st(cg__vat(v, off), v->dt, src, n);
        return;
    }
    for (int64_t j = 0; j < n; j++) cg__st1(v->p, off + j * v->s[2], v->dt, src[j]);
}
/* A state [b, d0 ..] (float32, any stride), 0 when absent; and back. */
static void get_state(const cg_view *v, int64_t b, int64_t d0, int64_t n, float *h) {
    for (int64_t j = 0; j < n; j++) h[j] = v->p ? ((const float *)v->p)[b * v->s[0] + (d0 + j) * v->s[1]] : 0.0f;
}
static void put_state(const cg_view *v, int64_t b, int64_t d0, int64_t n, const float *h) {
    if (!v->p) return;
    for (int64_t j = 0; j < n; j++) ((float *)v->p)[b * v->s[0] + (d0 + j) * v->s[1]] = h[j];
}

/* h = a h + b x over n channels. */
static inline void lru_step(float *restrict h, const float *restrict a, const float *restrict bb,
                            const float *restrict x, int64_t n) {
    for (int64_t j = 0; j < n; j++) h[j] = a[j] * h[j] + bb[j] * x[j];
}

static void fwd_task(void *arg, int64_t task, int tid) {
    (void)tid;
    const lru_run *r = arg;
    const cg_lru_prob *p = r->p;
    const int64_t b = task / r->nblk, d0 = (task % r->nblk) * r->W,
                  n = CG_DIM(p, D) - d0 < r->W ? CG_DIM(p, D) - d0 : r->W;
    float h[LRU_WMAX], ba[LRU_WMAX], bb[LRU_WMAX], bx[LRU_WMAX];
    get_state(&p->h0, b, d0, n, h);
    for (int64_t t = 0; t < CG_DIM(p, L); t++) {
        lru_step(h, get_row(r, &p->a, b, t, d0, n, ba), get_row(r, &p->b, b, t, d0, n, bb),
                 get_row(r, &p->x, b, t, d0, n, bx), n);
        put_row(r, &p->y, b, t, d0, n, h);
    }
    put_state(&p->hT, b, d0, n, h);
}

static void bwd_task(void *arg, int64_t task, int tid) {
    const lru_run *r = arg;
    const cg_lru_prob *p = r->p;
    const int64_t W = r->W, b = task / r->nblk, d0 = (task % r->nblk) * W,
                  n = CG_DIM(p, D) - d0 < W ? CG_DIM(p, D) - d0 : W;
    float *ck = r->ws + (size_t)tid * (size_t)((r->nseg + r->seg) * W), *hs = ck + r->nseg * W;
    float h[LRU_WMAX], g[LRU_WMAX], ba[LRU_WMAX], bb[LRU_WMAX], bx[LRU_WMAX], bd[LRU_WMAX], o[LRU_WMAX];
    get_state(&p->h0, b, d0, n, h);
    for (int64_t t = 0; t < CG_DIM(p, L); t++) { /* checkpoints: h before each segment's first token */
        if (t % r->seg == 0) memcpy(ck + (t / r->seg) * W, h, (size_t)n * sizeof(float));
        lru_step(h, get_row(r, &p->a, b, t, d0, n, ba), get_row(r, &p->b, b, t, d0, n, bb),
                 get_row(r, &p->x, b, t, d0, n, bx), n);
    }
    get_state(&p->dhT, b, d0, n, g);
    for (int64_t s = r->nseg - 1; s >= 0; s--) {
        const int64_t t0 = s * r->seg, t1 = t0 + r->seg < CG_DIM(p, L) ? t0 + r->seg : CG_DIM(p, L);
        memcpy(hs, ck + s * W, (size_t)n * sizeof(float)); /* hs row i: h_{t0 + i - 1} */
        for (int64_t t = t0; t + 1 < t1; t++) {
            float *restrict nx = hs + (t - t0 + 1) * W;
            memcpy(nx, hs + (t - t0) * W, (size_t)n * sizeof(float));
            lru_step(nx, get_row(r, &p->a, b, t, d0, n, ba), get_row(r, &p->b, b, t, d0, n, bb),
                     get_row(r, &p->x, b, t, d0, n, bx), n);
        }
        for (int64_t t = t1 - 1; t >= t0; t--) {
            const float *restrict a = get_row(r, &p->a, b, t, d0, n, ba),
                                  *restrict bv = get_row(r, &p->b, b, t, d0, n, bb),
                                  *restrict x = get_row(r, &p->x, b, t, d0, n, bx),
                                  *restrict dy = get_row(r, &p->dy, b, t, d0, n, bd), *restrict hp = hs + (t - t0) * W;
            for (int64_t j = 0; j < n; j++) g[j] += dy[j];
            for (int64_t j = 0; j < n; j++) o[j] = g[j] * hp[j];
            put_row(r, &p->grad_a, b, t, d0, n, o);
            for (int64_t j = 0; j < n; j++) o[j] = g[j] * x[j];
            put_row(r, &p->grad_b, b, t, d0, n, o);
            for (int64_t j = 0; j < n; j++) o[j] = g[j] * bv[j];
            put_row(r, &p->grad_x, b, t, d0, n, o);
            for (int64_t j = 0; j < n; j++) g[j] *= a[j];
        }
    }
    put_state(&p->grad_h0, b, d0, n, g);
}

/* The threads (pin, else one per 256 KiB of traffic, at most the pool's size and the
 * tasks; a small call stays on the calling thread) and the block (pin, else below). */
static cg_status lru_plan(cg_context *ctx, const cg_cfg *cfg, const char *what, const cg_lru_prob *p, double rows,
                          lru_run *r, cg_pool **pool, int *threads) {
    static const char *const known[] = {"threads", "block"};
    int64_t th = 0, W = 0;
    int pinned = 0, wpinned = 0;
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 2);
    if (!st) st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &th, &pinned);
    if (!st) st = cg__cfg_pin_int(ctx, cfg, "block", 1, LRU_WMAX, what, &W, &wpinned);
    if (st) return st;
    const double bytes = rows * (double)(CG_DIM(p, B) * CG_DIM(p, L) * CG_DIM(p, D)) * 4.0;
    const int want = pinned && th > 0 ? (int)th : (int)(bytes / (256.0 * 1024) + 1);
    *pool = NULL, *threads = 1;
    if (want > 1 && CG_DIM(p, B) * CG_DIM(p, D) > 1) {
        if (!(*pool = cg__ctx_pool(ctx))) return cg__err(ctx, CG_ENOMEM, "%s: no thread pool", what);
        const int size = cg__pool_size(*pool);
        *threads = want > size ? size : want;
    }
    /* the block: whole rows where the batch gives every thread a task (the rows of a
     * token are then one contiguous run per tensor: the streams the prefetchers follow
     * best), else halved (in multiples of 16) until it does */
    if (!wpinned) {
        W = CG_DIM(p, D) < LRU_WMAX ? CG_DIM(p, D) : LRU_WMAX;
        while (W > 16 && CG_DIM(p, B) * ((CG_DIM(p, D) + W - 1) / W) < *threads) W = (W / 2 + 15) / 16 * 16;
    }
    const cg_cpu_isa_ops *isa = cg__cpu_isa_ops();
    r->p = p, r->W = W, r->nblk = (CG_DIM(p, D) + W - 1) / W, r->ld = isa->ld_row, r->st = isa->st_row;
    const int64_t tasks = CG_DIM(p, B) * r->nblk;
    if (*threads > tasks) *threads = (int)tasks;
    if (*threads <= 1) *pool = NULL, *threads = 1;
    return CG_OK;
}

/* One LRU pass over the batch: the forward, or (bwd) the backward with its per-thread
 * checkpoint scratch. */
static cg_status lru_cpu(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, int bwd) {
    const char *what = bwd ? "lru_bwd (cpu)" : "lru_fwd (cpu)";
    lru_run r;
    cg_pool *pool;
    int threads;
    cg_status st = lru_plan(ctx, cfg, what, p, bwd ? 10 : 4, &r, &pool, &threads);
    if (st) return st;
    if (bwd) {
        r.seg = (int64_t)ceil(sqrt((double)CG_DIM(p, L)));
        if (r.seg < 16) r.seg = CG_DIM(p, L) < 16 ? CG_DIM(p, L) : 16;
        r.nseg = (CG_DIM(p, L) + r.seg - 1) / r.seg;
        const size_t per = (size_t)((r.nseg + r.seg) * r.W);
        if (!(r.ws = cg__aligned_alloc(per * (size_t)threads * sizeof(float))))
            return cg__err(ctx, CG_ENOMEM, "%s: out of memory for %d x %zu floats of checkpoints", what, threads, per);
    }
    cg__pool_run(pool, threads, CG_DIM(p, B) * r.nblk, bwd ? bwd_task : fwd_task, &r); /* no pool: on this thread */
    if (bwd) {
        cg__aligned_free(r.ws);
        cg__dispatch_detail(ctx, "lru_bwd block=%lld threads=%d seg=%lld", (long long)r.W, threads, (long long)r.seg);
    } else {
        cg__dispatch_detail(ctx, "lru_fwd block=%lld threads=%d", (long long)r.W, threads);
    }
    return CG_OK;
}

cg_status cg__lru_cpu_fwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    return lru_cpu(ctx, p, cfg, 0);
}

cg_status cg__lru_cpu_bwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    return lru_cpu(ctx, p, cfg, 1);
}

CG_HOST_OP_ENTRY(cpu, lru_fwd, cg_lru_prob, cg__lru_cpu_fwd)
CG_HOST_OP_ENTRY(cpu, lru_bwd, cg_lru_prob, cg__lru_cpu_bwd)
