/* sscan_cpu.c -- the generic CPU path of the selective scan (Mamba-1 S6), forward and
 * backward: float32 math, tensors float32 or (x, delta, B, C, z and their outputs and
 * gradients) bf16 / fp16, widened in the gathers and rounded in the scatters.
 *
 * Work split: one task per (batch b, group g, block of block_d channels of g), so the
 * channels of a task share one row of B and C per step. Inside a task, channels go 16
 * at a time (a lane chunk, SS_W): the state of a chunk is laid out [N][SS_W], so every
 * inner loop runs over 16 consecutive channels and vectorizes for any N (1 .. 256).
 * Inputs are gathered per tile of steps into [step][channel] scratch (any strides in,
 * unit stride out); outputs are scattered back the same way. Padding lanes hold zeros.
 *
 * Backward (stateless API): pass 1 runs the state recurrence and keeps the state that
 * enters each segment of `segment` steps (workspace B * Dpad * N * ceil(L / segment)
 * floats); pass 2 walks the segments in reverse: per lane chunk it recomputes the
 * segment's states and decays from the checkpoint into scratch ((segment + 1) * N * 16
 * floats), then runs the reverse-time recurrence of KERNEL_MATH.md.
 * Sums over channels (dB, dC) go through per-(b, channel block) partial rows, sums over
 * the batch (dA, dD, ddelta_bias) through per-(b, channel) partials, all reduced in a
 * fixed order: results do not depend on the thread count. */
#include "sscan_cpu.h" /* cpu_isa.h, internal.h; built once per ISA variant */

/* The lane loops below are 16 floats wide: with AVX-512, let GCC use zmm registers
 * (its default for -march=native on Intel is 256-bit vectors). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

#include <math.h>
#include <string.h>

#define SS_W 16      /* channels per lane chunk: one AVX-512 vector of floats */
#define SS_TILE 64   /* steps per gathered tile in the forward */
#define SS_PF_ROWS 8 /* prefetch distance of the row gathers */

#include "cpu_vmath.h" /* ss_exp, ss_exp2, ss_softplus, ss_sigmoid */

/* ------------------------------------------------------------------ plan */

typedef struct ss_plan {
    const cg_sscan_prob *p;
    int64_t Dg;   /* channels per group */
    int64_t bd;   /* channels per task */
    int64_t nblk; /* tasks per (b, g) */
    int64_t ld;   /* bd rounded up to SS_W: row length of the [step][channel] tiles */
    int64_t nc;   /* lane chunks per task: ld / SS_W */
    int64_t seg;  /* backward segment */
    int64_t nseg;
    int64_t tile; /* steps per tile: ss_fwd_tile forward, seg backward */
    int64_t ntask;
    ss_lim lim;     /* ss_exp clamp range */
    float *scratch; /* per thread, `scr` floats each */
    size_t scr;
    float *ck;               /* backward: checkpoints [task][nseg][nc][N][SS_W] */
    float *pBC;              /* backward, nblk > 1: [b][g][blk][L][2][N] partial rows of dB, dC */
    double *pA;              /* backward: [b][D][N] */
    double *pDb;             /* backward: [b][D][2] (dD, ddelta_bias) */
    cg_sscan_cpu_params prm; /* the call's config */
    cg_pool *pool;
    int nth; /* threads the pool uses: the per-thread scratch */
} ss_plan;

typedef struct ss_task {
    int64_t b, g, blk, d0, nb;
} ss_task;

static ss_task ss_decode(const ss_plan *P, int64_t i) {
    ss_task t;
    const int64_t per_b = CG_DIM(P->p, G) * P->nblk;
    t.b = i / per_b;
    t.g = (i % per_b) / P->nblk;
    t.blk = i % P->nblk;
    t.d0 = t.g * P->Dg + t.blk * P->bd;
    t.nb = P->Dg - t.blk * P->bd;
    if (t.nb > P->bd) t.nb = P->bd;
    return t;
}

/* x is stored sequence-major ([B, D, L] memory, as mamba's selective_scan_fn). */

/* Steps per forward tile: tiles are read in pieces of tile x 4 bytes per channel when
 * the tensors are sequence-major. */
static int64_t ss_fwd_tile(const cg_sscan_prob *p) { return cg__sscan_seq_major(p) ? 2 * SS_TILE : SS_TILE; }

/* Reads the config keys over the defaults; checks them. */
static cg_status ss_params(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, int bwd,
                           cg_sscan_cpu_params *out) {
    static const char *const known[] = {"segment", "block_d", "threads"};
    cg_status st;
    if ((st = cg__cfg_only(ctx, cfg, "sscan cpu", known, 3)) || (st = cg__sscan_cpu_params_default(ctx, p, bwd, out)))
        return st;
    int64_t seg = out->segment, bd = out->block_d, th = out->threads;
    if ((st = cg__cfg_pin_int(ctx, cfg, "segment", 1, 1 << 20, "sscan cpu", &seg, NULL)) ||
        (st = cg__cfg_pin_int(ctx, cfg, "block_d", 1, 1 << 16, "sscan cpu", &bd, NULL)) ||
        (st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, "sscan cpu", &th, NULL)))
        return st;
    out->segment = (int)seg;
    out->block_d = (int)bd;
    out->threads = (int)th;
    return CG_OK;
}

/* Count of floats as size_t, or 0 on overflow (the caller reports ENOMEM). */
static size_t ss_count(int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r) || __builtin_mul_overflow(r, d, &r))
        return 0;
    if ((uint64_t)r > SIZE_MAX / sizeof(double) / 2) return 0;
    return (size_t)r;
}

static void ss_plan_init(ss_plan *P, const cg_sscan_prob *p, const cg_sscan_cpu_params *prm) {
    memset(P, 0, sizeof *P);
    P->p = p;
    P->Dg = CG_DIM(p, D) / CG_DIM(p, G);
    P->bd = prm->block_d < P->Dg ? prm->block_d : P->Dg;
    P->nblk = (P->Dg + P->bd - 1) / P->bd;
    P->nc = (P->bd + SS_W - 1) / SS_W;
    P->ld = P->nc * SS_W;
    P->seg = prm->segment < CG_DIM(p, L) ? prm->segment : CG_DIM(p, L);
    P->nseg = (CG_DIM(p, L) + P->seg - 1) / P->seg;
    P->ntask = CG_DIM(p, B) * CG_DIM(p, G) * P->nblk;
    P->lim.lo = SS_EXP_LO;
    P->lim.hi = SS_EXP_HI;
    P->lim.lo2 = SS_EXP2_LO;
    P->lim.hi2 = SS_EXP2_HI;
}

#include "sscan_cpu_tiles.h" /* gathers and scatters of the tiles */

/* dt tile from the delta tile (in place): + bias, softplus when flagged; with sig, also
 * sigmoid(delta + bias) (the softplus derivative). Padding lanes stay 0. */
static void dt_tile(const cg_sscan_prob *p, ss_lim k, int64_t len, int64_t nb, int64_t ld, const float *restrict bias,
                    float *restrict dts, float *restrict sig) {
    for (int64_t i = 0; i < len; i++) {
        float *r = dts + i * ld;
        for (int64_t j = 0; j < ld; j++) r[j] += bias[j];
        if (!p->softplus) continue;
        if (sig) {
            float *sr = sig + i * ld;
            for (int64_t j = 0; j < ld; j++) sr[j] = ss_sigmoid(r[j], k);
        }
        for (int64_t j = 0; j < ld; j++) r[j] = ss_softplus(r[j], k);
        for (int64_t j = nb; j < ld; j++) r[j] = 0.0f;
    }
}

/* What a task gathers once: A (as A log2 e), the state from v (h0 or dhT), delta_bias and D. */
static void gather_task(const ss_plan *P, const ss_task *t, float *restrict At, float *restrict h, float *restrict bias,
                        float *restrict Dv) {
    const cg_sscan_prob *p = P->p;
    gather_A(p, t->d0, t->nb, P->nc, At);
    gather_state(&p->h0, t->b, t->d0, t->nb, P->nc, CG_DIM(p, N), h);
    gather_d(&p->dbias, t->d0, t->nb, P->ld, bias);
    gather_d(&p->Dv, t->d0, t->nb, P->ld, Dv);
}

/* The x, dt (from delta, see dt_tile) and B tiles of tokens [t0, t0 + len). */
static void gather_x_dt_b(const ss_plan *P, const ss_task *t, int64_t t0, int64_t len, const float *restrict bias,
                          float *restrict xs, float *restrict dts, float *restrict sig, float *restrict Bs) {
    const cg_sscan_prob *p = P->p;
    gather_bl(&p->x, t->b, t0, len, t->d0, t->nb, P->ld, xs);
    gather_bl(&p->delta, t->b, t0, len, t->d0, t->nb, P->ld, dts);
    dt_tile(p, P->lim, len, t->nb, P->ld, bias, dts, sig);
    gather_bc(&p->Bm, t->b, t0, len, t->g, CG_DIM(p, N), Bs);
}

/* --------------------------------------------------------- step kernels
 * One lane chunk (16 channels) over `len` steps. Tiles are [step][ld] with the chunk's
 * columns at offset 0 (the caller passes shifted pointers); B, C rows are [step][N]. */

/* One step's dt and dt x of the SS_W lanes (a row of the dts and xs tiles). */
static inline void ss_step_dt(const float *restrict dts, const float *restrict xs, float *restrict dt,
                              float *restrict dtx) {
    for (int l = 0; l < SS_W; l++) {
        dt[l] = dts[l];
        dtx[l] = dt[l] * xs[l];
    }
}

/* Forward: h[n][l] advances len steps; ys[i][l] = sum_n C h (without the D term). */
static void fwd_chunk(ss_lim k, int64_t len, int64_t N, int64_t ld, float *restrict h, const float *restrict At,
                      const float *restrict xs, const float *restrict dts, const float *restrict Bs,
                      const float *restrict Cs, float *restrict ys) {
    for (int64_t i = 0; i < len; i++) {
        float dt[SS_W], dtx[SS_W], y[SS_W];
        ss_step_dt(dts + i * ld, xs + i * ld, dt, dtx);
        for (int l = 0; l < SS_W; l++) y[l] = 0.0f;
        const float *Bi = Bs + i * N, *Ci = Cs + i * N;
        for (int64_t n = 0; n < N; n++) {
            const float bn = Bi[n], cn = Ci[n];
            float *hn = h + n * SS_W;
            const float *an = At + n * SS_W;
            for (int l = 0; l < SS_W; l++) {
                float hv = ss_exp2(dt[l] * an[l], k) * hn[l] + dtx[l] * bn;
                hn[l] = hv;
                y[l] += cn * hv;
            }
        }
        for (int l = 0; l < SS_W; l++) ys[i * ld + l] = y[l];
    }
}

/* States only (backward pass 1). */
static void state_chunk(ss_lim k, int64_t len, int64_t N, int64_t ld, float *restrict h, const float *restrict At,
                        const float *restrict xs, const float *restrict dts, const float *restrict Bs) {
    for (int64_t i = 0; i < len; i++) {
        float dt[SS_W], dtx[SS_W];
        ss_step_dt(dts + i * ld, xs + i * ld, dt, dtx);
        const float *Bi = Bs + i * N;
        for (int64_t n = 0; n < N; n++) {
            const float bn = Bi[n];
            float *hn = h + n * SS_W;
            const float *an = At + n * SS_W;
            for (int l = 0; l < SS_W; l++) hn[l] = ss_exp2(dt[l] * an[l], k) * hn[l] + dtx[l] * bn;
        }
    }
}

/* Segment recompute: hs[0] holds the entering state; writes ab[i] = decay of step i and
 * hs[i + 1] = state after step i. hs [len + 1][N][W], ab [len][N][W]. */
static void recompute_chunk(ss_lim k, int64_t len, int64_t N, int64_t ld, float *restrict hs, float *restrict ab,
                            const float *restrict At, const float *restrict xs, const float *restrict dts,
                            const float *restrict Bs) {
    const int64_t NW = N * SS_W;
    for (int64_t i = 0; i < len; i++) {
        float dt[SS_W], dtx[SS_W];
        ss_step_dt(dts + i * ld, xs + i * ld, dt, dtx);
        const float *Bi = Bs + i * N;
        const float *hp = hs + i * NW;
        float *hc = hs + (i + 1) * NW, *ai = ab + i * NW;
        for (int64_t n = 0; n < N; n++) {
            const float bn = Bi[n];
            for (int l = 0; l < SS_W; l++) {
                float a = ss_exp2(dt[l] * At[n * SS_W + l], k);
                ai[n * SS_W + l] = a;
                hc[n * SS_W + l] = a * hp[n * SS_W + l] + dtx[l] * bn;
            }
        }
    }
}

/* Reverse-time recurrence over one segment of one lane chunk (KERNEL_MATH.md):
 *   g += C dyy;  dC += dyy h_t;  dx = dt sum_n g B;  dB += g dt x;
 *   ddt = sum_n g (A a h_{t-1} + B x);  dA += g dt a h_{t-1};  g *= a,
 * with sum_n g B x = x sum_n g B taken from the dx sum.
 * g [N][W] carries across segments. accB, accC [len][N][W] accumulate over the chunks of
 * the task; dA [N][W] over the segment. Writes dxs, ddts, ys (C h_t) at [i][l]. */
static void bwd_chunk(int64_t len, int64_t N, int64_t ld, const float *restrict hs, const float *restrict ab,
                      float *restrict g, const float *restrict At, const float *restrict xs, const float *restrict dts,
                      const float *restrict dyys, const float *restrict Bs, const float *restrict Cs,
                      float *restrict accB, float *restrict accC, float *restrict dA, float *restrict dxs,
                      float *restrict ddts, float *restrict ys) {
    const int64_t NW = N * SS_W;
    for (int64_t i = len - 1; i >= 0; i--) {
        float dt[SS_W], x[SS_W], dtx[SS_W], dy[SS_W], y[SS_W], sgb[SS_W], ddt[SS_W];
        for (int l = 0; l < SS_W; l++) {
            dt[l] = dts[i * ld + l];
            x[l] = xs[i * ld + l];
            dtx[l] = dt[l] * x[l];
            dy[l] = dyys[i * ld + l];
            y[l] = sgb[l] = ddt[l] = 0.0f;
        }
        const float *Bi = Bs + i * N, *Ci = Cs + i * N;
        const float *hp = hs + i * NW, *hc = hs + (i + 1) * NW, *ai = ab + i * NW;
        float *aB = accB + i * NW, *aC = accC + i * NW;
        for (int64_t n = 0; n < N; n++) {
            const float bn = Bi[n], cn = Ci[n];
            for (int l = 0; l < SS_W; l++) {
                const int64_t k = n * SS_W + l;
                const float h = hc[k];
                y[l] += cn * h;
                const float gv = g[k] + cn * dy[l];
                aC[k] += dy[l] * h;
                sgb[l] += gv * bn;
                aB[k] += gv * dtx[l];
                const float gah = gv * (ai[k] * hp[k]);
                ddt[l] += gah * At[k];
                dA[k] += gah * dt[l];
                g[k] = gv * ai[k];
            }
        }
        for (int l = 0; l < SS_W; l++) {
            dxs[i * ld + l] = sgb[l] * dt[l];
            /* At holds A log2(e); sum_n g B x = x sum_n g B, factored out */
            ddts[i * ld + l] = ddt[l] * SS_LN2 + sgb[l] * x[l];
            ys[i * ld + l] = y[l];
        }
    }
}

/* Sum of the SS_W lanes, in a fixed order. */
static inline float hsum(const float *v) {
    float s = 0.0f;
    for (int l = 0; l < SS_W; l++) s += v[l];
    return s;
}

/* --------------------------------------------------------------- forward */

/* Runs body on task ti of the plan arg with thread tid's scratch (a cg__pool_run task). */
static inline void ss_run_task(void *arg, int64_t ti, int tid,
                               void (*body)(const ss_plan *, int64_t, const ss_task, float *)) {
    const ss_plan *P = arg;
    body(P, ti, ss_decode(P, ti), P->scratch + (size_t)tid * P->scr);
}

static void fwd_body(const ss_plan *P, int64_t ti, const ss_task t, float *s) {
    (void)ti;
    const cg_sscan_prob *p = P->p;
    const ss_lim lim = P->lim;
    const int64_t N = CG_DIM(p, N), ld = P->ld, nc = P->nc, T = P->tile, NW = N * SS_W;
    float *At = s, *h = At + nc * NW, *bias = h + nc * NW, *Dv = bias + ld;
    float *xs = Dv + ld, *dts = xs + T * ld, *ys = dts + T * ld, *zs = ys + T * ld;
    float *Bs = zs + T * ld, *Cs = Bs + T * N;

    gather_task(P, &t, At, h, bias, Dv);
    for (int64_t t0 = 0; t0 < CG_DIM(p, L); t0 += T) {
        const int64_t len = CG_DIM(p, L) - t0 < T ? CG_DIM(p, L) - t0 : T;
        gather_x_dt_b(P, &t, t0, len, bias, xs, dts, NULL, Bs);
        gather_bc(&p->Cm, t.b, t0, len, t.g, N, Cs);
        for (int64_t c = 0; c < nc; c++)
            fwd_chunk(lim, len, N, ld, h + c * NW, At + c * NW, xs + c * SS_W, dts + c * SS_W, Bs, Cs, ys + c * SS_W);
        if (p->z.p) gather_bl(&p->z, t.b, t0, len, t.d0, t.nb, ld, zs);
        for (int64_t i = 0; i < len; i++) {
            float *yr = ys + i * ld;
            const float *xr = xs + i * ld, *zr = zs + i * ld;
            for (int64_t j = 0; j < ld; j++) yr[j] += Dv[j] * xr[j];
            if (p->z.p)
                for (int64_t j = 0; j < ld; j++) yr[j] *= zr[j] * ss_sigmoid(zr[j], lim);
        }
        scatter_bl(&p->y, t.b, t0, len, t.d0, t.nb, ld, ys);
    }
    if (p->hT.p) scatter_state(&p->hT, t.b, t.d0, t.nb, nc, N, h);
}
static void fwd_task(void *arg, int64_t ti, int tid) { ss_run_task(arg, ti, tid, fwd_body); }

/* Thread count the pool will use, for per-thread scratch. */
static int ss_threads(cg_pool *pool, int threads) {
    int size = cg__pool_size(pool);
    if (!pool) return 1;
    return (threads <= 0 || threads > size) ? size : threads;
}

/* A call's plan: its config, tiles (ss_fwd_tile forward, the segment backward) and
 * threads. The dtypes were checked by the entry point (cpu_isa.c). */
static cg_status ss_begin(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, int bwd, ss_plan *P) {
    cg_sscan_cpu_params prm;
    cg_status s = ss_params(ctx, p, cfg, bwd, &prm);
    if (s) return s;
    ss_plan_init(P, p, &prm);
    P->prm = prm;
    P->pool = cg__ctx_pool(ctx);
    P->nth = ss_threads(P->pool, prm.threads);
    P->tile = bwd ? P->seg : ss_fwd_tile(p) < CG_DIM(p, L) ? ss_fwd_tile(p) : CG_DIM(p, L);
    return CG_OK;
}

/* The scratch floats of all threads: *per (one thread's) rounded up to 16 (64 bytes),
 * times nth; 0 when that overflows. */
static size_t ss_scratch(size_t *per, int nth) {
    *per = (*per + 15) / 16 * 16;
    return ss_count((int64_t)*per, nth, 1, 1);
}

cg_status cg__sscan_cpu_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    ss_plan P;
    cg_status s = ss_begin(ctx, p, cfg, 0, &P);
    if (s) return s;
    /* At, h [nc N W]; bias, Dv [ld]; xs, dts, ys, zs [T ld]; Bs, Cs [T N] */
    size_t per = ss_count(2 * P.nc, CG_DIM(p, N), SS_W, 1) + ss_count(P.ld, 2 + 4 * P.tile, 1, 1) +
                 ss_count(2 * P.tile, CG_DIM(p, N), 1, 1);
    size_t all = ss_scratch(&per, P.nth);
    if (!all || !(P.scratch = cg__aligned_alloc(all * sizeof(float))))
        return cg__err(ctx, CG_ENOMEM, "cpu sscan forward: out of memory for %d x %zu floats of scratch", P.nth, per);
    P.scr = per;
    cg__pool_run(P.pool, P.prm.threads, P.ntask, fwd_task, &P);
    cg__aligned_free(P.scratch);
    cg__dispatch_detail(ctx, "sscan_fwd block_d=%d threads=%d", P.prm.block_d, P.nth);
    return CG_OK;
}

/* -------------------------------------------------------------- backward */

static void bwd_body(const ss_plan *P, int64_t ti, const ss_task t, float *s) {
    const cg_sscan_prob *p = P->p;
    const ss_lim lim = P->lim;
    const int64_t N = CG_DIM(p, N), L = CG_DIM(p, L), ld = P->ld, nc = P->nc, S = P->seg, NW = N * SS_W;
    /* [nc NW]: At, h, g; dAtot (double) takes 2 nc NW floats */
    float *At = s, *h = At + nc * NW, *g = h + nc * NW;
    double *dAtot = (double *)(g + nc * NW);
    double *dDb = dAtot + nc * NW; /* [ld][2] */
    float *bias = (float *)(dDb + 2 * ld), *Dv = bias + ld;
    /* [S ld] tiles */
    float *xs = Dv + ld, *dts = xs + S * ld, *sig = dts + S * ld, *dout = sig + S * ld, *zs = dout + S * ld;
    float *dyy = zs + S * ld, *dxs = dyy + S * ld, *ddts = dxs + S * ld, *ys = ddts + S * ld;
    float *Bs = ys + S * ld, *Cs = Bs + S * N;
    float *accB = Cs + S * N, *accC = accB + S * NW, *ab = accC + S * NW, *hs = ab + S * NW;
    float *dAseg = hs + (S + 1) * NW, *dScr = dAseg + NW;
    float *ck = P->ck + (size_t)ti * (size_t)(P->nseg * nc * NW);

    gather_task(P, &t, At, h, bias, Dv);
    gather_state(&p->dhT, t.b, t.d0, t.nb, nc, N, g);
    memset(dAtot, 0, (size_t)(nc * NW) * sizeof(double));
    memset(dDb, 0, (size_t)(2 * ld) * sizeof(double));

    /* Pass 1: checkpoints of the state entering each segment. */
    for (int64_t k = 0; k < P->nseg; k++) {
        memcpy(ck + k * nc * NW, h, (size_t)(nc * NW) * sizeof(float));
        if (k == P->nseg - 1) break;
        const int64_t t0 = k * S;
        gather_x_dt_b(P, &t, t0, S, bias, xs, dts, NULL, Bs);
        for (int64_t c = 0; c < nc; c++)
            state_chunk(lim, S, N, ld, h + c * NW, At + c * NW, xs + c * SS_W, dts + c * SS_W, Bs);
    }

    /* Pass 2: segments in reverse. */
    for (int64_t k = P->nseg - 1; k >= 0; k--) {
        const int64_t t0 = k * S, len = L - t0 < S ? L - t0 : S;
        gather_x_dt_b(P, &t, t0, len, bias, xs, dts, p->softplus ? sig : NULL, Bs);
        gather_bc(&p->Cm, t.b, t0, len, t.g, N, Cs);
        gather_bl(&p->dy, t.b, t0, len, t.d0, t.nb, ld, dout);
        if (p->z.p) {
            gather_bl(&p->z, t.b, t0, len, t.d0, t.nb, ld, zs);
            for (int64_t i = 0; i < len * ld; i++) dyy[i] = dout[i] * zs[i] * ss_sigmoid(zs[i], lim);
        } else {
            memcpy(dyy, dout, (size_t)(len * ld) * sizeof(float));
        }
        memset(accB, 0, (size_t)(len * NW) * sizeof(float));
        memset(accC, 0, (size_t)(len * NW) * sizeof(float));
        for (int64_t c = 0; c < nc; c++) {
            memcpy(hs, ck + (k * nc + c) * NW, (size_t)NW * sizeof(float));
            recompute_chunk(lim, len, N, ld, hs, ab, At + c * NW, xs + c * SS_W, dts + c * SS_W, Bs);
            memset(dAseg, 0, (size_t)NW * sizeof(float));
            bwd_chunk(len, N, ld, hs, ab, g + c * NW, At + c * NW, xs + c * SS_W, dts + c * SS_W, dyy + c * SS_W, Bs,
                      Cs, accB, accC, dAseg, dxs + c * SS_W, ddts + c * SS_W, ys + c * SS_W);
            for (int64_t q = 0; q < NW; q++) dAtot[c * NW + q] += dAseg[q];
        }
        /* Per-channel epilogue: dx, ddelta, dz; dD and ddelta_bias sums. */
        for (int64_t i = 0; i < len; i++) {
            float *dxr = dxs + i * ld, *ddr = ddts + i * ld, *yr = ys + i * ld;
            const float *xr = xs + i * ld, *dyr = dyy + i * ld, *sr = sig + i * ld, *zr = zs + i * ld,
                        *dor = dout + i * ld;
            for (int64_t j = 0; j < ld; j++) {
                dxr[j] += Dv[j] * dyr[j];
                if (p->softplus) ddr[j] *= sr[j];
            }
            if (p->z.p)
                for (int64_t j = 0; j < ld; j++) {
                    const float sz = ss_sigmoid(zr[j], lim);
                    yr[j] = dor[j] * (yr[j] + Dv[j] * xr[j]) * sz * (1.0f + zr[j] * (1.0f - sz));
                }
            for (int64_t j = 0; j < t.nb; j++) {
                dDb[2 * j] += (double)dyr[j] * xr[j];
                dDb[2 * j + 1] += ddr[j];
            }
        }
        scatter_bl(&p->dx, t.b, t0, len, t.d0, t.nb, ld, dxs);
        scatter_bl(&p->ddelta, t.b, t0, len, t.d0, t.nb, ld, ddts);
        if (p->dz.p) scatter_bl(&p->dz, t.b, t0, len, t.d0, t.nb, ld, ys);
        /* dB, dC rows of this block: straight to the outputs when the block is the whole
         * group, else to the partial rows reduced later. */
        for (int64_t i = 0; i < len; i++) {
            /* the sums in a row [2 N] (dB then dC): the partial row, or dScr before the store */
            float *row =
                P->nblk == 1 ? dScr : P->pBC + (((t.b * CG_DIM(p, G) + t.g) * P->nblk + t.blk) * L + t0 + i) * 2 * N;
            for (int64_t n = 0; n < N; n++) {
                row[n] = hsum(accB + (i * N + n) * SS_W);
                row[N + n] = hsum(accC + (i * N + n) * SS_W);
            }
            if (P->nblk == 1) {
                put_bc(&p->dB, t.b, t0 + i, t.g, N, row);
                put_bc(&p->dC, t.b, t0 + i, t.g, N, row + N);
            }
        }
    }
    if (p->dh0.p) scatter_state(&p->dh0, t.b, t.d0, t.nb, nc, N, g);
    for (int64_t j = 0; j < t.nb; j++) {
        const int64_t c = j / SS_W, l = j % SS_W, d = t.d0 + j;
        double *pa = P->pA + (t.b * CG_DIM(p, D) + d) * N;
        for (int64_t n = 0; n < N; n++) pa[n] = dAtot[(c * N + n) * SS_W + l];
        P->pDb[(t.b * CG_DIM(p, D) + d) * 2] = dDb[2 * j];
        P->pDb[(t.b * CG_DIM(p, D) + d) * 2 + 1] = dDb[2 * j + 1];
    }
}
static void bwd_task(void *arg, int64_t ti, int tid) { ss_run_task(arg, ti, tid, bwd_body); }

/* dB, dC rows of (b, g, 64-step tile) summed over the channel blocks in order. */
#define SS_RED_TILE 64
static void bc_reduce_task(void *arg, int64_t i, int tid) {
    (void)tid;
    const ss_plan *P = arg;
    const cg_sscan_prob *p = P->p;
    const int64_t N = CG_DIM(p, N), L = CG_DIM(p, L), ntile = (L + SS_RED_TILE - 1) / SS_RED_TILE;
    const int64_t bg = i / ntile, t0 = (i % ntile) * SS_RED_TILE, b = bg / CG_DIM(p, G), g = bg % CG_DIM(p, G);
    const int64_t t1 = t0 + SS_RED_TILE < L ? t0 + SS_RED_TILE : L;
    for (int64_t t = t0; t < t1; t++) {
        /* the sums go into block 0's partial row (read by this task alone), then out */
        float *out = P->pBC + (bg * P->nblk * L + t) * 2 * N;
        for (int64_t n = 0; n < 2 * N; n++) {
            double sum = 0;
            for (int64_t k = 0; k < P->nblk; k++) sum += P->pBC[((bg * P->nblk + k) * L + t) * 2 * N + n];
            out[n] = (float)sum;
        }
        put_bc(&p->dB, b, t, g, N, out);
        put_bc(&p->dC, b, t, g, N, out + N);
    }
}

cg_status cg__sscan_cpu_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    ss_plan P;
    cg_status s = ss_begin(ctx, p, cfg, 1, &P);
    if (s) return s;
    const int64_t N = CG_DIM(p, N), NW = N * SS_W, S = P.seg, ld = P.ld, nc = P.nc;
    /* Per thread (floats): At, h, g [nc NW]; dAtot [2 nc NW]; dDb [4 ld]; bias, Dv [ld];
     * 9 tiles [S ld]; Bs, Cs [S N]; accB, accC, ab [S NW]; hs [(S+1) NW]; dAseg [NW]; dScr [2 N]. */
    size_t per = ss_count(5 * nc, NW, 1, 1) + ss_count(6, ld, 1, 1) + ss_count(9 * S, ld, 1, 1) +
                 ss_count(2 * S + 2, N, 1, 1) + ss_count(4 * S + 2, NW, 1, 1);
    size_t all = ss_scratch(&per, P.nth);
    size_t nck = ss_count(P.ntask, P.nseg, nc, NW);
    size_t nbc = P.nblk > 1 ? ss_count(CG_DIM(p, B) * CG_DIM(p, G) * P.nblk, CG_DIM(p, L), 2 * N, 1) : 1;
    size_t npa = ss_count(CG_DIM(p, B), CG_DIM(p, D), N, 1), npd = ss_count(CG_DIM(p, B), CG_DIM(p, D), 2, 1);
    if (!all || !nck || !nbc || !npa || !npd)
        return cg__err(ctx, CG_ENOMEM, "cpu sscan backward: workspace size overflows (B=%lld, L=%lld, D=%lld, N=%lld)",
                       (long long)CG_DIM(p, B), (long long)CG_DIM(p, L), (long long)CG_DIM(p, D), (long long)N);
    P.scratch = cg__aligned_alloc(all * sizeof(float));
    P.ck = cg__aligned_alloc(nck * sizeof(float));
    P.pBC = P.nblk > 1 ? cg__aligned_alloc(nbc * sizeof(float)) : NULL;
    P.pA = cg__aligned_alloc(npa * sizeof(double));
    P.pDb = cg__aligned_alloc(npd * sizeof(double));
    P.scr = per;
    cg_status st = CG_OK;
    if (!P.scratch || !P.ck || (P.nblk > 1 && !P.pBC) || !P.pA || !P.pDb) {
        st = cg__err(ctx, CG_ENOMEM,
                     "cpu sscan backward: out of memory (checkpoints: %zu floats for segment=%lld; scratch: %d x %zu "
                     "floats)",
                     nck, (long long)S, P.nth, per);
        goto done;
    }
    cg__pool_run(P.pool, P.prm.threads, P.ntask, bwd_task, &P);
    if (P.nblk > 1)
        cg__pool_run(P.pool, P.prm.threads,
                     CG_DIM(p, B) * CG_DIM(p, G) * ((CG_DIM(p, L) + SS_RED_TILE - 1) / SS_RED_TILE), bc_reduce_task,
                     &P);
    /* Batch sums in order b = 0, 1, ... */
    for (int64_t d = 0; d < CG_DIM(p, D); d++) {
        for (int64_t n = 0; n < N; n++) {
            double a = 0;
            for (int64_t b = 0; b < CG_DIM(p, B); b++) a += P.pA[(b * CG_DIM(p, D) + d) * N + n];
            CG_F32P(p->dA)[d * p->dA.s[0] + n * p->dA.s[1]] = (float)a;
        }
        double sd = 0, sb = 0;
        for (int64_t b = 0; b < CG_DIM(p, B); b++) {
            sd += P.pDb[(b * CG_DIM(p, D) + d) * 2];
            sb += P.pDb[(b * CG_DIM(p, D) + d) * 2 + 1];
        }
        if (p->dD.p) CG_F32P(p->dD)[d * p->dD.s[0]] = (float)sd;
        if (p->ddbias.p) CG_F32P(p->ddbias)[d * p->ddbias.s[0]] = (float)sb;
    }
    cg__dispatch_detail(ctx, "sscan_bwd segment=%d block_d=%d threads=%d", P.prm.segment, P.prm.block_d, P.nth);
done:
    cg__aligned_free(P.scratch);
    cg__aligned_free(P.ck);
    cg__aligned_free(P.pBC);
    cg__aligned_free(P.pA);
    cg__aligned_free(P.pDb);
    return st;
}
