/* gdr_cpu_chunk_prep.c -- one chunk's quantities of the gated delta rule that do not
 * depend on the state entering it (MATH_GDN.md 2.1-2.2), shared by the forward and the
 * backward (which recomputes them rather than store them). Built once per ISA variant.
 *
 * For the chunk's L tokens, with G the chunk-local cumulative sum of g (double):
 *   Q = s l2norm(q), K = l2norm(k) (or q, k as given when l2norm is off)
 *   KK = K K^T (lower triangle),  L_ij = beta_i KK_ij e^{G_i - G_j} (j < i)
 *   A = (I + L)^{-1} by forward substitution, row by row in float32:
 *       A_i = e_i - sum_{j < i} L_ij A_j
 *   [Wn | U] = A [-diag(beta e^G) K | diag(beta) V]   (Wn = -W: the state term is a GEMM
 *   that adds, Vn = U + Wn S0) */
#include "gdr_cpu_chunk.h"

#include <math.h>

cg_gdr_dims cg__gdr_prep_dims(const cg_gdr_prob *p, int64_t C) {
    cg_gdr_dims d;
    d.C = C, d.Cp = cg__ssd_pad(C);
    d.dk = CG_DIM(p, DK), d.dv = CG_DIM(p, DV), d.dkp = cg__ssd_pad(CG_DIM(p, DK)), d.dvp = cg__ssd_pad(CG_DIM(p, DV));
    d.ldk = cg__ssd_ld(CG_DIM(p, DK)), d.ldv = cg__ssd_ld(CG_DIM(p, DV)), d.ldc = cg__ssd_ld(C);
    d.ldwu = cg__ssd_ld(d.dkp + d.dvp);
    return d;
}

size_t cg__gdr_prep_floats(const cg_gdr_dims *d) {
    const int64_t C = d->C;
    return (size_t)(2 * cg__gdr_al(C * d->ldk) + /* Q, Kw */
                    cg__gdr_al(d->dk * d->ldc) + /* KT */
                    3 * cg__gdr_al(C * d->ldc) + /* KK, Lm, A */
                    cg__gdr_al(C * d->ldv) +     /* Vr */
                    cg__gdr_al(C * d->ldwu) +    /* RHS */
                    cg__gdr_al(C * d->ldk) +     /* Wn */
                    5 * cg__gdr_al(C) +          /* gam, wdec, beta, X (2 C) */
                    2 * cg__gdr_al(C));          /* Ad (double) */
}

float *cg__gdr_prep_layout(const cg_gdr_dims *d, float *base, cg_gdr_chunk *c) {
    const int64_t C = d->C;
    float *f = base;
#define TAKE(ptr, n) (ptr = f, f += cg__gdr_al(n))
    TAKE(c->Q, C * d->ldk);
    TAKE(c->Kw, C * d->ldk);
    TAKE(c->KT, d->dk * d->ldc);
    TAKE(c->KK, C * d->ldc);
    TAKE(c->Lm, C * d->ldc);
    TAKE(c->A, C * d->ldc);
    TAKE(c->Vr, C * d->ldv);
    TAKE(c->RHS, C * d->ldwu);
    TAKE(c->Wn, C * d->ldk);
    TAKE(c->gam, C);
    TAKE(c->wdec, C);
    TAKE(c->beta, C);
    TAKE(c->X, 2 * C);
#undef TAKE
    c->Ad = (double *)f;
    f += 2 * cg__gdr_al(C);
    c->K = NULL;
    return f;
}

void cg__gdr_load_qk(const cg_gdr_prob *p, const cg_view *x, int64_t b, int64_t g, int64_t t0, int64_t L, float mul,
                     float *dst, int64_t ld, const cg_gdr_dims *d) {
    const int64_t dk = d->dk, st = x->s[1];
    cg__cpu_ld_rows(dst, ld, cg__vat(x, b * x->s[0] + t0 * st + g * x->s[2]), x->dt, st, L, dk, d->dkp);
    for (int64_t i = 0; i < L; i++) {
        float *restrict r = dst + i * ld;
        float m = mul;
        if (p->l2norm) m = mul / sqrtf(cg__gdr_dot16(r, r, d->dkp) + 1e-6f);
        if (m != 1.0f)
            for (int64_t c = 0; c < dk; c++) r[c] *= m;
    }
}

/* A = (I + L)^{-1}, rows [0, L) of [0, Cp): row i is e_i - sum_{j<i} L_ij A_j, where A_j
 * is zero past column j. Per row, blocks of 64 columns in four 16-float vectors kept in
 * registers over the sum (a running row in memory would wait on its own stores), each
 * block taking only the rows j that reach it (j >= its first column); the zeros past j
 * add nothing, and column i of A_j, j < i, is zero, so A_ii stays 1. */
typedef float cg_v16 __attribute__((vector_size(64), aligned(4), may_alias));
static void solve_unit_lower(float *restrict A, const float *restrict Lm, int64_t ld, int64_t L, int64_t Cp) {
    for (int64_t i = 0; i < L; i++) {
        float *restrict a = A + i * ld;
        const float *restrict l = Lm + i * ld;
        for (int64_t c0 = 0; c0 < Cp; c0 += 64) {
            const int nv = (int)((Cp - c0) / 16 < 4 ? (Cp - c0) / 16 : 4);
            if (nv == 4) { /* four named vectors: a variable count would keep them in memory */
                cg_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                for (int64_t j = c0; j < i; j++) {
                    const float lij = l[j];
                    const float *restrict aj = A + j * ld + c0;
                    a0 -= lij * *(const cg_v16 *)aj, a1 -= lij * *(const cg_v16 *)(aj + 16);
                    a2 -= lij * *(const cg_v16 *)(aj + 32), a3 -= lij * *(const cg_v16 *)(aj + 48);
                }
                *(cg_v16 *)(a + c0) = a0, *(cg_v16 *)(a + c0 + 16) = a1;
                *(cg_v16 *)(a + c0 + 32) = a2, *(cg_v16 *)(a + c0 + 48) = a3;
                continue;
            }
            cg_v16 acc[3] = {{0}, {0}, {0}};
            for (int64_t j = c0; j < i; j++) {
                const float lij = l[j];
                const float *restrict aj = A + j * ld + c0;
                for (int v = 0; v < nv; v++) acc[v] -= lij * *(const cg_v16 *)(aj + 16 * v);
            }
            for (int v = 0; v < nv; v++) *(cg_v16 *)(a + c0 + 16 * v) = acc[v];
        }
        a[i] = 1.0f;
    }
}

void cg__gdr_prep_qk(const cg_gdr_prob *p, const cg_gdr_dims *d, int64_t b, int64_t g, int64_t t0, int64_t L,
                     int want_q, int want_kk, cg_gdr_chunk *c) {
    const int64_t dk = d->dk, ldk = d->ldk, ldc = d->ldc, Cp = d->Cp;
    c->L = L;
    if (want_q) cg__gdr_load_qk(p, &p->q, b, g, t0, L, (float)p->scale, c->Q, ldk, d);
    cg__gdr_load_qk(p, &p->k, b, g, t0, L, 1.0f, c->K, ldk, d);
    cg__ssd_transpose(c->KT, ldc, c->K, ldk, L, dk, Cp);
    if (want_kk) cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dk, c->K, ldk, 1, c->KT, ldc, c->KK, ldc, 0);
}

void cg__gdr_prep_head(const cg_gdr_prob *p, const cg_gdr_dims *d, int64_t b, int64_t h, int64_t t0, int solve,
                       cg_gdr_chunk *c) {
    const int64_t L = c->L, dv = d->dv, dkp = d->dkp, dvp = d->dvp, ldk = d->ldk, ldc = d->ldc, Cp = d->Cp;
    /* decays and beta */
    const int64_t og = b * p->g.s[0] + h * p->g.s[2], ob = b * p->beta.s[0] + h * p->beta.s[2];
    double acc = 0;
    for (int64_t i = 0; i < L; i++) {
        acc += cg__ssd_clamp_la(cg__gdr_ld(&p->g, og + (t0 + i) * p->g.s[1]));
        c->Ad[i] = acc;
        c->beta[i] = cg__gdr_ld(&p->beta, ob + (t0 + i) * p->beta.s[1]);
    }
    const double GL = c->Ad[L - 1];
    for (int64_t i = 0; i < L; i++) {
        c->gam[i] = cg__ssd_exp((float)c->Ad[i]);
        c->wdec[i] = cg__ssd_exp((float)(GL - c->Ad[i]));
    }
    c->gamC = c->gam[L - 1];
    for (int64_t i = 0; i < L; i++) { /* e^{G_L - G} K */
        const float w = c->wdec[i];
        const float *restrict k = c->K + i * ldk;
        float *restrict kw = c->Kw + i * ldk;
        for (int64_t x = 0; x < dkp; x++) kw[x] = w * k[x];
    }

    /* v and the right-hand sides */
    const int64_t sv = p->v.s[1];
    cg__cpu_ld_rows(c->Vr, d->ldv, cg__vat(&p->v, b * p->v.s[0] + t0 * sv + h * p->v.s[2]), p->v.dt, sv, L, dv, dvp);
    for (int64_t i = 0; i < L; i++) {
        float *restrict r = c->RHS + i * d->ldwu;
        const float *restrict k = c->K + i * ldk, *restrict v = c->Vr + i * d->ldv;
        const float bk = -c->beta[i] * c->gam[i], bv = c->beta[i];
        for (int64_t x = 0; x < dkp; x++) r[x] = bk * k[x];
        for (int64_t x = 0; x < dvp; x++) r[dkp + x] = bv * v[x];
    }
    if (!solve) return; /* A, Wn: the caller's from an earlier call */
    /* L from K K^T, A, W */
    cg__ssd_decay_mask_from(c->Lm, ldc, c->KK, ldc, L, c->Ad, c->X);
    for (int64_t i = 0; i < L; i++) {
        float *restrict l = c->Lm + i * ldc;
        const float bi = c->beta[i];
        for (int64_t j = 0; j < i; j++) l[j] *= bi;
    }
    solve_unit_lower(c->A, c->Lm, ldc, L, Cp);
    cg__ssd_gemm(CG_SSD_KLOWER, L, dkp, 0, c->A, ldc, 1, c->RHS, d->ldwu, c->Wn, ldk, 0);
}

void cg__gdr_prep_chunk(const cg_gdr_prob *p, const cg_gdr_dims *d, int64_t b, int64_t h, int64_t t0, int64_t L,
                        int want_q, int solve, cg_gdr_chunk *c) {
    cg__gdr_prep_qk(p, d, b, h / (CG_DIM(p, H) / CG_DIM(p, G)), t0, L, want_q, solve, c);
    cg__gdr_prep_head(p, d, b, h, t0, solve, c);
}

void cg__gdr_prep_vn(const cg_gdr_dims *d, const cg_gdr_chunk *c, const float *S0, float *Vn, int64_t ldvn) {
    cg__ssd_gemm(CG_SSD_KLOWER, c->L, d->dvp, 0, c->A, d->ldc, 1, c->RHS + d->dkp, d->ldwu, Vn, ldvn, 0);
    cg__ssd_gemm(CG_SSD_DENSE, c->L, d->dvp, d->dk, c->Wn, d->ldk, 1, S0, d->ldv, Vn, ldvn, 1);
}
