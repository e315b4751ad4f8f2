// ssd_bwd.cu -- SSD backward (chunked), one specialization per (dk, dv, config).
//
// Rendered by generator/kernels/ssd_bwd.lua, which defines before this text:
//   CG_DK, CG_DV                                  head sizes (any >= 1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS
//   CG_P_PRECISION_{IEEE,TF32,3XTF32,MMA16}, CG_P_HEADS_{LOOP,SPLIT}
//   CG_P_RECOMPUTE                                chunks per stored state (1: all stored)
//   CG_SMEM_STATES, CG_SMEM_GRADS                 the Lua side's shared-memory sizes
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_DOUT,            storage type of each of those tensors:
//   CG_T_DQ, CG_T_DK, CG_T_DV                     float when not defined, else cg_bf16 or
//                                                 cg_f16 (issue #15; a gradient follows
//                                                 its input)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Algorithm (SSD backward; docs/kernels.md has the overview). Per (b, h) and chunk c of CHUNK
// tokens, A = cumsum(la) within the chunk, eA = exp(A), w = exp(A_last - A),
// M_ij = exp(A_i - A_j) for i >= j (else 0), P = (Q K^T) .* M:
//   S0^c     state entering chunk c (forward phases 1 and 2: recomputed, not stored)
//   dS^c     gradient of the state leaving chunk c: dS^{last} = dhT (or 0),
//            dS^{c-1} = exp(A_last) dS^c + (Q .* eA)^T dO,   dh0 = dS^{-1}
//   dV  = P^T dO + diag(w) K dS^c
//   dP  = (dO V^T) .* M
//   dQ  = dP K + diag(eA) dO S0^T
//   dK  = dP^T Q + diag(w) V (dS^c)^T
//   dla_t = gamma <dS^c, S0^c> + sum_{i >= t} q_i . dQs_i + sum_{j < t} k_j . dKs_j
//           + sum_{i >= t > j} P_ij (dO V^T)_ij
// with gamma = exp(A_last), dQs = diag(eA) dO S0^T and dKs = diag(w) V (dS^c)^T the state
// terms of head h's dq and dk: exp(la_t) <G_t, S_{t-1}> expanded over the chunk, so each
// chunk's dla needs nothing from the other chunks but S0^c and dS^c, and no term is a
// difference of sums (exact zeros at a reset; a NaN reaches only the tokens whose exact
// gradient it reaches). The A_i - A_j are formed exactly (ssd_common.cuh: chunk_cumsum,
// seg_sum), and a masked product runs as a select wherever a zero could meet an Inf or NaN.
//
// Memory against time: the workspace keeps S0 and dS at every RECOMPUTE-th chunk
// boundary only. A super-chunk s is chunks [s*RECOMPUTE, (s+1)*RECOMPUTE) (the last one
// may be shorter); its U, R and gamma are those of the chunk formulas over its tokens
// (decays relative to the super-chunk's end and start), built chunk by chunk as
//   U <- gamma_j U + U_j,   R <- R + (gamma_first ... gamma_{j-1}) R_j,   gamma <- gamma gamma_j.
// With RECOMPUTE = 1 super-chunks are chunks and nothing below is recomputed.
//
// Four launches (three with heads=loop), one stream:
//   1 states  per (b, h, super-chunk, dv tile): U_s = (K .* w)^T V and R_s = (Q .* eA)^T dO
//             into the workspace, gamma_s = exp(A_last) (over the super-chunk).
//   2 scan    per (b, h, block of state elements): forward over the super-chunks turns
//             U_s into S0^s (in place), reverse turns R_s into dS^s (in place); dh0.
//   3 grads   heads=loop: per (b, g, chunk), one CTA owns every head of the group and
//             sums dq, dk over the heads in head order; heads=split: per (b, h, chunk),
//             head h's dq, dk go to per-head partial buffers in the workspace. Per head
//             it loops over the dv tiles (dV complete per tile, dP, dQ, dK accumulated
//             in smem), then dla of its tokens (the formula above). RECOMPUTE > 1:
//             per dv tile it first carries the stored S0 of its super-chunk forward
//             through the earlier chunks of the super-chunk (S <- gamma_j S + U_j) and
//             the stored dS backward through the later ones (dS <- gamma_j dS + R_j),
//             loading each of those chunks where its own chunk lives, then reloads its own.
//   4 finish  heads=split only, per (b, g, chunk): dq, dk = the sum of the partials in
//             head order.
// Varlen (CG_VARLEN, docs/varlen.md): B = 1, nseq sequences packed along T, cu_seqlens
// read on the device; recompute = 1 (ssd_bwd.lua). Launches 1, 3 and 4 run over the chunk
// slots of ssd_common.cuh (chunks start at every sequence start; an unused slot exits);
// launch 2 runs per (sequence n, h): its slots forward from h0[n], backward from dhT[n],
// and dh0[n].
// Matmuls are per warp on 16x16 output tiles with the m16n8k8 fragment layout: FFMA for
// ieee, mma tf32 for tf32, three tf32 mma per product for 3xtf32 (as in ssd_fwd.cu).
// Operands come from padded smem tiles, zero beyond dk, dv and the last token, so any
// dk, dv >= 1 and any T >= 1 work without special cases. 16-bit q, k, v, dout are widened
// to fp32 as they are staged (ssd_common.cuh: load_tile16), dq, dk, dv rounded once as
// they are stored: dv per tile, dq and dk after the sum over the group's heads (a 16-bit
// dq or dk with H > G takes heads=split, whose finish rounds the sum of the float
// partials; ssd_bwd.lua refuses heads=loop there, which would round per head).
// Deterministic: every output element and every workspace element is written by exactly
// one thread per launch, and every sum has a fixed order.
#include "cg_device.cuh"
#include "cg_kernel_params.h"
#include "ssd_common.cuh"
#if defined(CG_P_PRECISION_MMA16)
#include "ssd_mma16.cuh"
#endif

// ------------------------------------------------------------------- traits
namespace ssdb {

constexpr int DK = CG_DK;
constexpr int DV = CG_DV;
constexpr int CHUNK = CG_P_CHUNK;
constexpr int BDV = CG_P_BLOCK_DV;
constexpr int WARPS = CG_P_WARPS;
constexpr int NTHREADS = 32 * WARPS;
constexpr int REC = CG_P_RECOMPUTE; // chunks per stored state
#ifdef CG_VARLEN
static_assert(REC == 1, "varlen: recompute 1 (a super-chunk would straddle sequences)");
#endif

#if defined(CG_P_HEADS_SPLIT)
constexpr bool SPLIT = true;
#else
constexpr bool SPLIT = false;
#endif

constexpr int PREC = ssdc::PREC; // from CG_P_PRECISION_* (ssd_common.cuh)

constexpr int DKP = (DK + 15) / 16 * 16;   // dk padded to the 16-row mma tile
constexpr int NDVT = (DV + BDV - 1) / BDV; // dv tiles
constexpr long long DKDV = (long long)DK * DV;
constexpr int NBLK = (int)((DKDV + NTHREADS - 1) / NTHREADS); // scan blocks per (b, h)
// Row pitches in floats. A read is free of bank conflicts when the pitch is == 8 mod 16
// for a k-contiguous operand read in pairs (k, k+1) (64-bit) or a k-strided one read in
// the mma's k order (rows lane%4), and == 4 mod 8 for the other two combinations. dS and
// S0 (read k-strided in pairs next to K, and k-contiguous in pairs next to V or dO) and
// dP (read k-contiguous next to K and k-strided next to Q) need both classes: they take
// pitch == 8 mod 16 plus an XOR swizzle of the column by bit 2 of the row (sd_at, dp_at;
// checked by the emulator's bank counters), so all 13 operand reads are conflict-free.
constexpr int LDQ = DKP + 8;    // Q, K, dQ, dK  [CHUNK, DKP]
constexpr int LDV = BDV + 8;    // V, dO         [CHUNK, BDV]
constexpr int LDS = BDV + 8;    // S0, dS        [DKP, BDV] (swizzled: sd_at; U, R of the states launch plain)
constexpr int LDP = CHUNK + 8;  // P             [CHUNK, CHUNK]
constexpr int LDDP = CHUNK + 8; // dP            [CHUNK, CHUNK] (swizzled: dp_at)
// Element (i, j) of the swizzled tiles (the XOR stays within an aligned 16 (8) columns;
// BDV and CHUNK are multiples of 16).
__device__ __forceinline__ int sd_at(int i, int j) { return i * LDS + (j ^ (((i >> 2) & 1) << 3)); }
__device__ __forceinline__ int dp_at(int i, int j) { return i * LDDP + (j ^ (((i >> 2) & 1) << 2)); }

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
constexpr int OFF_S = OFF_DP + CHUNK * LDDP; // S0^c tile
constexpr int OFF_DS = OFF_S + DKP * LDS;    // dS^c tile
constexpr int OFF_DT = OFF_DS + DKP * LDS;   // [CHUNK] q.dq - k.dk, then its reverse cumsum
constexpr int GRADS_FLOATS = OFF_DT + CHUNK;
// States launch with REC > 1 only (over the grads' dQ region): U and R of the chunks so far.
constexpr int OFF_UACC = STATES_FLOATS;      // [DKP, LDS]
constexpr int OFF_RACC = OFF_UACC + DKP * LDS; // [DKP, LDS]
constexpr int STATES_LAUNCH_FLOATS = REC > 1 ? OFF_RACC + DKP * LDS : STATES_FLOATS;
static_assert(STATES_LAUNCH_FLOATS <= GRADS_FLOATS, "the grads launch has the most shared memory");
constexpr long long SMEM_STATES = 4LL * STATES_LAUNCH_FLOATS;
#if defined(CG_P_PRECISION_MMA16) // grads launch: the operands of P and dP again, raw 16-bit (ssd_mma16.cuh)
constexpr int LDQ16 = ssdc::Pitch16<DKP>::LD;      // row pitches in halves
constexpr int LDV16 = ssdc::Pitch16<BDV>::LD;
constexpr int OFF_Q16 = GRADS_FLOATS;              // [CHUNK, DKP] q as stored (pitch LDQ16 halves)
constexpr int OFF_K16 = OFF_Q16 + CHUNK * LDQ16 / 2; // [CHUNK, DKP] k
constexpr int OFF_V16 = OFF_K16 + CHUNK * LDQ16 / 2; // [CHUNK, BDV] v (pitch LDV16 halves)
constexpr int OFF_DO16 = OFF_V16 + CHUNK * LDV16 / 2; // [CHUNK, BDV] dout
constexpr int GRADS_LAUNCH_FLOATS = OFF_DO16 + CHUNK * LDV16 / 2;
static_assert(OFF_Q16 % 4 == 0 && OFF_V16 % 4 == 0 && OFF_DO16 % 4 == 0, "16-byte aligned raw tiles");
#else
constexpr int GRADS_LAUNCH_FLOATS = GRADS_FLOATS;
#endif
constexpr long long SMEM_GRADS = 4LL * GRADS_LAUNCH_FLOATS;
#ifdef CG_SMEM_GRADS // what generator/kernels/ssd_bwd.lua launches with
static_assert(SMEM_STATES == CG_SMEM_STATES, "ssd_bwd.lua smem_states() disagrees with the layout here");
static_assert(SMEM_GRADS == CG_SMEM_GRADS, "ssd_bwd.lua smem_grads() disagrees with the layout here");
#endif

static_assert(ssdc::Sizes<DK, DV, CHUNK, BDV, WARPS>::ok, "the sizes (ssd_common.cuh)");
static_assert((OFF_DQ | OFF_DK | OFF_P | OFF_DP | LDQ | LDP | LDDP) % 2 == 0, "8-byte aligned accumulator pairs (f2)");
static_assert(REC >= 1, "recompute: >= 1 chunks per stored state");

typedef cg_i64 i64;

// Storage types (cg_device.cuh): float, cg_bf16 or cg_f16; q, k, v: ssd_common.cuh.
#ifndef CG_T_DOUT
#define CG_T_DOUT float
#endif
#ifndef CG_T_DQ
#define CG_T_DQ float
#endif
#ifndef CG_T_DK
#define CG_T_DK float
#endif
#ifndef CG_T_DV
#define CG_T_DV float
#endif
typedef CG_T_DOUT TDO;
typedef CG_T_DQ TDQ;
typedef CG_T_DK TDK;
typedef CG_T_DV TDV;
using ssdc::TK;
using ssdc::TQ;
using ssdc::TV;
using ssdc::tp;

// ------------------------------------------------------------- warp matmul
// ssd_common.cuh at this kernel's precision; PAIRED: k pairs (k, k+1), else the mma's k order.
// RND: the operands stored by ssdc::mma_store (RND_A, RND_B, RND_AB).
template <bool PAIRED, int RND = 0, int MM, int NN, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[MM][NN][4], int k0, int k1, FA A, FB B) {
    ssdc::warp_mma<PREC, PAIRED, RND>(acc, k0, k1, A, B);
}
using ssdc::RND_A;
using ssdc::RND_AB;
using ssdc::RND_B;
using ssdc::ld_cols;
using ssdc::ld_pair;
using ssdc::ld_rows;
using ssdc::tile_foreach;
using ssdc::tile_foreach2;
using ssdc::tile_zero;
// The float2 at p (8-byte aligned: even pitches and offsets): the accumulator epilogues
// write pairs, which the pitches keep free of bank conflicts (half-warps on 64-bit).
__device__ __forceinline__ float2 &f2(float *p) { return *reinterpret_cast<float2 *>(p); }
// Warp tiles of the matmul shapes (ssdc::Tile: the largest giving each of W warps one).
// dV and dP share one tile list with dQ, dK (the grads' state terms), which keep the
// warps busy: the largest tiles. P alone: half the warps (causal tiles are skipped).
typedef ssdc::Tile<DKP, BDV, WARPS> TileU;                                   // U, R, the carries [DKP, BDV]
typedef ssdc::Tile<CHUNK, CHUNK, (WARPS > 2 ? WARPS / 2 : 1)> TileP;         // P
typedef ssdc::Tile<CHUNK, CHUNK, 1> TileDP;                                  // dP
typedef ssdc::Tile<CHUNK, BDV, 1> TileV;                                     // dV
typedef ssdc::Tile<CHUNK, DKP, WARPS> TileQ;                                 // dQ, dK

// ------------------------------------------------------------------ loads
__device__ __forceinline__ int chunk_len(const cg_ssd_bwd_params &p, i64 ci) {
    return ssdc::chunk_len<CHUNK>(p.T, ci);
}

// Which halves a load fills: the first (Q, V), the second (K, dO) or both.
enum { LD_FIRST = 1, LD_SECOND = 2, LD_BOTH = 3 };

// Loads by cp.async (ssdc::load_tile: 16-byte copies where rows are 16-byte aligned;
// 16-bit tensors loaded and widened, ssdc::load_tile16); the caller waits
// (ssdc::landed) before the barrier after which others read.
// Q, K rows [t0, t0 + n) of group g (zero beyond n and dk).
// RAW (mma16, grads launch): also the raw 16-bit copies P and dP read (ssd_mma16.cuh).
#if defined(CG_P_PRECISION_MMA16)
static_assert(sizeof(TQ) == 2 && sizeof(TK) == 2 && sizeof(TV) == 2 && sizeof(TDO) == 2,
              "mma16: 16-bit q, k, v and dout (ssd_bwd.lua valid())");
template <class T> __device__ __forceinline__ T *raw16(float *sm, int off) { return reinterpret_cast<T *>(sm + off); }
#endif
template <bool RAW = false>
__device__ __forceinline__ void load_qk(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 g, i64 t0, int n,
                                        int which = LD_BOTH) {
    const TQ *qb = tp<const TQ>(p.q) + b * p.q.s0 + t0 * p.q.s1 + g * p.q.s2;
    const TK *kb = tp<const TK>(p.k) + b * p.k.s0 + t0 * p.k.s1 + g * p.k.s2;
#if defined(CG_P_PRECISION_MMA16)
    if (RAW) {
        if (which & LD_FIRST)
            ssdc::load_tile16_raw<CHUNK, DKP / 4, LDQ, LDQ16, NTHREADS, TQ>(sm + OFF_Q, raw16<TQ>(sm, OFF_Q16), qb, p.q.s1, n, DK);
        if (which & LD_SECOND)
            ssdc::load_tile16_raw<CHUNK, DKP / 4, LDQ, LDQ16, NTHREADS, TK>(sm + OFF_K, raw16<TK>(sm, OFF_K16), kb, p.k.s1, n, DK);
        return;
    }
#endif
    if (which & LD_FIRST) ssdc::load_tile_t<CHUNK, DKP / 4, LDQ, NTHREADS, TQ>(sm + OFF_Q, qb, p.q.s1, n, DK);
    if (which & LD_SECOND) ssdc::load_tile_t<CHUNK, DKP / 4, LDQ, NTHREADS, TK>(sm + OFF_K, kb, p.k.s1, n, DK);
}

// V, dO rows [t0, t0 + n), columns [j0, j0 + BDV) of head h (zero beyond n and dv).
template <bool RAW = false>
__device__ __forceinline__ void load_vdo(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 h, i64 t0, int n, i64 j0,
                                         int which = LD_BOTH) {
    const TV *vb = tp<const TV>(p.v) + b * p.v.s0 + t0 * p.v.s1 + h * p.v.s2 + j0;
    const TDO *ob = tp<const TDO>(p.dout) + b * p.dout.s0 + t0 * p.dout.s1 + h * p.dout.s2 + j0;
    const int w = DV - j0 < BDV ? (int)(DV - j0) : BDV;
#if defined(CG_P_PRECISION_MMA16)
    if (RAW) {
        if (which & LD_FIRST)
            ssdc::load_tile16_raw<CHUNK, BDV / 4, LDV, LDV16, NTHREADS, TV>(sm + OFF_V, raw16<TV>(sm, OFF_V16), vb, p.v.s1, n, w);
        if (which & LD_SECOND)
            ssdc::load_tile16_raw<CHUNK, BDV / 4, LDV, LDV16, NTHREADS, TDO>(sm + OFF_DO, raw16<TDO>(sm, OFF_DO16), ob, p.dout.s1, n, w);
        return;
    }
#endif
    if (which & LD_FIRST) ssdc::load_tile_t<CHUNK, BDV / 4, LDV, NTHREADS, TV>(sm + OFF_V, vb, p.v.s1, n, w);
    if (which & LD_SECOND) ssdc::load_tile_t<CHUNK, BDV / 4, LDV, NTHREADS, TDO>(sm + OFF_DO, ob, p.dout.s1, n, w);
}

__device__ __forceinline__ void load_la(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 h, i64 t0, int n) {
    ssdc::load_column<CHUNK, NTHREADS>(sm + OFF_LA, p.la.p + b * p.la.s0 + t0 * p.la.s1 + h * p.la.s2, p.la.s1, n);
}

// A = cumsum(la), exp(A), w = exp(A_last - A) of the chunk's log_alpha in smem, by warp 0.
__device__ __forceinline__ void chunk_cumsum(float *sm) {
    ssdc::chunk_cumsum<CHUNK>(sm + OFF_LA, sm + OFF_A, sm + OFF_EA, sm + OFF_W);
}

// Super-chunks of T: the chunk boundaries the workspace keeps states at.
__device__ __forceinline__ i64 nsuper(const cg_ssd_bwd_params &p) { return (p.nchunks + REC - 1) / REC; }

// One TileU tile (m0, n0) of X^T Y over the chunk's rows: X [CHUNK, LDQ] (Q .* exp(A) or
// K .* w, stored so by outer_operands), Y [CHUNK, LDV] (dO or V, rounded by it). U_c and
// R_c. Both operands k-strided, in the mma's k order.
__device__ __forceinline__ void chunk_outer(float (&acc)[TileU::MM][TileU::NN][4], const float *X, const float *Y,
                                            int m0, int n0) {
    warp_mma<false, RND_AB>(acc, 0, CHUNK, [&](int m, int k) { return ld_rows(X + k * LDQ + m0 + m, LDQ, 4); },
                            [&](int k, int nn) { return ld_rows(Y + k * LDV + n0 + nn, LDV, 4); });
}

// chunk_outer's operands stored once (ssdc::scale_rows, round_tile): X .* s in place of X,
// Y rounded to tf32 (tf32 only), by the block between barriers after the cumsum.
template <class TY>
__device__ __forceinline__ void outer_operands(float *X, const float *s, float *Y) {
    ssdc::scale_rows<CHUNK, DKP / 4, LDQ, NTHREADS>(X, s);
    ssdc::round_tile<CHUNK, BDV / 4, LDV, NTHREADS, TY>(Y);
}

// Workspace, in floats: S [B*H, nsuper, DK, DV], D (same), gamma [B*H, nsuper], and for
// heads=split the per-head dq, dk [B*H, T, DK] each.
struct Ws {
    float *S, *D, *gam, *dqp, *dkp;
};
__device__ __forceinline__ Ws ws_of(const cg_ssd_bwd_params &p) {
    Ws w;
    const i64 bhs = p.B * p.H * nsuper(p);
    w.S = p.ws;
    w.D = w.S + bhs * DKDV;
    w.gam = w.D + bhs * DKDV;
    w.dqp = w.gam + bhs;
    w.dkp = w.dqp + p.B * p.H * p.T * DK;
    return w;
}

// This thread's share of sum S .* D over two [DKP, BDV] tiles of the same layout (pitch
// LDS, swizzled alike): the elements ssdc::round_tile gives it, in a fixed order.
__device__ __forceinline__ float tile_dot(const float *S, const float *D) {
    float s = 0.f;
#pragma unroll 1
    for (int e = threadIdx.x; e < DKP * (BDV / 4); e += NTHREADS) {
        const int r = e / (BDV / 4), i = (e - r * (BDV / 4)) * 4;
        const float4 x = *reinterpret_cast<const float4 *>(S + r * LDS + i);
        const float4 y = *reinterpret_cast<const float4 *>(D + r * LDS + i);
        s = fmaf(x.w, y.w, fmaf(x.z, y.z, fmaf(x.y, y.y, fmaf(x.x, y.x, s))));
    }
    return s;
}

// Element (m, j) of dV as the exact sum (a select where the mma multiplies by P's zeros):
// w_m (K dS)_mj + sum over i >= m of P_im dO_ij, by FFMA from the grads launch's tiles. The
// mma's P^T dO runs i over the whole diagonal tile, so it also multiplies P's zeros with
// the rows i < m of dO; 0 x Inf or NaN is NaN, so a NaN or Inf in dout at token i turned
// rows m > i of its tile to NaN, rows that do not depend on it (issue #39). Only an
// element that came out non-finite is recomputed this way.
__device__ __noinline__ float dv_exact(const float *K, const float *DS, const float *W, const float *P,
                                       const float *DO, int m, int j) {
    float s = 0.f;
#pragma unroll 1
    for (int k = 0; k < DKP; ++k) s = fmaf(K[m * LDQ + k], DS[sd_at(k, j)], s);
    s *= W[m];
#pragma unroll 1
    for (int i = m; i < CHUNK; ++i) s = fmaf(P[i * LDP + m], DO[i * LDV + j], s);
    return s;
}

} // namespace ssdb

// minBlocks 1: without it ptxas caps some configs near 80-96 registers and spills.
#define SSDB_ENTRY extern "C" __global__ void __launch_bounds__(ssdb::NTHREADS, 1)

// --------------------------------------------------------- 1: chunk states
// grid NDVT * nsuper * B * H, blockIdx.x = ((b*H + h) * nsuper + s) * NDVT + dv tile. Chunk
// by chunk over super-chunk s; the U, R of the chunks so far stay in smem (REC > 1), the
// last chunk writes them to the workspace.
SSDB_ENTRY cg_ssd_bwd_states(cg_ssd_bwd_params p) {
    using namespace ssdb;
    CG_DYN_SMEM(float, sm);
    const i64 ns = nsuper(p);
    const i64 dvt = blockIdx.x % NDVT, rest = blockIdx.x / NDVT;
    const i64 si = rest % ns, bh = rest / ns;
    const i64 h = bh % p.H, b = bh / p.H, g = h / (p.H / p.G), j0 = dvt * BDV;
    // chunks [c_begin, c_begin + nloc) of the super-chunk; REC = 1: a constant trip count of
    // one (a loop ptxas cannot see through costs 50 registers here)
    const i64 c_begin = si * REC;
    const int nloc = REC == 1 ? 1 : (int)((c_begin + REC < p.nchunks ? c_begin + REC : p.nchunks) - c_begin);
    const Ws w = ws_of(p);
    const i64 slot = bh * ns + si;
    float *Q = sm + OFF_Q, *K = sm + OFF_K, *V = sm + OFF_V, *DO = sm + OFF_DO;
    const float *EA = sm + OFF_EA, *W = sm + OFF_W;
    float *UACC = sm + OFF_UACC, *RACC = sm + OFF_RACC; // REC > 1 only
    typedef TileU T;
    const int warp = threadIdx.x >> 5;
    float gam = 1.f, pre = 1.f; // gamma of the chunks so far; before this chunk (R's weight)
    for (int u = 0; u < nloc; ++u) {
#ifdef CG_VARLEN
        const i64 ci = c_begin + u; // REC = 1: the slot
        i64 t0;
        const int n = ssdc::slot_tokens<CHUNK>(p, ci, &t0);
        if (n == 0) return; // an unused slot: the scan reads only its sequences' slots
#else
        const i64 ci = c_begin + u, t0 = ci * CHUNK;
        const int n = chunk_len(p, ci);
#endif
        const bool first = u == 0, last = u == nloc - 1;
        if (!first) __syncthreads(); // the previous chunk's readers are done
        load_qk(p, sm, b, g, t0, n);
        load_vdo(p, sm, b, h, t0, n, j0);
        load_la(p, sm, b, h, t0, n);
        ssdc::landed();
        __syncthreads();
        chunk_cumsum(sm);
        __syncthreads();
        outer_operands<TV>(K, W, V); // K .* w, V
        outer_operands<TDO>(Q, EA, DO); // Q .* exp(A), dO
        __syncthreads();
        const float gc = EA[CHUNK - 1]; // this chunk's gamma
        for (int tile = warp; tile < 2 * T::TILES; tile += WARPS) {
            const int which = tile / T::TILES, r2 = tile - which * T::TILES;
            const int m0 = r2 / T::TILES_N * T::TM, n0 = r2 % T::TILES_N * T::TN;
            float acc[T::MM][T::NN][4];
            tile_zero(acc);
            // two call sites: compile-time operand bases keep the inner loop at ssdcore's count
            // (one call site with runtime bases cost 9 more instructions per product)
            if (which == 0) chunk_outer(acc, K, V, m0, n0); // U = (K .* w)^T V   [DKP, BDV]
            else chunk_outer(acc, Q, DO, m0, n0);          // R = (Q .* eA)^T dO  [DKP, BDV]
            float *run = which == 0 ? UACC : RACC;
            float *dst = (which == 0 ? w.S : w.D) + slot * DKDV + j0;
            tile_foreach(acc, [&](int r, int cc, float &x) {
                const int i = m0 + r, j = n0 + cc;
                float y = x; // this thread owns (i, j) for every chunk: no sync between chunks
                if (REC > 1 && !first)
                    y = which == 0 ? fmaf(gc, run[i * LDS + j], x) : fmaf(pre, x, run[i * LDS + j]);
                if (REC > 1 && !last) run[i * LDS + j] = y;
                else if (i < DK && j0 + j < DV) dst[(i64)i * DV + j] = y;
            });
        }
        gam = first ? gc : gam * gc;
        pre = gam;
    }
    if (dvt == 0 && threadIdx.x == 0) w.gam[slot] = gam;
}

// ------------------------------------------------------------- 2: scans
// grid NBLK * B * H, blockIdx.x = (b*H + h) * NBLK + block; one thread per state element.
// Varlen: b is the sequence (grid NBLK * nseq * H), over its slots (B = 1: the workspace
// rows of S, D and gamma are the heads).
SSDB_ENTRY cg_ssd_bwd_scan(cg_ssd_bwd_params p) {
    using namespace ssdb;
    const i64 blk = blockIdx.x % NBLK, bh = blockIdx.x / NBLK;
    const i64 b = bh / p.H, h = bh - b * p.H;
    const i64 ij = blk * NTHREADS + threadIdx.x;
    const Ws w = ws_of(p);
    const i64 ns = nsuper(p);
    if (ij < DKDV) {
        const i64 i = ij / DV, j = ij - i * DV;
#ifdef CG_VARLEN
        const ssdc::VSeq sq = ssdc::seq_chunks<CHUNK>(p.cu, b, p.T);
        const i64 row = h * ns + sq.base, nsl = sq.nch; // sequence b's first slot in head h's row
#else
        const i64 row = bh * ns, nsl = ns;
#endif
        const float *gam = w.gam + row;
        // forward: slot s holds U_s, then S0^s (entering super-chunk s); s ends as S_T
        float s = p.h0.p ? p.h0.p[b * p.h0.s0 + h * p.h0.s1 + i * p.h0.s2 + j] : 0.f;
        float *u = w.S + row * DKDV + ij;
        ssdc::state_scan<DKDV>(u, gam, nsl, s);
        // reverse: slot s holds R_s, then dS^s (the gradient of the state leaving super-chunk s)
        float d = p.dhT.p ? p.dhT.p[b * p.dhT.s0 + h * p.dhT.s1 + i * p.dhT.s2 + j] : 0.f;
        float *r = w.D + row * DKDV + ij;
        for (i64 c = nsl - 1; c >= 0; --c) {
            const float rc = r[c * DKDV];
            r[c * DKDV] = d;
            d = fmaf(gam[c], d, rc);
        }
        if (p.dh0.p) p.dh0.p[b * p.dh0.s0 + h * p.dh0.s1 + i * p.dh0.s2 + j] = d;
    }
}

// ------------------------------------------------------- 3: chunk gradients
// REC > 1: carry the [DKP, BDV] tile St (swizzled: sd_at) through chunk ci of head h, columns
// [j0, j0 + BDV): St <- gamma St + X^T diag(s) Y with (X, s, Y) = (K, w, V) forward
// (the state) or (Q, exp(A), dO) backward (its gradient). The chunk is loaded over the
// CTA's own Q/K, V/dO, la and cumsum buffers; the caller reloads its own afterwards.
namespace ssdb {
__device__ __forceinline__ void carry_chunk(const cg_ssd_bwd_params &p, float *sm, float *St, bool fwd, i64 b, i64 g, i64 h, i64 ci, i64 j0) {
    typedef TileU T;
    const int warp = threadIdx.x >> 5;
    const i64 t0 = ci * CHUNK;
    const int n = chunk_len(p, ci);
    __syncthreads(); // the readers of the buffers (and the writers of St) are done
    load_qk(p, sm, b, g, t0, n, fwd ? LD_SECOND : LD_FIRST);  // K or Q
    load_vdo(p, sm, b, h, t0, n, j0, fwd ? LD_FIRST : LD_SECOND); // V or dO
    load_la(p, sm, b, h, t0, n);
    ssdc::landed();
    __syncthreads();
    chunk_cumsum(sm);
    __syncthreads();
    float *X = sm + (fwd ? OFF_K : OFF_Q), *Y = sm + (fwd ? OFF_V : OFF_DO);
    const float *sc = sm + (fwd ? OFF_W : OFF_EA);
    if (fwd) outer_operands<TV>(X, sc, Y); // over the loaded chunk's buffers (the caller reloads its own)
    else outer_operands<TDO>(X, sc, Y);
    __syncthreads();
    const float gamma = sm[OFF_EA + CHUNK - 1];
    for (int tile = warp; tile < T::TILES; tile += WARPS) {
        const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
        float acc[T::MM][T::NN][4];
        tile_zero(acc);
        chunk_outer(acc, X, Y, m0, n0);
        tile_foreach(acc, [&](int r, int cc, float &x) {
            float &st = St[sd_at(m0 + r, n0 + cc)]; // padding: X, Y zero there, so st stays 0
            st = fmaf(gamma, st, x);
        });
    }
}
} // namespace ssdb

// heads=loop:  grid nchunks * B * G, blockIdx.x = (b*G + g) * nchunks + c;
// heads=split: grid nchunks * B * H, blockIdx.x = (b*H + h) * nchunks + c.
SSDB_ENTRY cg_ssd_bwd_grads(cg_ssd_bwd_params p) {
    using namespace ssdb;
    CG_DYN_SMEM(float, sm);
    const i64 ci = blockIdx.x % p.nchunks, rest = blockIdx.x / p.nchunks;
#ifdef CG_VARLEN
    const i64 hpg = p.H / p.G;
    i64 t0; // of slot ci
    const int n = ssdc::slot_tokens<CHUNK>(p, ci, &t0);
    if (n == 0) return; // an unused slot
#else
    const i64 hpg = p.H / p.G, t0 = ci * CHUNK;
#endif
    const i64 b = SPLIT ? rest / p.H : rest / p.G;
    const i64 h_begin = SPLIT ? rest % p.H : rest % p.G * hpg, h_end = SPLIT ? h_begin + 1 : h_begin + hpg;
    const i64 g = h_begin / hpg;
#ifndef CG_VARLEN
    const int n = chunk_len(p, ci);
#endif
    const int warp = threadIdx.x >> 5, tg = threadIdx.x & 3;
    // The swizzle of dS (sd_at) in dV's read on the mma path: rows step + 2 (lane%4) (+1),
    // step a multiple of 8, so the XOR is bit 1 of lane%4 (the FFMA path uses sd_at itself).
    const int xs_rows = ((tg >> 1) & 1) << 3;
    const Ws w = ws_of(p);
    // super-chunk of ci, its stored states and its chunks [c_first, c_last]
    const i64 ns = nsuper(p), si = ci / REC, c_first = si * REC;
    const i64 c_last = c_first + REC - 1 < p.nchunks - 1 ? c_first + REC - 1 : p.nchunks - 1;
    const bool carry = REC > 1 && c_first < c_last;
    float *Q = sm + OFF_Q, *K = sm + OFF_K, *V = sm + OFF_V, *DO = sm + OFF_DO;
    float *A = sm + OFF_A, *EA = sm + OFF_EA, *W = sm + OFF_W, *LO = sm + OFF_LA; // LO: the cumsum's low parts
    float *DQ = sm + OFF_DQ, *DKs = sm + OFF_DK, *P = sm + OFF_P, *DP = sm + OFF_DP;
    float *S = sm + OFF_S, *DS = sm + OFF_DS, *DT = sm + OFF_DT;
    load_qk<ssdc::MMA16>(p, sm, b, g, t0, n);
    for (i64 h = h_begin; h < h_end; ++h) {
        const i64 bh = b * p.H + h;
        const i64 sslot = bh * ns + si;
        load_la(p, sm, b, h, t0, n);
        // The block-wide element loops stay rolled (#pragma unroll 1): unrolled, their
        // constant trip counts made a third of this entry's compile time.
#pragma unroll 1
        for (int e = threadIdx.x; e < CHUNK * LDQ; e += NTHREADS) DQ[e] = DKs[e] = 0.f;
#pragma unroll 1
        for (int e = threadIdx.x; e < CHUNK * LDDP; e += NTHREADS) DP[e] = 0.f;
        ssdc::landed(); // la (and the first head's Q, K)
        __syncthreads();
        chunk_cumsum(sm);
        __syncthreads();
        // P = (Q K^T) .* M (zero above the diagonal: readers' k ranges end at their own
        // tiles' edges), Q and K read as 64-bit k pairs
        for (int tile = warp; tile < TileP::TILES; tile += WARPS) {
            typedef TileP T;
            const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
            float acc[T::MM][T::NN][4];
            tile_zero(acc);
#if defined(CG_P_PRECISION_MMA16) // the raw 16-bit q, k by m16n8k16, ldmatrix fragments
            if (n0 < m0 + T::TM)
                ssdc::warp_mma16_abt<TQ, LDQ16, LDQ16>(acc, raw16<TQ>(sm, OFF_Q16) + m0 * LDQ16,
                                                       raw16<TK>(sm, OFF_K16) + n0 * LDQ16, 0, DKP);
#else
            if (n0 < m0 + T::TM)
                warp_mma<true>(acc, 0, DKP, [&](int m, int k) { return ld_pair(Q + (m0 + m) * LDQ + k); },
                               [&](int k, int nn) { return ld_pair(K + (n0 + nn) * LDQ + k); });
#endif
            tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                const int i = m0 + r, j = n0 + cc; // selects: above the diagonal exp(positive) may be Inf
                f2(P + i * LDP + j) = make_float2(j <= i ? ssdc::mma_store(x0 * expf(ssdc::seg_sum(A, LO, i, j))) : 0.f,
                                                  j + 1 <= i ? ssdc::mma_store(x1 * expf(ssdc::seg_sum(A, LO, i, j + 1)))
                                                             : 0.f); // read by dV (and the dla pairs) only
            });
        }
        float sdot = 0.f; // this thread's share of <S0, dS> over the dv tiles (dlog_alpha's chunk term)
        for (int dvt = 0; dvt < NDVT; ++dvt) {
            const i64 j0 = (i64)dvt * BDV;
            __syncthreads(); // the previous tile's readers are done (and P is complete)
            const float *s0 = w.S + sslot * DKDV + j0, *ds = w.D + sslot * DKDV + j0;
#pragma unroll 1
            for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
                const int i = e / BDV, j = e - i * BDV;
                const bool in = i < DK && j0 + j < DV;
                const float x = in ? s0[(i64)i * DV + j] : 0.f, y = in ? ds[(i64)i * DV + j] : 0.f;
                S[sd_at(i, j)] = carry ? x : ssdc::mma_store(x); // read by the mma only (carry: rounded after it)
                DS[sd_at(i, j)] = carry ? y : ssdc::mma_store(y);
                if (!carry) sdot = fmaf(x, y, sdot);
            }
            if (carry) { // S0^ci from S0 of the super-chunk, dS^ci from its dS (one call site: less code)
                for (i64 k = c_first; k < c_last; ++k) {
                    const bool fwd = k < ci; // forward over [c_first, ci), then backward from c_last down to ci + 1
                    carry_chunk(p, sm, fwd ? S : DS, fwd, b, g, h, fwd ? k : c_last - (k - ci), j0);
                }
                __syncthreads(); // back to this chunk's own Q, K, la, A, exp(A), w
                sdot += tile_dot(S, DS); // the elements round_tile gives this thread, before it rounds them
                ssdc::round_tile<DKP, BDV / 4, LDS, NTHREADS>(S); // the carried S0, dS: read by the mma only now
                ssdc::round_tile<DKP, BDV / 4, LDS, NTHREADS>(DS);
                load_qk<ssdc::MMA16>(p, sm, b, g, t0, n);
                load_la(p, sm, b, h, t0, n);
                ssdc::landed();
                __syncthreads();
                chunk_cumsum(sm);
            }
            load_vdo<ssdc::MMA16>(p, sm, b, h, t0, n, j0);
            ssdc::landed();
            __syncthreads();
            ssdc::round_tile<CHUNK, BDV / 4, LDV, NTHREADS, TV>(V); // V, dO: read by the mma only here
            ssdc::round_tile<CHUNK, BDV / 4, LDV, NTHREADS, TDO>(DO);
            if (PREC == 1) __syncthreads();
            // Four tile lists, each tile owned by one warp: dV, dP, dQ (state term), dK (state term).
            constexpr int N_DV = TileV::TILES, N_DP = TileDP::TILES, N_DQ = TileQ::TILES;
            constexpr int N_ALL = N_DV + N_DP + 2 * N_DQ;
            for (int tile = warp; tile < N_ALL; tile += WARPS) {
                if (tile < N_DV) { // dV = diag(w) K dS + P^T dO   [CHUNK, BDV]
                    typedef TileV T;
                    const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
                    if (m0 >= n) continue; // only padding rows
                    float acc[T::MM][T::NN][4];
                    tile_zero(acc);
                    // K (64-bit k pairs) dS (rows k, k+1)
                    warp_mma<true, RND_B>(acc, 0, DKP, [&](int m, int k) { return ld_pair(K + (m0 + m) * LDQ + k); },
                                   [&](int k, int nn) {
                                       if (PREC == 0) return make_float2(DS[sd_at(k, n0 + nn)], DS[sd_at(k + 1, n0 + nn)]);
                                       return ld_rows(DS + k * LDS + ((n0 + nn) ^ xs_rows), LDS, 1);
                                   });
                    tile_foreach(acc, [&](int r, int, float &x) { x *= W[m0 + r]; });
                    // P^T dO, both k-strided in the mma's k order
                    warp_mma<false, RND_AB>(acc, m0, CHUNK, [&](int m, int k) { return ld_rows(P + k * LDP + m0 + m, LDP, 4); },
                                    [&](int k, int nn) { return ld_rows(DO + k * LDV + n0 + nn, LDV, 4); });
                    TDV *dvb = tp<TDV>(p.dv) + b * p.dv.s0 + t0 * p.dv.s1 + h * p.dv.s2 + j0;
                    const int nr = n - m0; // as fwd's chunk_output: compile-time column test when DV % BDV == 0
                    bool bad = false; // an element came out Inf or NaN
                    tile_foreach(acc, [&](int r, int cc, float &x) {
                        const int j = n0 + cc;
                        if (r < nr && (DV % BDV == 0 || j0 + j < DV)) {
                            dvb[(m0 + r) * p.dv.s1 + j] = cg_round<TDV>(x); // rounded once
                            bad |= !ssdc::finite(x);
                        }
                    });
                    if (bad) { // rare: the lane's non-finite elements again, exactly (dv_exact)
                        const int lane = threadIdx.x & 31;
#pragma unroll 1
                        for (int e = 0; e < T::MM * T::NN * 4; ++e) {
                            const int r = e / (T::NN * 4) * 16 + (lane >> 2) + (e >> 1 & 1) * 8;
                            const int j = n0 + e / 4 % T::NN * 8 + 2 * (lane & 3) + (e & 1);
                            if (r >= nr || j0 + j >= DV) continue;
                            TDV &o = dvb[(m0 + r) * p.dv.s1 + j];
                            if (!ssdc::finite(cg_f32(o))) o = cg_round<TDV>(dv_exact(K, DS, W, P, DO, m0 + r, j));
                        }
                    }
                } else if (tile < N_DV + N_DP) { // dP += dO V^T   [CHUNK, CHUNK], tiles touching the lower triangle
                    typedef TileDP T;
                    const int t2 = tile - N_DV;
                    const int m0 = t2 / T::TILES_N * T::TM, n0 = t2 % T::TILES_N * T::TN;
                    if (n0 >= m0 + T::TM) continue;
                    float acc[T::MM][T::NN][4];
                    tile_zero(acc);
#if defined(CG_P_PRECISION_MMA16) // the raw 16-bit dout, v by m16n8k16
                    ssdc::warp_mma16_abt<TDO, LDV16, LDV16>(acc, raw16<TDO>(sm, OFF_DO16) + m0 * LDV16,
                                                            raw16<TV>(sm, OFF_V16) + n0 * LDV16, 0, BDV);
#else
                    warp_mma<true, RND_AB>(acc, 0, BDV, [&](int m, int k) { return ld_pair(DO + (m0 + m) * LDV + k); },
                                   [&](int k, int nn) { return ld_pair(V + (n0 + nn) * LDV + k); });
#endif
                    tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                        float2 &d = f2(DP + dp_at(m0 + r, n0 + cc)); // cc even: the swizzle keeps the pair
                        const float2 o = d; // one 64-bit load and store (d.x += .. reads as two 32-bit
                        d = make_float2(o.x + x0, o.y + x1); // accesses in the emulator's counts)
                    });
                } else { // dQ += diag(eA) dO S0^T or dK += diag(w) V dS^T   [CHUNK, DKP] (one call site, runtime
                         // operands: less code)
                    typedef TileQ T;
                    const int t2 = tile - N_DV - N_DP, is_dk = t2 >= N_DQ, t3 = t2 - is_dk * N_DQ;
                    const int m0 = t3 / T::TILES_N * T::TM, n0 = t3 % T::TILES_N * T::TN;
                    const float *X = is_dk ? V : DO, *Y = is_dk ? DS : S, *sc = is_dk ? W : EA;
                    float *dst = is_dk ? DKs : DQ;
                    float acc[T::MM][T::NN][4];
                    tile_zero(acc);
                    warp_mma<true, RND_AB>(acc, 0, BDV, [&](int m, int k) { return ld_pair(X + (m0 + m) * LDV + k); },
                                   [&](int k, int nn) { return ld_pair(Y + sd_at(n0 + nn, k)); });
                    // sc read once per row (ssd_common.cuh: tile_foreach2_row)
                    ssdc::tile_foreach2_row(acc, [&](int r) { return sc[m0 + r]; },
                                            [&](int r, int cc, float x0, float x1, float s) {
                                                float2 &d = f2(dst + (m0 + r) * LDQ + n0 + cc);
                                                const float2 o = d; // 64-bit, as above
                                                d = make_float2(fmaf(s, x0, o.x), fmaf(s, x1, o.y));
                                            });
                }
            }
        }
        // dlog_alpha, per token t of the chunk, without per-token states and without a sum
        // over the sequence (issue #39): exp(la_t) <G_t, S_{t-1}> (G_t the gradient of the
        // state after t) expands over the chunk's own terms into
        //   dla_t = gamma <dS, S0> + sum_{i >= t} x_i + sum_{j < t} y_j + sum_{i >= t > j} Z_ij
        // with gamma = exp(A_last), x_i = q_i . dQs_i and y_j = k_j . dKs_j (dQs, dKs: the state
        // terms of dq and dk, which DQ and DKs hold now), Z_ij = P_ij (dO V^T)_ij (the pairs
        // whose decay spans t). Every term is a sum of products, no difference of sums: a
        // reset (log_alpha -inf) makes each term 0 exactly where it should (dla_t = 0 at it),
        // and a non-finite input reaches exactly the tokens whose exact gradient it reaches
        // (the telescoping sum over s >= t of q_s . dq_s - k_s . dk_s it replaces spread a
        // NaN at token s to every t <= s).
        const float gam = EA[CHUNK - 1]; // (EA is reused below)
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sdot += __shfl_xor_sync(0xffffffffu, sdot, off);
        if ((threadIdx.x & 31) == 0) DT[warp] = sdot; // the warps' partials (DT: no other use now)
        __syncthreads();
        // P (dV, its reader, is done) becomes Z = P .* dP (lower triangle), dP becomes dP .* M
        // (zero above the diagonal, where the dP tiles may have written): selects, not products
        // (above the diagonal exp(A_i - A_j) may be Inf, and dP there NaN).
#pragma unroll 1
        for (int e = threadIdx.x; e < CHUNK * CHUNK; e += NTHREADS) {
            const int i = e / CHUNK, j = e - i * CHUNK;
            float &d = DP[dp_at(i, j)];
            const float dpv = d;
            if (j <= i) P[i * LDP + j] *= dpv;
            d = j <= i ? ssdc::mma_store(dpv * expf(ssdc::seg_sum(A, LO, i, j))) : 0.f; // read by the mma only
        }
        // x_t, y_t into EA, W (their readers, the dv tiles, are done). Token t starts at column
        // (t/4) % 8 and wraps (a fixed order per token): rows t of pitch == 8 mod 32 then hit 32
        // distinct banks instead of 4. A non-finite x or y flags a non-finite q or k row (or
        // state term) for dQ += dP K, dK += dP^T Q below.
        bool nonfin = false;
        for (int t = threadIdx.x; t < CHUNK; t += NTHREADS) {
            float a = 0.f, c = 0.f;
            const float *q = Q + t * LDQ, *dq = DQ + t * LDQ, *k = K + t * LDQ, *dk = DKs + t * LDQ;
            const int rot = (t >> 2) & 7;
#pragma unroll 4
            for (int ii = 0; ii < DKP; ++ii) {
                const int i = ii + rot < DKP ? ii + rot : ii + rot - DKP;
                a = fmaf(q[i], dq[i], a);
                c = fmaf(k[i], dk[i], c);
            }
            EA[t] = a;
            W[t] = c;
            nonfin |= !(ssdc::finite(a) && ssdc::finite(c));
        }
        // dQ += dP K and dK += dP^T Q multiply dP's zeros above the diagonal with K's rows
        // after a row of dQ and Q's rows before a row of dK: with a non-finite q or k in the
        // chunk (rare) they run as selects by FFMA instead of the mma (0 x Inf is NaN).
        const bool exact = __syncthreads_or(nonfin);
        // Z's column sums from the bottom: Z_ij <- sum_{i' >= i} Z_i'j for i > j (column j:
        // CHUNK - 1 - j steps), and in place the suffix sums of x and the prefix sums of y
        // (sum_{j < t}), in a fixed order, by the threads of the two shortest columns
        // (NTHREADS >= 64 >= CHUNK), so no thread runs more than about CHUNK steps
#pragma unroll 1
        for (int j = threadIdx.x; j < CHUNK; j += NTHREADS) {
            float run = 0.f;
#pragma unroll 1
            for (int i = CHUNK - 1; i > j; --i) run = P[i * LDP + j] += run;
        }
        static_assert(NTHREADS >= CHUNK, "the x, y scans' threads");
        if (threadIdx.x == CHUNK - 1) {
            float run = 0.f;
#pragma unroll 1
            for (int t = CHUNK - 1; t >= 0; --t) run = EA[t] += run;
        } else if (threadIdx.x == CHUNK - 2) {
            float run = 0.f;
#pragma unroll 1
            for (int t = 0; t < CHUNK; ++t) {
                const float y = W[t];
                W[t] = run;
                run += y;
            }
        }
        if (exact) {
#pragma unroll 1
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, c = e - r * DKP;
                float xq = DQ[r * LDQ + c], xk = DKs[r * LDQ + c];
#pragma unroll 1
                for (int j = 0; j <= r; ++j) xq = fmaf(DP[dp_at(r, j)], K[j * LDQ + c], xq);
#pragma unroll 1
                for (int i = r; i < CHUNK; ++i) xk = fmaf(DP[dp_at(i, r)], Q[i * LDQ + c], xk);
                DQ[r * LDQ + c] = xq;
                DKs[r * LDQ + c] = xk;
            }
        } else {
            // dQ += dP K, dK += dP^T Q   [CHUNK, DKP] each, the mma's k order
            for (int tile = warp; tile < 2 * TileQ::TILES; tile += WARPS) {
                typedef TileQ T;
                const int which = tile / T::TILES, t2 = tile - which * T::TILES;
                const int m0 = t2 / T::TILES_N * T::TM, n0 = t2 % T::TILES_N * T::TN;
                float *dst = which == 0 ? DQ : DKs;
                // dQ: dP [m, k] (row m, k-contiguous), k < m0 + TM, times K; dK: dP^T [m, k] = dP [k, m]
                // (k-strided), k >= m0, times Q. One call site with the dP strides and operands
                // at run time (less code). The lane's k slots are step + lane%4 and + 4 (step a
                // multiple of 8, which moves neither the swizzle's row bit nor its columns), so
                // the two elements sit at o0, o1 (fixed per m) plus step * ks.
                const int ks = which == 0 ? 1 : LDDP;
                const float *Y = which == 0 ? K : Q;
                float acc[T::MM][T::NN][4];
                tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                    const float2 d = f2(dst + (m0 + r) * LDQ + n0 + cc);
                    x0 = d.x;
                    x1 = d.y;
                });
                warp_mma<false, RND_A>(acc, which == 0 ? 0 : m0, which == 0 ? m0 + T::TM : CHUNK,
                                [&](int m, int k) {
                                    const int r = m0 + m, step = k - tg;
                                    if (PREC == 0) // FFMA: k is any slot (ssdc::warp_mma), the pair (k, k + 4)
                                        return which == 0 ? make_float2(DP[dp_at(r, k)], DP[dp_at(r, k + 4)])
                                                          : make_float2(DP[dp_at(k, r)], DP[dp_at(k + 4, r)]);
                                    const int o0 = which == 0 ? dp_at(r, tg) : dp_at(tg, r);
                                    const int o1 = which == 0 ? dp_at(r, tg + 4) : dp_at(tg + 4, r);
                                    return make_float2(DP[o0 + step * ks], DP[o1 + step * ks]);
                                },
                                [&](int k, int nn) { return ld_rows(Y + k * LDQ + n0 + nn, LDQ, 4); });
                tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) { f2(dst + (m0 + r) * LDQ + n0 + cc) = make_float2(x0, x1); });
            }
        }
        __syncthreads();
        // dla_t = gamma <dS, S0> + (x's suffix sum) + (y's prefix sum) + sum_{j < t} (the column
        // sums of Z at row t: the pairs spanning t). Row t starts at column (t/4) % 8 (mod t)
        // and wraps, a fixed order per token, so a warp's rows (pitch == 8 mod 32) hit 32
        // distinct banks instead of 4.
        float *dlb = p.dla.p + b * p.dla.s0 + t0 * p.dla.s1 + h * p.dla.s2;
        for (int t = threadIdx.x; t < n; t += NTHREADS) {
            float sd = 0.f, z = 0.f;
            for (int k = 0; k < WARPS; ++k) sd += DT[k];
            const float *zr = P + t * LDP;
            int j = t > 0 ? ((t >> 2) & 7) % t : 0;
#pragma unroll 1
            for (int jj = 0; jj < t; ++jj) {
                z += zr[j];
                j = j + 1 == t ? 0 : j + 1;
            }
            dlb[t * p.dla.s1] = gam * sd + EA[t] + W[t] + z;
        }
        if (SPLIT) { // head h's own dq, dk; launch 4 sums the heads
            float *dqb = w.dqp + (bh * p.T + t0) * DK, *dkb = w.dkp + (bh * p.T + t0) * DK;
#pragma unroll 1
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, i = e - r * DKP;
                if (r >= n || i >= DK) continue;
                dqb[(i64)r * DK + i] = DQ[r * LDQ + i];
                dkb[(i64)r * DK + i] = DKs[r * LDQ + i];
            }
        } else { // dq, dk of the group: the heads in order (this thread wrote the element for the previous head;
                 // a 16-bit dq, dk: one head per group, ssd_bwd.lua, so rounded once)
            TDQ *dqb = tp<TDQ>(p.dq) + b * p.dq.s0 + t0 * p.dq.s1 + g * p.dq.s2;
            TDK *dkb = tp<TDK>(p.dk) + b * p.dk.s0 + t0 * p.dk.s1 + g * p.dk.s2;
            const bool first = h == h_begin;
#pragma unroll 1
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, i = e - r * DKP;
                if (r >= n || i >= DK) continue;
                TDQ *oq = dqb + r * p.dq.s1 + i;
                TDK *ok = dkb + r * p.dk.s1 + i;
                *oq = cg_round<TDQ>((first ? 0.f : cg_f32(*oq)) + DQ[r * LDQ + i]);
                *ok = cg_round<TDK>((first ? 0.f : cg_f32(*ok)) + DKs[r * LDQ + i]);
            }
        }
        __syncthreads(); // before the next head overwrites the buffers
    }
}

// ----------------------------------------------------------------- 4: finish
// heads=split only: grid nchunks * B * G, blockIdx.x = (b*G + g) * nchunks + c: dq, dk of
// the group = the per-head partials summed in head order. Varlen: c is a slot.
#if defined(CG_P_HEADS_SPLIT)
SSDB_ENTRY cg_ssd_bwd_finish(cg_ssd_bwd_params p) {
    using namespace ssdb;
    const i64 ci = blockIdx.x % p.nchunks, bg = blockIdx.x / p.nchunks;
    const i64 g = bg % p.G, b = bg / p.G, hpg = p.H / p.G;
#ifdef CG_VARLEN
    const ssdc::VChunk v = ssdc::slot_chunk<CHUNK>(p.cu, p.nseq, p.T, ci);
    if (v.len == 0) return; // an unused slot
    const i64 t0 = v.t0;
    const int n = v.len;
#else
    const i64 t0 = ci * CHUNK;
    const int n = chunk_len(p, ci);
#endif
    const Ws w = ws_of(p);
    TDQ *dqb = tp<TDQ>(p.dq) + b * p.dq.s0 + t0 * p.dq.s1 + g * p.dq.s2;
    TDK *dkb = tp<TDK>(p.dk) + b * p.dk.s0 + t0 * p.dk.s1 + g * p.dk.s2;
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
        dqb[r * p.dq.s1 + i] = cg_round<TDQ>(aq); // the sum over heads, rounded once
        dkb[r * p.dk.s1 + i] = cg_round<TDK>(ak);
    }
}
#endif
