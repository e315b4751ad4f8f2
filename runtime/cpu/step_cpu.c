/* step_cpu.c -- the CPU path of the decode steps (issue #36; the gated delta rule's below
 * SSD's, with the same column blocks): per batch entry, T (L) tokens
 * of the recurrence from a cache slot's state, written back in place (internal.h,
 * cg_ssd_step_prob / cg_sscan_step_prob; the semantics: runtime/ref/ref_step.c).
 *
 * Memory bound: each task reads its part of the state once from the cache, runs the
 * tokens on a float32 copy in a stack buffer (L1/L2), and writes it once per destination.
 * SSD: a task is (b, h, block of dv columns), the state block [dk, bw] (columns are
 * independent); per token the row update S = a S + k_i v and the output o += q_i S are
 * loops over the block's columns that the compiler vectorizes. Selective scan: a task is
 * (b, block of channels), per channel the state [N] and its loop over n (the exp is
 * cg__ssd_exp, branch-free, so that it vectorizes). Rows of 16-bit tensors and caches
 * are widened and narrowed by the running ISA variant's row converters (cpu_half.h).
 * Threads over the tasks through the context's pool; a small call runs on the calling
 * thread. No allocation per call. Pins: threads, block (SSD columns / scan channels). */
#include "ssd_cpu.h" /* cg__ssd_exp; cpu_half.h, cpu_isa.h, internal.h */

#include <math.h>
#include <string.h>

#define STEP_BUF 16384 /* floats of a task's state block on the stack (64 KiB) */
#define STEP_ROW 4096  /* floats of a token row (q, k; v, o per block; sscan's B, C, A) */

typedef void (*ld_fn)(float *restrict, const void *restrict, cg_dtype, int64_t);
typedef void (*st_fn)(void *restrict, cg_dtype, const float *restrict, int64_t);

/* The slot an index names, or -1 (padding, no write, or out of range: device indices are
 * not checked by validation). */
static int64_t slot_of(const cg_view *v, int64_t b, int64_t t, int64_t S) {
    const int64_t x = cg__idx_at(v, b, t);
    return x >= 0 && x < S ? x : -1;
}

/* The address of element (i0, i1, i2, i3) of view v. */
static void *at4(const cg_view *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return cg__vat(v, i0 * v->s[0] + i1 * v->s[1] + i2 * v->s[2] + i3 * v->s[3]);
}

/* The threads a call uses: the pin, else about one per 256 KiB of state traffic (a small
 * call stays on the calling thread: waking the pool costs more than it saves). */
static cg_status step_threads(cg_context *ctx, const cg_cfg *cfg, const char *what, double bytes, int64_t tasks,
                              int64_t *block, int64_t block_max, cg_pool **pool, int *threads) {
    static const char *const known[] = {"threads", "block"};
    int64_t th = 0;
    int pinned = 0;
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 2);
    if (!st) st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &th, &pinned);
    if (!st) st = cg__cfg_pin_int(ctx, cfg, "block", 1, block_max, what, block, NULL);
    if (st) return st;
    int want = pinned ? (int)th : (int)(bytes / (256.0 * 1024) + 1);
    if (want == 1 || tasks <= 1) {
        *pool = NULL, *threads = 1;
        return CG_OK;
    }
    if (!(*pool = cg__ctx_pool(ctx))) return cg__err(ctx, CG_ENOMEM, "%s: no thread pool", what);
    *threads = want <= 0 || want > cg__pool_size(*pool) ? cg__pool_size(*pool) : want;
    return CG_OK;
}

/* The column blocks of a [dk, dv] state per (b, h) (SSD's and the gated delta rule's
 * columns are independent) and the threads: the widest block that fits the stack buffer,
 * narrower (multiples of 16) when there are fewer tasks than about two per thread; the
 * pin `block` wins. Logs the choice. */
static cg_status cols_plan(cg_context *ctx, const cg_cfg *cfg, const char *what, int64_t bh, int64_t dk, int64_t dv,
                           cg_dtype cdt, int64_t *bw_out, cg_pool **pool, int *threads) {
    int64_t bmax = STEP_BUF / dk;
    bmax = bmax > STEP_ROW ? STEP_ROW : bmax;
    int64_t bw = dv < bmax ? dv : bmax, pin = 0;
    const double bytes = 2.0 * (double)bh * (double)(dk * dv) * (double)cg__dt_bytes(cdt);
    cg_status st = step_threads(ctx, cfg, what, bytes, bh * ((dv + 15) / 16), &pin, bmax, pool, threads);
    if (st) return st;
    if (pin) bw = pin < dv ? pin : dv;
    else if (*threads > 1 && bh < 2 * *threads) {
        int64_t split = (2 * *threads + bh - 1) / bh;
        int64_t w = ((dv + split - 1) / split + 15) / 16 * 16;
        if (w < bw) bw = w;
    }
    *bw_out = bw;
    cg__dispatch_detail(ctx, " %s block=%lld threads=%d", what, (long long)bw, *threads);
    return CG_OK;
}

/* The state block [dk, w] of slot x, head h, columns j0.. of a [S, H, dk, dv] cache:
 * opened into buf (rows bw apart, *rs = bw), or, when direct (a float32 cache, one token,
 * no dst_indices: the block goes back where it came from), the cache's own memory
 * (*rs = its row stride), which saves a copy in and out. */
static float *block_open(const cg_view *c, ld_fn ld, float *buf, int64_t bw, int64_t x, int64_t h, int64_t j0,
                         int64_t w, int64_t dk, int direct, int64_t *rs) {
    if (direct) return *rs = c->s[2], (float *)at4(c, x, h, 0, j0);
    for (int64_t i = 0; i < dk; i++) ld(buf + i * bw, at4(c, x, h, i, j0), c->dt, w);
    return *rs = bw, buf;
}
/* The block S (rows rs apart) into slot x (nothing when direct: it is there). */
static void block_store(const cg_view *c, st_fn st, const float *S, int64_t rs, int64_t x, int64_t h, int64_t j0,
                        int64_t w, int64_t dk, int direct) {
    if (direct) return;
    for (int64_t i = 0; i < dk; i++) st(at4(c, x, h, i, j0), c->dt, S + i * rs, w);
}

/* ------------------------------------------------------------------- SSD */

typedef struct ssd_run {
    const cg_ssd_step_prob *p;
    int64_t bw, nblk;
    ld_fn ld;
    st_fn st;
} ssd_run;

static void ssd_task(void *arg, int64_t task, int tid) {
    (void)tid;
    const ssd_run *r = arg;
    const cg_ssd_step_prob *p = r->p;
    const int64_t blk = task % r->nblk, bh = task / r->nblk, b = bh / p->H, h = bh % p->H;
    const int64_t j0 = blk * r->bw, w = p->dv - j0 < r->bw ? p->dv - j0 : r->bw, dk = p->dk;
    const int64_t src = slot_of(&p->idx, b, 0, p->S), g = h / (p->H / p->G);
    if (src < 0) { /* padding: zeros (all-zero bits in every float dtype) */
        for (int64_t t = 0; t < p->T; t++) memset(at4(&p->o, b, t, h, j0), 0, (size_t)(w * cg__dt_bytes(p->o.dt)));
        return;
    }
    float Sb[STEP_BUF], q[STEP_ROW], k[STEP_ROW], v[STEP_ROW], o[STEP_ROW];
    const int direct = p->cache.dt == CG_F32 && p->T == 1 && !p->dst.p;
    int64_t bw;
    float *S = block_open(&p->cache, r->ld, Sb, r->bw, src, h, j0, w, dk, direct, &bw);
    for (int64_t t = 0; t < p->T; t++) {
        const float a = expf(((const float *)p->la.p)[b * p->la.s[0] + t * p->la.s[1] + h * p->la.s[2]]);
        r->ld(q, at4(&p->q, b, t, g, 0), p->q.dt, dk);
        r->ld(k, at4(&p->k, b, t, g, 0), p->k.dt, dk);
        r->ld(v, at4(&p->v, b, t, h, j0), p->v.dt, w);
        for (int64_t j = 0; j < w; j++) o[j] = 0.0f;
        for (int64_t i = 0; i < dk; i++) {
            float *restrict s = S + i * bw;
            const float ki = k[i], qi = q[i];
            for (int64_t j = 0; j < w; j++) {
                s[j] = a * s[j] + ki * v[j];
                o[j] += qi * s[j];
            }
        }
        r->st(at4(&p->o, b, t, h, j0), p->o.dt, o, w);
        const int64_t dst = p->dst.p ? slot_of(&p->dst, b, t, p->S) : t == p->T - 1 ? src : -1;
        if (dst >= 0) block_store(&p->cache, r->st, S, bw, dst, h, j0, w, dk, direct);
    }
}

cg_status cg__ssd_step_cpu(cg_context *ctx, const cg_ssd_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const char *what = "cpu ssd step";
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math)", what,
                       cg__dtype_name(p->dtype));
    if (p->dk > STEP_ROW || p->dk * 8 > STEP_BUF)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dk = %lld but the CPU path takes dk <= %d", what, (long long)p->dk,
                       STEP_BUF / 8);
    const cg_cpu_isa_ops *isa = cg__cpu_isa_ops();
    ssd_run r = {p, 0, 0, isa->ld_row, isa->st_row};
    cg_pool *pool;
    int threads;
    cg_status st = cols_plan(ctx, cfg, what, p->B * p->H, p->dk, p->dv, p->cache.dt, &r.bw, &pool, &threads);
    if (st) return st;
    r.nblk = (p->dv + r.bw - 1) / r.bw;
    cg__pool_run(pool, threads, p->B * p->H * r.nblk, ssd_task, &r);
    return CG_OK;
}

/* ------------------------------------------------------- selective scan */

typedef struct sscan_run {
    const cg_sscan_step_prob *p;
    int64_t bd, nblk;
    ld_fn ld;
    st_fn st;
} sscan_run;

static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static void sscan_task(void *arg, int64_t task, int tid) {
    (void)tid;
    const sscan_run *r = arg;
    const cg_sscan_step_prob *p = r->p;
    const int64_t b = task / r->nblk, d0 = task % r->nblk * r->bd, N = p->N;
    const int64_t d1 = d0 + r->bd < p->D ? d0 + r->bd : p->D, dpg = p->D / p->G;
    const int64_t src = slot_of(&p->idx, b, 0, p->S);
    if (src < 0) { /* padding */
        for (int64_t t = 0; t < p->L; t++)
            for (int64_t d = d0; d < d1; d++) memset(at4(&p->y, b, t, d, 0), 0, (size_t)cg__dt_bytes(p->y.dt));
        return;
    }
    float h[STEP_ROW], A[STEP_ROW], Bv[STEP_ROW], Cv[STEP_ROW];
    for (int64_t d = d0; d < d1; d++) {
        const int64_t g = d / dpg;
        const float Dd = p->Dv.p ? ((const float *)p->Dv.p)[d * p->Dv.s[0]] : 0.0f;
        const float bias = p->dbias.p ? ((const float *)p->dbias.p)[d * p->dbias.s[0]] : 0.0f;
        for (int64_t n = 0; n < N; n++) A[n] = ((const float *)p->A.p)[d * p->A.s[0] + n * p->A.s[1]];
        r->ld(h, at4(&p->cache, src, d, 0, 0), p->cache.dt, N);
        for (int64_t t = 0; t < p->L; t++) {
            float dt = cg__ld1(at4(&p->delta, b, t, d, 0), 0, p->delta.dt) + bias;
            if (p->softplus) dt = softplusf(dt);
            const float x = cg__ld1(at4(&p->x, b, t, d, 0), 0, p->x.dt), dtx = dt * x;
            const cg_view *Bm = &p->Bm, *Cm = &p->Cm;
            if (Bm->s[3] == 1 && Bm->dt == CG_F32) memcpy(Bv, at4(Bm, b, t, g, 0), (size_t)N * sizeof(float));
            else for (int64_t n = 0; n < N; n++) Bv[n] = cg__ld1(Bm->p, b * Bm->s[0] + t * Bm->s[1] + g * Bm->s[2] + n * Bm->s[3], Bm->dt);
            if (Cm->s[3] == 1 && Cm->dt == CG_F32) memcpy(Cv, at4(Cm, b, t, g, 0), (size_t)N * sizeof(float));
            else for (int64_t n = 0; n < N; n++) Cv[n] = cg__ld1(Cm->p, b * Cm->s[0] + t * Cm->s[1] + g * Cm->s[2] + n * Cm->s[3], Cm->dt);
            float y = 0.0f;
            for (int64_t n = 0; n < N; n++) {
                h[n] = cg__ssd_exp(dt * A[n]) * h[n] + dtx * Bv[n];
                y += Cv[n] * h[n];
            }
            y += Dd * x;
            if (p->z.p) {
                const float z = cg__ld1(at4(&p->z, b, t, d, 0), 0, p->z.dt);
                y *= z / (1.0f + expf(-z));
            }
            cg__st1(at4(&p->y, b, t, d, 0), 0, p->y.dt, y);
            const int64_t dst = p->dst.p ? slot_of(&p->dst, b, t, p->S) : t == p->L - 1 ? src : -1;
            if (dst >= 0) r->st(at4(&p->cache, dst, d, 0, 0), p->cache.dt, h, N);
        }
    }
}

cg_status cg__sscan_step_cpu(cg_context *ctx, const cg_sscan_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const char *what = "cpu sscan step";
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math)", what,
                       cg__dtype_name(p->dtype));
    if (p->N > STEP_ROW)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: N = %lld but the CPU path takes N <= %d", what, (long long)p->N,
                       STEP_ROW);
    const cg_cpu_isa_ops *isa = cg__cpu_isa_ops();
    sscan_run r = {p, 0, 0, isa->ld_row, isa->st_row};
    cg_pool *pool;
    int threads;
    const double bytes = 2.0 * (double)(p->B * p->D) * (double)p->N * (double)cg__dt_bytes(p->cache.dt);
    int64_t bd = 0;
    cg_status st = step_threads(ctx, cfg, what, bytes, p->B * ((p->D + 63) / 64), &bd, p->D, &pool, &threads);
    if (st) return st;
    if (!bd) { /* about four tasks per thread, at least 64 channels each, at most 1024 */
        bd = (p->B * p->D + 4 * threads - 1) / (4 * threads) / (p->B > 0 ? p->B : 1);
        bd = bd < 64 ? 64 : bd > 1024 ? 1024 : bd;
        if (bd > p->D) bd = p->D;
    }
    r.bd = bd;
    r.nblk = (p->D + bd - 1) / bd;
    cg__dispatch_detail(ctx, " cpu sscan step block=%lld threads=%d", (long long)bd, threads);
    cg__pool_run(pool, threads, p->B * r.nblk, sscan_task, &r);
    return CG_OK;
}

/* ------------------------------------------------------- gated delta rule
 * As SSD's (a task per (b, h, block of dv columns), the block [dk, bw] on the stack), per
 * token: p = S^T k (a pass reading the block), u = beta (v - exp(g) p), then one pass
 * S = exp(g) S + k u^T, o += q S; q, k normalised (use_qk_l2norm) and q scaled first. */

typedef struct gdr_run {
    const cg_gdr_step_prob *p;
    int64_t bw, nblk;
    ld_fn ld;
    st_fn st;
} gdr_run;

/* x[0, dk) times mul, divided by its norm sqrt(x.x + 1e-6) when l2 (gdr_fwd's L2 norm). */
static void gdr_norm(float *x, int64_t dk, int l2, float mul) {
    if (l2) {
        float ss = 0.0f;
        for (int64_t i = 0; i < dk; i++) ss += x[i] * x[i];
        mul /= sqrtf(ss + 1e-6f);
    }
    for (int64_t i = 0; i < dk; i++) x[i] *= mul;
}

static void gdr_task(void *arg, int64_t task, int tid) {
    (void)tid;
    const gdr_run *r = arg;
    const cg_gdr_step_prob *p = r->p;
    const int64_t blk = task % r->nblk, bh = task / r->nblk, b = bh / p->H, h = bh % p->H;
    const int64_t j0 = blk * r->bw, w = p->dv - j0 < r->bw ? p->dv - j0 : r->bw, dk = p->dk;
    const int64_t src = slot_of(&p->idx, b, 0, p->S), g = h / (p->H / p->G);
    if (src < 0) { /* padding: zeros (all-zero bits in every float dtype) */
        for (int64_t t = 0; t < p->T; t++) memset(at4(&p->o, b, t, h, j0), 0, (size_t)(w * cg__dt_bytes(p->o.dt)));
        return;
    }
    float Sb[STEP_BUF], q[STEP_ROW], k[STEP_ROW], u[STEP_ROW], o[STEP_ROW];
    const int direct = p->cache.dt == CG_F32 && p->T == 1 && !p->dst.p;
    int64_t bw;
    float *S = block_open(&p->cache, r->ld, Sb, r->bw, src, h, j0, w, dk, direct, &bw);
    for (int64_t t = 0; t < p->T; t++) {
        const float a = expf(((const float *)p->g.p)[b * p->g.s[0] + t * p->g.s[1] + h * p->g.s[2]]);
        const float beta = cg__ld1(at4(&p->beta, b, t, h, 0), 0, p->beta.dt);
        r->ld(q, at4(&p->q, b, t, g, 0), p->q.dt, dk);
        r->ld(k, at4(&p->k, b, t, g, 0), p->k.dt, dk);
        gdr_norm(q, dk, p->l2norm, (float)p->scale);
        gdr_norm(k, dk, p->l2norm, 1.0f);
        r->ld(u, at4(&p->v, b, t, h, j0), p->v.dt, w);
        for (int64_t j = 0; j < w; j++) o[j] = 0.0f;
        for (int64_t i = 0; i < dk; i++) { /* o as the accumulator of S^T k */
            const float *restrict s = S + i * bw;
            const float ki = k[i];
            for (int64_t j = 0; j < w; j++) o[j] += ki * s[j];
        }
        for (int64_t j = 0; j < w; j++) u[j] = beta * (u[j] - a * o[j]), o[j] = 0.0f;
        for (int64_t i = 0; i < dk; i++) {
            float *restrict s = S + i * bw;
            const float ki = k[i], qi = q[i];
            for (int64_t j = 0; j < w; j++) {
                s[j] = a * s[j] + ki * u[j];
                o[j] += qi * s[j];
            }
        }
        r->st(at4(&p->o, b, t, h, j0), p->o.dt, o, w);
        const int64_t dst = p->dst.p ? slot_of(&p->dst, b, t, p->S) : t == p->T - 1 ? src : -1;
        if (dst >= 0) block_store(&p->cache, r->st, S, bw, dst, h, j0, w, dk, direct);
    }
}

cg_status cg__gdr_step_cpu(cg_context *ctx, const cg_gdr_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const char *what = "cpu gdr step";
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math)", what,
                       cg__dtype_name(p->dtype));
    if (p->dk > STEP_ROW || p->dk * 8 > STEP_BUF)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dk = %lld but the CPU path takes dk <= %d", what, (long long)p->dk,
                       STEP_BUF / 8);
    const cg_cpu_isa_ops *isa = cg__cpu_isa_ops();
    gdr_run r = {p, 0, 0, isa->ld_row, isa->st_row};
    cg_pool *pool;
    int threads;
    cg_status st = cols_plan(ctx, cfg, what, p->B * p->H, p->dk, p->dv, p->cache.dt, &r.bw, &pool, &threads);
    if (st) return st;
    r.nblk = (p->dv + r.bw - 1) / r.bw;
    cg__pool_run(pool, threads, p->B * p->H * r.nblk, gdr_task, &r);
    return CG_OK;
}

CG_HOST_OP_ENTRY(cpu, ssd_step, cg_ssd_step_prob, cg__ssd_step_cpu)
CG_HOST_OP_ENTRY(cpu, sscan_step, cg_sscan_step_prob, cg__sscan_step_cpu)
CG_HOST_OP_ENTRY(cpu, gdr_step, cg_gdr_step_prob, cg__gdr_step_cpu)
