// gdr_common.cuh -- device code shared by the gated-delta-rule kernels (gdr_fwd.cu,
// gdr_bwd.cu): sizes and storage types, element access, the chunk of a slot, the per-chunk
// prep (gate cumsum, row norms, gated Gram matrix, its triangular inverse, W and U) and the
// forward pass of the states over the chunks. Both params structs
// (cg_kernel_params.h) name the members used here alike; the functions take either.
//
// Defines (from generator/kernels/gdr_*.lua): CG_DK, CG_DV, CG_L2NORM; CG_P_CHUNK,
// CG_P_BLOCK_DV, CG_P_WARPS; CG_T_<tensor> for 16-bit storage; CG_VARLEN.
#ifndef CG_GDR_COMMON_CUH
#define CG_GDR_COMMON_CUH
#include "cg_device.cuh"
#include "cg_kernel_params.h"
#ifdef CG_VARLEN
#include "cg_varlen.cuh"
#endif
#include "gdr_mma.cuh" // MMA, MMA16: the precision key; the mma helpers

namespace gdr {

typedef cg_i64 i64;

constexpr int DK = CG_DK;
constexpr int DV = CG_DV;
constexpr bool L2 = CG_L2NORM != 0;
constexpr int C = CG_P_CHUNK;
constexpr int BV = CG_P_BLOCK_DV;
constexpr int NT = 32 * CG_P_WARPS;

static_assert(DK >= 1 && DK <= 256 && DV >= 1, "dk: 1..256, dv >= 1");
static_assert(C == 16 || C == 32 || C == 64, "chunk: 16, 32 or 64");
static_assert(BV >= 1 && NT <= 1024, "block_dv, warps");

// The mma precisions' staged tiles: q and k rows [C][DKP] (columns zero padded to the
// 16-column mma step), pitch LDK floats; their raw 16-bit copies (mma16), pitch LDH halves.
constexpr int DKP = (DK + 15) / 16 * 16;
constexpr int LDK = DKP + 4;
constexpr int LDH = ssdc::Pitch16<DKP>::LD;
constexpr int KT_FLOATS = MMA ? C * LDK : 0;       // one staged fp32 tile
constexpr int KH_FLOATS = MMA16 ? C * LDH / 2 : 0; // one raw 16-bit copy

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_Q TQ;
typedef CG_T_K TK;
typedef CG_T_V TV;
typedef CG_T_BETA TBETA;

template <class T> __device__ __forceinline__ const T *tp(const cg_ktensor &t) {
    return reinterpret_cast<const T *>(t.p);
}
template <class T> __device__ __forceinline__ T *tpw(const cg_ktensor &t) { return reinterpret_cast<T *>(t.p); }

// Quotient and remainder of indices the constraints keep below 2^31 (32-bit, inline).
__device__ __forceinline__ i64 udiv(i64 a, i64 b) { return (i64)((unsigned)a / (unsigned)b); }
__device__ __forceinline__ i64 umod(i64 a, i64 b) { return (i64)((unsigned)a % (unsigned)b); }

// Offset of element (b, t, head, x) of a [b, t, head, x] tensor; of (b, t, head) of a
// [b, t, head] one.
__device__ __forceinline__ i64 off4(const cg_ktensor &t, i64 b, i64 s, i64 hd, i64 x) {
    return b * t.s0 + s * t.s1 + hd * t.s2 + x * t.s3;
}
__device__ __forceinline__ i64 off3(const cg_ktensor &t, i64 b, i64 s, i64 hd) {
    return b * t.s0 + s * t.s1 + hd * t.s2;
}
template <class T> __device__ __forceinline__ float ld4(const cg_ktensor &t, i64 b, i64 s, i64 hd, i64 x) {
    return cg_f32(tp<T>(t)[off4(t, b, s, hd, x)]);
}
template <class T> __device__ __forceinline__ float ld3(const cg_ktensor &t, i64 b, i64 s, i64 hd) {
    return cg_f32(tp<T>(t)[off3(t, b, s, hd)]);
}

// 1 / sqrt(|x|^2 + 1e-6) of row (b, t, head) of q or k; 1 without the L2 norm.
template <class T> __device__ __forceinline__ float rnorm(const cg_ktensor &t, i64 b, i64 s, i64 hd) {
    if (!L2) return 1.f;
    float a = 0.f;
#pragma unroll 4
    for (int x = 0; x < DK; ++x) {
        const float v = ld4<T>(t, b, s, hd, x);
        a += v * v;
    }
    return 1.f / sqrtf(a + 1e-6f);
}

// The tokens [t0, t0 + len) of chunk slot `slot` (varlen: of the slot's sequence; len 0:
// an unused slot).
struct Chunk {
    i64 t0;
    int len;
};
template <class P> __device__ __forceinline__ Chunk chunk_at(const P &p, i64 slot) {
    Chunk c;
#ifdef CG_VARLEN
    const cgvl::VChunk v = cgvl::slot_chunk<C>(p.cu, p.nseq, p.T, slot);
    c.t0 = v.t0;
    c.len = v.len;
#else
    c.t0 = slot * C;
    c.len = p.T - c.t0 < C ? (int)(p.T - c.t0) : C;
#endif
    return c;
}

// The (b, h, slot) of a per-chunk CTA index; qh: h's q/k head.
struct Where {
    i64 b, h, qh, slot, base; // base: (b * H + h) * nslot + slot, the workspace's chunk index
};
template <class P> __device__ __forceinline__ Where where_of(const P &p, i64 i) {
    Where w;
    w.slot = umod(i, p.nslot);
    const i64 bh = udiv(i, p.nslot);
    w.b = udiv(bh, p.H);
    w.h = umod(bh, p.H);
    w.qh = udiv(w.h, udiv(p.H, p.G));
    w.base = bh * p.nslot + w.slot;
    return w;
}

// The state pass's rows: (row n, head h, dv tile) of a CTA index; its chunks: slots
// [s0, s0 + ns) of batch row b, the first token of chunk k and its length.
struct Rows {
    i64 n, h, qh, j0, b, bh, s0, ns;
#ifdef CG_VARLEN
    cgvl::VSeq sq;
#endif
};
template <class P> __device__ __forceinline__ Rows rows_of(const P &p, i64 i) {
    Rows r;
    const i64 tile = umod(i, p.ndvt), rest = udiv(i, p.ndvt);
    r.h = umod(rest, p.H);
    r.n = udiv(rest, p.H);
    r.qh = udiv(r.h, udiv(p.H, p.G));
    r.j0 = tile * BV;
#ifdef CG_VARLEN
    r.sq = cgvl::seq_chunks<C>(p.cu, r.n, p.T);
    r.b = 0, r.s0 = r.sq.base, r.ns = r.sq.nch;
#else
    r.b = r.n, r.s0 = 0, r.ns = p.nslot;
#endif
    r.bh = r.b * p.H + r.h;
    return r;
}
template <class P> __device__ __forceinline__ Chunk rows_chunk(const P &p, const Rows &r, i64 k) {
    Chunk c;
#ifdef CG_VARLEN
    c.t0 = r.sq.start + k * C;
    c.len = r.sq.end - c.t0 < C ? (int)(r.sq.end - c.t0) : C;
#else
    c.t0 = k * C;
    c.len = p.T - c.t0 < C ? (int)(p.T - c.t0) : C;
#endif
    return c;
}

// The backward's prep also stores the gated query-key matrix (pm): its mma precisions stage Q.
#ifdef CG_GDR_BWD
constexpr bool PREP_QK = true;
#else
constexpr bool PREP_QK = false;
#endif

// Prep shared memory, floats: L [C][C], A [C][C], then per row G, beta, 1/|q|, 1/|k|,
// beta gam / |k|; the mma precisions also K [C][LDK], a V tile [C][BV + 4] and (mma16)
// K's raw 16-bit copy; the backward's also Q and its raw copy.
constexpr int PREP_L = 0, PREP_A = C * C, PREP_G = 2 * C * C, PREP_B = PREP_G + C, PREP_RQ = PREP_B + C,
              PREP_RK = PREP_RQ + C, PREP_BG = PREP_RK + C, PREP_K = PREP_BG + C, PREP_VT = PREP_K + KT_FLOATS,
              PREP_K16 = PREP_VT + (MMA ? C * (BV + 4) : 0), PREP_Q = PREP_K16 + KH_FLOATS,
              PREP_Q16 = PREP_Q + (PREP_QK ? KT_FLOATS : 0), PREP_FLOATS = PREP_Q16 + (PREP_QK ? KH_FLOATS : 0);

// dst [C][C] = ((Qn Kn^T) o Dm), Dm_ij = exp(G_i - G_j) for j <= i < len (0 elsewhere), on
// the matrix unit from Q, K staged at sQ, sK (raw copies sQ16, sK16) and the per-row G,
// 1/|q|, 1/|k|: the forward's output scores and the backward's pm.
__device__ __forceinline__ void qk_gated_mma(float *dst, const float *sQ, const float *sK, const TQ *sQ16,
                                             const TK *sK16, const float *sG, const float *sRq, const float *sRk,
                                             int len) {
    gemm_tiles<C, C, NT>(
        [&](float(&acc)[2][4], int m0, int n0) { mma_abt<DKP, LDK, LDH>(acc, sQ, sK, sQ16, sK16, m0, n0); },
        [&](int i, int j, float d) {
            dst[i * C + j] = i < len && j <= i ? d * sRq[i] * sRk[j] * expf(sG[i] - sG[j]) : 0.f;
        });
}

// The same lower-triangular chunk products by float32 FMA (ieee): dst[i][j] = fin(i, j, d), d
// = sum_{x < N} term(i, j, x), for j <= i < len, 0 elsewhere; by the block's NT threads (the
// caller's barrier orders the stores). The forward's output scores, the backward's dP.
template <int N, class FT, class FF> __device__ __forceinline__ void tril_dots(float *dst, int len, FT term, FF fin) {
    for (int e = (int)threadIdx.x; e < C * C; e += NT) {
        const int i = e / C, j = e % C;
        float v = 0.f;
        if (i < len && j <= i) {
            float d = 0.f;
#pragma unroll 4
            for (int x = 0; x < N; ++x) d += term(i, j, x);
            v = fin(i, j, d);
        }
        dst[e] = v;
    }
}

// prep's products on the matrix unit (gdr_mma.cuh): from K staged at sK (and sK16), the
// gated Gram matrix L, A = I (kk: also kn_i . kn_j, j < i); pm: the gated query-key matrix.
template <class P> __device__ __forceinline__ void prep_gram_mma(float *sm, int len, float *kk, float *pm) {
    float *sL = sm + PREP_L, *sA = sm + PREP_A, *sG = sm + PREP_G, *sB = sm + PREP_B, *sRk = sm + PREP_RK;
    const float *sK = sm + PREP_K;
    const TK *sK16 = reinterpret_cast<const TK *>(sm + PREP_K16);
    gemm_tiles<C, C, NT>(
        [&](float(&acc)[2][4], int m0, int n0) { mma_abt<DKP, LDK, LDH>(acc, sK, sK, sK16, sK16, m0, n0); },
        [&](int r, int j, float d) {
            const bool lo = r < len && j < r;
            d = lo ? d * sRk[r] * sRk[j] : 0.f;
            sL[r * C + j] = lo ? sB[r] * d * expf(sG[r] - sG[j]) : 0.f;
            sA[r * C + j] = r == j ? 1.f : 0.f;
            if (kk) kk[r * C + j] = d;
        });
    if constexpr (PREP_QK)
        if (pm)
            qk_gated_mma(pm, sm + PREP_Q, sK, reinterpret_cast<const TQ *>(sm + PREP_Q16), sK16, sG, sm + PREP_RQ, sRk,
                         len);
}
template <class P> __device__ __forceinline__ void prep_wu_mma(const P &p, float *sm, const Where &w, const Chunk &ch) {
    const float *sA = sm + PREP_A, *sB = sm + PREP_B, *sBG = sm + PREP_BG, *sK = sm + PREP_K;
    float *sVt = sm + PREP_VT;
    constexpr int LDV = BV + 4;
    const auto a = [&](int m, int k) { return sA[m * C + k]; };
    // W = A diag(beta gam / |k|) K (rows past len: A's 1 times beta gam = 0)
    gemm_tiles<C, DKP, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(acc, m0, n0, C, a, [&](int k, int n) { return sBG[k] * sK[k * LDK + n]; });
        },
        [&](int r, int x, float v) {
            if (x < DK) p.w[(w.base * C + r) * DK + x] = v;
        });
    // U = A diag(beta) V, V staged BV columns at a time
    for (int y0 = 0; y0 < DV; y0 += BV) {
        stage<C, BV, LDV, 0, NT, false>(sVt, (TV *)nullptr, p.v, w.b, ch.t0, w.h, y0, ch.len, DV - y0);
        __syncthreads();
        gemm_tiles<C, BV, NT>(
            [&](float(&acc)[2][4], int m0, int n0) {
                mma_tile(acc, m0, n0, C, a, [&](int k, int n) { return sB[k] * sVt[k * LDV + n]; });
            },
            [&](int r, int y, float v) {
                if (y0 + y < DV) p.u[(w.base * C + r) * DV + y0 + y] = v;
            });
        __syncthreads();
    }
}

// Per (b, h, chunk slot) of CTA index i: gc, rs, W and U of the chunk; with am, kk, pm
// (the backward) also A [C][C], kn_i . kn_j [C][C] and (qn_i . kn_j) exp(G_i - G_j) for
// j <= i [C][C] (0 elsewhere).
template <class P> __device__ __forceinline__ void prep(const P &p, float *sm, i64 i, float *am, float *kk, float *pm) {
    const Where w = where_of(p, i);
    const Chunk ch = chunk_at(p, w.slot);
    if (ch.len == 0) return;
    const int tid = (int)threadIdx.x, len = ch.len;
    float *sL = sm + PREP_L, *sA = sm + PREP_A, *sG = sm + PREP_G, *sB = sm + PREP_B;
    float *sRq = sm + PREP_RQ, *sRk = sm + PREP_RK, *sBG = sm + PREP_BG;
    for (int r = tid; r < C; r += NT) {
        const bool in = r < len;
        const i64 t = ch.t0 + r;
        sG[r] = in ? p.g.p[off3(p.g, w.b, t, w.h)] : 0.f;
        sB[r] = in ? ld3<TBETA>(p.beta, w.b, t, w.h) : 0.f;
        sRq[r] = in ? rnorm<TQ>(p.q, w.b, t, w.qh) : 0.f;
        sRk[r] = in ? rnorm<TK>(p.k, w.b, t, w.qh) : 0.f;
    }
    if constexpr (MMA)
        stage<C, DKP, LDK, LDH, NT, MMA16>(sm + PREP_K, reinterpret_cast<TK *>(sm + PREP_K16), p.k, w.b, ch.t0, w.qh, 0,
                                           len, DK);
    if constexpr (MMA && PREP_QK)
        stage<C, DKP, LDK, LDH, NT, MMA16>(sm + PREP_Q, reinterpret_cast<TQ *>(sm + PREP_Q16), p.q, w.b, ch.t0, w.qh, 0,
                                           len, DK);
    __syncthreads();
    if (tid == 0) // the chunk-local inclusive cumsum, in token order
        for (int r = 1; r < len; ++r) sG[r] += sG[r - 1];
    __syncthreads();
    for (int r = tid; r < C; r += NT) {
        sBG[r] = r < len ? sB[r] * expf(sG[r]) * sRk[r] : 0.f;
        p.gc[w.base * C + r] = sG[r];
        p.rs[(w.base * C + r) * 2] = sRq[r];
        p.rs[(w.base * C + r) * 2 + 1] = sRk[r];
    }
    // L (strictly lower, gated, beta-scaled) and A = I
    if constexpr (MMA) {
        prep_gram_mma<P>(sm, len, kk ? kk + w.base * C * C : nullptr, pm ? pm + w.base * C * C : nullptr);
        __syncthreads();
    }
    for (int e = tid; e < C * C && !MMA; e += NT) {
        const int r = e / C, j = e % C;
        float v = 0.f, d = 0.f;
        if (r < len && j < r) {
#pragma unroll 4
            for (int x = 0; x < DK; ++x)
                d += ld4<TK>(p.k, w.b, ch.t0 + r, w.qh, x) * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
            d *= sRk[r] * sRk[j];
            v = sB[r] * d * expf(sG[r] - sG[j]);
        }
        sL[e] = v;
        sA[e] = r == j ? 1.f : 0.f;
        if (kk) kk[w.base * C * C + e] = d;
        if (pm) {
            float q = 0.f;
            if (r < len && j <= r) {
#pragma unroll 4
                for (int x = 0; x < DK; ++x)
                    q += ld4<TQ>(p.q, w.b, ch.t0 + r, w.qh, x) * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
                q *= sRq[r] * sRk[j] * expf(sG[r] - sG[j]);
            }
            pm[w.base * C * C + e] = q;
        }
    }
    __syncthreads();
    // A = (I + L)^-1 by rows: A_rc = -L_rc - sum_{c < j < r} L_rj A_jc (c < r)
    for (int r = 1; r < len; ++r) {
        for (int c = tid; c < r; c += NT) {
            float a = -sL[r * C + c];
            for (int j = c + 1; j < r; ++j) a -= sL[r * C + j] * sA[j * C + c];
            sA[r * C + c] = a;
        }
        __syncthreads();
    }
    if (am)
        for (int e = tid; e < C * C; e += NT) am[w.base * C * C + e] = sA[e];
    // W = A diag(beta gam / |k|) K, U = A diag(beta) V (rows past len: 0)
    if constexpr (MMA) {
        prep_wu_mma(p, sm, w, ch);
        return;
    }
    for (int e = tid; e < C * DK; e += NT) {
        const int r = e / DK, x = e % DK;
        float a = 0.f;
        for (int j = 0; j <= r && r < len; ++j) a += sA[r * C + j] * sBG[j] * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
        p.w[(w.base * C + r) * DK + x] = a;
    }
    for (int e = tid; e < C * DV; e += NT) {
        const int r = e / DV, y = e % DV;
        float a = 0.f;
        for (int j = 0; j <= r && r < len; ++j) a += sA[r * C + j] * sB[j] * ld4<TV>(p.v, w.b, ch.t0 + j, w.h, y);
        p.u[(w.base * C + r) * DV + y] = a;
    }
}

// State pass shared memory, floats: S [DK][BV], Vn [C][BV], then three per-row columns;
// the mma precisions also the chunk's K [C][LDK].
constexpr int ST_S = 0, ST_V = DK * BV, ST_G = ST_V + C * BV, ST_CO = ST_G + C, ST_X = ST_CO + C, ST_K = ST_X + C,
              ST_FLOATS = ST_K + KT_FLOATS;

// The state pass's products on the matrix unit: Vn = U - W S over U (and into sV) ...
template <class P>
__device__ __forceinline__ void states_vn_mma(const P &p, float *sm, const Rows &rw, i64 base, int len) {
    const float *sS = sm + ST_S, *wc = p.w + base * C * DK;
    float *sV = sm + ST_V, *uc = p.u + base * C * DV;
    gemm_tiles<C, BV, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, DKP, [&](int m, int k) { return m < len && k < DK ? wc[m * DK + k] : 0.f; },
                [&](int k, int n) { return k < DK ? sS[k * BV + n] : 0.f; });
        },
        [&](int r, int c, float x) {
            const i64 j = rw.j0 + c;
            float v = 0.f;
            if (r < len && j < DV) {
                v = uc[r * DV + j] - x;
                uc[r * DV + j] = v;
            }
            sV[r * BV + c] = v;
        });
}
// ... and S = gam S + (diag(co) K)^T Vn, in place (each lane its own elements of S).
__device__ __forceinline__ void states_s_mma(float *sm, float gam) {
    float *sS = sm + ST_S;
    const float *sV = sm + ST_V, *sCo = sm + ST_CO, *sK = sm + ST_K;
    gemm_tiles<DKP, BV, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, C, [&](int m, int k) { return sCo[k] * sK[k * LDK + m]; },
                [&](int k, int n) { return sV[k * BV + n]; });
        },
        [&](int i, int c, float x) {
            if (i < DK) sS[i * BV + c] = gam * sS[i * BV + c] + x;
        });
}

// A state tile of rows rw: dst [DK][BV] from the [n, h, dk, dv] float32 tensor t (0 where
// t is absent or past dv); t (when given) from src; src into the workspace state ws
// [DK][DV] (rw's dv tile). By the block's threads, element by element.
__device__ __forceinline__ void load_state(float *dst, const cg_ktensor &t, const Rows &rw) {
    for (int e = (int)threadIdx.x; e < DK * BV; e += NT) {
        const int i = e / BV, c = e % BV;
        const i64 j = rw.j0 + c;
        dst[e] = t.p && j < DV ? t.p[rw.n * t.s0 + rw.h * t.s1 + i * t.s2 + j * t.s3] : 0.f;
    }
}
__device__ __forceinline__ void store_state(const cg_ktensor &t, const Rows &rw, const float *src) {
    if (!t.p) return;
    for (int e = (int)threadIdx.x; e < DK * BV; e += NT) {
        const int i = e / BV, c = e % BV;
        const i64 j = rw.j0 + c;
        if (j < DV) t.p[rw.n * t.s0 + rw.h * t.s1 + i * t.s2 + j * t.s3] = src[e];
    }
}
__device__ __forceinline__ void store_ws(float *ws, const Rows &rw, const float *src) {
    for (int e = (int)threadIdx.x; e < DK * BV; e += NT) {
        const int i = e / BV, c = e % BV;
        if (rw.j0 + c < DV) ws[i * DV + rw.j0 + c] = src[e];
    }
}

// The forward pass of the states of rows r (S in sm + ST_S from h0): per chunk in order the
// entering state into hs, Vn = U - W S over U, S = gamC S + Kt^T Vn. Leaves S, synced.
template <class P> __device__ __forceinline__ void states_fwd(const P &p, float *sm, const Rows &rw) {
    const int tid = (int)threadIdx.x;
    float *sS = sm + ST_S, *sV = sm + ST_V, *sG = sm + ST_G, *sCo = sm + ST_CO;
    load_state(sS, p.h0, rw);
    __syncthreads();
    for (i64 k = 0; k < rw.ns; ++k) {
        const i64 base = rw.bh * p.nslot + rw.s0 + k;
        const Chunk ch = rows_chunk(p, rw, k);
        const int len = ch.len;
        store_ws(p.hs + base * DK * DV, rw, sS);
        if constexpr (MMA) {
            stage<C, DKP, LDK, 0, NT, false>(sm + ST_K, (TK *)nullptr, p.k, rw.b, ch.t0, rw.qh, 0, len, DK);
            states_vn_mma(p, sm, rw, base, len);
        }
        for (int e = tid; e < C * BV && !MMA; e += NT) {
            const int r = e / BV, c = e % BV;
            const i64 j = rw.j0 + c;
            float v = 0.f;
            if (r < len && j < DV) {
                const float *wr = p.w + (base * C + r) * DK;
                float *ur = p.u + (base * C + r) * DV;
                v = ur[j];
#pragma unroll 4
                for (int i = 0; i < DK; ++i) v -= wr[i] * sS[i * BV + c];
                ur[j] = v;
            }
            sV[e] = v;
        }
        for (int r = tid; r < C; r += NT) {
            sG[r] = r < len ? p.gc[base * C + r] : 0.f;
            sCo[r] = r < len ? p.rs[(base * C + r) * 2 + 1] : 0.f;
        }
        __syncthreads();
        const float gl = sG[len - 1];
        for (int r = tid; r < len; r += NT) sCo[r] *= expf(gl - sG[r]);
        __syncthreads();
        const float gam = expf(gl);
        if constexpr (MMA) states_s_mma(sm, gam);
        for (int e = tid; e < DK * BV && !MMA; e += NT) {
            const int i = e / BV, c = e % BV;
            float a = gam * sS[e];
            for (int r = 0; r < len; ++r) a += sCo[r] * ld4<TK>(p.k, rw.b, ch.t0 + r, rw.qh, i) * sV[r * BV + c];
            sS[e] = a;
        }
        __syncthreads();
    }
}

#ifdef CG_SMEM_PREP // what generator/kernels/gdr_*.lua launch with (the kernels check their own passes')
static_assert(4 * PREP_FLOATS == CG_SMEM_PREP, "gdr_*.lua smem_prep() disagrees with the layout here");
static_assert(4 * ST_FLOATS == CG_SMEM_STATE, "gdr_*.lua smem_state() disagrees with the layout here");
#endif

} // namespace gdr

#if defined(CG_EMULATE)
#define GDR_ENTRY extern "C" __global__ void
#else
#define GDR_ENTRY extern "C" __global__ void __launch_bounds__(gdr::NT, 1)
#endif

#endif // CG_GDR_COMMON_CUH
