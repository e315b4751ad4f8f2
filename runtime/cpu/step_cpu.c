/* step_cpu.c -- the CPU path of the decode steps (issue #36; the gated delta rule's below
 * SSD's, with the same column blocks): per batch entry, T (L) tokens
 * of the recurrence from a cache slot's state, written back in place (internal.h,
 * cg_ssd_step_prob / cg_sscan_step_prob; the semantics: runtime/ref/ref_step.c).
 *
 * Memory bound: each task reads its part of the state once from the cache, runs the
 * tokens on a float32 copy in a stack buffer (L1/L2), and writes it once per destination.
 * Built once per ISA variant (cpu_isa.h; the entry points cg__*_step_cpu are in cpu_isa.c).
 * SSD and the gated delta rule (one task function, cols_task, and a token function each):
 * a task is (b, h, block of dv columns), the state block [dk, bw] (columns are
 * independent); per token the row update S = a S + k_i v and the output o += q_i S are
 * loops over the block's columns, vectorized at the variant's width. Selective scan: a
 * task is (b, block of channels), per channel the state [N] (padded to 16 lanes) updated
 * in the variant's own vectors (cpu_vmath.h's sv_exp2, the chunked scan's 2^x lane for
 * lane), 64 channels ahead prefetched, its C.h partial sums added across the lanes for
 * SV channels at once by shuffles; per token the channels' softplus and z gate 16 lanes at
 * a time. Rows of 16-bit tensors and caches
 * are widened and narrowed by the running ISA variant's row converters (cpu_half.h).
 * Threads over the tasks through the context's pool; a small call runs on the calling
 * thread. No allocation per call. Pins: threads, block (SSD columns / scan channels). */
#include "ssd_cpu.h" /* cpu_half.h, cpu_isa.h, internal.h; built once per ISA variant */

/* The lane loops below are 16 floats wide: with AVX-512, let GCC use zmm registers. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

#include "cpu_vmath.h" /* ss_exp2, ss_softplus, ss_sigmoid */

#include <math.h>
#include <string.h>

#define SS_AHEAD 64 /* channels the selective scan prefetches ahead */
#define SS_CH 64    /* channels of a selective-scan sub-block (a multiple of SW) */
#define SW 16       /* lanes of the selective scan's vector loops: one AVX-512 vector of floats */

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
 * pin `block` wins. Logs the choice. First refuses what the CPU steps do not run: math other
 * than CG_F32 (math: the call's dtype), dk past the stack buffer. */
static cg_status cols_plan(cg_context *ctx, const cg_cfg *cfg, const char *what, cg_dtype math, int64_t bh, int64_t dk,
                           int64_t dv, cg_dtype cdt, int64_t *bw_out, cg_pool **pool, int *threads) {
    if (math != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math)", what,
                       cg__dtype_name(math));
    if (dk > STEP_ROW || dk * 8 > STEP_BUF)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dk = %lld but the CPU path takes dk <= %d", what, (long long)dk,
                       STEP_BUF / 8);
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

/* A column-block step's run (SSD, the gated delta rule): a task per (b, h, block of dv
 * columns) opens the block [dk, w] of its slot's state, runs the op's token function for
 * each token, stores the output row and the block where the token says. */
typedef struct cols_run cols_run;
/* Token t of entry b, head h (q/k group g), columns [j0, j0 + w): the block S (rows rs
 * apart) updated in place, the output row o[0, w) written. */
typedef void (*cols_token)(const cols_run *r, int64_t b, int64_t t, int64_t h, int64_t g, int64_t j0, int64_t w,
                           float *S, int64_t rs, float *o);
struct cols_run {
    const void *p; /* the op's problem, for its token function */
    cols_token token;
    int64_t T, H, G, S, dk, dv, bw, nblk;
    const cg_view *cache, *idx, *dst, *o;
    ld_fn ld;
    st_fn st;
};

static void cols_task(void *arg, int64_t task, int tid) {
    (void)tid;
    const cols_run *r = arg;
    const int64_t T = r->T, H = r->H, dk = r->dk;
    const int64_t blk = task % r->nblk, bh = task / r->nblk, b = bh / H, h = bh % H;
    const int64_t j0 = blk * r->bw, w = r->dv - j0 < r->bw ? r->dv - j0 : r->bw;
    const int64_t src = slot_of(r->idx, b, 0, r->S), g = h / (H / r->G);
    if (src < 0) { /* padding: zeros (all-zero bits in every float dtype) */
        for (int64_t t = 0; t < T; t++) memset(at4(r->o, b, t, h, j0), 0, (size_t)(w * cg__dt_bytes(r->o->dt)));
        return;
    }
    float Sb[STEP_BUF], o[STEP_ROW];
    const int direct = r->cache->dt == CG_F32 && T == 1 && !r->dst->p;
    int64_t rs;
    float *S = block_open(r->cache, r->ld, Sb, r->bw, src, h, j0, w, dk, direct, &rs);
    for (int64_t t = 0; t < T; t++) {
        r->token(r, b, t, h, g, j0, w, S, rs, o);
        r->st(at4(r->o, b, t, h, j0), r->o->dt, o, w);
        const int64_t dst = r->dst->p ? slot_of(r->dst, b, t, r->S) : t == T - 1 ? src : -1;
        if (dst >= 0) block_store(r->cache, r->st, S, rs, dst, h, j0, w, dk, direct);
    }
}

/* An op's call (p its problem, sh its shape: B, T, H, G, S, dk, dv; token its token function;
 * v = its cache, state_indices, dst_indices and output views): plans the blocks and threads
 * (cols_plan) and runs the tasks. */
static cg_status cols_step(cg_context *ctx, const cg_cfg *cfg, const char *what, cg_dtype math, const void *p,
                           const cg_shape *sh, cols_token token, const cg_view *const v[4]) {
    const int64_t *d = sh->dim, B = d[CG_SYM_B];
    cols_run r = {p, token, d[CG_SYM_T], d[CG_SYM_H], d[CG_SYM_G], d[CG_SYM_S], d[CG_SYM_DK],   d[CG_SYM_DV],
                  0, 0,     v[0],        v[1],        v[2],        v[3],        cg__cpu_ld_row, cg__cpu_st_row};
    cg_pool *pool;
    int threads = 1;
    cg_status st = cols_plan(ctx, cfg, what, math, B * r.H, r.dk, r.dv, r.cache->dt, &r.bw, &pool, &threads);
    if (st) return st;
    r.nblk = (r.dv + r.bw - 1) / r.bw;
    cg__pool_run(pool, threads, B * r.H * r.nblk, cols_task, &r);
    return CG_OK;
}

/* S = a S + k v^T over the block's dk rows (rs apart) and w columns, and o = q S. */
static void cols_rank1(float *S, int64_t rs, int64_t dk, int64_t w, float a, const float *restrict k,
                       const float *restrict q, const float *restrict v, float *restrict o) {
    for (int64_t j = 0; j < w; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        float *restrict s = S + i * rs;
        const float ki = k[i], qi = q[i];
        for (int64_t j = 0; j < w; j++) {
            s[j] = a * s[j] + ki * v[j];
            o[j] += qi * s[j];
        }
    }
}

/* The token's q and k rows (group g) into q, k; returns its decay exp(gate[b, t, h]) (a
 * float32 [B, T, H] view). */
static float cols_qk(const cols_run *r, const cg_view *gate, const cg_view *qv, const cg_view *kv, int64_t b, int64_t t,
                     int64_t h, int64_t g, float *q, float *k) {
    r->ld(q, at4(qv, b, t, g, 0), qv->dt, r->dk);
    r->ld(k, at4(kv, b, t, g, 0), kv->dt, r->dk);
    return expf(((const float *)gate->p)[b * gate->s[0] + t * gate->s[1] + h * gate->s[2]]);
}

/* ------------------------------------------------------------------- SSD */

static void ssd_token(const cols_run *r, int64_t b, int64_t t, int64_t h, int64_t g, int64_t j0, int64_t w, float *S,
                      int64_t rs, float *o) {
    const cg_ssd_step_prob *p = r->p;
    float q[STEP_ROW], k[STEP_ROW], v[STEP_ROW];
    const float a = cols_qk(r, &p->la, &p->q, &p->k, b, t, h, g, q, k);
    r->ld(v, at4(&p->v, b, t, h, j0), p->v.dt, w);
    cols_rank1(S, rs, r->dk, w, a, k, q, v, o);
}

cg_status cg__ssd_step_cpu(cg_context *ctx, const cg_ssd_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const cg_view *const v[4] = {&p->cache, &p->idx, &p->dst, &p->o};
    return cols_step(ctx, cfg, "cpu ssd step", p->dtype, p, &p->shape, ssd_token, v);
}

/* ------------------------------------------------------- selective scan */

typedef struct sscan_run {
    const cg_sscan_step_prob *p;
    int64_t bd, nblk, cw; /* channels per task, tasks per batch entry, channels per sub-block */
    ld_fn ld;
    st_fn st;
    ss_lim lim; /* cpu_vmath.h's clamp ranges, run-time values on purpose (see there) */
} sscan_run;

/* Lane sums by shuffles of the variant's vectors (cpu_vmath.h's sv_f, SV lanes): GCC's
 * __builtin_shuffle or clang's __builtin_shufflevector. */
typedef int32_t ss_mask __attribute__((vector_size(SV * 4)));
#if defined(__clang__)
#define SS_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SS_SHUF(a, b, ...) __builtin_shuffle(a, b, (ss_mask){__VA_ARGS__})
#endif
/* One stage: for i < h, r[i] = the halves of r[i]'s and r[i + h]'s partial sums side by side,
 * added (lo: the first halves of each 2s-lane segment of a then b, hi: the second halves). */
#define SS_LIST(...) __VA_ARGS__
#define SS_STAGE(h, lo, hi)                                                                                            \
    for (int i = 0; i < (h); i++) r[i] = SS_SHUF(r[i], r[i + (h)], SS_LIST lo) + SS_SHUF(r[i], r[i + (h)], SS_LIST hi);

/* y[c] = the sum of the SV lanes of row c of acc [SV][SV], all rows at once: log2(SV) stages
 * of the transpose's shuffles (2 (SV - 1) in all), each row by the same tree wherever it lies
 * in the block, so that a channel's sum does not depend on its neighbours. */
static void sscan_lane_sums(float *restrict y, const float *restrict acc) {
    sv_f r[SV];
    for (int i = 0; i < SV; i++) r[i] = *(const sv_f *)(acc + i * SV);
#if SV == 16
    SS_STAGE(8, (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
             (8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
    SS_STAGE(4, (0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
             (4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
    SS_STAGE(2, (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
             (2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
    SS_STAGE(1, (0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
             (1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
#elif SV == 8
    SS_STAGE(4, (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15))
    SS_STAGE(2, (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15))
    SS_STAGE(1, (0, 8, 2, 10, 4, 12, 6, 14), (1, 9, 3, 11, 5, 13, 7, 15))
#else
    SS_STAGE(2, (0, 1, 4, 5), (2, 3, 6, 7))
    SS_STAGE(1, (0, 4, 2, 6), (1, 5, 3, 7))
#endif
    *(sv_f *)y = r[0];
}

/* One channel's state h[0, Np) (padded with zeros to whole SW-lane vectors, as are A, B
 * and C) for one token: h = 2^(dt2 A) h + dtx B (dt2 = dt log2(e)), in the variant's
 * vectors; acc[0, SV) = C.h summed per lane (the vectors of a row added in a fixed order;
 * sscan_lane_sums adds the lanes). */
static void sscan_chan(float *restrict h, const float *restrict A, const float *restrict Bv, const float *restrict Cv,
                       int64_t Np, float dt2, float dtx, ss_lim lim, float *restrict acc) {
    sv_f a[SW / SV];
    for (int j = 0; j < SW / SV; j++) a[j] = (sv_f){0};
    for (int64_t n0 = 0; n0 < Np; n0 += SW)
        for (int j = 0; j < SW / SV; j++) {
            const int64_t n = n0 + j * SV;
            sv_f hv = *(const sv_f *)(h + n);
            hv = sv_exp2(dt2 * *(const sv_f *)(A + n), lim) * hv + dtx * *(const sv_f *)(Bv + n);
            *(sv_f *)(h + n) = hv;
            a[j] += *(const sv_f *)(Cv + n) * hv;
        }
    for (int j = 1; j < SW / SV; j++) a[0] += a[j];
    *(sv_f *)acc = a[0];
}

/* Row n of a [B, L, G, N] view (B or C) at (b, t, g) into dst[0, Np), zero-padded. */
static void sscan_row(float *dst, const cg_view *m, int64_t b, int64_t t, int64_t g, int64_t N, int64_t Np) {
    if (m->s[3] == 1 && m->dt == CG_F32) memcpy(dst, at4(m, b, t, g, 0), (size_t)N * sizeof(float));
    else
        for (int64_t n = 0; n < N; n++)
            dst[n] = cg__ld1(m->p, b * m->s[0] + t * m->s[1] + g * m->s[2] + n * m->s[3], m->dt);
    for (int64_t n = N; n < Np; n++) dst[n] = 0.0f;
}

/* Channels [c0, c0 + nc) of a [B, L, D] view at (b, t) into lanes[0, nc). */
static void sscan_lanes(float *restrict lanes, const cg_view *v, int64_t b, int64_t t, int64_t c0, int64_t nc,
                        ld_fn ld) {
    const float *f = v->dt == CG_F32 && v->s[2] == 1 ? (const float *)at4(v, b, t, c0, 0) : NULL;
    if (f && nc == SW) /* one vector load: no store-to-load stall */
        for (int l = 0; l < SW; l++) lanes[l] = f[l];
    else if (f)
        for (int64_t k = 0; k < nc; k++) lanes[k] = f[k];
    else if (v->s[2] == 1) ld(lanes, at4(v, b, t, c0, 0), v->dt, nc);
    else
        for (int64_t k = 0; k < nc; k++) lanes[k] = cg__ld1(at4(v, b, t, c0 + k, 0), 0, v->dt);
}

/* Channels [c0, c0 + nc) of a float32 [D] view (dt bias, D) into lanes[0, nc), if given. */
static void sscan_chans(float *restrict lanes, const cg_view *v, int64_t c0, int64_t nc) {
    const float *f = (const float *)v->p + c0 * v->s[0];
    if (v->s[0] == 1 && nc == SW)
        for (int l = 0; l < SW; l++) lanes[l] = f[l];
    else
        for (int64_t k = 0; k < nc; k++) lanes[k] = f[k * v->s[0]];
}

/* The per-channel scalars of channels [c0, c0 + nc) at token (b, t), SW lanes at a time
 * whatever the fill (so a channel's values do not depend on where the blocks fall): dt2 =
 * dt log2(e) and dtx = dt x (dt with its bias and softplus), x, z and D. */
static void sscan_scalars(const sscan_run *r, int64_t b, int64_t t, int64_t c0, int64_t nc, float *restrict dt2,
                          float *restrict dtx, float *restrict x, float *restrict z, float *restrict Dd) {
    const cg_sscan_step_prob *p = r->p;
    float dt[SW] = {0}, bs[SW] = {0};
    for (int l = 0; l < SW; l++) x[l] = z[l] = Dd[l] = 0.0f;
    sscan_lanes(dt, &p->delta, b, t, c0, nc, r->ld);
    sscan_lanes(x, &p->x, b, t, c0, nc, r->ld);
    if (p->z.p) sscan_lanes(z, &p->z, b, t, c0, nc, r->ld);
    if (p->dbias.p) sscan_chans(bs, &p->dbias, c0, nc);
    if (p->Dv.p) sscan_chans(Dd, &p->Dv, c0, nc);
    for (int l = 0; l < SW; l++) dt[l] += bs[l];
    if (p->softplus)
        for (int l = 0; l < SW; l++) dt[l] = ss_softplus(dt[l], r->lim);
    for (int l = 0; l < SW; l++) dt2[l] = dt[l] * SS_LOG2E, dtx[l] = dt[l] * x[l];
}

/* Channels [k0, k1) of a sub-block, one group (B, C fixed): sscan_chan each (its states
 * H, rows Np apart; A's rows as rows as apart, Np wide), the rows of acc; A's rows and,
 * when pf > 0 (H is the cache itself), the states prefetched SS_AHEAD channels ahead while
 * below pf: the loop's arithmetic per 64 bytes of state leaves the hardware's prefetch
 * behind (measured: the loads of h stall; a burst of prefetches stalls instead). No calls
 * in the loop (around a call GCC reloads the constants for every channel). */
static inline void sscan_group(float *restrict H, const float *restrict A, int64_t as, const float *restrict Bv,
                               const float *restrict Cv, int64_t Np, int64_t k0, int64_t k1, int64_t pf,
                               const float *dt2, const float *dtx, ss_lim lim, float *restrict acc) {
    for (int64_t k = k0; k < k1; k++) {
        if (k + SS_AHEAD < pf)
            for (int64_t n = 0; n < Np; n += 16) __builtin_prefetch(H + (k + SS_AHEAD) * Np + n, 0, 3);
        __builtin_prefetch(A + (k + SS_AHEAD) * as, 0, 3);
        sscan_chan(H + k * Np, A + k * as, Bv, Cv, Np, dt2[k], dtx[k], lim, acc + k * SV);
    }
}

/* A task: batch entry b, channels [d0, d1), in sub-blocks of cw (<= SS_CH) channels whose
 * states [cw, Np] stay in a stack buffer (or in place) over the tokens, the next
 * sub-block's prefetched. Per token: the channels' scalars SW lanes at a time; per channel
 * its state and SV lane partial sums of C.h (a row of acc); the outputs are the rows' sums,
 * SV at a time (sscan_lane_sums), then the D term and the z gate. */
static void sscan_task(void *arg, int64_t task, int tid) {
    (void)tid;
    const sscan_run *r = arg;
    const cg_sscan_step_prob *p = r->p;
    const int64_t L = CG_DIM(p, L), D = CG_DIM(p, D), N = CG_DIM(p, N), S = CG_DIM(p, S), dpg = D / CG_DIM(p, G),
                  Np = (N + SW - 1) / SW * SW;
    const int64_t b = task / r->nblk, d0 = task % r->nblk * r->bd, d1 = d0 + r->bd < D ? d0 + r->bd : D;
    const cg_view *c = &p->cache, *Av = &p->A, *yv = &p->y;
    const int64_t src = slot_of(&p->idx, b, 0, S);
    if (src < 0) { /* padding */
        for (int64_t t = 0; t < L; t++)
            for (int64_t d = d0; d < d1; d++) memset(at4(yv, b, t, d, 0), 0, (size_t)cg__dt_bytes(yv->dt));
        return;
    }
    const ss_lim lim = r->lim;
    /* the states in place (a float32 cache, one token back to its slot, whole vectors); or
     * a sub-block's states in one row when they lie end to end; else channel by channel */
    const int whole = N == Np && c->s[2] == 1 && c->s[1] == N;
    const int direct = whole && c->dt == CG_F32 && L == 1 && !p->dst.p;
    const int arow = Av->s[1] == 1 && N == Np; /* A's rows as they are */
    float Hb[STEP_BUF], A2[STEP_ROW], Bv[STEP_ROW], Cv[STEP_ROW];
    float acc[SS_CH * SV] __attribute__((aligned(64))), y[SS_CH] __attribute__((aligned(64)));
    float dt2[SS_CH], dtx[SS_CH], x[SS_CH], z[SS_CH], Dd[SS_CH];
    if (direct)
        for (int64_t o = 0; o < SS_AHEAD * N && o < (d1 - d0) * N; o += 16)
            __builtin_prefetch((const float *)at4(c, src, d0, 0, 0) + o, 0, 3);
    for (int64_t c0 = d0; c0 < d1; c0 += r->cw) {
        const int64_t nc = d1 - c0 < r->cw ? d1 - c0 : r->cw, nl = (nc + SW - 1) / SW * SW; /* lanes */
        float *H = direct ? (float *)at4(c, src, c0, 0, 0) : Hb;
        if (whole && !direct) r->ld(H, at4(c, src, c0, 0, 0), c->dt, nc * N);
        else if (!direct)
            for (int64_t k = 0; k < nc; k++) {
                r->ld(H + k * Np, at4(c, src, c0 + k, 0, 0), c->dt, N);
                for (int64_t n = N; n < Np; n++) H[k * Np + n] = 0.0f;
            }
        for (int64_t k = nc * SV; k < nl * SV; k++) acc[k] = 0.0f; /* rows past the fill */
        for (int64_t t = 0; t < L; t++) {
            for (int64_t o = 0; o < nl; o += SW)
                sscan_scalars(r, b, t, c0 + o, nc - o < SW ? nc - o : SW, dt2 + o, dtx + o, x + o, z + o, Dd + o);
            for (int64_t k0 = 0, k1; k0 < nc; k0 = k1) { /* runs of channels in one group */
                const int64_t g = (c0 + k0) / dpg;
                k1 = (g + 1) * dpg - c0 < nc ? (g + 1) * dpg - c0 : nc;
                sscan_row(Bv, &p->Bm, b, t, g, N, Np), sscan_row(Cv, &p->Cm, b, t, g, N, Np);
                const int64_t pf = direct ? d1 - c0 : 0;
                if (arow && Np == SW) /* the common case, N = 16: straight-line code per channel */
                    sscan_group(H, (const float *)Av->p + c0 * Av->s[0], Av->s[0], Bv, Cv, SW, k0, k1, pf, dt2, dtx,
                                lim, acc);
                else if (arow)
                    sscan_group(H, (const float *)Av->p + c0 * Av->s[0], Av->s[0], Bv, Cv, Np, k0, k1, pf, dt2, dtx,
                                lim, acc);
                else
                    for (int64_t k = k0; k < k1; k++) { /* A's row k zero-padded into A2 */
                        const float *Ad = (const float *)Av->p + (c0 + k) * Av->s[0];
                        for (int64_t n = 0; n < N; n++) A2[n] = Ad[n * Av->s[1]];
                        for (int64_t n = N; n < Np; n++) A2[n] = 0.0f;
                        sscan_group(H + k * Np, A2, 0, Bv, Cv, Np, 0, 1, 0, dt2 + k, dtx + k, lim, acc + k * SV);
                    }
            }
            for (int64_t o = 0; o < nl; o += SV) sscan_lane_sums(y + o, acc + o * SV);
            for (int64_t k = 0; k < nl; k++) y[k] += Dd[k] * x[k];
            if (p->z.p)
                for (int64_t k = 0; k < nl; k++) y[k] *= z[k] * ss_sigmoid(z[k], lim);
            if (yv->s[2] == 1) r->st(at4(yv, b, t, c0, 0), yv->dt, y, nc);
            else
                for (int64_t k = 0; k < nc; k++) cg__st1(at4(yv, b, t, c0 + k, 0), 0, yv->dt, y[k]);
            const int64_t dst = p->dst.p ? slot_of(&p->dst, b, t, S) : t == L - 1 ? src : -1;
            if (dst < 0 || direct) continue;
            if (whole) r->st(at4(c, dst, c0, 0, 0), c->dt, H, nc * N);
            else
                for (int64_t k = 0; k < nc; k++) r->st(at4(c, dst, c0 + k, 0, 0), c->dt, H + k * Np, N);
        }
    }
}

cg_status cg__sscan_step_cpu(cg_context *ctx, const cg_sscan_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const char *what = "cpu sscan step";
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math)", what,
                       cg__dtype_name(p->dtype));
    if (CG_DIM(p, N) > STEP_ROW)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: N = %lld but the CPU path takes N <= %d", what,
                       (long long)CG_DIM(p, N), STEP_ROW);
    sscan_run r = {p, 0, 0, 0, cg__cpu_ld_row, cg__cpu_st_row, {SS_EXP_LO, SS_EXP_HI, SS_EXP2_LO, SS_EXP2_HI}};
    const int64_t Np = (CG_DIM(p, N) + SW - 1) / SW * SW;
    r.cw = STEP_BUF / Np < SS_CH ? STEP_BUF / Np : SS_CH;
    cg_pool *pool;
    int threads = 1;
    const double bytes =
        2.0 * (double)(CG_DIM(p, B) * CG_DIM(p, D)) * (double)CG_DIM(p, N) * (double)cg__dt_bytes(p->cache.dt);
    int64_t bd = 0;
    cg_status st = step_threads(ctx, cfg, what, bytes, CG_DIM(p, B) * ((CG_DIM(p, D) + 63) / 64), &bd, CG_DIM(p, D),
                                &pool, &threads);
    if (st) return st;
    if (!bd) { /* about four tasks per thread, at least 64 channels each, at most 1024 */
        bd = (CG_DIM(p, B) * CG_DIM(p, D) + 4 * threads - 1) / (4 * threads) / (CG_DIM(p, B) > 0 ? CG_DIM(p, B) : 1);
        bd = bd < 64 ? 64 : bd > 1024 ? 1024 : bd;
        if (bd > CG_DIM(p, D)) bd = CG_DIM(p, D);
    }
    r.bd = bd;
    r.nblk = (CG_DIM(p, D) + bd - 1) / bd;
    cg__dispatch_detail(ctx, " cpu sscan step block=%lld threads=%d", (long long)bd, threads);
    cg__pool_run(pool, threads, CG_DIM(p, B) * r.nblk, sscan_task, &r);
    return CG_OK;
}

/* ------------------------------------------------------- gated delta rule
 * As SSD's (a task per (b, h, block of dv columns), the block [dk, bw] on the stack), per
 * token: p = S^T k (a pass reading the block), u = beta (v - exp(g) p), then one pass
 * S = exp(g) S + k u^T, o += q S; q, k normalised (use_qk_l2norm) and q scaled first. */

/* x[0, dk) times mul, divided by its norm sqrt(x.x + 1e-6) when l2 (gdr_fwd's L2 norm). */
static void gdr_norm(float *x, int64_t dk, int l2, float mul) {
    if (l2) {
        float ss = 0.0f;
        for (int64_t i = 0; i < dk; i++) ss += x[i] * x[i];
        mul /= sqrtf(ss + 1e-6f);
    }
    for (int64_t i = 0; i < dk; i++) x[i] *= mul;
}

static void gdr_token(const cols_run *r, int64_t b, int64_t t, int64_t h, int64_t g, int64_t j0, int64_t w, float *S,
                      int64_t rs, float *o) {
    const cg_gdr_step_prob *p = r->p;
    const int64_t dk = r->dk;
    float q[STEP_ROW], k[STEP_ROW], u[STEP_ROW];
    const float a = cols_qk(r, &p->g, &p->q, &p->k, b, t, h, g, q, k);
    const float beta = cg__ld1(at4(&p->beta, b, t, h, 0), 0, p->beta.dt);
    gdr_norm(q, dk, p->l2norm, (float)p->scale);
    gdr_norm(k, dk, p->l2norm, 1.0f);
    r->ld(u, at4(&p->v, b, t, h, j0), p->v.dt, w);
    for (int64_t j = 0; j < w; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < dk; i++) { /* o as the accumulator of S^T k */
        const float *restrict s = S + i * rs;
        const float ki = k[i];
        for (int64_t j = 0; j < w; j++) o[j] += ki * s[j];
    }
    for (int64_t j = 0; j < w; j++) u[j] = beta * (u[j] - a * o[j]);
    cols_rank1(S, rs, dk, w, a, k, q, u, o);
}

cg_status cg__gdr_step_cpu(cg_context *ctx, const cg_gdr_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const cg_view *const v[4] = {&p->cache, &p->idx, &p->dst, &p->o};
    return cols_step(ctx, cfg, "cpu gdr step", p->dtype, p, &p->shape, gdr_token, v);
}
