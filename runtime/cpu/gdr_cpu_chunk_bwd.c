/* gdr_cpu_chunk_bwd.c -- the gated delta rule's backward on the CPU by the chunked WY
 * form (MATH_GDN.md section 3). Built once per ISA variant.
 *
 * One task per (b, q/k group) takes the group's value heads in order (so dq and dk sum
 * over them in a fixed order: deterministic, no atomics); with fewer (b, g) pairs than
 * threads, a task per (b, value head) keeps its dq, dk apart and a second pass adds them
 * in the same order (the same bits). The task's heads go through the chunks together, so
 * q, k, K K^T and Q K^T are made once per chunk for them (gdr_cpu_chunk_prep.c). Per head:
 *   forward:  the state entering every chunk, S0[c], into per-thread scratch (S0[0] = h0),
 *             and the chunk's A, Wn and Vn (K K^T once for the group).
 *   reverse:  chunks last to first, dS = dhT (or 0) the gradient of the state at the end
 *             of the chunk; its Q, K and the right-hand sides are reloaded, then (Q scaled
 *             by s; P = (Q K^T) . Dm, Dm_ij = e^{G_i - G_j}, j <= i):
 *     dVn = P^T dO + Kw dS                      Kw = diag(e^{G_L - G}) K
 *     dK  = diag(e^{G_L - G}) Vn dS^T + dP^T Q  dP = (dO Vn^T) . Dm
 *     dQ  = [diag(e^G) dO | dP] [S0^T; K]       (one GEMM, causal in k)
 *     dG  = rows of (Q . dQ - K . dK) without dP's diagonal and dK's state part (whose
 *           terms are summed directly into dg), the last row + e^{G_L} <S0, dS>
 *     [dWn | dU] = [dVn S0^T | dVn];  [-dKbg | dVb] = A^T [dWn | dU]
 *     dK += diag(beta e^G) dKbg;  dbeta = rows of (dKbg . e^G K + dVb . V);  dv = diag(beta) dVb
 *     dG += rows of (dKbg . Kbg)
 *     dL  = strictly_lower(-A^T dAmat A^T),  dAmat = [dWn | dU] RHS^T (its strict lower part)
 *     dLg = dL . Gam;  dbeta_i += sum_j dLg_ij KK_ij;  dK += Db K + Db^T K,  Db = diag(beta) dLg
 *     dG_i += sum_j E_ij - sum_j E_ji,  E = dLg . (beta_i KK_ij)   (= dL . L)
 *     dg = the reverse cumulative sum of dG inside the chunk
 *     dS = e^{G_L} dS + Q^T diag(e^G) dO + Wn^T dVn    (then the previous chunk's)
 *   dh0 = dS.
 * dq and dk of the group's heads add up in float32 accumulators [T, dk]; at the end the
 * scale and the L2-norm backward (dx = rstd (dy - (dy . y) y), linear in dy, so the sum
 * over heads goes through it once) and the rounding to the output dtype. */
#include "gdr_cpu_chunk.h"

#include <math.h>

#ifndef GDR_KEEP_BYTES
#define GDR_KEEP_BYTES ((size_t)64 << 20)
#endif

typedef struct bwd_job {
    const cg_gdr_prob *p;
    cg_gdr_dims d;
    int64_t nc;     /* chunks per sequence */
    int64_t ldd;    /* of Ld [C, dvp + Cp] */
    int64_t cs;     /* floats per chunk and head of the forward pass's store (CS) */
    int64_t nh;     /* value heads per task: the group's, or 1 (split) */
    int keep;       /* CS holds every chunk (else one: the reverse pass solves again) */
    int split;      /* a task per (b, value head), dq and dk per head in HQ, HK, summed after */
    float *HQ, *HK; /* split: [B * H] x [T, ldk] */
    cg_gdr_scratch scratch;
} bwd_job;

/* The task's tiles beside the prep ones. */
typedef struct bwd_tiles {
    float *R2;                             /* [dvp + C, ldk]  S0^T over K (the dQ GEMM's B operand) */
    float *VnT, *dOr;                      /* [dv, ldc], [C, ldv] (dO rows; then dv) */
    float *Praw, *Pm, *dAm, *M1, *M2, *AT; /* [C, ldc] (Praw = Q K^T, shared by the heads) */
    float *Ld;                             /* [C, ldd]  [e^G dO | dP] */
    float *DWU, *DKV;                      /* [C, ldwu] [dWn | dVn], A^T of it */
    float *RHST;                           /* [dkp + dvp, ldc] */
    float *dQ, *dK, *dKs;                  /* [C, ldk] */
    float *dS, *dST;                       /* [nh] x [dk, ldv] (per head), [dv, ldk] */
    float *dG, *dB, *cs, *kd, *pd;         /* [C] */
    float *WS;                             /* [nh] x [nc, dk * ldv] chunk-entering states */
    float *KKs;                            /* [nc, C * ldc] K K^T per chunk (the group's) */
    float *CS;      /* [nh] x [nc, cs] per chunk from the forward pass: A [C, ldc], Wn [C, ldk], Vn [C, ldv] */
    float *DQ, *DK; /* [T, ldk] accumulators over the group's heads (split: one head's) */
    float *Xq;      /* [C, ldk] rows for the final L2-norm backward */
} bwd_tiles;

/* The tiles from f (NULL: only counted); returns their floats. */
static size_t layout(const bwd_job *J, float *f, bwd_tiles *t) {
    const cg_gdr_dims *d = &J->d;
    const int64_t C = d->C;
    size_t off = 0;
#define TAKE(ptr, n) (t->ptr = f ? f + off : NULL, off += (size_t)cg__gdr_al(n))
    TAKE(R2, (d->dvp + C) * d->ldk);
    TAKE(VnT, d->dv * d->ldc);
    TAKE(dOr, C * d->ldv);
    TAKE(Praw, C * d->ldc);
    TAKE(Pm, C * d->ldc);
    TAKE(dAm, C * d->ldc);
    TAKE(M1, C * d->ldc);
    TAKE(M2, C * d->ldc);
    TAKE(AT, C * d->ldc);
    TAKE(Ld, C * J->ldd);
    TAKE(DWU, C * d->ldwu);
    TAKE(DKV, C * d->ldwu);
    TAKE(RHST, (d->dkp + d->dvp) * d->ldc);
    TAKE(dQ, C * d->ldk);
    TAKE(dK, C * d->ldk);
    TAKE(dKs, C * d->ldk);
    TAKE(dS, J->nh * cg__gdr_al(d->dk * d->ldv));
    TAKE(dST, d->dv * d->ldk);
    TAKE(dG, C);
    TAKE(dB, C);
    TAKE(cs, C);
    TAKE(kd, C);
    TAKE(pd, C);
    TAKE(WS, J->nh * J->nc * d->dk * d->ldv);
    TAKE(KKs, (J->keep ? J->nc : 1) * cg__gdr_al(C * d->ldc));
    TAKE(CS, J->nh * (J->keep ? J->nc : 1) * J->cs);
    TAKE(DQ, J->split ? 0 : CG_DIM(J->p, T) * d->ldk); /* split: the head's slice of HQ, HK instead */
    TAKE(DK, J->split ? 0 : CG_DIM(J->p, T) * d->ldk);
    TAKE(Xq, C * d->ldk);
#undef TAKE
    return off;
}

static size_t bwd_floats(const bwd_job *J) {
    bwd_tiles t;
    return cg__gdr_prep_floats(&J->d) + layout(J, NULL, &t) + 16;
}

/* <a, b> over dk rows of width dvp (rows ld apart), 16 lanes per row, rows in order. */
static float tile_dot(const float *a, const float *b, int64_t ld, int64_t rows, int64_t w) {
    float s = 0.0f;
    for (int64_t i = 0; i < rows; i++) s += cg__gdr_dot16(a + i * ld, b + i * ld, w);
    return s;
}

/* Point c's A, Wn (and *Vn) at head u's part of chunk ci's store. */
static void chunk_store(const bwd_job *J, const bwd_tiles *t, int64_t u, int64_t ci, cg_gdr_chunk *c, float **Vn) {
    const cg_gdr_dims *d = &J->d;
    const int64_t slots = J->keep ? J->nc : 1;
    float *f = t->CS + (u * slots + (J->keep ? ci : 0)) * J->cs;
    c->A = f, f += cg__gdr_al(d->C * d->ldc);
    c->Wn = f, f += cg__gdr_al(d->C * d->ldk);
    *Vn = f;
}

/* The gradients of one chunk of head h (the task's u-th), after the group's part of the
 * chunk (cg__gdr_prep_qk, Praw); dS (the gradient of the state after the chunk) becomes
 * that of the state before it. first: the group's first head (the dq, dk accumulators are
 * set, not added to). */
static void bwd_chunk(const bwd_job *J, bwd_tiles *t, cg_gdr_chunk *c, int64_t b, int64_t h, int64_t u, int64_t ci,
                      int64_t t0, int64_t L, const float *S0, float *dS, int first) {
    const cg_gdr_prob *p = J->p;
    const cg_gdr_dims *d = &J->d;
    const int64_t dk = d->dk, dv = d->dv, dkp = d->dkp, dvp = d->dvp, ldk = d->ldk, ldv = d->ldv, ldc = d->ldc;
    const int64_t Cp = d->Cp, ldwu = d->ldwu, ldd = J->ldd;
    float *restrict dVn = t->DWU + dkp;

    float *Vn;
    chunk_store(J, t, u, ci, c, &Vn); /* A, Wn and Vn of the forward pass (or solved again) */
    cg__gdr_prep_head(p, d, b, h, t0, !J->keep, c);
    if (!J->keep) cg__gdr_prep_vn(d, c, S0, Vn, ldv);
    const int64_t sd = p->dout.s[1];
    cg__cpu_ld_rows(t->dOr, ldv, cg__vat(&p->dout, b * p->dout.s[0] + t0 * sd + h * p->dout.s[2]), p->dout.dt, sd, L,
                    dv, dvp);
    /* S0^T over K; rows dv..dvp zero */
    cg__ssd_transpose(t->R2, ldk, S0, ldv, dk, dv, dkp);
    memset(t->R2 + dv * ldk, 0, (size_t)((dvp - dv) * ldk) * sizeof(float));

    /* P, dVn = P^T dO + Kw dS */
    cg__ssd_decay_mask_from(t->Pm, ldc, t->Praw, ldc, L, c->Ad, c->X);
    cg__ssd_gemm(CG_SSD_KUPPER, L, dvp, L, t->Pm, 1, ldc, t->dOr, ldv, dVn, ldwu, 0);
    cg__ssd_gemm(CG_SSD_DENSE, L, dvp, dk, c->Kw, ldk, 1, dS, ldv, dVn, ldwu, 1);

    /* dKs = diag(wdec) Vn dS^T (the state part of dK) and its rows' k . dKs */
    cg__ssd_transpose(t->dST, ldk, dS, ldv, dk, dv, dkp);
    cg__ssd_gemm_rs(CG_SSD_DENSE, L, dkp, dv, Vn, ldv, 1, t->dST, ldk, t->dKs, ldk, c->wdec);
    for (int64_t i = 0; i < L; i++) t->kd[i] = cg__gdr_dot16(c->K + i * ldk, t->dKs + i * ldk, dkp);
    cg__ssd_transpose(t->VnT, ldc, Vn, ldv, L, dv, Cp);
    for (int64_t i = 0; i < L; i++) {
        const float e = c->gam[i];
        const float *restrict o = t->dOr + i * ldv;
        float *restrict l = t->Ld + i * ldd;
        for (int64_t x = 0; x < dvp; x++) l[x] = e * o[x];
    }
    float *dP = t->Ld + dvp;
    cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dv, t->dOr, ldv, 1, t->VnT, ldc, dP, ldd, 0);
    cg__ssd_decay_mask(dP, ldd, L, c->Ad, c->X);
    /* dG takes the intra-chunk terms without dP's diagonal (their q_r . dP_rr k_r and
     * k_r . dP_rr q_r cancel exactly; left in, their rounding would stay where strong decay
     * makes the true dg tiny) and without the state part of dK (added as a prefix sum below) */
    for (int64_t i = 0; i < L; i++) t->pd[i] = dP[i * ldd + i], dP[i * ldd + i] = 0.0f;
    cg__ssd_gemm(CG_SSD_KUPPER, L, dkp, L, dP, 1, ldd, c->Q, ldk, t->dK, ldk, 0);
    /* dQ = [e^G dO | dP] [S0^T; K] */
    cg__ssd_gemm(CG_SSD_KLOWER, L, dkp, dvp, t->Ld, ldd, 1, t->R2, ldk, t->dQ, ldk, 0);
    for (int64_t i = 0; i < L; i++) {
        const float *restrict q = c->Q + i * ldk, *restrict k = c->K + i * ldk, *restrict ks = t->dKs + i * ldk;
        float *restrict dq = t->dQ + i * ldk, *restrict dki = t->dK + i * ldk;
        t->dG[i] = cg__gdr_dot16(q, dq, dkp) - cg__gdr_dot16(k, dki, dkp);
        const float pd = t->pd[i];
        for (int64_t x = 0; x < dkp; x++) {
            dq[x] += pd * k[x];
            dki[x] += pd * q[x] + ks[x];
        }
    }
    t->dG[L - 1] += c->gamC * tile_dot(S0, dS, ldv, dk, dvp);

    /* WY backward: [dWn | dU], A^T of it */
    cg__ssd_gemm(CG_SSD_DENSE, L, dkp, dv, dVn, ldwu, 1, t->R2, ldk, t->DWU, ldwu, 0);
    cg__ssd_gemm(CG_SSD_KUPPER, L, dkp + dvp, L, c->A, 1, ldc, t->DWU, ldwu, t->DKV, ldwu, 0);
    for (int64_t i = 0; i < L; i++) {
        const float *restrict dkv = t->DKV + i * ldwu, *restrict k = c->K + i * ldk;
        const float bg = c->beta[i] * c->gam[i], bi = c->beta[i];
        float *restrict dki = t->dK + i * ldk, *restrict dvi = t->dOr + i * ldv;
        t->dB[i] = -c->gam[i] * cg__gdr_dot16(dkv, k, dkp) + cg__gdr_dot16(dkv + dkp, c->Vr + i * ldv, dvp);
        t->dG[i] += cg__gdr_dot16(dkv, c->RHS + i * ldwu, dkp);
        for (int64_t x = 0; x < dkp; x++) dki[x] -= bg * dkv[x];
        for (int64_t x = 0; x < dvp; x++) dvi[x] = bi * dkv[dkp + x]; /* dv, over dO (used above) */
    }
    /* dAmat's strict lower part, then dL = -A^T dAmat A^T (strict lower) */
    cg__ssd_transpose(t->RHST, ldc, c->RHS, ldwu, L, dkp + dvp, Cp);
    cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dkp + dvp, t->DWU, ldwu, 1, t->RHST, ldc, t->dAm, ldc, 0);
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = i; j < Cp; j++) t->dAm[i * ldc + j] = 0.0f;
    cg__ssd_gemm(CG_SSD_KUPPER, L, Cp, L, c->A, 1, ldc, t->dAm, ldc, t->M1, ldc, 0);
    cg__ssd_transpose(t->AT, ldc, c->A, ldc, L, L, Cp);
    cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, L, t->M1, ldc, 1, t->AT, ldc, t->M2, ldc, 0);
    for (int64_t i = 0; i < L; i++) {
        float *restrict m = t->M2 + i * ldc;
        for (int64_t j = 0; j < i; j++) m[j] = -m[j];
        for (int64_t j = i; j < Cp; j++) m[j] = 0.0f;
    }
    cg__ssd_decay_mask(t->M2, ldc, L, c->Ad, c->X); /* dLg = dL . Gam */
    for (int64_t j = 0; j < L; j++) t->cs[j] = 0.0f;
    for (int64_t i = 0; i < L; i++) {
        const float *restrict m = t->M2 + i * ldc, *restrict kk = c->KK + i * ldc;
        float *restrict rr = t->dAm + i * ldc;
        const float bi = c->beta[i];
        float db = 0.0f, rs = 0.0f;
        for (int64_t j = 0; j < i; j++) {
            const float e = m[j] * kk[j];
            db += e;
            rs += bi * e;
            t->cs[j] += bi * e;
        }
        t->dB[i] += db;
        t->dG[i] += rs;
        for (int64_t j = 0; j < Cp; j++) rr[j] = bi * m[j];
    }
    for (int64_t j = 0; j < L; j++) t->dG[j] -= t->cs[j];
    cg__ssd_gemm(CG_SSD_KLOWER, L, dkp, 0, t->dAm, ldc, 1, c->K, ldk, t->dK, ldk, 1);
    cg__ssd_gemm(CG_SSD_KUPPER, L, dkp, L, t->dAm, 1, ldc, c->K, ldk, t->dK, ldk, 1);

    /* dq, dk into the group's accumulators; dv, dbeta, dg stored */
    for (int64_t i = 0; i < L; i++) {
        float *restrict aq = t->DQ + (t0 + i) * ldk, *restrict ak = t->DK + (t0 + i) * ldk;
        const float *restrict q = t->dQ + i * ldk, *restrict k = t->dK + i * ldk;
        if (first) {
            for (int64_t x = 0; x < dkp; x++) aq[x] = q[x], ak[x] = k[x];
        } else {
            for (int64_t x = 0; x < dkp; x++) aq[x] += q[x], ak[x] += k[x];
        }
    }
    const int64_t sv = p->grad_v.s[1];
    cg__cpu_st_rows(cg__vat(&p->grad_v, b * p->grad_v.s[0] + t0 * sv + h * p->grad_v.s[2]), p->grad_v.dt, sv, t->dOr,
                    ldv, L, dv);
    const int64_t og = b * p->grad_g.s[0] + h * p->grad_g.s[2], ob = b * p->grad_beta.s[0] + h * p->grad_beta.s[2];
    /* dg_r = sum_{r' >= r} dG_r' + sum_{r' < r} k_r' . dKs_r' (the state part of dK enters
     * dG as -k_r . dKs_r on every row and +sum_r k_r . dKs_r on the last one: summed
     * directly, no difference of sums) */
    float acc = 0.0f;
    for (int64_t i = L - 1; i >= 0; i--) acc += t->dG[i], t->dG[i] = acc;
    acc = 0.0f;
    for (int64_t i = 0; i < L; i++) {
        cg__gdr_st(&p->grad_g, og + (t0 + i) * p->grad_g.s[1], t->dG[i] + acc);
        acc += t->kd[i];
        cg__gdr_st(&p->grad_beta, ob + (t0 + i) * p->grad_beta.s[1], t->dB[i]);
    }

    /* dS = e^{G_L} dS + Q^T (e^G dO) + Wn^T dVn */
    cg__ssd_gemm_beta(CG_SSD_DENSE, dk, dvp, L, c->Q, 1, ldk, t->Ld, ldd, dS, ldv, 1, c->gamC);
    cg__ssd_gemm(CG_SSD_DENSE, dk, dvp, L, c->Wn, 1, ldk, dVn, ldwu, dS, ldv, 1);
}

/* dx of rows [t0, t0 + L) of q or k of (b, g) from the accumulated gradient of the
 * scaled, normalised rows (acc: rows t0.., ldk apart): times mul (the scale for q), then
 * the L2-norm backward. */
static void store_dqk(const bwd_job *J, bwd_tiles *t, const cg_view *x, const cg_view *dx, const float *acc, int64_t b,
                      int64_t g, int64_t t0, int64_t L, float mul) {
    const cg_gdr_prob *p = J->p;
    const cg_gdr_dims *d = &J->d;
    const int64_t ldk = d->ldk, dkp = d->dkp, sx = x->s[1];
    cg__cpu_ld_rows(t->Xq, ldk, cg__vat(x, b * x->s[0] + t0 * sx + g * x->s[2]), x->dt, sx, L, d->dk, dkp);
    for (int64_t i = 0; i < L; i++) {
        float *restrict r = t->Xq + i * ldk;
        const float *restrict a = acc + i * ldk;
        if (p->l2norm) {
            const float rstd = 1.0f / sqrtf(cg__gdr_dot16(r, r, dkp) + 1e-6f);
            for (int64_t c = 0; c < dkp; c++) r[c] *= rstd; /* y */
            const float dy_y = mul * cg__gdr_dot16(a, r, dkp);
            for (int64_t c = 0; c < dkp; c++) r[c] = rstd * (mul * a[c] - dy_y * r[c]);
        } else {
            for (int64_t c = 0; c < dkp; c++) r[c] = mul * a[c];
        }
    }
    const int64_t sd = dx->s[1];
    cg__cpu_st_rows(cg__vat(dx, b * dx->s[0] + t0 * sd + g * dx->s[2]), dx->dt, sd, t->Xq, ldk, L, d->dk);
}

/* Value heads [hf, hf + nh) of q/k group g of batch b (nh = J->nh): their chunk-entering
 * states by a forward pass, then the reverse pass, chunk by chunk with the group's part
 * (q, k, K K^T, Q K^T) made once per chunk; dq, dk into t->DQ, t->DK (set by the first
 * head, added to by the others, in head order). */
static void run_group(const bwd_job *J, bwd_tiles *t, cg_gdr_chunk *c, int64_t b, int64_t g, int64_t hf) {
    const cg_gdr_prob *p = J->p;
    const cg_gdr_dims *d = &J->d;
    const int64_t dk = d->dk, dv = d->dv, dvp = d->dvp, ldv = d->ldv, ldk = d->ldk, C = d->C, T = CG_DIM(p, T),
                  nh = J->nh;
    const int64_t nc = J->nc, ssz = dk * ldv, dsz = cg__gdr_al(dk * ldv), kks = cg__gdr_al(C * d->ldc);
    float *K1 = t->R2 + dvp * ldk; /* where the group's part puts K (below S0^T: bwd_chunk's B operand) */
    for (int64_t u = 0; u < nh; u++) {
        float *S = t->WS + u * nc * ssz;
        const int64_t h = hf + u;
        if (p->h0.p)
            cg__ssd_copy_rows(S, ldv, CG_F32P(p->h0) + b * p->h0.s[0] + h * p->h0.s[1], p->h0.s[2], dk, dv, dvp);
        else memset(S, 0, (size_t)ssz * sizeof(float));
    }
    for (int64_t ci = 0; ci < nc; ci++) { /* forward: K K^T, A, Wn, Vn stored for the reverse pass */
        const int64_t t0 = ci * C, L = cg__ssd_min(C, T - t0);
        c->K = K1, c->KK = t->KKs + (J->keep ? ci : 0) * kks;
        cg__gdr_prep_qk(p, d, b, g, t0, L, 0, 1, c);
        for (int64_t u = 0; u < nh && t0 + C < T; u++)
            cg__gdr_prefetch(p, b, hf + u, t0 + C, cg__ssd_min(C, T - t0 - C), 0);
        for (int64_t u = 0; u < nh; u++) {
            float *S = t->WS + (u * nc + ci) * ssz, *Vn;
            chunk_store(J, t, u, ci, c, &Vn);
            cg__gdr_prep_head(p, d, b, hf + u, t0, 1, c);
            cg__gdr_prep_vn(d, c, S, Vn, ldv);
            if (ci + 1 == nc) continue;
            memcpy(S + ssz, S, (size_t)ssz * sizeof(float));
            cg__ssd_gemm_beta(CG_SSD_DENSE, dk, dvp, L, c->Kw, 1, ldk, Vn, ldv, S + ssz, ldv, 1, c->gamC);
        }
    }
    for (int64_t u = 0; u < nh; u++) {
        float *dS = t->dS + u * dsz;
        const int64_t h = hf + u;
        if (p->dhT.p)
            cg__ssd_copy_rows(dS, ldv, CG_F32P(p->dhT) + b * p->dhT.s[0] + h * p->dhT.s[1], p->dhT.s[2], dk, dv, dvp);
        else memset(dS, 0, (size_t)ssz * sizeof(float));
    }
    for (int64_t ci = nc - 1; ci >= 0; ci--) { /* reverse */
        const int64_t t0 = ci * C, L = cg__ssd_min(C, T - t0);
        c->K = K1, c->KK = t->KKs + (J->keep ? ci : 0) * kks;
        cg__gdr_prep_qk(p, d, b, g, t0, L, 1, !J->keep, c);
        cg__ssd_gemm(CG_SSD_NLOWER, L, d->Cp, dk, c->Q, ldk, 1, c->KT, d->ldc, t->Praw, d->ldc, 0);
        for (int64_t u = 0; u < nh && t0 > 0; u++) cg__gdr_prefetch(p, b, hf + u, t0 - C, C, 1); /* next in this pass */
        for (int64_t u = 0; u < nh; u++)
            bwd_chunk(J, t, c, b, hf + u, u, ci, t0, L, t->WS + (u * nc + ci) * ssz, t->dS + u * dsz, u == 0);
    }
    if (p->grad_h0.p)
        for (int64_t u = 0; u < nh; u++) {
            float *dh0 = CG_F32P(p->grad_h0) + b * p->grad_h0.s[0] + (hf + u) * p->grad_h0.s[1];
            const float *dS = t->dS + u * dsz;
            for (int64_t i = 0; i < dk; i++)
                memcpy(dh0 + i * p->grad_h0.s[2], dS + i * ldv, (size_t)dv * sizeof(float));
        }
}

static float *task_tiles(const bwd_job *J, int tid, cg_gdr_chunk *c, bwd_tiles *t) {
    float *f = cg__gdr_prep_layout(&J->d, cg__gdr_scratch_at(&J->scratch, tid), c);
    layout(J, f, t);
    return f;
}

/* A task per (b, g): the group's heads in order, then dq, dk stored. */
static void bwd_task(void *arg, int64_t idx, int tid) {
    const bwd_job *J = arg;
    const cg_gdr_prob *p = J->p;
    const int64_t b = idx / CG_DIM(p, G), g = idx % CG_DIM(p, G), grp = CG_DIM(p, H) / CG_DIM(p, G), C = J->d.C,
                  ldk = J->d.ldk;
    cg_gdr_chunk c;
    bwd_tiles t;
    task_tiles(J, tid, &c, &t);
    run_group(J, &t, &c, b, g, g * grp);
    for (int64_t t0 = 0; t0 < CG_DIM(p, T); t0 += C) {
        const int64_t L = cg__ssd_min(C, CG_DIM(p, T) - t0);
        store_dqk(J, &t, &p->q, &p->grad_q, t.DQ + t0 * ldk, b, g, t0, L, (float)p->scale);
        store_dqk(J, &t, &p->k, &p->grad_k, t.DK + t0 * ldk, b, g, t0, L, 1.0f);
    }
}

/* Split mode, when there are fewer (b, g) pairs than threads: a task per (b, h) ... */
static void head_task(void *arg, int64_t idx, int tid) {
    const bwd_job *J = arg;
    const int64_t slice = CG_DIM(J->p, T) * J->d.ldk;
    cg_gdr_chunk c;
    bwd_tiles t;
    task_tiles(J, tid, &c, &t);
    t.DQ = J->HQ + idx * slice, t.DK = J->HK + idx * slice;
    const int64_t h = idx % CG_DIM(J->p, H);
    run_group(J, &t, &c, idx / CG_DIM(J->p, H), h / (CG_DIM(J->p, H) / CG_DIM(J->p, G)), h);
}

/* ... then one per (b, g, chunk) adds the group's heads in head order (the same float
 * operations as bwd_task's accumulators: bitwise the same result) and stores dq, dk. */
static void sum_task(void *arg, int64_t idx, int tid) {
    const bwd_job *J = arg;
    const cg_gdr_prob *p = J->p;
    const int64_t b = idx / (CG_DIM(p, G) * J->nc), g = idx / J->nc % CG_DIM(p, G), ci = idx % J->nc,
                  grp = CG_DIM(p, H) / CG_DIM(p, G);
    const int64_t C = J->d.C, ldk = J->d.ldk, dkp = J->d.dkp, t0 = ci * C, L = cg__ssd_min(C, CG_DIM(p, T) - t0);
    cg_gdr_chunk c;
    bwd_tiles t;
    task_tiles(J, tid, &c, &t);
    for (int w = 0; w < 2; w++) {
        const float *H = w ? J->HK : J->HQ;
        float *sum = w ? t.dK : t.dQ;
        for (int64_t u = 0; u < grp; u++) {
            const float *src = H + ((b * CG_DIM(p, H) + g * grp + u) * CG_DIM(p, T) + t0) * ldk;
            for (int64_t i = 0; i < L; i++) {
                float *restrict sr = sum + i * ldk;
                const float *restrict hr = src + i * ldk;
                if (u == 0)
                    for (int64_t x = 0; x < dkp; x++) sr[x] = hr[x];
                else
                    for (int64_t x = 0; x < dkp; x++) sr[x] += hr[x];
            }
        }
    }
    store_dqk(J, &t, &p->q, &p->grad_q, t.dQ, b, g, t0, L, (float)p->scale);
    store_dqk(J, &t, &p->k, &p->grad_k, t.dK, b, g, t0, L, 1.0f);
}

cg_status cg__gdr_cpu_chunk_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    cg_gdr_run run;
    cg_status st = cg__gdr_chunk_resolve(ctx, p, cfg, 1, "cpu gdr backward (chunked)", &run);
    if (st != CG_OK || cg__gdr_chunk_empty(p)) return st; /* an error, or nothing to compute */
    bwd_job J = {.p = p, .d = cg__gdr_prep_dims(p, run.chunk)};
    J.nc = (CG_DIM(p, T) + J.d.C - 1) / J.d.C;
    J.ldd = J.d.dvp + J.d.Cp;
    /* fewer (b, g) pairs than threads, and heads to share them: a task per head (the
     * results are bitwise those of the grouped tasks, see sum_task) */
    J.split = CG_DIM(p, B) * CG_DIM(p, G) < run.threads && CG_DIM(p, H) > CG_DIM(p, G);
    J.nh = J.split ? 1 : CG_DIM(p, H) / CG_DIM(p, G);
    J.cs = cg__gdr_al(J.d.C * J.d.ldc) + cg__gdr_al(J.d.C * J.d.ldk) + cg__gdr_al(J.d.C * J.d.ldv);
    /* the per-chunk store up to 64 MiB per thread (about T = 36k / nh at dk = dv = 128,
     * C = 64); longer sequences solve each chunk again in the reverse pass */
    J.keep = (size_t)(J.nc * (J.nh * J.cs + cg__gdr_al(J.d.C * J.d.ldc))) * sizeof(float) <= GDR_KEEP_BYTES;
    const size_t per = (bwd_floats(&J) * sizeof(float) + 63) / 64 * 64, sbytes = per * (size_t)run.nscratch;
    const size_t hfl = J.split ? (size_t)(CG_DIM(p, B) * CG_DIM(p, H)) * (size_t)(CG_DIM(p, T) * J.d.ldk) : 0;
    const size_t bytes = sbytes + 2 * hfl * sizeof(float);
    void *own;
    J.scratch.stride = per;
    if (!(J.scratch.mem = cg__gdr_ws(ctx, ex, bytes, &own)))
        return cg__err(ctx, CG_ENOMEM, "cpu gdr backward: out of memory for %zu bytes of workspace", bytes);
    if (J.split) {
        J.HQ = (float *)(J.scratch.mem + sbytes), J.HK = J.HQ + hfl;
        cg__pool_run(run.pool, run.threads, CG_DIM(p, B) * CG_DIM(p, H), head_task, &J);
        cg__pool_run(run.pool, run.threads, CG_DIM(p, B) * CG_DIM(p, G) * J.nc, sum_task, &J);
    } else {
        cg__pool_run(run.pool, run.threads, CG_DIM(p, B) * CG_DIM(p, G), bwd_task, &J);
    }
    cg__ssd_big_free(own, bytes);
    cg__gdr_chunk_detail(ctx, "gdr_bwd", &run);
    return CG_OK;
}
