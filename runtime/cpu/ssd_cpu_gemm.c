/* ssd_cpu_gemm.c -- the SSD CPU path's register-blocked GEMM and tile transpose, one
 * build per ISA variant (cpu_isa.h): the register blocking follows the register file.
 *
 * Micro-kernel: a block of MR rows of C by up to NVMAX vectors of VW floats stays in
 * registers; each k step loads NVMAX vectors of B and broadcasts MR scalars of A. It is
 * written with GCC vector extensions (plain float arrays do not stay in registers,
 * measured at a quarter of the speed), so the same code serves each variant:
 *   avx512    VW 16, 6 x 4 zmm = 24 of 32 registers (6 x 64 floats)
 *   avx2      VW  8, 6 x 2 ymm = 12 of 16 registers (6 x 16 floats), + 2 loads + 1 broadcast
 *   baseline  VW  4, 4 x 2 xmm =  8 of 16 registers (4 x 8 floats; no FMA: products need
 *             temporaries)
 * A may be any strided view (its scalars are broadcast), which saves the transposes of
 * P and dP in the backward (a view whose k steps are a page apart, such as token rows of
 * v in the token-major layout, costs a TLB miss per step: those are copied first).
 * The causal modes treat their diagonal blocks as triangles (micro's tri), so the
 * entries above (below) the diagonal are never read: an inf or NaN in B cannot meet a
 * masked zero there, and the caller need not zero them. */
#include "cpu_isa.h"
#include "ssd_cpu.h"

#include <math.h>

#if defined(__AVX512F__)
#define VW 16
#define MR 6
#define NVMAX 4
#elif defined(__AVX2__) && defined(__FMA__)
#define VW 8
#define MR 6
#define NVMAX 2
#else
#define VW 4
#define MR 4
#define NVMAX 2
#endif

typedef float cg_vf __attribute__((vector_size(VW * 4), aligned(4), may_alias));

_Static_assert(CG_SSD_VL % VW == 0, "tiles are padded to whole vectors");

/* The first rem (< VW) floats of a vector from / to memory, touching no float after them. */
#if VW == 16
#include <immintrin.h>
static inline cg_vf load_part(const float *p, int rem) {
    return (cg_vf)_mm512_maskz_loadu_ps((__mmask16)((1u << rem) - 1), p);
}
static inline void store_part(float *p, cg_vf x, int rem) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << rem) - 1), (__m512)x);
}
#elif VW == 8
#include <immintrin.h>
static inline __m256i part_mask(int rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline cg_vf load_part(const float *p, int rem) { return (cg_vf)_mm256_maskload_ps(p, part_mask(rem)); }
static inline void store_part(float *p, cg_vf x, int rem) { _mm256_maskstore_ps(p, part_mask(rem), (__m256)x); }
#else
static inline cg_vf load_part(const float *p, int rem) {
    cg_vf x = {0};
    for (int i = 0; i < rem; i++) x[i] = p[i];
    return x;
}
static inline void store_part(float *p, cg_vf x, int rem) {
    for (int i = 0; i < rem; i++) p[i] = x[i];
}
#endif

/* unit: A is row-major (aks == 1), the common case, with simpler addressing.
 * tri: TRI_LOWER leaves the last mr k steps to a triangle (row r takes step mr - 1 - x only
 * when r >= mr - 1 - x: the diagonal block of a lower-triangular A), TRI_UPPER likewise the
 * first mr steps (row r takes step x only when x >= r); zeros above (below) the diagonal
 * are then never multiplied, so an inf or NaN in B there does not reach C.
 * C = beta C + diag(rs) A B when acc, else diag(rs) A B (C not read); no rs: a scale of 1.
 * Of the nv vectors of C columns only
 * the first ns (1..nv VW) floats are read and written (the rest of a row may be someone
 * else's memory). */
enum { TRI_NONE, TRI_LOWER, TRI_UPPER };
static inline __attribute__((always_inline)) cg_vf load_ns(const float *p, int v, int ns) {
    return (v + 1) * VW <= ns ? *(const cg_vf *)(p + v * VW) : load_part(p + v * VW, ns - v * VW);
}
static inline __attribute__((always_inline)) void micro(const int mr, const int nv, const int unit, int64_t K,
                                                        const float *restrict A, int64_t ars, int64_t aks,
                                                        const float *restrict B, int64_t ldb, float *C, int64_t ldc,
                                                        int acc, float beta, int tri, int ns,
                                                        const float *restrict rs) {
    cg_vf c[MR][NVMAX];
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) {
            c[r][v] = (cg_vf){0};
            if (acc && !rs && v * VW < ns) c[r][v] = beta * load_ns(C + r * ldc, v, ns);
        }
    int64_t k = 0, kend = K;
    if (tri == TRI_UPPER) {
#pragma GCC unroll 8
        for (int x = 0; x < mr; x++) {
            cg_vf b[NVMAX];
            for (int v = 0; v < nv; v++) b[v] = *(const cg_vf *)(B + x * ldb + v * VW);
            const float *restrict ak = A + x * (unit ? 1 : aks);
#pragma GCC unroll 8
            for (int r = 0; r <= x; r++) {
                const float a = ak[r * ars];
                for (int v = 0; v < nv; v++) c[r][v] += a * b[v];
            }
        }
        k = mr;
    } else if (tri == TRI_LOWER) {
        kend = K - mr;
    }
    /* unrolled: measured 15-40% faster on Zen 3 (AVX2) for the chunk's K of 48-176 */
#pragma GCC unroll 4
    for (; k < kend; k++) {
        cg_vf b[NVMAX];
        for (int v = 0; v < nv; v++) b[v] = *(const cg_vf *)(B + k * ldb + v * VW);
        const float *restrict ak = A + k * (unit ? 1 : aks);
        for (int r = 0; r < mr; r++) {
            const float a = ak[r * ars];
            for (int v = 0; v < nv; v++) c[r][v] += a * b[v];
        }
    }
    if (tri == TRI_LOWER) {
#pragma GCC unroll 8
        for (int x = 0; x < mr; x++) {
            cg_vf b[NVMAX];
            for (int v = 0; v < nv; v++) b[v] = *(const cg_vf *)(B + (kend + x) * ldb + v * VW);
            const float *restrict ak = A + (kend + x) * (unit ? 1 : aks);
#pragma GCC unroll 8
            for (int r = x; r < mr; r++) {
                const float a = ak[r * ars];
                for (int v = 0; v < nv; v++) c[r][v] += a * b[v];
            }
        }
    }
    if (rs)
        for (int r = 0; r < mr; r++)
            for (int v = 0; v < nv; v++) {
                c[r][v] *= rs[r];
                if (acc && v * VW < ns) c[r][v] += beta * load_ns(C + r * ldc, v, ns);
            }
    if (ns == nv * VW) {
        for (int r = 0; r < mr; r++)
            for (int v = 0; v < nv; v++) *(cg_vf *)(C + r * ldc + v * VW) = c[r][v];
    } else {
        for (int r = 0; r < mr; r++)
            for (int v = 0; v < nv && v * VW < ns; v++) {
                if ((v + 1) * VW <= ns) *(cg_vf *)(C + r * ldc + v * VW) = c[r][v];
                else store_part(C + r * ldc + v * VW, c[r][v], ns - v * VW);
            }
    }
}

typedef void (*micro_fn)(int64_t K, const float *restrict A, int64_t ars, int64_t aks, const float *restrict B,
                         int64_t ldb, float *C, int64_t ldc, int acc, float beta, int tri, int ns,
                         const float *restrict rs);

#define MICRO_DEF(mr, nv, unit)                                                                                        \
    static void micro_##mr##_##nv##_##unit(int64_t K, const float *restrict A, int64_t ars, int64_t aks,               \
                                           const float *restrict B, int64_t ldb, float *C, int64_t ldc, int acc,       \
                                           float beta, int tri, int ns, const float *restrict rs) {                    \
        micro(mr, nv, unit, K, A, ars, aks, B, ldb, C, ldc, acc, beta, tri, ns, rs);                                   \
    }
#if NVMAX == 4
#define MICRO_ROW(mr, u) MICRO_DEF(mr, 1, u) MICRO_DEF(mr, 2, u) MICRO_DEF(mr, 3, u) MICRO_DEF(mr, 4, u)
#define MICRO_REF(mr, u)                                                                                               \
    { micro_##mr##_1_##u, micro_##mr##_2_##u, micro_##mr##_3_##u, micro_##mr##_4_##u }
#elif NVMAX == 2
#define MICRO_ROW(mr, u) MICRO_DEF(mr, 1, u) MICRO_DEF(mr, 2, u)
#define MICRO_REF(mr, u)                                                                                               \
    { micro_##mr##_1_##u, micro_##mr##_2_##u }
#endif
#if MR == 6
#define MICRO_ALL(u) MICRO_ROW(1, u) MICRO_ROW(2, u) MICRO_ROW(3, u) MICRO_ROW(4, u) MICRO_ROW(5, u) MICRO_ROW(6, u)
#define MICRO_TAB(u)                                                                                                   \
    { MICRO_REF(1, u), MICRO_REF(2, u), MICRO_REF(3, u), MICRO_REF(4, u), MICRO_REF(5, u), MICRO_REF(6, u) }
#elif MR == 4
#define MICRO_ALL(u) MICRO_ROW(1, u) MICRO_ROW(2, u) MICRO_ROW(3, u) MICRO_ROW(4, u)
#define MICRO_TAB(u)                                                                                                   \
    { MICRO_REF(1, u), MICRO_REF(2, u), MICRO_REF(3, u), MICRO_REF(4, u) }
#endif
MICRO_ALL(0)
MICRO_ALL(1)
static const micro_fn micro_tab[2][MR][NVMAX] = {MICRO_TAB(0), MICRO_TAB(1)};

static void gemm_run(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t nc, int64_t K, const float *A, int64_t ars,
                     int64_t aks, const float *B, int64_t ldb, float *C, int64_t ldc, int acc, float beta,
                     const float *rs) {
    CG_ASSERT(n % CG_SSD_VL == 0 && nc >= 1 && nc <= n);
    const int unit = aks == 1;
    /* Column panels outside, row blocks inside: one panel of B (K x NVMAX VW) is reused by
     * every row block while it is in L1/L2. */
    for (int64_t j0 = 0; j0 < nc; j0 += NVMAX * VW) {
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            const int mr = (int)cg__ssd_min(MR, m - i0);
            int64_t nend = n, kbeg = 0, kend = K;
            int tri = TRI_NONE;
            switch (mode) {
            case CG_SSD_DENSE: break;
            case CG_SSD_KLOWER: kend = K + cg__ssd_min(i0 + mr, m), tri = TRI_LOWER; break;
            case CG_SSD_KUPPER: kbeg = i0, tri = TRI_UPPER; break;
            case CG_SSD_NLOWER: nend = cg__ssd_min(n, cg__ssd_pad(cg__ssd_min(i0 + mr, m))); break;
            }
            if (j0 >= nend) continue;
            /* the vectors up to nend, all computed (a full-width tile is faster than a narrow
             * one), and of their columns those below nc stored */
            const int nv = (int)cg__ssd_min(NVMAX, (nend - j0) / VW);
            const int ns = (int)cg__ssd_min(nv * VW, nc - j0);
            const int64_t kn = kend > kbeg ? kend - kbeg : 0;
            if (kn < mr) tri = TRI_NONE; /* not a triangular block (KUPPER with K < m: not used) */
            micro_tab[unit][mr - 1][nv - 1](kn, A + i0 * ars + kbeg * aks, ars, aks, B + kbeg * ldb + j0, ldb,
                                            C + i0 * ldc + j0, ldc, acc, beta, tri, ns, rs ? rs + i0 : NULL);
        }
    }
}

void cg__ssd_gemm_nc(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t nc, int64_t K, const float *A, int64_t ars,
                     int64_t aks, const float *B, int64_t ldb, float *C, int64_t ldc, int acc, float beta) {
    gemm_run(mode, m, n, nc, K, A, ars, aks, B, ldb, C, ldc, acc, beta, NULL);
}

void cg__ssd_gemm_rs(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars, int64_t aks,
                     const float *B, int64_t ldb, float *C, int64_t ldc, const float *rs) {
    gemm_run(mode, m, n, n, K, A, ars, aks, B, ldb, C, ldc, 0, 1.0f, rs);
}

void cg__ssd_gemm_beta(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars, int64_t aks,
                       const float *B, int64_t ldb, float *C, int64_t ldc, int acc, float beta) {
    cg__ssd_gemm_nc(mode, m, n, n, K, A, ars, aks, B, ldb, C, ldc, acc, beta);
}

void cg__ssd_gemm(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars, int64_t aks,
                  const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
    cg__ssd_gemm_nc(mode, m, n, n, K, A, ars, aks, B, ldb, C, ldc, acc, 1.0f);
}

/* ------------------------------------------------------------- decay mask
 * cg__ssd_exp (ssd_cpu.h) on whole vectors: the same operations, with the clamps as
 * selects (the scalar form's branches keep GCC from vectorizing it in a loop). */
typedef int32_t cg_vi __attribute__((vector_size(VW * 4)));
typedef uint32_t cg_vu __attribute__((vector_size(VW * 4)));

static inline cg_vf exp_v(cg_vf x) {
    const cg_vf lo = (cg_vf){0} - 104.0f, hi = (cg_vf){0} + 89.0f, magic = (cg_vf){0} + 12582912.0f;
    cg_vi m = x < lo; /* false for NaN, as in the scalar form */
    cg_vf xc = (cg_vf)(((cg_vi)lo & m) | ((cg_vi)x & ~m));
    m = xc > hi;
    xc = (cg_vf)(((cg_vi)hi & m) | ((cg_vi)xc & ~m));
    const cg_vf t = xc * 1.44269504088896341f + magic;
    const cg_vf n = t - magic;
    const cg_vi ni = (cg_vi)t - 0x4B400000;
    cg_vf r = xc - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723e-6f;
    cg_vf p;
    CG_SSD_EXP_POLY(p, r);
    const cg_vi n1 = ni >> 1, n2 = ni - n1;
    const cg_vf s1 = (cg_vf)((cg_vu)(n1 + 127) << 23), s2 = (cg_vf)((cg_vu)(n2 + 127) << 23);
    return p * s1 * s2;
}

void cg__ssd_mul_exp(float *restrict P, const float *restrict X, int64_t n) {
    int64_t j = 0;
    for (; j + VW <= n; j += VW) *(cg_vf *)(P + j) *= exp_v(*(const cg_vf *)(X + j));
    for (; j < n; j++) P[j] *= cg__ssd_exp(X[j]);
}

/* The decay mask e^{A_i - A_j} factors as e^{A_i - M} e^{M - A_j}: L exponentials and L
 * reciprocals (in double, each factor rounded once) instead of L(L+1)/2 exponentials, and
 * a product per entry. With M the middle
 * of the chunk's range of A and that range at most 80, both factors lie in [e^-40, e^40]:
 * normal floats, the product within 2 ulp of the exact mask (at most e^80 where log_alpha
 * grows). Otherwise (strong decay, -inf clamped to -1e4, NaN) each entry's exponent
 * A_i - A_j is taken in double and e^x in vectors, as before: entries that underflow
 * to 0 stay 0 and a NaN stays NaN. */
void cg__ssd_decay_mask_from(float *X, int64_t ld, const float *Src, int64_t lds, int64_t L, const double *restrict Ad,
                             float *restrict E) {
    double lo = Ad[0], hi = Ad[0];
    for (int64_t i = 1; i < L; i++) {
        lo = Ad[i] < lo ? Ad[i] : lo;
        hi = Ad[i] > hi ? Ad[i] : hi;
    }
    const double M = 0.5 * (lo + hi);
    int factored = 1;
    for (int64_t i = 0; i < L; i++) {
        const double d = Ad[i] - M;
        if (!(d <= 40.0 && d >= -40.0)) factored = 0; /* also false for NaN */
    }
    if (factored) {
        float *restrict ep = E, *restrict en = E + L;
        for (int64_t i = 0; i < L; i++) { /* e^{M - A_i} as 1 / e^{A_i - M}: one exp, the same float */
            const double e = exp(Ad[i] - M);
            ep[i] = (float)e;
            en[i] = (float)(1.0 / e);
        }
        for (int64_t i = 0; i < L; i++) {
            const float s = ep[i];
            if (Src == X) {
                float *restrict x = X + i * ld;
                for (int64_t j = 0; j <= i; j++) x[j] *= s * en[j];
            } else {
                float *restrict x = X + i * ld;
                const float *restrict y = Src + i * lds;
                for (int64_t j = 0; j <= i; j++) x[j] = y[j] * (s * en[j]);
            }
        }
        return;
    }
    if (Src != X)
        for (int64_t i = 0; i < L; i++) memcpy(X + i * ld, Src + i * lds, (size_t)(i + 1) * sizeof(float));
    for (int64_t i = 0; i < L; i++) {
        const double Ai = Ad[i];
        for (int64_t j = 0; j <= i; j++) E[j] = (float)(Ai - Ad[j]);
        cg__ssd_mul_exp(X + i * ld, E, i + 1);
    }
}

void cg__ssd_decay_mask(float *X, int64_t ld, int64_t L, const double *restrict Ad, float *restrict E) {
    cg__ssd_decay_mask_from(X, ld, X, ld, L, Ad, E);
}

/* ------------------------------------------------------------- transpose
 * TB x TB blocks transposed in registers: 16 x 16 in zmm by vector-extension shuffles
 * (avx512), 8 x 8 in ymm (avx2) and 4 x 4 in xmm (SSE) by intrinsics, else scalar. */
#if defined(__AVX512F__) && !defined(__clang__) /* no __builtin_shuffle in clang */
#define TB 16
typedef float cg_v16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t cg_i16 __attribute__((vector_size(64)));

/* Four stages that swap the off-diagonal b x b sub-blocks of every 2b x 2b block
 * (b = 8, 4, 2, 1), two-register shuffles each. */
static inline void transpose_block(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss) {
    static const cg_i16 lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                        hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                        lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                        hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                        lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                        hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                        lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                        hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
    cg_v16 r[16];
    for (int i = 0; i < 16; i++) r[i] = *(const cg_v16 *)(src + i * ss);
#define STAGE(b, lo, hi)                                                                                               \
    for (int i = 0; i < 16; i++)                                                                                       \
        if (!(i & (b))) {                                                                                              \
            cg_v16 x = r[i], y = r[i + (b)];                                                                           \
            r[i] = __builtin_shuffle(x, y, lo);                                                                        \
            r[i + (b)] = __builtin_shuffle(x, y, hi);                                                                  \
        }
    STAGE(8, lo8, hi8)
    STAGE(4, lo4, hi4)
    STAGE(2, lo2, hi2)
    STAGE(1, lo1, hi1)
#undef STAGE
    for (int j = 0; j < 16; j++) *(cg_v16 *)(dst + j * ldd) = r[j];
}
#elif defined(__AVX2__)
#include <immintrin.h>
#define TB 8
static inline void transpose_block(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ss);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);     /* r0[0] r1[0] r0[1] r1[1] | r0[4] ... */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); /* r0[2] r1[2] r0[3] r1[3] | r0[6] ... */
    }
    for (int i = 0; i < 8; i += 4)
        for (int u = 0; u < 2; u++) {
            r[i + u] = _mm256_shuffle_ps(t[i + u], t[i + 2 + u], _MM_SHUFFLE(1, 0, 1, 0));
            r[i + 2 + u] = _mm256_shuffle_ps(t[i + u], t[i + 2 + u], _MM_SHUFFLE(3, 2, 3, 2));
        }
    /* r[0]: column 0 | column 4 of rows 0..3, r[2]: 1 | 5, r[1]: 2 | 6, r[3]: 3 | 7; r[4..7] rows 4..7 */
    static const int col[4] = {0, 2, 1, 3};
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(r[col[c]], r[4 + col[c]], 0x20));
        _mm256_storeu_ps(dst + (c + 4) * ldd, _mm256_permute2f128_ps(r[col[c]], r[4 + col[c]], 0x31));
    }
}
#elif defined(__SSE2__)
#include <immintrin.h>
#define TB 4
static inline void transpose_block(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss) {
    __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + ss), r2 = _mm_loadu_ps(src + 2 * ss),
           r3 = _mm_loadu_ps(src + 3 * ss);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst, r0);
    _mm_storeu_ps(dst + ldd, r1);
    _mm_storeu_ps(dst + 2 * ldd, r2);
    _mm_storeu_ps(dst + 3 * ldd, r3);
}
#else
#define TB 4
static inline void transpose_block(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss) {
    for (int i = 0; i < TB; i++)
        for (int j = 0; j < TB; j++) dst[j * ldd + i] = src[i * ss + j];
}
#endif

void cg__ssd_transpose(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss, int64_t rows, int64_t w,
                       int64_t cols_pad) {
    for (int64_t j = 0; j < w; j++)
        for (int64_t i = rows; i < cols_pad; i++) dst[j * ldd + i] = 0.0f;
    const int64_t rb = rows / TB * TB, wb = w / TB * TB;
    for (int64_t i0 = 0; i0 < rb; i0 += TB)
        for (int64_t j0 = 0; j0 < wb; j0 += TB) transpose_block(dst + j0 * ldd + i0, ldd, src + i0 * ss + j0, ss);
    /* the edges */
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = (i < rb ? wb : 0); j < w; j++) dst[j * ldd + i] = src[i * ss + j];
}
