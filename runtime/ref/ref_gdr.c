/* ref_gdr.c -- float64 sequential reference of the gated delta rule, forward and backward
 * (MATH_GDN.md section 4: the recurrence as fla defines it).
 *
 * Per (b, value head h), q/k head g = h / (H / G), state S [dk, dv] (h0 or 0 before token 0);
 * qn, kn the inputs, L2-normalised over dk when use_qk_l2norm (x / sqrt(x.x + 1e-6)), s the
 * resolved scale:
 *   S' = exp(g_t) S;  p = S'^T kn;  u = beta_t (v_t - p);  S_t = S' + kn u^T;  o_t = S_t^T (s qn).
 * The backward is reverse-mode AD of that loop, with dS the gradient of S_t (dhT or 0 after
 * the last token), for t = T-1 .. 0:
 *   dS += (s qn) do^T;  dqn += s S_t do;  dkn += dS u;  du = dS^T kn;
 *   dbeta = du.(v - p);  dv = beta du;  dp = -beta du;
 *   dS += kn dp^T (now the gradient of S');  dkn += S' dp;  dg = <S', dS>;  dS *= exp(g_t).
 * Then dh0 = dS. dqn, dkn of a group are summed over its value heads in head order (one
 * accumulator per (b, g)); then through the L2 norm, dx = (dxn - (dxn.xn) xn) / sqrt(x.x + 1e-6).
 * S_{t-1} is recomputed per segment of about sqrt(T) tokens from checkpoints taken by the
 * same forward loop (bit-identical to the forward), so memory grows as sqrt(T) dk dv.
 * Plain loops, all math in double; views of any dtype and strides are read through
 * cg__vload / written through cg__vstore. */
#include "internal.h"
#include "ref_ckpt.h"

#include <math.h>
#include <string.h>

#define GDR_L2_EPS 1e-6

/* x[0, dk) of q or k at (b, t, g), normalised when the problem says so; returns
 * 1 / sqrt(x.x + eps) (1 without the norm). */
static double load_qk(const cg_gdr_prob *p, const cg_view *v, int64_t b, int64_t t, int64_t g, double *x) {
    double ss = 0;
    for (int64_t i = 0; i < CG_DIM(p, DK); i++) {
        x[i] = cg__vload(v, b, t, g, i);
        ss += x[i] * x[i];
    }
    if (!p->l2norm) return 1;
    const double r = 1 / sqrt(ss + GDR_L2_EPS);
    for (int64_t i = 0; i < CG_DIM(p, DK); i++) x[i] *= r;
    return r;
}

/* Token t of value head h: kn, v (and s qn when q is not NULL) into row buffers; *beta;
 * returns exp(g_t). */
static double load_token(const cg_gdr_prob *p, int64_t b, int64_t t, int64_t g, int64_t h, double *q, double *k,
                         double *v, double *beta) {
    if (q) {
        (void)load_qk(p, &p->q, b, t, g, q);
        for (int64_t i = 0; i < CG_DIM(p, DK); i++) q[i] *= p->scale;
    }
    (void)load_qk(p, &p->k, b, t, g, k);
    for (int64_t j = 0; j < CG_DIM(p, DV); j++) v[j] = cg__vload(&p->v, b, t, h, j);
    *beta = cg__vload(&p->beta, b, t, h, 0);
    return exp(cg__vload(&p->g, b, t, h, 0));
}

/* One step on S in place: S = a S; pv = S^T k; u = beta (v - pv); S += k u^T. */
static void state_step(double *S, double a, double beta, const double *k, const double *v, double *pv, double *u,
                       int64_t dk, int64_t dv) {
    for (int64_t j = 0; j < dv; j++) pv[j] = 0;
    for (int64_t i = 0; i < dk; i++) {
        double *row = S + i * dv;
        for (int64_t j = 0; j < dv; j++) {
            row[j] *= a;
            pv[j] += k[i] * row[j];
        }
    }
    for (int64_t j = 0; j < dv; j++) u[j] = beta * (v[j] - pv[j]);
    for (int64_t i = 0; i < dk; i++)
        for (int64_t j = 0; j < dv; j++) S[i * dv + j] += k[i] * u[j];
}

/* A [b, h, dk, dv] state view into S (0 when absent). */
static void load_state(const cg_gdr_prob *p, const cg_view *v, int64_t b, int64_t h, double *S) {
    if (!v->p) {
        memset(S, 0, (size_t)(CG_DIM(p, DK) * CG_DIM(p, DV)) * sizeof *S);
        return;
    }
    for (int64_t i = 0; i < CG_DIM(p, DK); i++)
        for (int64_t j = 0; j < CG_DIM(p, DV); j++) S[i * CG_DIM(p, DV) + j] = cg__vload(v, b, h, i, j);
}

static void store_state(const cg_gdr_prob *p, const cg_view *v, int64_t b, int64_t h, const double *S) {
    if (!v->p) return;
    for (int64_t i = 0; i < CG_DIM(p, DK); i++)
        for (int64_t j = 0; j < CG_DIM(p, DV); j++) cg__vstore(v, b, h, i, j, S[i * CG_DIM(p, DV) + j]);
}

cg_status cg__gdr_ref_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), hpg = CG_DIM(p, H) / CG_DIM(p, G);
    double *S = malloc((size_t)(dk * dv + 2 * dk + 3 * dv) * sizeof(double));
    if (!S)
        return cg__err(ctx, CG_ENOMEM, "ref gdr forward: out of memory for the state (dk=%lld, dv=%lld)", (long long)dk,
                       (long long)dv);
    double *q = S + dk * dv, *k = q + dk, *v = k + dk, *pv = v + dv, *u = pv + dv;
    for (int64_t b = 0; b < CG_DIM(p, B); b++)
        for (int64_t h = 0; h < CG_DIM(p, H); h++) {
            const int64_t g = h / hpg;
            load_state(p, &p->h0, b, h, S);
            for (int64_t t = 0; t < CG_DIM(p, T); t++) {
                double beta;
                const double a = load_token(p, b, t, g, h, q, k, v, &beta);
                state_step(S, a, beta, k, v, pv, u, dk, dv);
                for (int64_t j = 0; j < dv; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < dk; i++) acc += q[i] * S[i * dv + j];
                    cg__vstore(&p->o, b, t, h, j, acc);
                }
            }
            store_state(p, &p->hT, b, h, S);
        }
    free(S);
    return CG_OK;
}

/* dx = r (dxn - (dxn.xn) xn) with xn = r x (the L2 norm's backward); dxn without the norm. */
static void l2norm_bwd(const cg_gdr_prob *p, const cg_view *x, const cg_view *dx, int64_t b, int64_t g,
                       const double *dxn, int64_t T, double *xn) {
    for (int64_t t = 0; t < T; t++) {
        const double *d = dxn + t * CG_DIM(p, DK);
        const double r = load_qk(p, x, b, t, g, xn);
        double dot = 0;
        for (int64_t i = 0; i < CG_DIM(p, DK); i++) dot += d[i] * xn[i];
        for (int64_t i = 0; i < CG_DIM(p, DK); i++)
            cg__vstore(dx, b, t, g, i, p->l2norm ? r * (d[i] - dot * xn[i]) : d[i]);
    }
}

cg_status cg__gdr_ref_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const int64_t T = CG_DIM(p, T), dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), hpg = CG_DIM(p, H) / CG_DIM(p, G),
                  ss = dk * dv;
    /* after the checkpoints (ref_ckpt.h): dS, the gradient of the state; q, k, v, pv, u,
     * dout, du, dp; dqn, dkn [T, dk] per (b, g). */
    cg_ref_ckpt ck;
    cg_status st0 = cg__ref_ckpt_alloc(ctx, "gdr", T, dk, dv, ss + 2 * dk + 6 * dv + 2 * T * dk, &ck);
    if (st0 != CG_OK) return st0;
    const int64_t seg = ck.seg, nseg = ck.nseg;
    double *ckpt = ck.ckpt, *st = ck.st, *dS = ck.rest;
    double *q = dS + ss, *k = q + dk, *v = k + dk, *pv = v + dv, *u = pv + dv, *dout = u + dv;
    double *du = dout + dv, *dp = du + dv;
    double *dqn = dp + dv, *dkn = dqn + T * dk;

    for (int64_t b = 0; b < CG_DIM(p, B); b++)
        for (int64_t g = 0; g < CG_DIM(p, G); g++) {
            memset(dqn, 0, (size_t)(2 * T * dk) * sizeof(double));
            for (int64_t h = g * hpg; h < (g + 1) * hpg; h++) {
                /* forward: checkpoints */
                load_state(p, &p->h0, b, h, st);
                for (int64_t t = 0; t < T; t++) {
                    if (t % seg == 0) memcpy(ckpt + (t / seg) * ss, st, (size_t)ss * sizeof(double));
                    double beta;
                    const double a = load_token(p, b, t, g, h, NULL, k, v, &beta);
                    state_step(st, a, beta, k, v, pv, u, dk, dv);
                }
                load_state(p, &p->dhT, b, h, dS);
                for (int64_t c = nseg - 1; c >= 0; c--) {
                    const int64_t t0 = c * seg, t1 = t0 + seg < T ? t0 + seg : T;
                    memcpy(st, ckpt + c * ss, (size_t)ss * sizeof(double));
                    for (int64_t t = t0; t < t1; t++) {
                        double *next = st + (t - t0 + 1) * ss, beta;
                        memcpy(next, next - ss, (size_t)ss * sizeof(double));
                        const double a = load_token(p, b, t, g, h, NULL, k, v, &beta);
                        state_step(next, a, beta, k, v, pv, u, dk, dv);
                    }
                    for (int64_t t = t1 - 1; t >= t0; t--) {
                        const double *Sprev = st + (t - t0) * ss, *S = Sprev + ss;
                        double beta;
                        const double a = load_token(p, b, t, g, h, q, k, v, &beta);
                        for (int64_t j = 0; j < dv; j++) {
                            dout[j] = cg__vload(&p->dout, b, t, h, j);
                            pv[j] = 0;
                        }
                        for (int64_t i = 0; i < dk; i++)
                            for (int64_t j = 0; j < dv; j++) pv[j] += a * Sprev[i * dv + j] * k[i];
                        for (int64_t j = 0; j < dv; j++) u[j] = beta * (v[j] - pv[j]), du[j] = 0;
                        /* o = S^T (s qn): dS += (s qn) do^T, dqn += s S do */
                        for (int64_t i = 0; i < dk; i++) {
                            double aq = 0, ak = 0;
                            for (int64_t j = 0; j < dv; j++) {
                                dS[i * dv + j] += q[i] * dout[j];
                                aq += S[i * dv + j] * dout[j];
                                ak += dS[i * dv + j] * u[j];
                                du[j] += dS[i * dv + j] * k[i];
                            }
                            dqn[t * dk + i] += p->scale * aq;
                            dkn[t * dk + i] += ak; /* S = S' + kn u^T */
                        }
                        /* u = beta (v - p) */
                        double db = 0;
                        for (int64_t j = 0; j < dv; j++) {
                            db += du[j] * (v[j] - pv[j]);
                            cg__vstore(&p->grad_v, b, t, h, j, beta * du[j]);
                            dp[j] = -beta * du[j];
                        }
                        cg__vstore(&p->grad_beta, b, t, h, 0, db);
                        /* p = S'^T kn, S' = exp(g) S_{t-1} */
                        double dg = 0;
                        for (int64_t i = 0; i < dk; i++) {
                            double ak = 0;
                            for (int64_t j = 0; j < dv; j++) {
                                dS[i * dv + j] += k[i] * dp[j];
                                ak += Sprev[i * dv + j] * dp[j];
                                dg += Sprev[i * dv + j] * dS[i * dv + j];
                            }
                            dkn[t * dk + i] += a * ak;
                        }
                        cg__vstore(&p->grad_g, b, t, h, 0, a * dg);
                        for (int64_t e = 0; e < ss; e++) dS[e] *= a;
                    }
                }
                store_state(p, &p->grad_h0, b, h, dS);
            }
            l2norm_bwd(p, &p->q, &p->grad_q, b, g, dqn, T, q);
            l2norm_bwd(p, &p->k, &p->grad_k, b, g, dkn, T, k);
        }
    free(ck.mem);
    return CG_OK;
}

/* The ref backend's entry points for the gated delta rule (host_backends.c). */
CG_HOST_OP_ENTRY(ref, gdr_fwd, cg_gdr_prob, cg__gdr_ref_fwd)
CG_HOST_OP_ENTRY(ref, gdr_bwd, cg_gdr_prob, cg__gdr_ref_bwd)
