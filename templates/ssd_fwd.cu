// ssd_fwd.cu -- SSD forward (chunked), one specialization per (dk, dv, config).
//
// Rendered by generator/kernels/ssd_fwd.lua, which defines before this text:
//   CG_DK, CG_DV                                  head sizes (any >= 1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS, CG_P_STAGES
//   CG_P_PRECISION_{IEEE,TF32,3XTF32}, CG_P_STRATEGY_{SEQ,3PHASE}
//   CG_SMEM_BYTES                                 the Lua side's shared-memory size
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Algorithm (docs/kernels.md has the overview), per (b, h) and a tile of BDV state columns:
// a chunk of CHUNK tokens with Q, K [CHUNK, DK], V [CHUNK, BDV], A = cumsum(la),
//   P  = (Q K^T) .* M,      M_ij = exp(A_i - A_j) for i >= j, else 0
//   O  = diag(exp(A)) Q S0 + P V
//   S1 = exp(A_last) S0 + (K .* w)^T V,   w_j = exp(A_last - A_j)
// Strategies:
//   seq     one CTA per (b, h, dv tile) walks the chunks in order, S [DK, BDV] in smem;
//           with STAGES = 2 the next chunk's Q, K, V, la arrive by cp.async meanwhile.
//   3phase  (1) chunk states U_c = (K .* w)^T V and decays in parallel over chunks,
//           (2) an elementwise scan over chunks turning U_c into entering states S0^c
//           (in place in the workspace) and writing hT, (3) outputs in parallel.
// Matmuls run per warp on 16x16 output tiles with the m16n8k8 fragment layout: FFMA
// for ieee (each lane computes the accumulator elements the mma would give it), mma
// tf32 for tf32, and three tf32 mma per product (hi*lo + lo*hi + hi*hi) for 3xtf32.
// Operands come from padded smem tiles, zero beyond dk, dv and the last token, so any
// dk, dv >= 1 and any T >= 1 work without special cases in the math. The whole dk
// lives in smem (Q, K rows and S): dk is bounded by the shared memory, which valid()
// checks (dk up to about 1000 on sm_90, 720 on sm_80); larger heads take the CPU path.
#include "cg_device.cuh"
#include "cg_kernel_params.h"
#include "ssd_common.cuh"

// ------------------------------------------------------------------- traits
namespace ssd {

constexpr int DK = CG_DK;
constexpr int DV = CG_DV;
constexpr int CHUNK = CG_P_CHUNK;
constexpr int BDV = CG_P_BLOCK_DV;
constexpr int WARPS = CG_P_WARPS;
constexpr int STAGES = CG_P_STAGES;
constexpr int NTHREADS = 32 * WARPS;

#if defined(CG_P_PRECISION_IEEE)
constexpr int PREC = 0;
#elif defined(CG_P_PRECISION_TF32)
constexpr int PREC = 1;
#elif defined(CG_P_PRECISION_3XTF32)
constexpr int PREC = 2;
#else
#error "ssd_fwd: no CG_P_PRECISION_* defined"
#endif

#if defined(CG_P_STRATEGY_3PHASE)
constexpr bool THREE_PHASE = true;
#else
constexpr bool THREE_PHASE = false;
#endif

constexpr int DKP = (DK + 15) / 16 * 16;  // dk padded to the 16-row mma tile
constexpr int NDVT = (DV + BDV - 1) / BDV; // dv tiles, one CTA each
// Row pitches in floats. +4 makes the A-fragment pattern (row = lane/4, col = lane%4)
// hit 32 distinct banks; +8 does the same for the B pattern (row = lane%4, col = lane/4).
constexpr int LDQ = DKP + 4;
constexpr int LDK = DKP + 4;
constexpr int LDV = BDV + 8;
constexpr int LDP = CHUNK + 4;
constexpr int LDS = BDV + 8;

// Shared memory, in floats (offsets are multiples of 4: 16-byte aligned).
constexpr int OFF_S = 0;                        // [DKP, BDV] state S (pitch LDS)
constexpr int OFF_P = OFF_S + DKP * LDS;        // [CHUNK, CHUNK] masked scores P (pitch LDP)
constexpr int OFF_A = OFF_P + CHUNK * LDP;      // [CHUNK] A = cumsum(la) within the chunk
constexpr int OFF_EA = OFF_A + CHUNK;           // [CHUNK] exp(A)
constexpr int OFF_W = OFF_EA + CHUNK;           // [CHUNK] w = exp(A_last - A)
constexpr int OFF_STAGE = OFF_W + CHUNK;        // STAGES x one chunk of inputs:
constexpr int ST_Q = 0;                         //   [CHUNK, DKP] q (pitch LDQ)
constexpr int ST_K = ST_Q + CHUNK * LDQ;        //   [CHUNK, DKP] k (pitch LDK)
constexpr int ST_V = ST_K + CHUNK * LDK;        //   [CHUNK, BDV] v (pitch LDV)
constexpr int ST_LA = ST_V + CHUNK * LDV;       //   [CHUNK] log_alpha
constexpr int STAGE_FLOATS = ST_LA + CHUNK;
constexpr int SMEM_FLOATS = OFF_STAGE + STAGES * STAGE_FLOATS;
constexpr long long SMEM_BYTES = 4LL * SMEM_FLOATS;
#ifdef CG_SMEM_BYTES // what generator/kernels/ssd_fwd.lua launches with
static_assert(SMEM_BYTES == CG_SMEM_BYTES, "ssd_fwd.lua smem_bytes() disagrees with the layout here");
#endif

static_assert(DK >= 1 && DV >= 1, "dk, dv >= 1");
static_assert(CHUNK % 16 == 0 && CHUNK >= 16, "chunk: a multiple of the 16-row mma tile");
static_assert(BDV % 16 == 0 && BDV >= 16, "block_dv: a multiple of the 16-column warp tile");
static_assert(WARPS >= 1 && NTHREADS <= 1024, "warps: 1..32");
static_assert(STAGES == 1 || STAGES == 2, "stages: 1 or 2");
static_assert(!THREE_PHASE || STAGES == 1, "3phase: one chunk per CTA, nothing to pipeline");
static_assert(OFF_STAGE % 4 == 0 && STAGE_FLOATS % 4 == 0 && OFF_P % 4 == 0, "16-byte aligned tiles");

typedef cg_i64 i64;

// ------------------------------------------------------------- warp matmul
// ssd_common.cuh at this kernel's precision (the m16n8k8 accumulator layout).
template <class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[2][4], int k0, int k1, FA A, FB B) {
    ssdc::warp_mma<PREC>(acc, k0, k1, A, B);
}
using ssdc::tile_foreach;

// ---------------------------------------------------------------- problem
struct Cta {
    i64 b, h, g, j0; // batch, head, group, first state column of the dv tile
};

__device__ __forceinline__ Cta cta_coords(const cg_ssd_fwd_params &p, i64 dvt, i64 bh) {
    Cta c;
    c.h = bh % p.H;
    c.b = bh / p.H;
    c.g = c.h / (p.H / p.G);
    c.j0 = dvt * BDV;
    return c;
}

// Load tokens [t0, t0 + n) of a chunk into stage st (zero beyond n, dk, dv). With
// async, in-range elements go by cp.async (the caller commits and waits); padding is
// stored directly.
__device__ __forceinline__ void load_chunk(const cg_ssd_fwd_params &p, const Cta &c, float *st, i64 t0, int n,
                                           bool want_q, bool async) {
    const int tid = threadIdx.x;
    const float *qb = p.q.p + c.b * p.q.s0 + t0 * p.q.s1 + c.g * p.q.s2;
    const float *kb = p.k.p + c.b * p.k.s0 + t0 * p.k.s1 + c.g * p.k.s2;
    const float *vb = p.v.p + c.b * p.v.s0 + t0 * p.v.s1 + c.h * p.v.s2 + c.j0;
    const float *lb = p.la.p + c.b * p.la.s0 + t0 * p.la.s1 + c.h * p.la.s2;
    for (int e = tid; e < CHUNK * DKP; e += NTHREADS) {
        const int r = e / DKP, i = e - r * DKP;
        const bool in = r < n && i < DK;
        float *dq = st + ST_Q + r * LDQ + i, *dk = st + ST_K + r * LDK + i;
        const float *sq = qb + r * p.q.s1 + i, *sk = kb + r * p.k.s1 + i;
        if (in && async) {
            if (want_q) cg_cp_async_ca4(dq, sq);
            cg_cp_async_ca4(dk, sk);
        } else {
            if (want_q) *dq = in ? *sq : 0.f;
            *dk = in ? *sk : 0.f;
        }
    }
    for (int e = tid; e < CHUNK * BDV; e += NTHREADS) {
        const int r = e / BDV, j = e - r * BDV;
        const bool in = r < n && c.j0 + j < DV;
        float *dv = st + ST_V + r * LDV + j;
        const float *sv = vb + r * p.v.s1 + j;
        if (in && async) cg_cp_async_ca4(dv, sv);
        else *dv = in ? *sv : 0.f;
    }
    for (int r = tid; r < CHUNK; r += NTHREADS) {
        const bool in = r < n;
        const float *sl = lb + r * p.la.s1;
        if (in && async) cg_cp_async_ca4(st + ST_LA + r, sl);
        else st[ST_LA + r] = in ? *sl : 0.f;
    }
}

// A = cumsum(la), exp(A), w = exp(A_last - A) of the chunk in stage st, by warp 0.
__device__ __forceinline__ void chunk_cumsum(float *sm, const float *st) {
    ssdc::chunk_cumsum<CHUNK>(st + ST_LA, sm + OFF_A, sm + OFF_EA, sm + OFF_W);
}

// P = (Q K^T) .* M into smem; tiles strictly above the diagonal are never read.
__device__ __forceinline__ void chunk_scores(float *sm, const float *st) {
    const int warp = threadIdx.x >> 5;
    constexpr int MT = CHUNK / 16;
    const float *Q = st + ST_Q, *K = st + ST_K, *A = sm + OFF_A;
    float *P = sm + OFF_P;
    for (int tile = warp; tile < MT * MT; tile += WARPS) {
        const int mi = tile / MT, ni = tile - mi * MT;
        if (ni > mi) continue;
        const int m0 = mi * 16, n0 = ni * 16;
        float acc[2][4] = {};
        warp_mma(acc, 0, DKP, [&](int m, int k) { return Q[(m0 + m) * LDQ + k]; }, // Q [CHUNK, DKP]
                 [&](int k, int n) { return K[(n0 + n) * LDK + k]; });            // K^T [DKP, CHUNK]
        tile_foreach(acc, [&](int r, int cc, float &x) {
            const int i = m0 + r, j = n0 + cc;
            P[i * LDP + j] = j <= i ? x * expf(A[i] - A[j]) : 0.f;
        });
    }
}

// O = diag(exp(A)) Q S0 + P V for rows < n, columns < dv; with_state false: S0 = 0.
__device__ __forceinline__ void chunk_output(const cg_ssd_fwd_params &p, const Cta &c, float *sm, const float *st,
                                             i64 t0, int n, bool with_state) {
    const int warp = threadIdx.x >> 5;
    constexpr int MT = CHUNK / 16, NT = BDV / 16;
    const float *Q = st + ST_Q, *V = st + ST_V, *S = sm + OFF_S, *P = sm + OFF_P, *EA = sm + OFF_EA;
    float *ob = p.o.p + c.b * p.o.s0 + t0 * p.o.s1 + c.h * p.o.s2 + c.j0;
    for (int tile = warp; tile < MT * NT; tile += WARPS) {
        const int mi = tile / NT, ni = tile - mi * NT;
        const int m0 = mi * 16, n0 = ni * 16;
        if (m0 >= n) continue; // only padding rows
        float acc[2][4] = {};
        if (with_state) {
            warp_mma(acc, 0, DKP, [&](int m, int k) { return Q[(m0 + m) * LDQ + k]; }, // Q [CHUNK, DKP]
                     [&](int k, int nn) { return S[k * LDS + n0 + nn]; });          // S [DKP, BDV]
            tile_foreach(acc, [&](int r, int, float &x) { x *= EA[m0 + r]; });
        }
        warp_mma(acc, 0, m0 + 16, [&](int m, int k) { return P[(m0 + m) * LDP + k]; }, // P [CHUNK, CHUNK]
                 [&](int k, int nn) { return V[k * LDV + n0 + nn]; });                // V [CHUNK, BDV]
        tile_foreach(acc, [&](int r, int cc, float &x) {
            const int i = m0 + r, j = n0 + cc;
            if (i < n && c.j0 + j < DV) ob[i * p.o.s1 + j] = x;
        });
    }
}

// S = gamma S + (K .* w)^T V over the whole [DKP, BDV] tile (gamma = exp(A_last)).
__device__ __forceinline__ void chunk_state(float *sm, const float *st, float gamma) {
    const int warp = threadIdx.x >> 5;
    constexpr int MT = DKP / 16, NT = BDV / 16;
    const float *K = st + ST_K, *V = st + ST_V, *W = sm + OFF_W;
    float *S = sm + OFF_S;
    for (int tile = warp; tile < MT * NT; tile += WARPS) {
        const int mi = tile / NT, ni = tile - mi * NT;
        const int m0 = mi * 16, n0 = ni * 16;
        float acc[2][4];
        const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[nt][e] = gamma * S[(m0 + gr + (e >> 1) * 8) * LDS + n0 + nt * 8 + 2 * tg + (e & 1)];
        warp_mma(acc, 0, CHUNK, [&](int m, int k) { return K[k * LDK + m0 + m] * W[k]; }, // (K .* w)^T [DKP, CHUNK]
                 [&](int k, int nn) { return V[k * LDV + n0 + nn]; });                   // V [CHUNK, BDV]
        tile_foreach(acc, [&](int r, int cc, float &x) { S[(m0 + r) * LDS + n0 + cc] = x; });
    }
}

// S tile from a [.., dk, dv] tensor row-block at src (pitch ld, dv contiguous), zero-padded.
__device__ __forceinline__ void state_load(float *sm, const float *src, i64 ld, i64 j0) {
    float *S = sm + OFF_S;
    for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
        const int i = e / BDV, j = e - i * BDV;
        S[i * LDS + j] = (src && i < DK && j0 + j < DV) ? src[i * ld + j] : 0.f;
    }
}

__device__ __forceinline__ void state_store(const float *sm, float *dst, i64 ld, i64 j0) {
    const float *S = sm + OFF_S;
    for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
        const int i = e / BDV, j = e - i * BDV;
        if (i < DK && j0 + j < DV) dst[i * ld + j] = S[i * LDS + j];
    }
}

__device__ __forceinline__ int chunk_len(const cg_ssd_fwd_params &p, i64 ci) {
    return ssdc::chunk_len<CHUNK>(p.T, ci);
}

} // namespace ssd

// minBlocks 1: without it ptxas caps some configs near 80-96 registers and spills.
#define SSD_ENTRY extern "C" __global__ void __launch_bounds__(ssd::NTHREADS, 1)

#if !defined(CG_P_STRATEGY_3PHASE)
// ------------------------------------------------------ sequential strategy
// grid: NDVT * B * H CTAs, blockIdx.x = (b * H + h) * NDVT + dv tile.
SSD_ENTRY cg_ssd_fwd_seq(cg_ssd_fwd_params p) {
    using namespace ssd;
    CG_DYN_SMEM(float, sm);
    const i64 dvt = blockIdx.x % NDVT, bh = blockIdx.x / NDVT;
    const Cta c = cta_coords(p, dvt, bh);
    const float *h0 = p.h0.p ? p.h0.p + c.b * p.h0.s0 + c.h * p.h0.s1 + c.j0 : nullptr;
    state_load(sm, h0, p.h0.s2, c.j0);
    float *stage0 = sm + OFF_STAGE;
    if (STAGES == 2) {
        load_chunk(p, c, stage0, 0, chunk_len(p, 0), true, true);
        cg_cp_async_commit();
    }
    for (i64 ci = 0; ci < p.nchunks; ++ci) {
        float *st = stage0 + (STAGES == 2 ? (int)(ci & 1) * STAGE_FLOATS : 0);
        const i64 t0 = ci * CHUNK;
        const int n = chunk_len(p, ci);
        if (STAGES == 2) {
            // The other stage was last read by chunk ci-1, which ended with a barrier.
            if (ci + 1 < p.nchunks)
                load_chunk(p, c, stage0 + (int)((ci + 1) & 1) * STAGE_FLOATS, t0 + CHUNK, chunk_len(p, ci + 1), true,
                           true);
            cg_cp_async_commit();
            cg_cp_async_wait<1>(); // chunk ci has landed (this thread's copies)
        } else {
            load_chunk(p, c, st, t0, n, true, false);
        }
        __syncthreads();
        chunk_cumsum(sm, st);
        __syncthreads();
        chunk_scores(sm, st);
        __syncthreads();
        chunk_output(p, c, sm, st, t0, n, ci > 0 || h0 != nullptr);
        const bool last = ci + 1 == p.nchunks;
        if (!last || p.hT.p) {
            __syncthreads(); // every warp is done reading S
            chunk_state(sm, st, sm[OFF_EA + CHUNK - 1]);
        }
        __syncthreads();
    }
    if (p.hT.p) state_store(sm, p.hT.p + c.b * p.hT.s0 + c.h * p.hT.s1 + c.j0, p.hT.s2, c.j0);
}
#else
// ------------------------------------------------------ three-phase strategy
// Workspace: states [B*H, nchunks, DK, DV] then decays [B*H, nchunks].
// Phase 1, grid NDVT * nchunks * B * H, blockIdx.x = ((b*H + h) * nchunks + c) * NDVT + dvt:
// U_c = (K .* w)^T V into the chunk's state slot, gamma_c = exp(A_last).
SSD_ENTRY cg_ssd_fwd_states(cg_ssd_fwd_params p) {
    using namespace ssd;
    CG_DYN_SMEM(float, sm);
    const i64 dvt = blockIdx.x % NDVT, rest = blockIdx.x / NDVT;
    const i64 ci = rest % p.nchunks, bh = rest / p.nchunks;
    const Cta c = cta_coords(p, dvt, bh);
    float *st = sm + OFF_STAGE;
    load_chunk(p, c, st, ci * CHUNK, chunk_len(p, ci), false, false);
    state_load(sm, nullptr, 0, c.j0);
    __syncthreads();
    chunk_cumsum(sm, st);
    __syncthreads();
    chunk_state(sm, st, 0.f);
    __syncthreads();
    const i64 slot = bh * p.nchunks + ci;
    state_store(sm, p.ws + slot * (i64)(DK * DV) + c.j0, DV, c.j0);
    if (dvt == 0 && threadIdx.x == 0) p.ws[p.B * p.H * p.nchunks * (i64)(DK * DV) + slot] = sm[OFF_EA + CHUNK - 1];
}

// Phase 2, one thread per (b, h, i, j): S0^0 = h0, S0^{c+1} = gamma_c S0^c + U_c; the
// slot of chunk c ends up holding S0^c; hT = the state after the last chunk.
SSD_ENTRY cg_ssd_fwd_scan(cg_ssd_fwd_params p) {
    using namespace ssd;
    const i64 e = (i64)blockIdx.x * NTHREADS + threadIdx.x;
    if (e >= p.B * p.H * (i64)(DK * DV)) return;
    const i64 bh = e / (DK * DV), ij = e - bh * (DK * DV);
    const i64 i = ij / DV, j = ij - i * DV, b = bh / p.H, h = bh - b * p.H;
    float s = p.h0.p ? p.h0.p[b * p.h0.s0 + h * p.h0.s1 + i * p.h0.s2 + j] : 0.f;
    float *u = p.ws + bh * p.nchunks * (i64)(DK * DV) + ij;
    const float *gam = p.ws + p.B * p.H * p.nchunks * (i64)(DK * DV) + bh * p.nchunks;
    s = ssdc::state_scan<DK * DV>(u, gam, p.nchunks, s);
    if (p.hT.p) p.hT.p[b * p.hT.s0 + h * p.hT.s1 + i * p.hT.s2 + j] = s;
}

// Phase 3, grid as phase 1: O of chunk c from its entering state S0^c.
SSD_ENTRY cg_ssd_fwd_out(cg_ssd_fwd_params p) {
    using namespace ssd;
    CG_DYN_SMEM(float, sm);
    const i64 dvt = blockIdx.x % NDVT, rest = blockIdx.x / NDVT;
    const i64 ci = rest % p.nchunks, bh = rest / p.nchunks;
    const Cta c = cta_coords(p, dvt, bh);
    float *st = sm + OFF_STAGE;
    const int n = chunk_len(p, ci);
    load_chunk(p, c, st, ci * CHUNK, n, true, false);
    state_load(sm, p.ws + (bh * p.nchunks + ci) * (i64)(DK * DV) + c.j0, DV, c.j0);
    __syncthreads();
    chunk_cumsum(sm, st);
    __syncthreads();
    chunk_scores(sm, st);
    __syncthreads();
    chunk_output(p, c, sm, st, ci * CHUNK, n, true);
}
#endif
