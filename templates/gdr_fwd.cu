// gdr_fwd.cu -- gated delta rule forward (MATH_GDN.md section 2), one specialization per
// (dk, dv, l2norm, config).
//
// Rendered by generator/kernels/gdr_fwd.lua, which defines before this text:
//   CG_DK, CG_DV, CG_L2NORM          key and value head sizes; q and k L2-normalised (1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS   chunk length, dv tile of the state and output
//                                    passes, warps per CTA
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_BETA, CG_T_O   storage type of those tensors (float when not
//                                    defined, else cg_bf16 or cg_f16); g, h0, hT are float32
//   CG_SMEM_PREP, CG_SMEM_STATE, CG_SMEM_OUT   the Lua side's shared memory (checked below)
//   CG_VARLEN                        cu_seqlens given (docs/varlen.md)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Per (sequence, value head h; q/k head h / (H / G)), chunks of C tokens, local rows r:
//   G_r = g_1 + ... + g_r (chunk-local), gam_r = exp(G_r); kn, qn the rows (normalised when
//   CG_L2NORM: x / sqrt(|x|^2 + 1e-6));
//   L_ij = beta_i (kn_i . kn_j) exp(G_i - G_j) for i > j;  A = (I + L)^-1 (forward substitution)
//   W = A diag(beta gam) Kn,  U = A diag(beta) V
//   per chunk in order: h[c] = S;  Vn = U - W S;  S = gamC S + sum_r exp(G_C' - G_r) kn_r Vn_r^T
//   O = scale [diag(gam) Qn S0 + ((Qn Kn^T) o Dm) Vn],  Dm_ij = exp(G_i - G_j) for j <= i.
// Launches (one stream, in order): prep per (b, h, chunk slot); state per (row, h, dv tile);
// out per (b, h, chunk slot, dv tile). Plain float32 FMA throughout (no mma yet); each thread
// owns elements by a stride-NT loop, so every sum has one fixed order (deterministic).
// Any dk, dv, T; any strides (64-bit offsets); 16-bit q, k, v, beta widened as read, o
// rounded once as stored; the workspace is float32.
#include "cg_device.cuh"
#include "cg_kernel_params.h"
#ifdef CG_VARLEN
#include "cg_varlen.cuh"
#endif

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

#ifndef CG_T_Q
#define CG_T_Q float
#endif
#ifndef CG_T_K
#define CG_T_K float
#endif
#ifndef CG_T_V
#define CG_T_V float
#endif
#ifndef CG_T_BETA
#define CG_T_BETA float
#endif
#ifndef CG_T_O
#define CG_T_O float
#endif
typedef CG_T_Q TQ;
typedef CG_T_K TK;
typedef CG_T_V TV;
typedef CG_T_BETA TBETA;
typedef CG_T_O TO;

// Shared memory, floats.
// prep: L [C][C], A [C][C], then per row G, beta, 1/|q|, 1/|k|, beta gam / |k|.
constexpr int PREP_L = 0, PREP_A = C * C, PREP_G = 2 * C * C, PREP_B = PREP_G + C, PREP_RQ = PREP_B + C,
              PREP_RK = PREP_RQ + C, PREP_BG = PREP_RK + C, PREP_FLOATS = PREP_BG + C;
// state: S [DK][BV], Vn [C][BV], G [C], exp(G_C' - G_r) / |k_r| [C].
constexpr int ST_S = 0, ST_V = DK * BV, ST_G = ST_V + C * BV, ST_CO = ST_G + C, ST_FLOATS = ST_CO + C;
// out: P [C][C], G, 1/|q|, 1/|k| [C].
constexpr int OUT_P = 0, OUT_G = C * C, OUT_RQ = OUT_G + C, OUT_RK = OUT_RQ + C, OUT_FLOATS = OUT_RK + C;
#ifdef CG_SMEM_PREP // what generator/kernels/gdr_fwd.lua launches with
static_assert(4 * PREP_FLOATS == CG_SMEM_PREP, "gdr_fwd.lua smem_prep() disagrees with the layout here");
static_assert(4 * ST_FLOATS == CG_SMEM_STATE, "gdr_fwd.lua smem_state() disagrees with the layout here");
static_assert(4 * OUT_FLOATS == CG_SMEM_OUT, "gdr_fwd.lua smem_out() disagrees with the layout here");
#endif

template <class T> __device__ __forceinline__ const T *tp(const cg_ktensor &t) { return reinterpret_cast<const T *>(t.p); }

// Quotient and remainder of indices the constraints keep below 2^31 (32-bit, inline).
__device__ __forceinline__ i64 udiv(i64 a, i64 b) { return (i64)((unsigned)a / (unsigned)b); }
__device__ __forceinline__ i64 umod(i64 a, i64 b) { return (i64)((unsigned)a % (unsigned)b); }

// Element x of row (b, t, head) of a [b, t, head, x] tensor of T, widened.
template <class T> __device__ __forceinline__ float ld4(const cg_ktensor &t, i64 b, i64 s, i64 hd, i64 x) {
    return cg_f32(tp<T>(t)[b * t.s0 + s * t.s1 + hd * t.s2 + x * t.s3]);
}
// Element (b, t, head) of a [b, t, head] tensor of T, widened.
template <class T> __device__ __forceinline__ float ld3(const cg_ktensor &t, i64 b, i64 s, i64 hd) {
    return cg_f32(tp<T>(t)[b * t.s0 + s * t.s1 + hd * t.s2]);
}

// 1 / sqrt(|x|^2 + 1e-6) of row (b, t, head) of q or k; 1 without the L2 norm.
template <class T> __device__ __forceinline__ float rnorm(const cg_ktensor &t, i64 b, i64 s, i64 hd) {
    if (!L2) return 1.f;
    float a = 0.f;
    for (int x = 0; x < DK; ++x) {
        const float v = ld4<T>(t, b, s, hd, x);
        a += v * v;
    }
    return 1.f / sqrtf(a + 1e-6f);
}

// The tokens [t0, t0 + len) of chunk slot `slot` of batch row b (varlen: of the slot's
// sequence; len 0: an unused slot).
struct Chunk {
    i64 t0;
    int len;
};
__device__ __forceinline__ Chunk chunk_at(const cg_gdr_fwd_params &p, i64 slot) {
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

// The (b, h, slot) of a prep or out CTA index; qh: h's q/k head.
struct Where {
    i64 b, h, qh, slot, base; // base: (b * H + h) * nslot + slot, the workspace's chunk index
};
__device__ __forceinline__ Where where_of(const cg_gdr_fwd_params &p, i64 i) {
    Where w;
    w.slot = umod(i, p.nslot);
    const i64 bh = udiv(i, p.nslot);
    w.b = udiv(bh, p.H);
    w.h = umod(bh, p.H);
    w.qh = udiv(w.h, udiv(p.H, p.G));
    w.base = bh * p.nslot + w.slot;
    return w;
}

} // namespace gdr

#if defined(CG_EMULATE)
#define GDR_ENTRY extern "C" __global__ void
#else
#define GDR_ENTRY extern "C" __global__ void __launch_bounds__(gdr::NT, 1)
#endif

// Per (b, h, chunk slot): gc, rs, W and U of the chunk.
GDR_ENTRY cg_gdr_fwd_prep(cg_gdr_fwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const Where w = where_of(p, blockIdx.x);
    const Chunk ch = chunk_at(p, w.slot);
    if (ch.len == 0) return;
    const int tid = (int)threadIdx.x, len = ch.len;
    float *sL = sm + PREP_L, *sA = sm + PREP_A, *sG = sm + PREP_G, *sB = sm + PREP_B;
    float *sRq = sm + PREP_RQ, *sRk = sm + PREP_RK, *sBG = sm + PREP_BG;
    for (int r = tid; r < C; r += NT) {
        const bool in = r < len;
        const i64 t = ch.t0 + r;
        sG[r] = in ? p.g.p[w.b * p.g.s0 + t * p.g.s1 + w.h * p.g.s2] : 0.f;
        sB[r] = in ? ld3<TBETA>(p.beta, w.b, t, w.h) : 0.f;
        sRq[r] = in ? rnorm<TQ>(p.q, w.b, t, w.qh) : 0.f;
        sRk[r] = in ? rnorm<TK>(p.k, w.b, t, w.qh) : 0.f;
    }
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
    for (int e = tid; e < C * C; e += NT) {
        const int i = e / C, j = e % C;
        float v = 0.f;
        if (i < len && j < i) {
            float d = 0.f;
            for (int x = 0; x < DK; ++x) d += ld4<TK>(p.k, w.b, ch.t0 + i, w.qh, x) * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
            v = sB[i] * sRk[i] * sRk[j] * d * expf(sG[i] - sG[j]);
        }
        sL[e] = v;
        sA[e] = i == j ? 1.f : 0.f;
    }
    __syncthreads();
    // A = (I + L)^-1 by rows: A_ic = -L_ic - sum_{c < j < i} L_ij A_jc (c < i)
    for (int i = 1; i < len; ++i) {
        for (int c = tid; c < i; c += NT) {
            float a = -sL[i * C + c];
            for (int j = c + 1; j < i; ++j) a -= sL[i * C + j] * sA[j * C + c];
            sA[i * C + c] = a;
        }
        __syncthreads();
    }
    // W = A diag(beta gam / |k|) K, U = A diag(beta) V (rows past len: 0)
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

// Per (row, h, dv tile): the chunks in order from h0; the entering states into hs, Vn over
// U, hT at the end.
GDR_ENTRY cg_gdr_fwd_state(cg_gdr_fwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const int tid = (int)threadIdx.x;
    const i64 tile = umod(blockIdx.x, p.ndvt), rest = udiv(blockIdx.x, p.ndvt);
    const i64 h = umod(rest, p.H), n = udiv(rest, p.H), qh = udiv(h, udiv(p.H, p.G));
    const i64 j0 = tile * BV;
#ifdef CG_VARLEN
    const cgvl::VSeq sq = cgvl::seq_chunks<C>(p.cu, n, p.T);
    const i64 b = 0, s0 = sq.base, ns = sq.nch;
#else
    const i64 b = n, s0 = 0, ns = p.nslot;
#endif
    const i64 bh = b * p.H + h;
    float *sS = sm + ST_S, *sV = sm + ST_V, *sG = sm + ST_G, *sCo = sm + ST_CO;
    for (int e = tid; e < DK * BV; e += NT) {
        const int i = e / BV, c = e % BV;
        const i64 j = j0 + c;
        sS[e] = p.h0.p && j < DV ? p.h0.p[n * p.h0.s0 + h * p.h0.s1 + i * p.h0.s2 + j * p.h0.s3] : 0.f;
    }
    __syncthreads();
    for (i64 k = 0; k < ns; ++k) {
        const i64 slot = s0 + k, base = bh * p.nslot + slot;
#ifdef CG_VARLEN
        const i64 t0 = sq.start + k * C;
        const int len = sq.end - t0 < C ? (int)(sq.end - t0) : C;
#else
        const i64 t0 = k * C;
        const int len = p.T - t0 < C ? (int)(p.T - t0) : C;
#endif
        float *hs = p.hs + base * DK * DV;
        for (int e = tid; e < DK * BV; e += NT) {
            const int i = e / BV, c = e % BV;
            if (j0 + c < DV) hs[i * DV + j0 + c] = sS[e];
        }
        for (int e = tid; e < C * BV; e += NT) {
            const int r = e / BV, c = e % BV;
            const i64 j = j0 + c;
            float v = 0.f;
            if (r < len && j < DV) {
                const float *wr = p.w + (base * C + r) * DK;
                float *ur = p.u + (base * C + r) * DV;
                v = ur[j];
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
        for (int e = tid; e < DK * BV; e += NT) {
            const int i = e / BV, c = e % BV;
            float a = gam * sS[e];
            for (int r = 0; r < len; ++r) a += sCo[r] * ld4<TK>(p.k, b, t0 + r, qh, i) * sV[r * BV + c];
            sS[e] = a;
        }
        __syncthreads();
    }
    if (p.hT.p)
        for (int e = tid; e < DK * BV; e += NT) {
            const int i = e / BV, c = e % BV;
            const i64 j = j0 + c;
            if (j < DV) p.hT.p[n * p.hT.s0 + h * p.hT.s1 + i * p.hT.s2 + j * p.hT.s3] = sS[e];
        }
}

// Per (b, h, chunk slot, dv tile): O = scale [diag(gam) Qn S0 + ((Qn Kn^T) o Dm) Vn].
GDR_ENTRY cg_gdr_fwd_out(cg_gdr_fwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const i64 tile = umod(blockIdx.x, p.ndvt);
    const Where w = where_of(p, udiv(blockIdx.x, p.ndvt));
    const Chunk ch = chunk_at(p, w.slot);
    if (ch.len == 0) return;
    const int tid = (int)threadIdx.x, len = ch.len;
    const i64 j0 = tile * BV;
    float *sP = sm + OUT_P, *sG = sm + OUT_G, *sRq = sm + OUT_RQ, *sRk = sm + OUT_RK;
    for (int r = tid; r < C; r += NT) {
        sG[r] = p.gc[w.base * C + r];
        sRq[r] = p.rs[(w.base * C + r) * 2];
        sRk[r] = p.rs[(w.base * C + r) * 2 + 1];
    }
    __syncthreads();
    for (int e = tid; e < C * C; e += NT) {
        const int i = e / C, j = e % C;
        float v = 0.f;
        if (i < len && j <= i) {
            float d = 0.f;
            for (int x = 0; x < DK; ++x) d += ld4<TQ>(p.q, w.b, ch.t0 + i, w.qh, x) * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
            v = d * sRq[i] * sRk[j] * expf(sG[i] - sG[j]);
        }
        sP[e] = v;
    }
    __syncthreads();
    const float *hs = p.hs + w.base * DK * DV;
    const float *vn = p.u + w.base * C * DV;
    const float scale = (float)p.scale;
    for (int e = tid; e < C * BV; e += NT) {
        const int r = e / BV, c = e % BV;
        const i64 j = j0 + c;
        if (r >= len || j >= DV) continue;
        float a = 0.f;
        for (int i = 0; i < DK; ++i) a += ld4<TQ>(p.q, w.b, ch.t0 + r, w.qh, i) * hs[i * DV + j];
        a *= expf(sG[r]) * sRq[r];
        for (int m = 0; m <= r; ++m) a += sP[r * C + m] * vn[m * DV + j];
        reinterpret_cast<TO *>(p.o.p)[w.b * p.o.s0 + (ch.t0 + r) * p.o.s1 + w.h * p.o.s2 + j * p.o.s3] =
            cg_round<TO>(scale * a);
    }
}
