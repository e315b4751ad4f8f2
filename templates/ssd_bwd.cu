// ssd_bwd.cu -- SSD backward (chunked), one specialization per (dk, dv, config).
//
// Rendered by generator/kernels/ssd_bwd.lua, which defines before this text:
//   CG_DK, CG_DV                                  head sizes (any >= 1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS
//   CG_P_PRECISION_{IEEE,TF32,3XTF32}, CG_P_HEADS_{LOOP,SPLIT}
//   CG_SMEM_STATES, CG_SMEM_GRADS                 the Lua side's shared-memory sizes
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Algorithm (shared/KERNEL_MATH.md, SSD backward). Per (b, h) and chunk c of CHUNK
// tokens, A = cumsum(la) within the chunk, eA = exp(A), w = exp(A_last - A),
// M_ij = exp(A_i - A_j) for i >= j (else 0), P = (Q K^T) .* M:
//   S0^c     state entering chunk c (forward phases 1 and 2: recomputed, not stored)
//   dS^c     gradient of the state leaving chunk c: dS^{last} = dhT (or 0),
//            dS^{c-1} = exp(A_last) dS^c + (Q .* eA)^T dO,   dh0 = dS^{-1}
//   dV  = P^T dO + diag(w) K dS^c
//   dP  = (dO V^T) .* M
//   dQ  = dP K + diag(eA) dO S0^T
//   dK  = dP^T Q + diag(w) V (dS^c)^T
//   dla_t = sum_{s >= t} (q_s . dq_s^(h) - k_s . dk_s^(h)) + <dhT, S_T>
// with dq^(h), dk^(h) head h's own terms, before the sum over the group's heads.
//
// Four launches, one stream:
//   1 states  per (b, h, chunk, dv tile): U_c = (K .* w)^T V and R_c = (Q .* eA)^T dO
//             into the workspace, gamma_c = exp(A_last).
//   2 scan    per (b, h, block of state elements): forward over the chunks turns U_c
//             into S0^c (in place), reverse over the chunks turns R_c into dS^c (in
//             place); dh0; partial sums of dhT .* S_T (fixed order within the block).
//   3 grads   heads=loop: per (b, g, chunk), one CTA owns every head of the group and
//             sums dq, dk over the heads in head order; heads=split: per (b, h, chunk),
//             head h's dq, dk go to per-head partial buffers in the workspace. Per head
//             it loops over the dv tiles (dV complete per tile, dP, dQ, dK accumulated
//             in smem), then writes the chunk-local reverse cumulative sum of
//             q.dq - k.dk into dla and its chunk total into the workspace.
//   4 finish  per (b, g, chunk): for each head adds to dla the carry from the later
//             chunks (their totals, summed from the last chunk down) and <dhT, S_T>;
//             heads=split: dq, dk = the sum of the partials in head order.
// Matmuls are per warp on 16x16 output tiles with the m16n8k8 fragment layout: FFMA for
// ieee, mma tf32 for tf32, three tf32 mma per product for 3xtf32 (as in ssd_fwd.cu).
// Operands come from padded smem tiles, zero beyond dk, dv and the last token, so any
// dk, dv >= 1 and any T >= 1 work without special cases. Deterministic: every output
// element and every workspace element is written by exactly one thread per launch,
// and every sum has a fixed order.
#include "cg_device.cuh"
#include "cg_kernel_params.h"
#include "ssd_common.cuh"

// ------------------------------------------------------------------- traits
namespace ssdb {

constexpr int DK = CG_DK;
constexpr int DV = CG_DV;
constexpr int CHUNK = CG_P_CHUNK;
constexpr int BDV = CG_P_BLOCK_DV;
constexpr int WARPS = CG_P_WARPS;
constexpr int NTHREADS = 32 * WARPS;

#if defined(CG_P_HEADS_SPLIT)
constexpr bool SPLIT = true;
#else
constexpr bool SPLIT = false;
#endif

#if defined(CG_P_PRECISION_IEEE)
constexpr int PREC = 0;
#elif defined(CG_P_PRECISION_TF32)
constexpr int PREC = 1;
#elif defined(CG_P_PRECISION_3XTF32)
constexpr int PREC = 2;
#else
#error "ssd_bwd: no CG_P_PRECISION_* defined"
#endif

constexpr int DKP = (DK + 15) / 16 * 16;   // dk padded to the 16-row mma tile
constexpr int NDVT = (DV + BDV - 1) / BDV; // dv tiles
constexpr long long DKDV = (long long)DK * DV;
constexpr int NBLK = (int)((DKDV + NTHREADS - 1) / NTHREADS); // scan blocks per (b, h)
// Row pitches in floats (bank-conflict padding as in ssd_fwd.cu).
constexpr int LDQ = DKP + 4;   // Q, K, dQ, dK  [CHUNK, DKP]
constexpr int LDV = BDV + 8;   // V, dO         [CHUNK, BDV]
constexpr int LDS = BDV + 8;   // S0, dS        [DKP, BDV]
constexpr int LDP = CHUNK + 4; // P, dP         [CHUNK, CHUNK]

// Shared memory, in floats. The states launch uses the prefix up to SMEM_STATES.
constexpr int OFF_Q = 0;
constexpr int OFF_K = OFF_Q + CHUNK * LDQ;
constexpr int OFF_V = OFF_K + CHUNK * LDQ;
constexpr int OFF_DO = OFF_V + CHUNK * LDV;
constexpr int OFF_LA = OFF_DO + CHUNK * LDV; // [CHUNK] log_alpha
constexpr int OFF_A = OFF_LA + CHUNK;        // [CHUNK] A = cumsum(la)
constexpr int OFF_EA = OFF_A + CHUNK;        // [CHUNK] exp(A)
constexpr int OFF_W = OFF_EA + CHUNK;        // [CHUNK] exp(A_last - A)
constexpr int STATES_FLOATS = OFF_W + CHUNK;
constexpr int OFF_DQ = STATES_FLOATS;        // head h's dQ, dK
constexpr int OFF_DK = OFF_DQ + CHUNK * LDQ;
constexpr int OFF_P = OFF_DK + CHUNK * LDQ;
constexpr int OFF_DP = OFF_P + CHUNK * LDP;
constexpr int OFF_S = OFF_DP + CHUNK * LDP;  // S0^c tile
constexpr int OFF_DS = OFF_S + DKP * LDS;    // dS^c tile
constexpr int OFF_DT = OFF_DS + DKP * LDS;   // [CHUNK] q.dq - k.dk, then its reverse cumsum
constexpr int GRADS_FLOATS = OFF_DT + CHUNK;
constexpr long long SMEM_STATES = 4LL * STATES_FLOATS;
constexpr long long SMEM_GRADS = 4LL * GRADS_FLOATS;
#ifdef CG_SMEM_GRADS // what generator/kernels/ssd_bwd.lua launches with
static_assert(SMEM_STATES == CG_SMEM_STATES, "ssd_bwd.lua smem_states() disagrees with the layout here");
static_assert(SMEM_GRADS == CG_SMEM_GRADS, "ssd_bwd.lua smem_grads() disagrees with the layout here");
#endif

static_assert(DK >= 1 && DV >= 1, "dk, dv >= 1");
static_assert(CHUNK % 16 == 0 && CHUNK >= 16, "chunk: a multiple of the 16-row mma tile");
static_assert(BDV % 16 == 0 && BDV >= 16, "block_dv: a multiple of the 16-column warp tile");
static_assert(WARPS >= 1 && NTHREADS <= 1024, "warps: 1..32");

typedef cg_i64 i64;

// ------------------------------------------------------------- warp matmul
// ssd_common.cuh at this kernel's precision (the m16n8k8 accumulator layout).
template <class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[2][4], int k0, int k1, FA A, FB B) {
    ssdc::warp_mma<PREC>(acc, k0, k1, A, B);
}
using ssdc::tile_foreach;
using ssdc::tile_zero;

// ------------------------------------------------------------------ loads
__device__ __forceinline__ int chunk_len(const cg_ssd_bwd_params &p, i64 ci) {
    return ssdc::chunk_len<CHUNK>(p.T, ci);
}

// Q, K rows [t0, t0 + n) of group g (zero beyond n and dk).
__device__ __forceinline__ void load_qk(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 g, i64 t0, int n) {
    const float *qb = p.q.p + b * p.q.s0 + t0 * p.q.s1 + g * p.q.s2;
    const float *kb = p.k.p + b * p.k.s0 + t0 * p.k.s1 + g * p.k.s2;
    for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
        const int r = e / DKP, i = e - r * DKP;
        const bool in = r < n && i < DK;
        sm[OFF_Q + r * LDQ + i] = in ? qb[r * p.q.s1 + i] : 0.f;
        sm[OFF_K + r * LDQ + i] = in ? kb[r * p.k.s1 + i] : 0.f;
    }
}

// V, dO rows [t0, t0 + n), columns [j0, j0 + BDV) of head h (zero beyond n and dv).
__device__ __forceinline__ void load_vdo(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 h, i64 t0, int n, i64 j0) {
    const float *vb = p.v.p + b * p.v.s0 + t0 * p.v.s1 + h * p.v.s2 + j0;
    const float *ob = p.dout.p + b * p.dout.s0 + t0 * p.dout.s1 + h * p.dout.s2 + j0;
    for (int e = threadIdx.x; e < CHUNK * BDV; e += NTHREADS) {
        const int r = e / BDV, j = e - r * BDV;
        const bool in = r < n && j0 + j < DV;
        sm[OFF_V + r * LDV + j] = in ? vb[r * p.v.s1 + j] : 0.f;
        sm[OFF_DO + r * LDV + j] = in ? ob[r * p.dout.s1 + j] : 0.f;
    }
}

__device__ __forceinline__ void load_la(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 h, i64 t0, int n) {
    const float *lb = p.la.p + b * p.la.s0 + t0 * p.la.s1 + h * p.la.s2;
    for (int r = threadIdx.x; r < CHUNK; r += NTHREADS) sm[OFF_LA + r] = r < n ? lb[r * p.la.s1] : 0.f;
}

// A = cumsum(la), exp(A), w = exp(A_last - A) of the chunk's log_alpha in smem, by warp 0.
__device__ __forceinline__ void chunk_cumsum(float *sm) {
    ssdc::chunk_cumsum<CHUNK>(sm + OFF_LA, sm + OFF_A, sm + OFF_EA, sm + OFF_W);
}

// Workspace, in floats: S [B*H, nchunks, DK, DV], D (same), gamma [B*H, nchunks],
// chunk totals of q.dq - k.dk [B*H, nchunks], partial <dhT, S_T> [B*H, NBLK], and for
// heads=split the per-head dq, dk [B*H, T, DK] each.
struct Ws {
    float *S, *D, *gam, *tot, *pdot, *dqp, *dkp;
};
__device__ __forceinline__ Ws ws_of(const cg_ssd_bwd_params &p) {
    Ws w;
    const i64 bhc = p.B * p.H * p.nchunks;
    w.S = p.ws;
    w.D = w.S + bhc * DKDV;
    w.gam = w.D + bhc * DKDV;
    w.tot = w.gam + bhc;
    w.pdot = w.tot + bhc;
    w.dqp = w.pdot + p.B * p.H * NBLK;
    w.dkp = w.dqp + p.B * p.H * p.T * DK;
    return w;
}

} // namespace ssdb

// minBlocks 1: without it ptxas caps some configs near 80-96 registers and spills.
#define SSDB_ENTRY extern "C" __global__ void __launch_bounds__(ssdb::NTHREADS, 1)

// --------------------------------------------------------- 1: chunk states
// grid NDVT * nchunks * B * H, blockIdx.x = ((b*H + h) * nchunks + c) * NDVT + dv tile.
SSDB_ENTRY cg_ssd_bwd_states(cg_ssd_bwd_params p) {
    using namespace ssdb;
    CG_DYN_SMEM(float, sm);
    const i64 dvt = blockIdx.x % NDVT, rest = blockIdx.x / NDVT;
    const i64 ci = rest % p.nchunks, bh = rest / p.nchunks;
    const i64 h = bh % p.H, b = bh / p.H, g = h / (p.H / p.G), j0 = dvt * BDV, t0 = ci * CHUNK;
    const int n = chunk_len(p, ci);
    load_qk(p, sm, b, g, t0, n);
    load_vdo(p, sm, b, h, t0, n, j0);
    load_la(p, sm, b, h, t0, n);
    __syncthreads();
    chunk_cumsum(sm);
    __syncthreads();
    const Ws w = ws_of(p);
    const i64 slot = bh * p.nchunks + ci;
    const float *Q = sm + OFF_Q, *K = sm + OFF_K, *V = sm + OFF_V, *DO = sm + OFF_DO;
    const float *EA = sm + OFF_EA, *W = sm + OFF_W;
    constexpr int MT = DKP / 16, NT = BDV / 16;
    const int warp = threadIdx.x >> 5;
    for (int tile = warp; tile < 2 * MT * NT; tile += WARPS) {
        const int which = tile / (MT * NT), r2 = tile - which * (MT * NT);
        const int m0 = r2 / NT * 16, n0 = r2 % NT * 16;
        float acc[2][4];
        tile_zero(acc);
        if (which == 0) // U = (K .* w)^T V   [DKP, BDV]
            warp_mma(acc, 0, CHUNK, [&](int m, int k) { return K[k * LDQ + m0 + m] * W[k]; },
                     [&](int k, int nn) { return V[k * LDV + n0 + nn]; });
        else // R = (Q .* eA)^T dO   [DKP, BDV]
            warp_mma(acc, 0, CHUNK, [&](int m, int k) { return Q[k * LDQ + m0 + m] * EA[k]; },
                     [&](int k, int nn) { return DO[k * LDV + n0 + nn]; });
        float *dst = (which == 0 ? w.S : w.D) + slot * DKDV + j0;
        tile_foreach(acc, [&](int r, int cc, float &x) {
            const int i = m0 + r, j = n0 + cc;
            if (i < DK && j0 + j < DV) dst[(i64)i * DV + j] = x;
        });
    }
    if (dvt == 0 && threadIdx.x == 0) w.gam[slot] = sm[OFF_EA + CHUNK - 1];
}

// ------------------------------------------------------------- 2: scans
// grid NBLK * B * H, blockIdx.x = (b*H + h) * NBLK + block; one thread per state element.
SSDB_ENTRY cg_ssd_bwd_scan(cg_ssd_bwd_params p) {
    using namespace ssdb;
    __shared__ float red[NTHREADS];
    const i64 blk = blockIdx.x % NBLK, bh = blockIdx.x / NBLK;
    const i64 b = bh / p.H, h = bh - b * p.H;
    const i64 ij = blk * NTHREADS + threadIdx.x;
    const Ws w = ws_of(p);
    float dot = 0.f;
    if (ij < DKDV) {
        const i64 i = ij / DV, j = ij - i * DV;
        const float *gam = w.gam + bh * p.nchunks;
        // forward: slot c holds U_c, then S0^c; s ends as S_T
        float s = p.h0.p ? p.h0.p[b * p.h0.s0 + h * p.h0.s1 + i * p.h0.s2 + j] : 0.f;
        float *u = w.S + bh * p.nchunks * DKDV + ij;
        s = ssdc::state_scan<DKDV>(u, gam, p.nchunks, s);
        // reverse: slot c holds R_c, then dS^c (the gradient of the state leaving chunk c)
        float d = p.dhT.p ? p.dhT.p[b * p.dhT.s0 + h * p.dhT.s1 + i * p.dhT.s2 + j] : 0.f;
        dot = d * s;
        float *r = w.D + bh * p.nchunks * DKDV + ij;
        for (i64 c = p.nchunks - 1; c >= 0; --c) {
            const float rc = r[c * DKDV];
            r[c * DKDV] = d;
            d = fmaf(gam[c], d, rc);
        }
        if (p.dh0.p) p.dh0.p[b * p.dh0.s0 + h * p.dh0.s1 + i * p.dh0.s2 + j] = d;
    }
    red[threadIdx.x] = dot;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.f;
        for (int t = 0; t < NTHREADS; ++t) sum += red[t];
        w.pdot[bh * NBLK + blk] = sum;
    }
}

// ------------------------------------------------------- 3: chunk gradients
// heads=loop:  grid nchunks * B * G, blockIdx.x = (b*G + g) * nchunks + c;
// heads=split: grid nchunks * B * H, blockIdx.x = (b*H + h) * nchunks + c.
SSDB_ENTRY cg_ssd_bwd_grads(cg_ssd_bwd_params p) {
    using namespace ssdb;
    CG_DYN_SMEM(float, sm);
    const i64 ci = blockIdx.x % p.nchunks, rest = blockIdx.x / p.nchunks;
    const i64 hpg = p.H / p.G, t0 = ci * CHUNK;
    const i64 b = SPLIT ? rest / p.H : rest / p.G;
    const i64 h_begin = SPLIT ? rest % p.H : rest % p.G * hpg, h_end = SPLIT ? h_begin + 1 : h_begin + hpg;
    const i64 g = h_begin / hpg;
    const int n = chunk_len(p, ci);
    const int warp = threadIdx.x >> 5;
    const Ws w = ws_of(p);
    float *Q = sm + OFF_Q, *K = sm + OFF_K, *V = sm + OFF_V, *DO = sm + OFF_DO;
    float *A = sm + OFF_A, *EA = sm + OFF_EA, *W = sm + OFF_W;
    float *DQ = sm + OFF_DQ, *DKs = sm + OFF_DK, *P = sm + OFF_P, *DP = sm + OFF_DP;
    float *S = sm + OFF_S, *DS = sm + OFF_DS, *DT = sm + OFF_DT;
    constexpr int MT = CHUNK / 16, NT = BDV / 16, KT = DKP / 16;
    load_qk(p, sm, b, g, t0, n);
    for (i64 h = h_begin; h < h_end; ++h) {
        const i64 bh = b * p.H + h;
        const i64 slot = bh * p.nchunks + ci;
        load_la(p, sm, b, h, t0, n);
        for (int e = threadIdx.x; e < CHUNK * LDQ; e += NTHREADS) DQ[e] = DKs[e] = 0.f;
        for (int e = threadIdx.x; e < CHUNK * LDP; e += NTHREADS) DP[e] = 0.f;
        __syncthreads();
        chunk_cumsum(sm);
        __syncthreads();
        // P = (Q K^T) .* M on the tiles at or below the diagonal (the others are never read)
        for (int tile = warp; tile < MT * MT; tile += WARPS) {
            const int mi = tile / MT, ni = tile - mi * MT;
            if (ni > mi) continue;
            const int m0 = mi * 16, n0 = ni * 16;
            float acc[2][4];
            tile_zero(acc);
            warp_mma(acc, 0, DKP, [&](int m, int k) { return Q[(m0 + m) * LDQ + k]; },
                     [&](int k, int nn) { return K[(n0 + nn) * LDQ + k]; });
            tile_foreach(acc, [&](int r, int cc, float &x) {
                const int i = m0 + r, j = n0 + cc;
                P[i * LDP + j] = j <= i ? x * expf(A[i] - A[j]) : 0.f;
            });
        }
        for (int dvt = 0; dvt < NDVT; ++dvt) {
            const i64 j0 = (i64)dvt * BDV;
            __syncthreads(); // the previous tile's readers are done (and P is complete)
            load_vdo(p, sm, b, h, t0, n, j0);
            const float *s0 = w.S + slot * DKDV + j0, *ds = w.D + slot * DKDV + j0;
            for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
                const int i = e / BDV, j = e - i * BDV;
                const bool in = i < DK && j0 + j < DV;
                S[i * LDS + j] = in ? s0[(i64)i * DV + j] : 0.f;
                DS[i * LDS + j] = in ? ds[(i64)i * DV + j] : 0.f;
            }
            __syncthreads();
            // Four tile lists, each tile owned by one warp: dV, dP, dQ (state term), dK (state term).
            constexpr int N_DV = MT * NT, N_DP = MT * MT, N_DQ = MT * KT;
            constexpr int N_ALL = N_DV + N_DP + 2 * N_DQ;
            for (int tile = warp; tile < N_ALL; tile += WARPS) {
                float acc[2][4];
                tile_zero(acc);
                if (tile < N_DV) { // dV = diag(w) K dS + P^T dO   [CHUNK, BDV]
                    const int m0 = tile / NT * 16, n0 = tile % NT * 16;
                    if (m0 >= n) continue; // only padding rows
                    warp_mma(acc, 0, DKP, [&](int m, int k) { return K[(m0 + m) * LDQ + k]; },
                             [&](int k, int nn) { return DS[k * LDS + n0 + nn]; });
                    tile_foreach(acc, [&](int r, int, float &x) { x *= W[m0 + r]; });
                    warp_mma(acc, m0, CHUNK, [&](int m, int k) { return P[k * LDP + m0 + m]; },
                             [&](int k, int nn) { return DO[k * LDV + n0 + nn]; });
                    float *dvb = p.dv.p + b * p.dv.s0 + t0 * p.dv.s1 + h * p.dv.s2 + j0;
                    tile_foreach(acc, [&](int r, int cc, float &x) {
                        const int i = m0 + r, j = n0 + cc;
                        if (i < n && j0 + j < DV) dvb[i * p.dv.s1 + j] = x;
                    });
                } else if (tile < N_DV + N_DP) { // dP += dO V^T   [CHUNK, CHUNK], lower tiles
                    const int t2 = tile - N_DV, mi = t2 / MT, ni = t2 - mi * MT;
                    if (ni > mi) continue;
                    const int m0 = mi * 16, n0 = ni * 16;
                    warp_mma(acc, 0, BDV, [&](int m, int k) { return DO[(m0 + m) * LDV + k]; },
                             [&](int k, int nn) { return V[(n0 + nn) * LDV + k]; });
                    tile_foreach(acc, [&](int r, int cc, float &x) { DP[(m0 + r) * LDP + n0 + cc] += x; });
                } else if (tile < N_DV + N_DP + N_DQ) { // dQ += diag(eA) dO S0^T   [CHUNK, DKP]
                    const int t2 = tile - N_DV - N_DP, m0 = t2 / KT * 16, n0 = t2 % KT * 16;
                    warp_mma(acc, 0, BDV, [&](int m, int k) { return DO[(m0 + m) * LDV + k]; },
                             [&](int k, int nn) { return S[(n0 + nn) * LDS + k]; });
                    tile_foreach(acc, [&](int r, int cc, float &x) { DQ[(m0 + r) * LDQ + n0 + cc] += EA[m0 + r] * x; });
                } else { // dK += diag(w) V dS^T   [CHUNK, DKP]
                    const int t2 = tile - N_DV - N_DP - N_DQ, m0 = t2 / KT * 16, n0 = t2 % KT * 16;
                    warp_mma(acc, 0, BDV, [&](int m, int k) { return V[(m0 + m) * LDV + k]; },
                             [&](int k, int nn) { return DS[(n0 + nn) * LDS + k]; });
                    tile_foreach(acc, [&](int r, int cc, float &x) { DKs[(m0 + r) * LDQ + n0 + cc] += W[m0 + r] * x; });
                }
            }
        }
        __syncthreads();
        // dP .* M on the lower tiles
        for (int e = threadIdx.x; e < CHUNK * CHUNK; e += NTHREADS) {
            const int i = e / CHUNK, j = e - i * CHUNK;
            if ((j >> 4) > (i >> 4)) continue;
            DP[i * LDP + j] = j <= i ? DP[i * LDP + j] * expf(A[i] - A[j]) : 0.f;
        }
        __syncthreads();
        // dQ += dP K, dK += dP^T Q   [CHUNK, DKP] each
        for (int tile = warp; tile < 2 * MT * KT; tile += WARPS) {
            const int which = tile / (MT * KT), t2 = tile - which * (MT * KT);
            const int m0 = t2 / KT * 16, n0 = t2 % KT * 16;
            float *dst = which == 0 ? DQ : DKs;
            float acc[2][4];
            tile_foreach(acc, [&](int r, int cc, float &x) { x = dst[(m0 + r) * LDQ + n0 + cc]; });
            if (which == 0)
                warp_mma(acc, 0, m0 + 16, [&](int m, int k) { return DP[(m0 + m) * LDP + k]; },
                         [&](int k, int nn) { return K[k * LDQ + n0 + nn]; });
            else
                warp_mma(acc, m0, CHUNK, [&](int m, int k) { return DP[k * LDP + m0 + m]; },
                         [&](int k, int nn) { return Q[k * LDQ + n0 + nn]; });
            tile_foreach(acc, [&](int r, int cc, float &x) { dst[(m0 + r) * LDQ + n0 + cc] = x; });
        }
        __syncthreads();
        // q.dq - k.dk per token (head h's own terms)
        for (int t = threadIdx.x; t < CHUNK; t += NTHREADS) {
            float a = 0.f, c = 0.f;
            for (int i = 0; i < DKP; ++i) {
                a = fmaf(Q[t * LDQ + i], DQ[t * LDQ + i], a);
                c = fmaf(K[t * LDQ + i], DKs[t * LDQ + i], c);
            }
            DT[t] = a - c;
        }
        __syncthreads();
        if (threadIdx.x == 0) { // chunk-local reverse cumulative sum, fixed order
            float run = 0.f;
            for (int t = CHUNK - 1; t >= 0; --t) {
                run += DT[t];
                DT[t] = run;
            }
            w.tot[slot] = run;
        }
        __syncthreads();
        float *dlb = p.dla.p + b * p.dla.s0 + t0 * p.dla.s1 + h * p.dla.s2;
        for (int t = threadIdx.x; t < n; t += NTHREADS) dlb[t * p.dla.s1] = DT[t];
        if (SPLIT) { // head h's own dq, dk; launch 4 sums the heads
            float *dqb = w.dqp + (bh * p.T + t0) * DK, *dkb = w.dkp + (bh * p.T + t0) * DK;
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, i = e - r * DKP;
                if (r >= n || i >= DK) continue;
                dqb[(i64)r * DK + i] = DQ[r * LDQ + i];
                dkb[(i64)r * DK + i] = DKs[r * LDQ + i];
            }
        } else { // dq, dk of the group: the heads in order (this thread wrote the element for the previous head)
            float *dqb = p.dq.p + b * p.dq.s0 + t0 * p.dq.s1 + g * p.dq.s2;
            float *dkb = p.dk.p + b * p.dk.s0 + t0 * p.dk.s1 + g * p.dk.s2;
            const bool first = h == h_begin;
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, i = e - r * DKP;
                if (r >= n || i >= DK) continue;
                float *oq = dqb + r * p.dq.s1 + i, *ok = dkb + r * p.dk.s1 + i;
                *oq = (first ? 0.f : *oq) + DQ[r * LDQ + i];
                *ok = (first ? 0.f : *ok) + DKs[r * LDQ + i];
            }
        }
        __syncthreads(); // before the next head overwrites the buffers
    }
}

// ----------------------------------------------------------------- 4: finish
// grid nchunks * B * G, blockIdx.x = (b*G + g) * nchunks + c. Per head of the group:
// dla += <dhT, S_T> + the later chunks' totals (last chunk first). heads=split: dq, dk
// of the group = the per-head partials summed in head order.
SSDB_ENTRY cg_ssd_bwd_finish(cg_ssd_bwd_params p) {
    using namespace ssdb;
    __shared__ float carry;
    const i64 ci = blockIdx.x % p.nchunks, bg = blockIdx.x / p.nchunks;
    const i64 g = bg % p.G, b = bg / p.G, hpg = p.H / p.G, t0 = ci * CHUNK;
    const int n = chunk_len(p, ci);
    const Ws w = ws_of(p);
    for (i64 h = g * hpg; h < (g + 1) * hpg; ++h) {
        const i64 bh = b * p.H + h;
        if (threadIdx.x == 0) {
            float c = 0.f;
            for (int k = 0; k < NBLK; ++k) c += w.pdot[bh * NBLK + k];
            for (i64 c2 = p.nchunks - 1; c2 > ci; --c2) c += w.tot[bh * p.nchunks + c2];
            carry = c;
        }
        __syncthreads();
        float *dlb = p.dla.p + b * p.dla.s0 + t0 * p.dla.s1 + h * p.dla.s2;
        for (int t = threadIdx.x; t < n; t += NTHREADS) dlb[t * p.dla.s1] += carry;
        __syncthreads(); // before thread 0 overwrites carry
    }
    if (SPLIT) {
        float *dqb = p.dq.p + b * p.dq.s0 + t0 * p.dq.s1 + g * p.dq.s2;
        float *dkb = p.dk.p + b * p.dk.s0 + t0 * p.dk.s1 + g * p.dk.s2;
        const i64 hstride = p.T * DK;
        const float *pq = w.dqp + ((b * p.H + g * hpg) * p.T + t0) * DK;
        const float *pk = w.dkp + ((b * p.H + g * hpg) * p.T + t0) * DK;
        for (int e = threadIdx.x; e < n * DK; e += NTHREADS) {
            const int r = e / DK, i = e - r * DK;
            float aq = 0.f, ak = 0.f;
            for (i64 hh = 0; hh < hpg; ++hh) {
                aq += pq[hh * hstride + e];
                ak += pk[hh * hstride + e];
            }
            dqb[r * p.dq.s1 + i] = aq;
            dkb[r * p.dk.s1 + i] = ak;
        }
    }
}
