/* ref_ssd.c -- float64 sequential-scan reference of SSD, forward and backward.
 *
 * Per (b, h), state S [dk, dv] (h0 or 0 before token 0):
 *   S_t = exp(la_t) S_{t-1} + k_t^T v_t,   o_t = q_t S_t.
 * The backward is reverse-mode AD of that loop. With G the gradient of S_t (dhT or 0
 * after the last token), for t = T-1 .. 0:
 *   G += q_t^T do_t;  dq_t += S_t do_t^T;  dk_t += G v_t;  dv_t = k_t G;
 *   dla_t = exp(la_t) <G, S_{t-1}>;  G *= exp(la_t).   Then dh0 = G.
 * S_{t-1} is recomputed per segment of about sqrt(T) tokens from checkpoints taken by
 * the same forward loop, so the values are bit-identical to the forward's and memory
 * grows as sqrt(T) * dk * dv.
 * dq, dk of a group are the sum over its heads in head order (one accumulator per
 * (b, g), heads visited in order). Plain loops, all math in double; views of any dtype
 * and strides are read through cg__vload / written through cg__vstore. */
#include "internal.h"
#include "ref_ckpt.h"

#include <math.h>
#include <string.h>

/* Token t of head h: load q, k (group g), v into row buffers, return exp(la_t). */
static double load_token(const cg_ssd_prob *p, int64_t b, int64_t t, int64_t g, int64_t h, double *q, double *k,
                         double *v) {
    for (int64_t i = 0; i < CG_DIM(p, DK); i++) {
        if (q) q[i] = cg__vload(&p->q, b, t, g, i);
        k[i] = cg__vload(&p->k, b, t, g, i);
    }
    for (int64_t j = 0; j < CG_DIM(p, DV); j++) v[j] = cg__vload(&p->v, b, t, h, j);
    return exp(cg__vload(&p->la, b, t, h, 0));
}

/* S = decay * S + k^T v. */
static void state_step(double *S, double decay, const double *k, const double *v, int64_t dk, int64_t dv) {
    for (int64_t i = 0; i < dk; i++) {
        double *row = S + i * dv;
        double ki = k[i];
        for (int64_t j = 0; j < dv; j++) row[j] = decay * row[j] + ki * v[j];
    }
}

static void load_h0(const cg_ssd_prob *p, int64_t b, int64_t h, double *S) {
    int64_t n = CG_DIM(p, DK) * CG_DIM(p, DV);
    if (!p->h0.p) {
        memset(S, 0, (size_t)n * sizeof *S);
        return;
    }
    for (int64_t i = 0; i < CG_DIM(p, DK); i++)
        for (int64_t j = 0; j < CG_DIM(p, DV); j++) S[i * CG_DIM(p, DV) + j] = cg__vload(&p->h0, b, h, i, j);
}

cg_status cg__ssd_ref_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), hpg = CG_DIM(p, H) / CG_DIM(p, G);
    double *S = malloc((size_t)(dk * dv + 2 * dk + dv) * sizeof(double));
    if (!S)
        return cg__err(ctx, CG_ENOMEM, "ref ssd forward: out of memory for the state (dk=%lld, dv=%lld)", (long long)dk,
                       (long long)dv);
    double *q = S + dk * dv, *k = q + dk, *v = k + dk;
    for (int64_t b = 0; b < CG_DIM(p, B); b++) {
        for (int64_t h = 0; h < CG_DIM(p, H); h++) {
            const int64_t g = h / hpg;
            load_h0(p, b, h, S);
            for (int64_t t = 0; t < CG_DIM(p, T); t++) {
                double decay = load_token(p, b, t, g, h, q, k, v);
                state_step(S, decay, k, v, dk, dv);
                for (int64_t j = 0; j < dv; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < dk; i++) acc += q[i] * S[i * dv + j];
                    cg__vstore(&p->o, b, t, h, j, acc);
                }
            }
            if (p->hT.p)
                for (int64_t i = 0; i < dk; i++)
                    for (int64_t j = 0; j < dv; j++) cg__vstore(&p->hT, b, h, i, j, S[i * dv + j]);
        }
    }
    free(S);
    return CG_OK;
}

cg_status cg__ssd_ref_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const int64_t T = CG_DIM(p, T), dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), hpg = CG_DIM(p, H) / CG_DIM(p, G),
                  ss = dk * dv;
    /* after the checkpoints (ref_ckpt.h): G, the gradient of the state; q, k, v, dout;
     * dq, dkacc [T, dk] per (b, g). */
    cg_ref_ckpt ck;
    cg_status st0 = cg__ref_ckpt_alloc(ctx, "ssd", T, dk, dv, ss + 2 * dk + 2 * dv + 2 * T * dk, &ck);
    if (st0 != CG_OK) return st0;
    const int64_t seg = ck.seg, nseg = ck.nseg;
    double *ckpt = ck.ckpt, *st = ck.st, *G = ck.rest;
    double *q = G + ss, *k = q + dk, *v = k + dk, *dout = v + dv;
    double *dq = dout + dv, *dkacc = dq + T * dk; /* [T, dk] per (b, g) */

    for (int64_t b = 0; b < CG_DIM(p, B); b++) {
        for (int64_t g = 0; g < CG_DIM(p, G); g++) {
            memset(dq, 0, (size_t)(2 * T * dk) * sizeof(double));
            for (int64_t h = g * hpg; h < (g + 1) * hpg; h++) {
                /* forward: checkpoints */
                load_h0(p, b, h, st);
                for (int64_t t = 0; t < T; t++) {
                    if (t % seg == 0) memcpy(ckpt + (t / seg) * ss, st, (size_t)ss * sizeof(double));
                    double decay = load_token(p, b, t, g, h, NULL, k, v);
                    state_step(st, decay, k, v, dk, dv);
                }
                /* G = dhT or 0 */
                if (p->dhT.p) {
                    for (int64_t i = 0; i < dk; i++)
                        for (int64_t j = 0; j < dv; j++) G[i * dv + j] = cg__vload(&p->dhT, b, h, i, j);
                } else {
                    memset(G, 0, (size_t)ss * sizeof(double));
                }
                for (int64_t c = nseg - 1; c >= 0; c--) {
                    const int64_t t0 = c * seg, t1 = t0 + seg < T ? t0 + seg : T;
                    memcpy(st, ckpt + c * ss, (size_t)ss * sizeof(double));
                    for (int64_t t = t0; t < t1; t++) {
                        double *next = st + (t - t0 + 1) * ss;
                        memcpy(next, next - ss, (size_t)ss * sizeof(double));
                        double decay = load_token(p, b, t, g, h, NULL, k, v);
                        state_step(next, decay, k, v, dk, dv);
                    }
                    for (int64_t t = t1 - 1; t >= t0; t--) {
                        const double *Sprev = st + (t - t0) * ss, *S = Sprev + ss;
                        double decay = load_token(p, b, t, g, h, q, k, v);
                        for (int64_t j = 0; j < dv; j++) dout[j] = cg__vload(&p->dout, b, t, h, j);
                        /* G += q^T do */
                        for (int64_t i = 0; i < dk; i++)
                            for (int64_t j = 0; j < dv; j++) G[i * dv + j] += q[i] * dout[j];
                        /* dq += S do^T, dk += G v^T */
                        for (int64_t i = 0; i < dk; i++) {
                            double aq = 0, ak = 0;
                            for (int64_t j = 0; j < dv; j++) {
                                aq += S[i * dv + j] * dout[j];
                                ak += G[i * dv + j] * v[j];
                            }
                            dq[t * dk + i] += aq;
                            dkacc[t * dk + i] += ak;
                        }
                        /* dv = k G */
                        for (int64_t j = 0; j < dv; j++) {
                            double a = 0;
                            for (int64_t i = 0; i < dk; i++) a += k[i] * G[i * dv + j];
                            cg__vstore(&p->grad_v, b, t, h, j, a);
                        }
                        /* dla = exp(la) <G, S_{t-1}>, then G passes to t-1 */
                        double dot = 0;
                        for (int64_t e = 0; e < ss; e++) dot += G[e] * Sprev[e];
                        cg__vstore(&p->grad_la, b, t, h, 0, decay * dot);
                        for (int64_t e = 0; e < ss; e++) G[e] *= decay;
                    }
                }
                if (p->grad_h0.p)
                    for (int64_t i = 0; i < dk; i++)
                        for (int64_t j = 0; j < dv; j++) cg__vstore(&p->grad_h0, b, h, i, j, G[i * dv + j]);
            }
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < dk; i++) {
                    cg__vstore(&p->grad_q, b, t, g, i, dq[t * dk + i]);
                    cg__vstore(&p->grad_k, b, t, g, i, dkacc[t * dk + i]);
                }
        }
    }
    free(ck.mem);
    return CG_OK;
}

/* The ref backend's entry points for the SSD ops (host_backends.c). */
CG_HOST_OP_ENTRY(ref, ssd_fwd, cg_ssd_prob, cg__ssd_ref_fwd)
CG_HOST_OP_ENTRY(ref, ssd_bwd, cg_ssd_prob, cg__ssd_ref_bwd)
