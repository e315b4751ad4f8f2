/* ssd_cpu_bwd.c -- SSD backward on the CPU by the chunked algorithm (KERNEL_MATH.md,
 * section Backward). Nothing per token is stored; per chunk it keeps the boundary state
 * (and, in the chunk-parallel mode, the boundary state gradient) in a workspace.
 *
 * Phase 1, one task per (b, h), sequential over chunks:
 *   forward:  S0^c for every chunk (S0^0 = h0), stored transposed: WS[c] = (S0^c)^T [dv, ldk].
 *   reverse (chunk-parallel mode only): dS_end^c stored as WD[c] [dk, ldv], from
 *             dS_end of the last chunk = dhT or 0 and
 *             dS0^c = e^{A_last} dS_end^c + Q^T diag(e^A) dO;  dh0 = dS0^0.
 * Phase 2, the gradients of one chunk of one group: the heads of the group in order, so
 * dq and dk sum over them in a fixed order (deterministic, no atomics); Q K^T once for
 * all heads. Per head, with M the decay mask and w_j = e^{A_last - A_j}:
 *   P   = (Q K^T) . M,   dP = (dO V^T) . M                    [L, L], lower triangular
 *   dQh = diag(e^A) dO S0^T + dP K                             [L, dk]
 *   dKh = diag(w) V dS_end^T + dP^T Q                          [L, dk]  (dP read transposed in place)
 *   dV  = diag(w) K dS_end + P^T dO                            [L, dv]  (P likewise)
 *   dlog_alpha_t = gamma <dS_end, S0> + sum_{i >= t} q_i . dQs_i + sum_{j < t} k_j . dKs_j
 *                  + sum_{i >= t > j} (Q K^T)_ij dP_ij
 *   with dQs, dKs the state terms of dQh, dKh (their first GEMMs): exp(la_t) <G_t, S_{t-1}>
 *   expanded over the chunk (templates/ssd_bwd.cu has the same), so no sum runs across
 *   chunks and no term is a difference of sums: exact zeros at a reset (log_alpha -inf),
 *   and a NaN reaches only the tokens whose exact gradient it reaches.
 *   Two ways to schedule it:
 *   - fused (default when there are enough (b, g) pairs for the threads): one task per
 *     (b, g) walks the chunks in reverse and carries dS of each head of the group in
 *     scratch, so dS never goes through memory; only WS does. The machines this runs on
 *     are often bound by memory bandwidth in the backward.
 *   - chunk-parallel (config bwd_split=1, or few (b, g) pairs): one task per (b, g, chunk)
 *     reads dS_end from WD.
 *
 * bf16 / fp16 q, k, v, dout (cpu_half.h) are widened into the padded tiles the float32
 * path copies them to anyway (Qt, Kt, dOt; v into Vr), and those tiles then stand for
 * them; dq, dk, dv are rounded as they are stored. */
#include "ssd_cpu.h"

#include <math.h>

typedef struct bwd_job {
    const cg_ssd_prob *p;
    int64_t C, Cp, nc, dkp, dvp, hpg;
    int64_t ldk, ldv, ldc; /* leading dimensions of the [., dkp], [., dvp], [., Cp] tiles (cg__ssd_ld) */
    int fused;
    float *WS, *WD; /* [B*H*nc] x (dv*ldk), x (dk*ldv) (WD: chunk-parallel mode only) */
    cg_ssd_scratch scratch;
} bwd_job;

/* Cumulative sums of log_alpha over a chunk (double), e^A, w and gamma. */
static float chunk_decays(const float *la, int64_t sl, int64_t L, double *restrict Ad, float *restrict eA,
                          float *restrict wv) {
    double acc = 0;
    for (int64_t i = 0; i < L; i++) {
        acc += cg__ssd_clamp_la(la[i * sl]);
        Ad[i] = acc;
    }
    const double Alast = Ad[L - 1];
    for (int64_t i = 0; i < L; i++) {
        eA[i] = cg__ssd_exp((float)Ad[i]);
        wv[i] = cg__ssd_exp((float)(Alast - Ad[i]));
    }
    return eA[L - 1];
}

/* sum_{j < dv} a[j, 0..dk) . b[j, 0..dk) (rows ld apart) in 16 float lanes: element (j, i)
 * goes to lane i mod 16 (independent chains, one vector of 16 -- a zmm, two ymm or four
 * xmm -- where one running sum would be a chain of dk dv dependent adds), then the lanes
 * are added pairwise (8 + 8, 4 + 4, ...): a fixed order, the same on every ISA. */
typedef float cg_l16 __attribute__((vector_size(64), aligned(4), may_alias));
static float tile_dot(const float *restrict a, const float *restrict b, int64_t ld, int64_t dv, int64_t dk) {
    cg_l16 s = {0};
    float t[16] = {0};
    for (int64_t j = 0; j < dv; j++) {
        const float *restrict x = a + j * ld, *restrict y = b + j * ld;
        int64_t i = 0;
        for (; i + 16 <= dk; i += 16) s += *(const cg_l16 *)(x + i) * *(const cg_l16 *)(y + i);
        for (int l = 0; i < dk; i++, l++) t[l] += x[i] * y[i];
    }
    float r[16];
    memcpy(r, &s, sizeof r);
    for (int l = 0; l < 16; l++) r[l] += t[l];
    for (int w = 8; w > 0; w >>= 1)
        for (int l = 0; l < w; l++) r[l] += r[l + w];
    return r[0];
}

/* X[i, :] *= s[i] over rows [0, L) of width n. */
static void scale_rows(float *X, int64_t ld, int64_t L, int64_t n, const float *restrict s) {
    for (int64_t i = 0; i < L; i++) {
        float *restrict x = X + i * ld;
        for (int64_t j = 0; j < n; j++) x[j] *= s[i];
    }
}

/* dst[i, j] = s[i] x[i, j] for rows i < L of view x from element off (rows ss apart, any
 * storage dtype: 16-bit rows widened first), j < w; zero for w <= j < wp. */
static void load_scaled(float *restrict dst, int64_t ldd, const cg_view *x, int64_t off, int64_t ss, int64_t L,
                        int64_t w, int64_t wp, const float *restrict s) {
    if (cg__dtype_half(x->dt)) {
        cg__cpu_ld_rows(dst, ldd, cg__vat(x, off), x->dt, ss, L, w, wp);
        scale_rows(dst, ldd, L, w, s);
        return;
    }
    for (int64_t i = 0; i < L; i++) {
        const float *restrict r = CG_F32P(*x) + off + i * ss;
        float *restrict d = dst + i * ldd;
        for (int64_t j = 0; j < w; j++) d[j] = s[i] * r[j];
        for (int64_t j = w; j < wp; j++) d[j] = 0.0f;
    }
}

/* ------------------------------------------------------------ phase 1 */

static size_t p1_floats(const bwd_job *J) {
    const cg_ssd_prob *p = J->p;
    const int64_t C = J->C;
    const size_t half = (cg__dtype_half(p->v.dt) ? cg__ssd_pad(C * J->ldv) : 0) + /* Vr */
                        (cg__dtype_half(p->q.dt) ? cg__ssd_pad(C * J->ldk) : 0);  /* Qr */
    return (size_t)(cg__ssd_pad(C * J->ldk) + cg__ssd_pad(C * J->ldv) + cg__ssd_pad(CG_DIM(p, DV) * J->ldk) +
                    cg__ssd_pad(CG_DIM(p, DK) * J->ldv) + cg__ssd_pad(CG_DIM(p, DV) * J->ldc) + 4 * cg__ssd_pad(C)) +
           half;
}

static void phase1(void *arg, int64_t bh, int tid) {
    const bwd_job *J = arg;
    const cg_ssd_prob *p = J->p;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), T = CG_DIM(p, T), C = J->C, dkp = J->dkp, dvp = J->dvp,
                  nc = J->nc;
    const int64_t ldk = J->ldk, ldv = J->ldv, ldc = J->ldc;
    const int64_t b = bh / CG_DIM(p, H), h = bh % CG_DIM(p, H), g = h / (CG_DIM(p, H) / CG_DIM(p, G));

    float *mem = cg__ssd_scratch_at(&J->scratch, tid);
    float *restrict Kw = mem;                         /* [C, dkp]  diag(w) K */
    float *restrict eAdO = Kw + cg__ssd_pad(C * ldk); /* [C, dvp]  diag(e^A) dO */
    float *restrict ST = eAdO + cg__ssd_pad(C * ldv); /* [dv, dkp] S^T */
    float *restrict dS = ST + cg__ssd_pad(dv * ldk);  /* [dk, dvp] */
    float *restrict VT = dS + cg__ssd_pad(dk * ldv);  /* [dv, Cp]  v transposed */
    float *restrict eA = VT + cg__ssd_pad(dv * ldc);
    float *restrict wv = eA + cg__ssd_pad(C);
    double *restrict Ad = (double *)(wv + cg__ssd_pad(C));
    float *restrict Vr = (float *)(Ad + cg__ssd_pad(C));                            /* [C, dvp] v widened */
    float *restrict Qr = Vr + (cg__dtype_half(p->v.dt) ? cg__ssd_pad(C * ldv) : 0); /* [C, dkp] q widened */

    /* element offsets: any storage dtype */
    const int64_t q = b * p->q.s[0] + g * p->q.s[2], k = b * p->k.s[0] + g * p->k.s[2];
    const int64_t v = b * p->v.s[0] + h * p->v.s[2], dout = b * p->dout.s[0] + h * p->dout.s[2];
    const float *la = CG_F32P(p->la) + b * p->la.s[0] + h * p->la.s[2];
    const int64_t sq = p->q.s[1], sk = p->k.s[1], sv = p->v.s[1], sd = p->dout.s[1], sl = p->la.s[1];

    /* forward over the chunks: S^T = e^{A_last} S^T + V^T diag(w) K, with V^T a transposed
     * copy where v's token rows are 256 bytes or a multiple of that apart (read in place,
     * each k step of the GEMM would be a token row of v, a page apart in the token-major
     * layout, all on one L1 set: measured slower); else v read transposed in place (the A
     * operand: broadcast scalars). The state is updated in ST (in cache) and copied to WS per
     * chunk: the GEMM writing WS[c + 1] itself from WS[c] (a GEMM with a separate C source, no copy) measured
     * no faster on g2h8_d128 fwd_bwd (75 MB of WS: the GEMM's stores then wait for its lines
     * from memory; 12% slower in one loaded A/B, equal in the next). The last chunk's update
     * (S_T) serves nothing: skipped. */
    if (p->h0.p) cg__ssd_transpose(ST, ldk, CG_F32P(p->h0) + b * p->h0.s[0] + h * p->h0.s[1], p->h0.s[2], dk, dv, dkp);
    else memset(ST, 0, (size_t)(dv * ldk) * sizeof(float));
    const int64_t nupd = nc - 1;
    /* a float32 v whose token rows are not a multiple of 256 bytes apart (and less than a
     * page) is read in place: its rows then spread over the L1 sets, a chunk's over a few pages */
    const int v_in_place = !cg__dtype_half(p->v.dt) && (sv * 4) % 256 != 0 && sv * 4 < 4096;
    for (int64_t c = 0; c < nc; c++) {
        const int64_t t0 = c * C, L = cg__ssd_min(C, T - t0);
        memcpy(J->WS + (bh * nc + c) * dv * ldk, ST, (size_t)(dv * ldk) * sizeof(float));
        if (c >= nupd) break;
        const float gamma = chunk_decays(la + t0 * sl, sl, L, Ad, eA, wv);
        load_scaled(Kw, ldk, &p->k, k + t0 * sk, sk, L, dk, dkp, wv);
        const float *A = VT;
        int64_t ars = ldc, aks = 1;
        if (cg__dtype_half(p->v.dt)) {
            cg__cpu_ld_rows(Vr, ldv, cg__vat(&p->v, v + t0 * sv), p->v.dt, sv, L, dv, dv);
            cg__ssd_transpose(VT, ldc, Vr, ldv, L, dv, J->Cp);
        } else if (v_in_place) {
            A = CG_F32P(p->v) + v + t0 * sv, ars = 1, aks = sv;
        } else {
            cg__ssd_transpose(VT, ldc, CG_F32P(p->v) + v + t0 * sv, sv, L, dv, J->Cp);
        }
        cg__ssd_gemm_beta(CG_SSD_DENSE, dv, dkp, L, A, ars, aks, Kw, ldk, ST, ldk, 1, gamma);
    }
    if (J->fused) return;
    if (p->dhT.p)
        cg__ssd_copy_rows(dS, ldv, CG_F32P(p->dhT) + b * p->dhT.s[0] + h * p->dhT.s[1], p->dhT.s[2], dk, dv, dvp);
    else memset(dS, 0, (size_t)(dk * ldv) * sizeof(float));

    /* reverse over the chunks: dS_end of each chunk; dS = e^{A_last} dS + Q^T diag(e^A) dO */
    for (int64_t c = nc - 1; c >= 0; c--) {
        const int64_t t0 = c * C, L = cg__ssd_min(C, T - t0);
        memcpy(J->WD + (bh * nc + c) * dk * ldv, dS, (size_t)(dk * ldv) * sizeof(float));
        const float gamma = chunk_decays(la + t0 * sl, sl, L, Ad, eA, wv);
        load_scaled(eAdO, ldv, &p->dout, dout + t0 * sd, sd, L, dv, dvp, eA);
        if (cg__dtype_half(p->q.dt)) { /* Q^T as A: q rows widened, read transposed */
            cg__cpu_ld_rows(Qr, ldk, cg__vat(&p->q, q + t0 * sq), p->q.dt, sq, L, dk, dk);
            cg__ssd_gemm_beta(CG_SSD_DENSE, dk, dvp, L, Qr, 1, ldk, eAdO, ldv, dS, ldv, 1, gamma);
        } else {
            cg__ssd_gemm_beta(CG_SSD_DENSE, dk, dvp, L, CG_F32P(p->q) + q + t0 * sq, 1, sq, eAdO, ldv, dS, ldv, 1,
                              gamma);
        }
    }
    if (p->grad_h0.p) {
        float *dh0 = CG_F32P(p->grad_h0) + b * p->grad_h0.s[0] + h * p->grad_h0.s[1];
        for (int64_t i = 0; i < dk; i++) memcpy(dh0 + i * p->grad_h0.s[2], dS + i * ldv, (size_t)dv * sizeof(float));
    }
}

/* ------------------------------------------------------------ phase 2 */

typedef struct p2_tiles {
    float *Qt, *Kt, *KT, *Praw, *P, *dP, *VT, *dOt, *dSeT, *dQh, *dKh, *dQa, *dKa, *dVt, *eAdO, *dS;
    float *eA, *wv, *E, *Vr;
    float *Zc;
    double *Ad, *Xs;
} p2_tiles;

/* Lays the tiles out from mem (NULL: just count); returns the floats used. */
static size_t p2_layout(const bwd_job *J, float *mem, p2_tiles *t) {
    const cg_ssd_prob *p = J->p;
    const int64_t C = J->C, dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), dkp = J->ldk, dvp = J->ldv,
                  Cp = J->ldc; /* row lengths */
    p2_tiles dummy;
    if (!t) t = &dummy;
    size_t off = 0;
#define TILE(name, n)                                                                                                  \
    do {                                                                                                               \
        t->name = mem ? mem + off : NULL;                                                                              \
        off += (size_t)cg__ssd_pad(n);                                                                                 \
    } while (0)
    TILE(Qt, C * dkp);    /* [C, dkp]  q rows (B operand: user rows may be a page apart; fused mode: read
                            transposed in place as the A operand Q^T of the dS updates) */
    TILE(Kt, C * dkp);    /* [C, dkp]  k rows */
    TILE(KT, dk * Cp);    /* [dk, Cp]  k transposed */
    TILE(Praw, C * Cp);   /* [C, Cp]   Q K^T, shared by the group's heads */
    TILE(P, C * Cp);      /* [C, Cp]   masked; read transposed in place as P^T */
    TILE(dP, C * Cp);     /* [C, Cp]   likewise */
    TILE(VT, dv * Cp);    /* [dv, Cp]  v transposed */
    TILE(dOt, C * dvp);   /* [C, dvp]  dO rows */
    TILE(dSeT, dv * dkp); /* [dv, dkp] dS_end transposed */
    TILE(dQh, C * dkp);   /* [C, dkp]  this head's dq */
    TILE(dKh, C * dkp);   /* [C, dkp]  this head's dk */
    TILE(dQa, C * dkp);   /* [C, dkp]  dq summed over the group */
    TILE(dKa, C * dkp);
    TILE(dVt, C * dvp);                         /* [C, dvp]  dv rows before the strided store */
    TILE(eAdO, J->fused ? C * dvp : 0);         /* [C, dvp]  diag(e^A) dO (fused mode) */
    TILE(dS, J->fused ? J->hpg * dk * dvp : 0); /* [hpg][dk, dvp] dS of each head (fused mode) */
    TILE(eA, C);
    TILE(wv, C);
    TILE(E, 2 * C);                                  /* scratch of the decay masks */
    TILE(Vr, cg__dtype_half(p->v.dt) ? C * dvp : 0); /* [C, dvp]  v rows widened (bf16 / fp16 v) */
#undef TILE
    t->Ad = mem ? (double *)(mem + off) : NULL;
    off += 2 * (size_t)cg__ssd_pad(C);
    t->Zc = mem ? mem + off : NULL; /* [C] the dlog_alpha pairs' sums per token */
    off += (size_t)cg__ssd_pad(C);
    t->Xs = mem ? (double *)(mem + off) : NULL; /* [C] the suffix sums of x */
    off += 2 * (size_t)cg__ssd_pad(C);
    return off;
}

/* Rows [0, L) x [0, w) of src (rows *ss elements apart, dtype dt) as float32: widened into
 * the padded tile (ldt; zeros in [w, wp)) when 16-bit, which then stands for them (*ss =
 * ldt); else src itself, copied into the tile too when copy. */
static const float *tile_rows(float *tile, int64_t ldt, const void *src, cg_dtype dt, int64_t *ss, int64_t L, int64_t w,
                              int64_t wp, int copy) {
    if (cg__dtype_half(dt)) {
        cg__cpu_ld_rows(tile, ldt, src, dt, *ss, L, w, wp);
        *ss = ldt;
        return tile;
    }
    if (copy) cg__ssd_copy_rows(tile, ldt, src, *ss, L, w, wp);
    return src;
}

/* The gradients of chunk c of group (b, g). dS_end comes from WD, or in the fused mode
 * from t->dS, which is then moved back one chunk: dS = e^{A_last} dS + Q^T diag(e^A) dO. */
static void chunk_grads(const bwd_job *J, p2_tiles *tp, int64_t b, int64_t g, int64_t c) {
    const cg_ssd_prob *p = J->p;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), T = CG_DIM(p, T), C = J->C, Cp = J->Cp, dkp = J->dkp,
                  dvp = J->dvp, nc = J->nc;
    const int64_t hpg = J->hpg, ldk = J->ldk, ldv = J->ldv, ldc = J->ldc;
    const int64_t t0 = c * C, L = cg__ssd_min(C, T - t0);
    p2_tiles t = *tp;

    const void *q16 = cg__vat(&p->q, b * p->q.s[0] + g * p->q.s[2] + t0 * p->q.s[1]);
    const void *k16 = cg__vat(&p->k, b * p->k.s[0] + g * p->k.s[2] + t0 * p->k.s[1]);
    const float *q, *k;
    int64_t sq = p->q.s[1], sk = p->k.s[1];
    /* q and k rows as B operands: copied to padded rows (user rows 512 bytes or a page apart
     * map a B panel's rows onto a few cache sets); 16-bit ones widened there, and the
     * copies stand for them below */
    q = tile_rows(t.Qt, ldk, q16, p->q.dt, &sq, L, dk, dkp, 1);
    k = tile_rows(t.Kt, ldk, k16, p->k.dt, &sk, L, dk, dkp, 1);
    cg__ssd_transpose(t.KT, ldc, k, sk, L, dk, Cp);
    cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dk, q, sq, 1, t.KT, ldc, t.Praw, ldc, 0);
    /* float32 dq and dk: this chunk's rows in the user's tensors (see the sums) */
    float *dq32 = p->grad_q.dt == CG_F32
                      ? CG_F32P(p->grad_q) + b * p->grad_q.s[0] + g * p->grad_q.s[2] + t0 * p->grad_q.s[1]
                      : NULL;
    float *dk32 = p->grad_k.dt == CG_F32
                      ? CG_F32P(p->grad_k) + b * p->grad_k.s[0] + g * p->grad_k.s[2] + t0 * p->grad_k.s[1]
                      : NULL;

    for (int64_t h = g * hpg; h < (g + 1) * hpg; h++) {
        const int64_t bh = b * CG_DIM(p, H) + h;
        const void *v16 = cg__vat(&p->v, b * p->v.s[0] + h * p->v.s[2] + t0 * p->v.s[1]);
        const void *d16 = cg__vat(&p->dout, b * p->dout.s[0] + h * p->dout.s[2] + t0 * p->dout.s[1]);
        const float *v, *dout;
        const float *la = CG_F32P(p->la) + b * p->la.s[0] + h * p->la.s[2] + t0 * p->la.s[1];
        const float *S0T = J->WS + (bh * nc + c) * dv * ldk;                                        /* [dv, dkp] */
        float *dSe = J->fused ? t.dS + (h - g * hpg) * dk * ldv : J->WD + (bh * nc + c) * dk * ldv; /* [dk, dvp] */
        int64_t sv = p->v.s[1], sd = p->dout.s[1];
        chunk_decays(la, p->la.s[1], L, t.Ad, t.eA, t.wv);

        /* tiles of this head (16-bit v and dout: widened, the tiles stand for them) */
        v = tile_rows(t.Vr, ldv, v16, p->v.dt, &sv, L, dv, dvp, 0);
        cg__ssd_transpose(t.VT, ldc, v, sv, L, dv, Cp);
        cg__ssd_transpose(t.dSeT, ldk, dSe, ldv, dk, dv, dkp);
        dout = tile_rows(t.dOt, ldv, d16, p->dout.dt, &sd, L, dv, dvp, 1);

        /* P and dP, masked */
        cg__ssd_decay_mask_from(t.P, ldc, t.Praw, ldc, L, t.Ad, t.E);
        cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dv, dout, sd, 1, t.VT, ldc, t.dP, ldc, 0);
        cg__ssd_decay_mask(t.dP, ldc, L, t.Ad, t.E);

        /* the state terms: dQh = diag(e^A) (dO S0^T), dKh = diag(w) (V dS_end^T) (the row
         * scales applied by the GEMMs) */
        cg__ssd_gemm_rs(CG_SSD_DENSE, L, dkp, dv, dout, sd, 1, S0T, ldk, t.dQh, ldk, t.eA);
        cg__ssd_gemm_rs(CG_SSD_DENSE, L, dkp, dv, v, sv, 1, t.dSeT, ldk, t.dKh, ldk, t.wv);
        /* dlog_alpha's chunk term gamma <dS_end, S0>, and x_t = q_t . dQs_t, y_t = k_t . dKs_t
         * in the scratch E (2 C floats) before the intra-chunk GEMMs add to dQh, dKh */
        const double base = (double)t.eA[L - 1] * (double)tile_dot(t.dSeT, S0T, ldk, dv, dk); /* both [dv, ldk] */
        float *restrict xs = t.E, *restrict ys = t.E + C;
        for (int64_t i = 0; i < L; i++) {
            const float *restrict qi = q + i * sq, *restrict ki = k + i * sk;
            const float *restrict dqi = t.dQh + i * ldk, *restrict dki = t.dKh + i * ldk;
            float a = 0, c2 = 0;
            for (int64_t j = 0; j < dk; j++) {
                a += qi[j] * dqi[j];
                c2 += ki[j] * dki[j];
            }
            xs[i] = a;
            ys[i] = c2;
        }
        /* dQh += dP K, dKh += dP^T Q (dP read transposed in place) */
        cg__ssd_gemm(CG_SSD_KLOWER, L, dkp, 0, t.dP, ldc, 1, t.Kt, ldk, t.dQh, ldk, 1);
        cg__ssd_gemm(CG_SSD_KUPPER, L, dkp, L, t.dP, 1, ldc, t.Qt, ldk, t.dKh, ldk, 1);

        /* dV = diag(w) (K dS_end) + P^T dO, in padded rows, then stored (the GEMM storing
         * into dv itself measured no faster: its stores then wait for dv's lines from memory) */
        void *dvo = cg__vat(&p->grad_v, b * p->grad_v.s[0] + h * p->grad_v.s[2] + t0 * p->grad_v.s[1]);
        cg__ssd_gemm_rs(CG_SSD_DENSE, L, dvp, dk, k, sk, 1, dSe, ldv, t.dVt, ldv, t.wv);
        cg__ssd_gemm(CG_SSD_KUPPER, L, dvp, L, t.P, 1, ldc, t.dOt, ldv, t.dVt, ldv, 1);
        cg__cpu_st_rows(dvo, p->grad_v.dt, p->grad_v.s[1], t.dVt, ldv, L, dv);

        /* dlog_alpha_t = base + sum_{i >= t} x_i + sum_{j < t} y_j + sum_{i >= t > j} Z_ij,
         * Z = (Q K^T) .* dP (masked). The pairs' sums without a sum across a row (they would
         * not vectorize): dP (its GEMMs are done) becomes the column sums from the bottom,
         * dP[t, j] = sum_{i >= t} Z_ij for j < t, rows of vectors; P (dV's GEMM is done) its
         * transpose; then Zr[t] = sum_{j < t} P[j, t], vectors along t. */
        for (int64_t i = L - 1; i >= 1; i--) {
            const float *restrict zr = t.Praw + i * ldc, *restrict nx = t.dP + (i + 1) * ldc;
            float *restrict dr = t.dP + i * ldc;
            if (i == L - 1)
                for (int64_t j = 0; j < i; j++) dr[j] *= zr[j];
            else
                for (int64_t j = 0; j < i; j++) dr[j] = zr[j] * dr[j] + nx[j];
        }
        cg__ssd_transpose(t.P, ldc, t.dP, ldc, L, L, J->Cp);
        float *restrict Zr = t.Zc;
        for (int64_t i = 0; i < L; i++) Zr[i] = 0;
        for (int64_t j = 0; j + 1 < L; j++) {
            const float *restrict pr = t.P + j * ldc;
            for (int64_t i = j + 1; i < L; i++) Zr[i] += pr[i];
        }
        float *dla = CG_F32P(p->grad_la) + b * p->grad_la.s[0] + h * p->grad_la.s[2] + t0 * p->grad_la.s[1];
        double *restrict xhi = t.Xs, run = 0; /* sum_{i >= t} x_i */
        for (int64_t i = L - 1; i >= 0; i--) xhi[i] = run += xs[i];
        run = 0; /* sum_{j < t} y_j */
        for (int64_t i = 0; i < L; i++) {
            dla[i * p->grad_la.s[1]] = (float)(base + xhi[i] + run + (double)Zr[i]);
            run += ys[i];
        }
        if (J->fused) { /* dS_end of chunk c - 1 */
            const float gamma = t.eA[L - 1];
            for (int64_t i = 0; i < L; i++) {
                const float *restrict dr = dout + i * sd;
                float *restrict d = t.eAdO + i * ldv;
                for (int64_t j = 0; j < dv; j++) d[j] = t.eA[i] * dr[j];
                for (int64_t j = dv; j < dvp; j++) d[j] = 0.0f;
            }
            /* Q^T as the A operand: the padded q rows read transposed in place */
            cg__ssd_gemm_beta(CG_SSD_DENSE, dk, dvp, L, t.Qt, 1, ldk, t.eAdO, ldv, dSe, ldv, 1, gamma);
        }

        /* the group's sums, in head order: the first head's tiles become the sums (swapped, not
         * copied); a float32 dq and dk take the last head's sum straight from the add */
        if (h == g * hpg) {
            float *tmp = t.dQa;
            t.dQa = t.dQh;
            t.dQh = tmp;
            tmp = t.dKa;
            t.dKa = t.dKh;
            t.dKh = tmp;
        } else if (h == (g + 1) * hpg - 1 && dq32 && dk32) {
            for (int64_t i = 0; i < L; i++) {
                float *restrict oq = dq32 + i * p->grad_q.s[1], *restrict ok = dk32 + i * p->grad_k.s[1];
                const float *restrict aq = t.dQa + i * ldk, *restrict hq = t.dQh + i * ldk;
                const float *restrict ak = t.dKa + i * ldk, *restrict hk = t.dKh + i * ldk;
                for (int64_t j = 0; j < dk; j++) oq[j] = aq[j] + hq[j];
                for (int64_t j = 0; j < dk; j++) ok[j] = ak[j] + hk[j];
            }
            return;
        } else {
            for (int64_t x = 0; x < L * ldk; x++) {
                t.dQa[x] += t.dQh[x];
                t.dKa[x] += t.dKh[x];
            }
        }
    }
    cg__cpu_st_rows(cg__vat(&p->grad_q, b * p->grad_q.s[0] + g * p->grad_q.s[2] + t0 * p->grad_q.s[1]), p->grad_q.dt,
                    p->grad_q.s[1], t.dQa, ldk, L, dk);
    cg__cpu_st_rows(cg__vat(&p->grad_k, b * p->grad_k.s[0] + g * p->grad_k.s[2] + t0 * p->grad_k.s[1]), p->grad_k.dt,
                    p->grad_k.s[1], t.dKa, ldk, L, dk);
}

static void phase2_split(void *arg, int64_t idx, int tid) {
    const bwd_job *J = arg;
    const int64_t G = CG_DIM(J->p, G), nc = J->nc;
    p2_tiles t;
    p2_layout(J, cg__ssd_scratch_at(&J->scratch, tid), &t);
    chunk_grads(J, &t, idx / (G * nc), idx / nc % G, idx % nc);
}

static void phase2_fused(void *arg, int64_t idx, int tid) {
    const bwd_job *J = arg;
    const cg_ssd_prob *p = J->p;
    const int64_t dk = CG_DIM(p, DK), dv = CG_DIM(p, DV), dvp = J->dvp, ldv = J->ldv, b = idx / CG_DIM(p, G),
                  g = idx % CG_DIM(p, G);
    p2_tiles t;
    p2_layout(J, cg__ssd_scratch_at(&J->scratch, tid), &t);
    for (int64_t u = 0; u < J->hpg; u++) {
        const int64_t h = g * J->hpg + u;
        float *dS = t.dS + u * dk * ldv;
        if (p->dhT.p)
            cg__ssd_copy_rows(dS, ldv, CG_F32P(p->dhT) + b * p->dhT.s[0] + h * p->dhT.s[1], p->dhT.s[2], dk, dv, dvp);
        else memset(dS, 0, (size_t)(dk * ldv) * sizeof(float));
    }
    for (int64_t c = J->nc - 1; c >= 0; c--) chunk_grads(J, &t, b, g, c);
    if (p->grad_h0.p)
        for (int64_t u = 0; u < J->hpg; u++) {
            const int64_t h = g * J->hpg + u;
            float *dh0 = CG_F32P(p->grad_h0) + b * p->grad_h0.s[0] + h * p->grad_h0.s[1];
            for (int64_t i = 0; i < dk; i++)
                memcpy(dh0 + i * p->grad_h0.s[2], t.dS + u * dk * ldv + i * ldv, (size_t)dv * sizeof(float));
        }
}

cg_status cg__ssd_cpu_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    /* dtypes: checked by the entry point (cpu_isa.c) */
    cg_ssd_cpu_run run;
    cg_status st = cg__ssd_cpu_resolve(ctx, p, cfg, 1, "cpu ssd backward", &run);
    if (st != CG_OK) return st;

    bwd_job J = {.p = p, .C = run.chunk, .Cp = run.chunk_pad};
    J.nc = (CG_DIM(p, T) + J.C - 1) / J.C;
    J.dkp = cg__ssd_pad(CG_DIM(p, DK));
    J.dvp = cg__ssd_pad(CG_DIM(p, DV));
    J.hpg = CG_DIM(p, H) / CG_DIM(p, G);
    J.ldk = cg__ssd_ld(CG_DIM(p, DK)), J.ldv = cg__ssd_ld(CG_DIM(p, DV)), J.ldc = cg__ssd_ld(J.C);
    /* fused when the (b, g) tasks keep the threads at least 3/4 busy */
    const int64_t ngroups = CG_DIM(p, B) * CG_DIM(p, G), rounds = (ngroups + run.threads - 1) / run.threads;
    J.fused = run.bwd_split >= 0 ? !run.bwd_split : 4 * ngroups >= 3 * rounds * run.threads;

    const int64_t nbh = CG_DIM(p, B) * CG_DIM(p, H), nent = nbh * J.nc;
    const size_t ws_f = (size_t)nent * (size_t)(CG_DIM(p, DV) * J.ldk + (J.fused ? 0 : CG_DIM(p, DK) * J.ldv));
    const size_t ws_bytes = ws_f * sizeof(float);
    void *own = NULL, *ws;
    if (ex && ex->workspace && ex->workspace_bytes >= ws_bytes + 64) {
        ws = (void *)(((uintptr_t)ex->workspace + 63) / 64 * 64);
    } else if (!(ws = cg__ctx_host_ws(ctx, ws_bytes))) {
        ws = own = cg__ssd_big_alloc(ws_bytes);
        if (!own)
            return cg__err(ctx, CG_ENOMEM, "cpu ssd backward: out of memory for %zu bytes of chunk-state workspace",
                           ws_bytes);
    }
    J.WS = ws;
    J.WD = J.fused ? NULL : J.WS + (size_t)nent * (size_t)(CG_DIM(p, DV) * J.ldk);

    size_t per = p1_floats(&J);
    size_t f2 = p2_layout(&J, NULL, NULL);
    if (f2 > per) per = f2;
    per = (per * sizeof(float) + 127) / 64 * 64;
    J.scratch.stride = per;
    J.scratch.mem = cg__aligned_alloc(per * (size_t)run.nscratch);
    if (!J.scratch.mem) {
        cg__ssd_big_free(own, ws_bytes);
        return cg__err(ctx, CG_ENOMEM, "cpu ssd backward: out of memory for %d x %zu bytes of scratch", run.nscratch,
                       per);
    }
    cg__pool_run(run.pool, run.threads, nbh, phase1, &J);
    if (J.fused) cg__pool_run(run.pool, run.threads, ngroups, phase2_fused, &J);
    else cg__pool_run(run.pool, run.threads, ngroups * J.nc, phase2_split, &J);
    cg__aligned_free(J.scratch.mem);
    cg__ssd_big_free(own, ws_bytes);
    cg__dispatch_detail(ctx, "ssd_bwd chunk=%lld bwd_split=%d threads=%d (%s)", (long long)J.C, !J.fused, run.threads,
                        run.pinned ? "pinned" : "default");
    return CG_OK;
}
