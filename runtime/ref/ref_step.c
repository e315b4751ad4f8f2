/* ref_step.c -- float64 reference of the decode steps (issue #36: ssd, sscan, gdr): per batch entry, the
 * chunked ops' sequential recurrence over its T (L) tokens from the state of a cache slot.
 *
 * Entry b reads slot src = state_indices[b]; src = -1 (or any index outside the cache,
 * which validation refuses for host indices) is padding: its outputs are zero, nothing is
 * read or written. The running state stays float64; it is stored (rounded once to the
 * cache's dtype) to slot dst_indices[b, t] after token t when dst_indices is given and
 * that index is a slot, else to slot src after the last token. Entries run in order;
 * validation refuses the calls whose result would depend on that order. */
#include "internal.h"

#include <math.h>
#include <string.h>

/* The slot an index names, or -1 (padding, no write, or out of range). */
static int64_t slot_of(const cg_view *v, int64_t b, int64_t t, int64_t S) {
    const int64_t x = cg__idx_at(v, b, t);
    return x >= 0 && x < S ? x : -1;
}

/* Head (or channel) h of entry b begins: padding (src < 0) zeroes its T outputs o[b, :, h, :dv]
 * and returns 0; else loads the state of slot src, cache[src, h, :dk, :dv], into S and returns 1. */
static int head_begin(const cg_view *cache, const cg_view *o, int64_t src, int64_t b, int64_t h, int64_t T, int64_t dk,
                      int64_t dv, double *S) {
    if (src < 0) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < dv; j++) cg__vstore(o, b, t, h, j, 0.0);
        return 0;
    }
    for (int64_t i = 0; i < dk; i++)
        for (int64_t j = 0; j < dv; j++) S[i * dv + j] = cg__vload(cache, src, h, i, j);
    return 1;
}

/* After token t of T: stores S to slot dst_indices[b, t] when dst is given, else to slot src
 * after the last token (module comment). */
static void head_store(const cg_view *cache, const cg_view *dst, int64_t nslots, int64_t src, int64_t b, int64_t t,
                       int64_t T, int64_t h, int64_t dk, int64_t dv, const double *S) {
    const int64_t to = dst->p ? slot_of(dst, b, t, nslots) : t == T - 1 ? src : -1;
    if (to >= 0)
        for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++) cg__vstore(cache, to, h, i, j, S[i * dv + j]);
}

/* A step's token: updates the state S of head (channel) h of entry b with token t and writes
 * its output (the op's scratch, if any, follows S). */
typedef void (*step_token_fn)(const void *p, int64_t b, int64_t t, int64_t h, double *S);

/* The walk every step shares: per entry b of B and head h of H, padding or the state of its
 * slot, then T tokens, each followed by its store (head_begin, head_store). */
typedef struct step_walk {
    const cg_view *cache, *o, *idx, *dst;
    int64_t B, H, T, S, dk, dv;
} step_walk;

static void step_walk_run(const step_walk *w, step_token_fn tok, const void *p, double *S) {
    for (int64_t b = 0; b < w->B; b++) {
        const int64_t src = slot_of(w->idx, b, 0, w->S);
        for (int64_t h = 0; h < w->H; h++) {
            if (!head_begin(w->cache, w->o, src, b, h, w->T, w->dk, w->dv, S)) continue; /* padding */
            for (int64_t t = 0; t < w->T; t++) {
                tok(p, b, t, h, S);
                head_store(w->cache, w->dst, w->S, src, b, t, w->T, h, w->dk, w->dv, S);
            }
        }
    }
}

/* A step's whole call: its state (and extra doubles of scratch) for the walk w over tok. */
static cg_status step_ref(cg_context *ctx, const char *what, const step_walk *w, int64_t extra, step_token_fn tok,
                          const void *p) {
    double *S = malloc((size_t)(w->dk * w->dv + extra) * sizeof(double));
    if (!S)
        return cg__err(ctx, CG_ENOMEM, "ref %s step: out of memory for the state (%lld x %lld)", what, (long long)w->dk,
                       (long long)w->dv);
    step_walk_run(w, tok, p, S);
    free(S);
    return CG_OK;
}

/* S = exp(log_alpha) S + k v^T; o = S^T q. */
static void ssd_token(const void *pp, int64_t b, int64_t t, int64_t h, double *S) {
    const cg_ssd_step_prob *p = pp;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), g = h / (CG_DIM(p, H) / CG_DIM(p, G));
    const double a = exp(cg__vload(&p->la, b, t, h, 0));
    for (int64_t i = 0; i < dk; i++) {
        const double ki = cg__vload(&p->k, b, t, g, i);
        for (int64_t j = 0; j < dv; j++) S[i * dv + j] = a * S[i * dv + j] + ki * cg__vload(&p->v, b, t, h, j);
    }
    for (int64_t j = 0; j < dv; j++) {
        double acc = 0;
        for (int64_t i = 0; i < dk; i++) acc += cg__vload(&p->q, b, t, g, i) * S[i * dv + j];
        cg__vstore(&p->o, b, t, h, j, acc);
    }
}

cg_status cg__ssd_step_ref(cg_context *ctx, const cg_ssd_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const step_walk w = {&p->cache,    &p->o,        &p->idx,      &p->dst,       CG_DIM(p, B),
                         CG_DIM(p, H), CG_DIM(p, T), CG_DIM(p, S), CG_DIM(p, DK), CG_DIM(p, DV)};
    return step_ref(ctx, "ssd", &w, 0, ssd_token, p);
}

static double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }

/* h = exp(dt A) h + dt B x; y = C h + D x, times silu(z) when z is given. */
static void sscan_token(const void *pp, int64_t b, int64_t t, int64_t d, double *h) {
    const cg_sscan_step_prob *p = pp;
    const int64_t N = CG_DIM(p, N), g = d / (CG_DIM(p, D) / CG_DIM(p, G));
    double dt = cg__vload(&p->delta, b, t, d, 0);
    if (p->dbias.p) dt += cg__vload(&p->dbias, d, 0, 0, 0);
    if (p->softplus) dt = softplus(dt);
    const double x = cg__vload(&p->x, b, t, d, 0);
    double y = 0;
    for (int64_t n = 0; n < N; n++) {
        h[n] = exp(dt * cg__vload(&p->A, d, n, 0, 0)) * h[n] + dt * cg__vload(&p->Bm, b, t, g, n) * x;
        y += cg__vload(&p->Cm, b, t, g, n) * h[n];
    }
    y += (p->Dv.p ? cg__vload(&p->Dv, d, 0, 0, 0) : 0.0) * x;
    if (p->z.p) {
        const double z = cg__vload(&p->z, b, t, d, 0);
        y *= z / (1.0 + exp(-z));
    }
    cg__vstore(&p->y, b, t, d, 0, y);
}

cg_status cg__sscan_step_ref(cg_context *ctx, const cg_sscan_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    /* a channel d is a head whose state is [N, 1] */
    const step_walk w = {&p->cache,    &p->y,        &p->idx,      &p->dst,      CG_DIM(p, B),
                         CG_DIM(p, D), CG_DIM(p, L), CG_DIM(p, S), CG_DIM(p, N), 1};
    return step_ref(ctx, "sscan", &w, 0, sscan_token, p);
}

/* q or k at (b, t, g) into x, L2-normalised over dk when the problem says so (gdr_fwd's). */
static void gdr_load_qk(const cg_gdr_step_prob *p, const cg_view *v, int64_t b, int64_t t, int64_t g, double *x) {
    double ss = 0;
    for (int64_t i = 0; i < CG_DIM(p, DK); i++) {
        x[i] = cg__vload(v, b, t, g, i);
        ss += x[i] * x[i];
    }
    if (!p->l2norm) return;
    const double r = 1 / sqrt(ss + 1e-6);
    for (int64_t i = 0; i < CG_DIM(p, DK); i++) x[i] *= r;
}

/* The gated delta rule's step (ref_gdr.c's forward loop over a cache slot):
 * S = exp(g) S; u = beta (v - S^T k); S += k u^T; o = S^T (scale q). Its scratch q, k [dk],
 * pv, u [dv] follows S. */
static void gdr_token(const void *pp, int64_t b, int64_t t, int64_t h, double *S) {
    const cg_gdr_step_prob *p = pp;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), g = h / (CG_DIM(p, H) / CG_DIM(p, G));
    double *q = S + dk * dv, *k = q + dk, *pv = k + dk, *u = pv + dv;
    gdr_load_qk(p, &p->q, b, t, g, q);
    gdr_load_qk(p, &p->k, b, t, g, k);
    const double a = exp(cg__vload(&p->g, b, t, h, 0)), beta = cg__vload(&p->beta, b, t, h, 0);
    for (int64_t j = 0; j < dv; j++) pv[j] = 0;
    for (int64_t i = 0; i < dk; i++)
        for (int64_t j = 0; j < dv; j++) {
            S[i * dv + j] *= a;
            pv[j] += k[i] * S[i * dv + j];
        }
    for (int64_t j = 0; j < dv; j++) u[j] = beta * (cg__vload(&p->v, b, t, h, j) - pv[j]);
    for (int64_t j = 0; j < dv; j++) {
        double acc = 0;
        for (int64_t i = 0; i < dk; i++) {
            S[i * dv + j] += k[i] * u[j];
            acc += q[i] * S[i * dv + j];
        }
        cg__vstore(&p->o, b, t, h, j, p->scale * acc);
    }
}

cg_status cg__gdr_step_ref(cg_context *ctx, const cg_gdr_step_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const step_walk w = {&p->cache,    &p->o,        &p->idx,      &p->dst,       CG_DIM(p, B),
                         CG_DIM(p, H), CG_DIM(p, T), CG_DIM(p, S), CG_DIM(p, DK), CG_DIM(p, DV)};
    return step_ref(ctx, "gdr", &w, 2 * CG_DIM(p, DK) + 2 * CG_DIM(p, DV), gdr_token, p);
}

CG_HOST_OP_ENTRY(ref, ssd_step, cg_ssd_step_prob, cg__ssd_step_ref)
CG_HOST_OP_ENTRY(ref, sscan_step, cg_sscan_step_prob, cg__sscan_step_ref)
CG_HOST_OP_ENTRY(ref, gdr_step, cg_gdr_step_prob, cg__gdr_step_ref)
