/* gdr_cpu.c -- the cpu backend's entry points for the gated delta rule and its sequential
 * float32 path (the recurrence of runtime/ref/ref_gdr.c token by token, in float32).
 *
 * Forward: one task per (b, value head) through the context's pool; per token two passes
 * over the float32 state S [dk, dv]:
 *   1. S = exp(g) S and p = S^T kn (row by row);  u = beta (v - p);
 *   2. S += kn u^T and o = S^T (s qn).
 * Backward: one task per (b, q/k group), its value heads in head order (dq and dk are sums
 * over them, in one float32 accumulator per group: deterministic for any thread count).
 * Per head the states are checkpointed every seg ~ sqrt(T) tokens by a forward pass; each
 * segment is recomputed (its states, p and u kept) and walked backwards with two passes
 * per token over S, S_{t-1} and dS (ref_gdr.c's formulas). The L2 norm of q and k is
 * applied once per (b, group) into float32 rows, and its backward at the end.
 * bf16 / fp16 tensors are widened per row as they are read and rounded once as stored
 * (cpu_half.h); g and the states are float32; reductions over a whole state (dg) add
 * float32 row sums in double. Nothing here depends on the ISA variant: it is compiled
 * once, for baseline x86-64. */
#include "cpu_half.h"
#include "ops.h"

#include <math.h>
#include <string.h>

#define GDR_L2_EPS 1e-6f

/* ------------------------------------------------------------------ rows */

/* n elements of view v from offset off with element stride st, widened into dst. */
static void ld_row(float *dst, const cg_view *v, int64_t off, int64_t st, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cg__ld1(v->p, off + i * st, v->dt);
}
static void st_row(const cg_view *v, int64_t off, int64_t st, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) cg__st1(v->p, off + i * st, v->dt, src[i]);
}
static float ld_at(const cg_view *v, int64_t b, int64_t t, int64_t h) {
    return cg__ld1(v->p, b * v->s[0] + t * v->s[1] + h * v->s[2], v->dt);
}
static void st_at(const cg_view *v, int64_t b, int64_t t, int64_t h, float x) {
    cg__st1(v->p, b * v->s[0] + t * v->s[1] + h * v->s[2], v->dt, x);
}

/* Row (b, t, g) of q or k, normalised when the problem says so and times mul; returns the
 * norm's 1 / sqrt(x.x + eps) (1 without it). */
static float ld_qk(const cg_gdr_prob *p, const cg_view *v, int64_t b, int64_t t, int64_t g, float mul, float *x) {
    ld_row(x, v, b * v->s[0] + t * v->s[1] + g * v->s[2], v->s[3], p->dk);
    float r = 1;
    if (p->l2norm) {
        double ss = 0;
        for (int64_t i = 0; i < p->dk; i++) ss += (double)x[i] * x[i];
        r = (float)(1 / sqrt(ss + GDR_L2_EPS));
    }
    const float m = r * mul;
    for (int64_t i = 0; i < p->dk; i++) x[i] *= m;
    return r;
}

/* A state [b, h] (float32 view) into S, 0 when absent; and back. */
static void ld_state(const cg_gdr_prob *p, const cg_view *v, int64_t b, int64_t h, float *S) {
    if (!v->p) {
        memset(S, 0, (size_t)(p->dk * p->dv) * sizeof *S);
        return;
    }
    for (int64_t i = 0; i < p->dk; i++) ld_row(S + i * p->dv, v, b * v->s[0] + h * v->s[1] + i * v->s[2], v->s[3], p->dv);
}
static void st_state(const cg_gdr_prob *p, const cg_view *v, int64_t b, int64_t h, const float *S) {
    if (!v->p) return;
    for (int64_t i = 0; i < p->dk; i++) st_row(v, b * v->s[0] + h * v->s[1] + i * v->s[2], v->s[3], S + i * p->dv, p->dv);
}

/* ------------------------------------------------------------------ step */

/* The state update of one token on S in place: S = a S; pv = S^T k; u = beta (v - pv);
 * S += k u^T. o (may be NULL): o = S^T q after it. */
static void step(float *restrict S, float a, float beta, const float *restrict k, const float *restrict v,
                 const float *restrict q, float *restrict pv, float *restrict u, float *restrict o, int64_t dk,
                 int64_t dv) {
    for (int64_t j = 0; j < dv; j++) pv[j] = 0;
    for (int64_t i = 0; i < dk; i++) {
        float *restrict row = S + i * dv;
        const float ki = k[i];
        for (int64_t j = 0; j < dv; j++) {
            row[j] *= a;
            pv[j] += ki * row[j];
        }
    }
    for (int64_t j = 0; j < dv; j++) u[j] = beta * (v[j] - pv[j]);
    if (o)
        for (int64_t j = 0; j < dv; j++) o[j] = 0;
    for (int64_t i = 0; i < dk; i++) {
        float *restrict row = S + i * dv;
        const float ki = k[i], qi = q ? q[i] : 0;
        for (int64_t j = 0; j < dv; j++) row[j] += ki * u[j];
        if (o)
            for (int64_t j = 0; j < dv; j++) o[j] += qi * row[j];
    }
}

/* ------------------------------------------------------------------ runs */

typedef struct gdr_job {
    const cg_gdr_prob *p;
    float *ws;       /* per thread: per floats each */
    size_t per;
    int64_t seg, nseg; /* backward: tokens per checkpoint segment, segments */
} gdr_job;

/* Threads: the config's pin (0 or absent: the pool's size), at most the tasks. */
static cg_status seq_threads(cg_context *ctx, const cg_cfg *cfg, const char *what, int64_t tasks, cg_pool **pool,
                             int *threads) {
    int64_t th = 0;
    cg_status st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &th, NULL);
    if (st) return st;
    if (!(*pool = cg__ctx_pool(ctx))) return cg__err(ctx, CG_ENOMEM, "%s: out of memory for the thread pool", what);
    const int size = cg__pool_size(*pool);
    int n = th <= 0 || th > size ? size : (int)th;
    if (n > tasks) n = (int)tasks;
    *threads = n < 1 ? 1 : n;
    return CG_OK;
}

static void fwd_task(void *arg, int64_t task, int tid) {
    const gdr_job *J = arg;
    const cg_gdr_prob *p = J->p;
    const int64_t dk = p->dk, dv = p->dv, b = task / p->H, h = task % p->H, g = h / (p->H / p->G);
    float *S = J->ws + (size_t)tid * J->per, *q = S + dk * dv, *k = q + dk, *v = k + dk, *pv = v + dv, *u = pv + dv,
          *o = u + dv;
    ld_state(p, &p->h0, b, h, S);
    for (int64_t t = 0; t < p->T; t++) {
        ld_qk(p, &p->q, b, t, g, (float)p->scale, q);
        ld_qk(p, &p->k, b, t, g, 1, k);
        ld_row(v, &p->v, b * p->v.s[0] + t * p->v.s[1] + h * p->v.s[2], p->v.s[3], dv);
        step(S, expf(ld_at(&p->g, b, t, h)), ld_at(&p->beta, b, t, h), k, v, q, pv, u, o, dk, dv);
        st_row(&p->o, b * p->o.s[0] + t * p->o.s[1] + h * p->o.s[2], p->o.s[3], o, dv);
    }
    st_state(p, &p->hT, b, h, S);
}

cg_status cg__gdr_cpu_seq_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const int64_t tasks = p->B * p->H;
    cg_pool *pool;
    int threads = 1;
    cg_status st = seq_threads(ctx, cfg, "gdr_fwd (cpu, sequential)", tasks, &pool, &threads);
    if (st) return st;
    gdr_job J = {.p = p, .per = (size_t)(p->dk * p->dv + 2 * p->dk + 4 * p->dv)};
    J.per = (J.per + 15) & ~(size_t)15; /* 64-byte rows per thread */
    if (!(J.ws = cg__aligned_alloc(J.per * (size_t)threads * sizeof(float))))
        return cg__err(ctx, CG_ENOMEM, "gdr_fwd (cpu, sequential): out of memory for %d states of %lld x %lld", threads,
                       (long long)p->dk, (long long)p->dv);
    cg__pool_run(pool, threads, tasks, fwd_task, &J);
    cg__aligned_free(J.ws);
    cg__dispatch_detail(ctx, "gdr_fwd sequential threads=%d", threads);
    return CG_OK;
}

/* The backward of one value head h of group (b, g): adds its part of dqn, dkn (the
 * gradients of the scaled normalised q rows qs and the normalised k rows kn, [T, dk]);
 * writes dv, dg, dbeta, dh0. */
static void bwd_head(const gdr_job *J, float *W, int64_t b, int64_t g, int64_t h, const float *qs, const float *kn,
                     float *dqn, float *dkn) {
    const cg_gdr_prob *p = J->p;
    const int64_t T = p->T, dk = p->dk, dv = p->dv, ss = dk * dv, seg = J->seg, nseg = J->nseg;
    const float scale = (float)p->scale;
    float *ckpt = W, *st = ckpt + nseg * ss, *dS = st + (seg + 1) * ss, *pvs = dS + ss, *us = pvs + seg * dv;
    float *v = us + seg * dv, *dout = v + dv, *du = dout + dv, *dp = du + dv, *dvr = dp + dv;
    const cg_view *V = &p->v;
    /* forward: checkpoints */
    ld_state(p, &p->h0, b, h, st);
    for (int64_t t = 0; t < T; t++) {
        if (t % seg == 0) memcpy(ckpt + (t / seg) * ss, st, (size_t)ss * sizeof(float));
        ld_row(v, V, b * V->s[0] + t * V->s[1] + h * V->s[2], V->s[3], dv);
        step(st, expf(ld_at(&p->g, b, t, h)), ld_at(&p->beta, b, t, h), kn + t * dk, v, NULL, du, dp, NULL, dk, dv);
    }
    ld_state(p, &p->dhT, b, h, dS);
    for (int64_t c = nseg - 1; c >= 0; c--) {
        const int64_t t0 = c * seg, t1 = t0 + seg < T ? t0 + seg : T;
        memcpy(st, ckpt + c * ss, (size_t)ss * sizeof(float));
        for (int64_t t = t0; t < t1; t++) {
            float *next = st + (t - t0 + 1) * ss;
            memcpy(next, next - ss, (size_t)ss * sizeof(float));
            ld_row(v, V, b * V->s[0] + t * V->s[1] + h * V->s[2], V->s[3], dv);
            step(next, expf(ld_at(&p->g, b, t, h)), ld_at(&p->beta, b, t, h), kn + t * dk, v, NULL,
                 pvs + (t - t0) * dv, us + (t - t0) * dv, NULL, dk, dv);
        }
        for (int64_t t = t1 - 1; t >= t0; t--) {
            const float *restrict Sprev = st + (t - t0) * ss, *restrict S = Sprev + ss;
            const float *restrict pv = pvs + (t - t0) * dv, *restrict u = us + (t - t0) * dv;
            const float *restrict q = qs + t * dk, *restrict k = kn + t * dk;
            const float a = expf(ld_at(&p->g, b, t, h)), beta = ld_at(&p->beta, b, t, h);
            ld_row(v, V, b * V->s[0] + t * V->s[1] + h * V->s[2], V->s[3], dv);
            ld_row(dout, &p->dout, b * p->dout.s[0] + t * p->dout.s[1] + h * p->dout.s[2], p->dout.s[3], dv);
            for (int64_t j = 0; j < dv; j++) du[j] = 0;
            /* o = S^T qs: dS += qs do^T, dqs = S do; S = S' + kn u^T: dkn += dS u, du = dS^T kn */
            for (int64_t i = 0; i < dk; i++) {
                float *restrict dr = dS + i * dv;
                const float *restrict sr = S + i * dv;
                const float qi = q[i], ki = k[i];
                float aq = 0, ak = 0;
                for (int64_t j = 0; j < dv; j++) {
                    dr[j] += qi * dout[j];
                    aq += sr[j] * dout[j];
                    ak += dr[j] * u[j];
                    du[j] += ki * dr[j];
                }
                dqn[t * dk + i] += scale * aq;
                dkn[t * dk + i] += ak;
            }
            /* u = beta (v - p) */
            float db = 0;
            for (int64_t j = 0; j < dv; j++) {
                db += du[j] * (v[j] - pv[j]);
                dvr[j] = beta * du[j];
                dp[j] = -beta * du[j];
            }
            st_at(&p->grad_beta, b, t, h, db);
            st_row(&p->grad_v, b * p->grad_v.s[0] + t * p->grad_v.s[1] + h * p->grad_v.s[2], p->grad_v.s[3], dvr, dv);
            /* p = S'^T kn with S' = a S_{t-1}: dS += kn dp^T (the gradient of S'), dkn += S' dp,
             * dg = <S', dS'>; then dS = a dS' (the gradient of S_{t-1}) */
            double dg = 0;
            for (int64_t i = 0; i < dk; i++) {
                float *restrict dr = dS + i * dv;
                const float *restrict sr = Sprev + i * dv;
                const float ki = k[i];
                float ak = 0, ag = 0;
                for (int64_t j = 0; j < dv; j++) {
                    dr[j] += ki * dp[j];
                    ak += sr[j] * dp[j];
                    ag += sr[j] * dr[j];
                    dr[j] *= a;
                }
                dkn[t * dk + i] += a * ak;
                dg += ag;
            }
            st_at(&p->grad_g, b, t, h, (float)(a * dg));
        }
    }
    st_state(p, &p->grad_h0, b, h, dS);
}

/* dx = r (dxn - (dxn.xn) xn) (the L2 norm's backward; dx = dxn without it) for the rows
 * of q or k of (b, g), xn recomputed from the input. */
static void qk_grad(const cg_gdr_prob *p, const cg_view *x, const cg_view *dx, int64_t b, int64_t g, const float *dxn,
                    float *xn) {
    const int64_t dk = p->dk;
    for (int64_t t = 0; t < p->T; t++) {
        const float *d = dxn + t * dk;
        const int64_t off = b * dx->s[0] + t * dx->s[1] + g * dx->s[2];
        if (!p->l2norm) {
            st_row(dx, off, dx->s[3], d, dk);
            continue;
        }
        const float r = ld_qk(p, x, b, t, g, 1, xn);
        double dot = 0;
        for (int64_t i = 0; i < dk; i++) dot += (double)d[i] * xn[i];
        for (int64_t i = 0; i < dk; i++) xn[i] = r * (d[i] - (float)dot * xn[i]);
        st_row(dx, off, dx->s[3], xn, dk);
    }
}

static void bwd_task(void *arg, int64_t task, int tid) {
    const gdr_job *J = arg;
    const cg_gdr_prob *p = J->p;
    const int64_t T = p->T, dk = p->dk, b = task / p->G, g = task % p->G, hpg = p->H / p->G;
    float *qs = J->ws + (size_t)tid * J->per, *kn = qs + T * dk, *dqn = kn + T * dk, *dkn = dqn + T * dk;
    float *W = dkn + T * dk;
    for (int64_t t = 0; t < T; t++) {
        ld_qk(p, &p->q, b, t, g, (float)p->scale, qs + t * dk);
        ld_qk(p, &p->k, b, t, g, 1, kn + t * dk);
    }
    memset(dqn, 0, (size_t)(2 * T * dk) * sizeof(float));
    for (int64_t h = g * hpg; h < (g + 1) * hpg; h++) bwd_head(J, W, b, g, h, qs, kn, dqn, dkn);
    qk_grad(p, &p->q, &p->grad_q, b, g, dqn, qs);
    qk_grad(p, &p->k, &p->grad_k, b, g, dkn, kn);
}

cg_status cg__gdr_cpu_seq_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    const int64_t tasks = p->B * p->G, T = p->T, ss = p->dk * p->dv;
    cg_pool *pool;
    int threads = 1;
    cg_status st = seq_threads(ctx, cfg, "gdr_bwd (cpu, sequential)", tasks, &pool, &threads);
    if (st) return st;
    gdr_job J = {.p = p};
    J.seg = (int64_t)ceil(sqrt((double)T));
    if (J.seg < 1) J.seg = 1;
    J.nseg = (T + J.seg - 1) / J.seg;
    J.per = (size_t)(4 * T * p->dk + (J.nseg + J.seg + 2) * ss + 2 * J.seg * p->dv + 5 * p->dv);
    J.per = (J.per + 15) & ~(size_t)15;
    if (!(J.ws = cg__aligned_alloc(J.per * (size_t)threads * sizeof(float))))
        return cg__err(ctx, CG_ENOMEM, "gdr_bwd (cpu, sequential): out of memory (%d x %zu floats for T=%lld, dk=%lld, dv=%lld)",
                       threads, J.per, (long long)T, (long long)p->dk, (long long)p->dv);
    cg__pool_run(pool, threads, tasks, bwd_task, &J);
    cg__aligned_free(J.ws);
    cg__dispatch_detail(ctx, "gdr_bwd sequential threads=%d", threads);
    return CG_OK;
}

/* ----------------------------------------------------------- entry points */

/* The cpu backend runs the chunked path (gdr_cpu_chunk*.c: keys chunk and threads), faster
 * than the sequential one above at every length measured, T = 1 included (docs/bench.md);
 * the sequential path stays for the benchmark's side-by-side rows (tests/perf/gdr_cpu.c). */
cg_status cg__gdr_cpu_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__gdr_cpu_chunk_fwd(ctx, p, cfg, ex);
}

cg_status cg__gdr_cpu_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__gdr_cpu_chunk_bwd(ctx, p, cfg, ex);
}

/* The cpu backend's entry points for the gated delta rule (host_backends.c). */
CG_HOST_OP_ENTRY(cpu, gdr_fwd, cg_gdr_prob, cg__gdr_cpu_fwd)
CG_HOST_OP_ENTRY(cpu, gdr_bwd, cg_gdr_prob, cg__gdr_cpu_bwd)
