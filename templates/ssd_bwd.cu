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
constexpr int OFF_DQ = STATES_FLOATS; // head h's dQ, dK
constexpr int OFF_DK = OFF_DQ + CHUNK * LDQ;
constexpr int OFF_P = OFF_DK + CHUNK * LDQ;
constexpr int OFF_DP = OFF_P + CHUNK * LDP;
constexpr int OFF_S = OFF_DP + CHUNK * LDDP; // S0^c tile
constexpr int OFF_DS = OFF_S + DKP * LDS;    // dS^c tile
constexpr int OFF_DT = OFF_DS + DKP * LDS;   // [CHUNK] q.dq - k.dk, then its reverse cumsum
constexpr int GRADS_FLOATS = OFF_DT + CHUNK;
// States launch with REC > 1 only (over the grads' dQ region): U and R of the chunks so far.
constexpr int OFF_UACC = STATES_FLOATS;        // [DKP, LDS]
constexpr int OFF_RACC = OFF_UACC + DKP * LDS; // [DKP, LDS]
constexpr int STATES_LAUNCH_FLOATS = REC > 1 ? OFF_RACC + DKP *LDS : STATES_FLOATS;
static_assert(STATES_LAUNCH_FLOATS <= GRADS_FLOATS, "the grads launch has the most shared memory");
constexpr long long SMEM_STATES = 4LL * STATES_LAUNCH_FLOATS;
#if defined(CG_P_PRECISION_MMA16) // grads launch: the operands of P and dP again, raw 16-bit (ssd_mma16.cuh)
constexpr int LDQ16 = ssdc::Pitch16<DKP>::LD; // row pitches in halves
constexpr int LDV16 = ssdc::Pitch16<BDV>::LD;
constexpr int OFF_Q16 = GRADS_FLOATS;                 // [CHUNK, DKP] q as stored (pitch LDQ16 halves)
constexpr int OFF_K16 = OFF_Q16 + CHUNK * LDQ16 / 2;  // [CHUNK, DKP] k
constexpr int OFF_V16 = OFF_K16 + CHUNK * LDQ16 / 2;  // [CHUNK, BDV] v (pitch LDV16 halves)
constexpr int OFF_DO16 = OFF_V16 + CHUNK * LDV16 / 2; // [CHUNK, BDV] dout
constexpr int GRADS_LAUNCH_FLOATS = OFF_DO16 + CHUNK * LDV16 / 2;
static_assert(OFF_Q16 % 4 == 0 && OFF_V16 % 4 == 0 && OFF_DO16 % 4 == 0, "16-byte aligned raw tiles");
#else
constexpr int GRADS_LAUNCH_FLOATS = GRADS_FLOATS;
constexpr int LDQ16 = 0, LDV16 = 0, OFF_Q16 = 0, OFF_K16 = 0, OFF_V16 = 0, OFF_DO16 = 0; // no raw tiles
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
#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
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
typedef ssdc::Tile<DKP, BDV, WARPS> TileU;                           // U, R, the carries [DKP, BDV]
typedef ssdc::Tile<CHUNK, CHUNK, (WARPS > 2 ? WARPS / 2 : 1)> TileP; // P
typedef ssdc::Tile<CHUNK, CHUNK, 1> TileDP;                          // dP
typedef ssdc::Tile<CHUNK, BDV, 1> TileV;                             // dV
typedef ssdc::Tile<CHUNK, DKP, WARPS> TileQ;                         // dQ, dK

// ------------------------------------------------------------------ loads
__device__ __forceinline__ int chunk_len(const cg_ssd_bwd_params &p, i64 ci) { return ssdc::chunk_len<CHUNK>(p.T, ci); }

// Which halves a load fills: the first (Q, V), the second (K, dO) or both.
enum { LD_FIRST = 1, LD_SECOND = 2, LD_BOTH = 3 };

// Loads by cp.async (ssdc::load_tile: 16-byte copies where rows are 16-byte aligned;
// 16-bit tensors loaded and widened, ssdc::load_tile16); the caller waits
// (ssdc::landed) before the barrier after which others read.
#if defined(CG_P_PRECISION_MMA16)
static_assert(sizeof(TQ) == 2 && sizeof(TK) == 2 && sizeof(TV) == 2 && sizeof(TDO) == 2,
              "mma16: 16-bit q, k, v and dout (ssd_bwd.lua valid())");
template <class T> __device__ __forceinline__ T *raw16(float *sm, int off) { return reinterpret_cast<T *>(sm + off); }
#endif

// One tile of a load: rows [0, n) and columns [0, w) of src (row pitch ld, storage T) widened
// into sm + off (pitch LDF floats, W4 * 4 columns); RAW (mma16) also its raw 16-bit copy at
// off16 (pitch LDH halves).
template <bool RAW, int W4, int LDF, int LDH, class T>
__device__ __forceinline__ void load_one(float *sm, int off, int off16, const T *src, i64 ld, int n, int w) {
#if defined(CG_P_PRECISION_MMA16)
    if (RAW) {
        ssdc::load_tile16_raw<CHUNK, W4, LDF, LDH, NTHREADS, T>(sm + off, raw16<T>(sm, off16), src, ld, n, w);
        return;
    }
#endif
    (void)off16;
    ssdc::load_tile_t<CHUNK, W4, LDF, NTHREADS, T>(sm + off, src, ld, n, w);
}

// Q, K rows [t0, t0 + n) of group g (zero beyond n and dk).
// RAW (mma16, grads launch): also the raw 16-bit copies P and dP read (ssd_mma16.cuh).
template <bool RAW = false>
__device__ __forceinline__ void load_qk(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 g, i64 t0, int n,
                                        int which = LD_BOTH) {
    const TQ *qb = tp<const TQ>(p.q) + b * p.q.s0 + t0 * p.q.s1 + g * p.q.s2;
    const TK *kb = tp<const TK>(p.k) + b * p.k.s0 + t0 * p.k.s1 + g * p.k.s2;
    if (which & LD_FIRST) load_one<RAW, DKP / 4, LDQ, LDQ16>(sm, OFF_Q, OFF_Q16, qb, p.q.s1, n, DK);
    if (which & LD_SECOND) load_one<RAW, DKP / 4, LDQ, LDQ16>(sm, OFF_K, OFF_K16, kb, p.k.s1, n, DK);
}

// V, dO rows [t0, t0 + n), columns [j0, j0 + BDV) of head h (zero beyond n and dv).
template <bool RAW = false>
__device__ __forceinline__ void load_vdo(const cg_ssd_bwd_params &p, float *sm, i64 b, i64 h, i64 t0, int n, i64 j0,
                                         int which = LD_BOTH) {
    const TV *vb = tp<const TV>(p.v) + b * p.v.s0 + t0 * p.v.s1 + h * p.v.s2 + j0;
    const TDO *ob = tp<const TDO>(p.dout) + b * p.dout.s0 + t0 * p.dout.s1 + h * p.dout.s2 + j0;
    const int w = DV - j0 < BDV ? (int)(DV - j0) : BDV;
    if (which & LD_FIRST) load_one<RAW, BDV / 4, LDV, LDV16>(sm, OFF_V, OFF_V16, vb, p.v.s1, n, w);
    if (which & LD_SECOND) load_one<RAW, BDV / 4, LDV, LDV16>(sm, OFF_DO, OFF_DO16, ob, p.dout.s1, n, w);
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
    warp_mma<false, RND_AB>(
        acc, 0, CHUNK, [&](int m, int k) { return ld_rows(X + k * LDQ + m0 + m, LDQ, 4); },
        [&](int k, int nn) { return ld_rows(Y + k * LDV + n0 + nn, LDV, 4); });
}

// chunk_outer's operands stored once (ssdc::scale_rows, round_tile): X .* s in place of X,
// Y rounded to tf32 (tf32 only), by the block between barriers after the cumsum.
template <class TY> __device__ __forceinline__ void outer_operands(float *X, const float *s, float *Y) {
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
__device__ __noinline__ float dv_exact(const float *K, const float *DS, const float *W, const float *P, const float *DO,
                                       int m, int j) {
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
        outer_operands<TV>(K, W, V);    // K .* w, V
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
            else chunk_outer(acc, Q, DO, m0, n0);           // R = (Q .* eA)^T dO  [DKP, BDV]
            float *run = which == 0 ? UACC : RACC;
            float *dst = (which == 0 ? w.S : w.D) + slot * DKDV + j0;
            tile_foreach(acc, [&](int r, int cc, float &x) {
                const int i = m0 + r, j = n0 + cc;
                float y = x; // this thread owns (i, j) for every chunk: no sync between chunks
                if (REC > 1 && !first) y = which == 0 ? fmaf(gc, run[i * LDS + j], x) : fmaf(pre, x, run[i * LDS + j]);
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
#include "ssd_bwd_grads.cuh"

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
