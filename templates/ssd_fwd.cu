// ssd_fwd.cu -- SSD forward (chunked), one specialization per (dk, dv, config).
//
// Rendered by generator/kernels/ssd_fwd.lua, which defines before this text:
//   CG_DK, CG_DV                                  head sizes (any >= 1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS, CG_P_STAGES
//   CG_P_PRECISION_{IEEE,TF32,3XTF32,MMA16}, CG_P_STRATEGY_{SEQ,3PHASE}
//   CG_SMEM_BYTES                                 the Lua side's shared-memory size
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_O                storage type of each of those tensors:
//                                                 float when not defined, else cg_bf16 or
//                                                 cg_f16 (issue #15; o follows v)
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
// Varlen (CG_VARLEN, docs/varlen.md): B = 1, nseq sequences packed along T, cu_seqlens
// read on the device. seq: one CTA per (sequence, h, dv tile) walks its sequence's
// chunks from h0[n] and writes hT[n]. 3phase: phases 1 and 3 run over the chunk slots
// of ssd_common.cuh (chunks start at every sequence start; a CTA finds its chunk from
// its slot), phase 2 scans each sequence's slots from h0[n] and writes hT[n].
// Matmuls run per warp on tiles of up to 32x32 outputs (ssdc::Tile: the largest that
// gives every warp one) with the m16n8k8 fragment layout, each fragment loaded and
// converted once per k step and reused across the tile (tf32: operands read only by the
// mma stored already rounded, ssdc::round_tile / mma_store): FFMA for ieee (each lane
// computes the accumulator elements the mma would give it), mma tf32 for tf32, and
// three tf32 mma per product (lo*hi + hi*lo + hi*hi) for 3xtf32. Inputs arrive by
// cp.async, 16 bytes at a time where rows are 16-byte aligned (4 bytes otherwise).
// Operands come from padded smem tiles, zero beyond dk, dv and the last token, so any
// dk, dv >= 1 and any T >= 1 work without special cases in the math. A 16-bit q, k or v
// is widened to fp32 as it is staged (16-byte loads of 8 halves where rows are 16-byte
// aligned, 2-byte loads otherwise; ssd_common.cuh) into the same fp32 tiles, and o is
// rounded once as it is stored: the math is the float32 kernel's. The whole dk
// lives in smem (Q, K rows and S): dk is bounded by the shared memory, which valid()
// checks (dk up to about 1000 on sm_90, 720 on sm_80); larger heads take the CPU path.
#include "cg_device.cuh"
#include "cg_kernel_params.h"
#include "ssd_common.cuh"
#if defined(CG_P_PRECISION_MMA16)
#include "ssd_mma16.cuh"
#endif

// ------------------------------------------------------------------- traits
namespace ssd {

constexpr int DK = CG_DK;
constexpr int DV = CG_DV;
constexpr int CHUNK = CG_P_CHUNK;
constexpr int BDV = CG_P_BLOCK_DV;
constexpr int WARPS = CG_P_WARPS;
constexpr int STAGES = CG_P_STAGES;
constexpr int NTHREADS = 32 * WARPS;

constexpr int PREC = ssdc::PREC; // from CG_P_PRECISION_* (ssd_common.cuh)

#if defined(CG_P_STRATEGY_3PHASE)
constexpr bool THREE_PHASE = true;
#else
constexpr bool THREE_PHASE = false;
#endif

constexpr int DKP = (DK + 15) / 16 * 16;   // dk padded to the 16-row mma tile
constexpr int NDVT = (DV + BDV - 1) / BDV; // dv tiles, one CTA each
// Row pitches in floats, chosen so that every operand read of a warp hits 32 distinct
// banks (64-bit reads: 16 distinct bank pairs per half-warp). Q, K: +8 (== 8 mod 16),
// read as 64-bit k pairs (Q K^T, Q S: rows lane/4, words 2(lane%4)) and K^T by rows
// lane%4 (chunk_state: mma k order); V: +8, rows lane%4 (P V, chunk_state); S: +4
// (== 4 mod 8), rows 2(lane%4) and 2(lane%4)+1 (Q S, paired k order); P: +4, row
// lane/4, word lane%4 (P V).
constexpr int LDQ = DKP + 8;
constexpr int LDK = DKP + 8;
constexpr int LDV = BDV + 8;
constexpr int LDP = CHUNK + 4;
constexpr int LDS = BDV + 4;

// Shared memory, in floats (offsets are multiples of 4: 16-byte aligned).
// seq and out: S, P, A/EA/W, then STAGES x (Q, K, V, la):
constexpr int OFF_S = 0;                           // [DKP, BDV] state S (pitch LDS)
constexpr int OFF_P = OFF_S + DKP * LDS;           // [CHUNK, CHUNK] masked scores P (pitch LDP)
constexpr int OFF_A = OFF_P + CHUNK * LDP;         // [CHUNK] A = cumsum(la) within the chunk
constexpr int OFF_STAGE = OFF_A + 3 * CHUNK;       // STAGES x one chunk of inputs:
constexpr int ST_Q = 0;                            //   [CHUNK, DKP] q (pitch LDQ)
constexpr int ST_K = ST_Q + CHUNK * LDQ;           //   [CHUNK, DKP] k (pitch LDK)
constexpr int ST_V = ST_K + CHUNK * LDK;           //   [CHUNK, BDV] v (pitch LDV)
constexpr int ST_LA = ST_V + CHUNK * LDV;          //   [CHUNK] log_alpha
#if defined(CG_P_PRECISION_MMA16)                  // the scores' operands again, raw 16-bit (ssd_mma16.cuh)
constexpr int LDQ16 = ssdc::Pitch16<DKP>::LD;      //   row pitch in halves
constexpr int ST_Q16 = ST_LA + CHUNK;              //   [CHUNK, DKP] q as stored (pitch LDQ16 halves)
constexpr int ST_K16 = ST_Q16 + CHUNK * LDQ16 / 2; // [CHUNK, DKP] k as stored
constexpr int STAGE_FLOATS = ST_K16 + CHUNK * LDQ16 / 2;
#else
constexpr int STAGE_FLOATS = ST_LA + CHUNK;
#endif
constexpr int SMEM_FLOATS = OFF_STAGE + STAGES * STAGE_FLOATS;
constexpr long long SMEM_BYTES = 4LL * SMEM_FLOATS;
// states (3phase phase 1: no S, P or Q; the chunk state goes from registers to the
// workspace): A/EA/W, K, V, la.
constexpr int SOFF_A = 0;
constexpr int SOFF_K = SOFF_A + 3 * CHUNK;
constexpr int SOFF_V = SOFF_K + CHUNK * LDK;
constexpr int SOFF_LA = SOFF_V + CHUNK * LDV;
constexpr long long SMEM_STATES_BYTES = 4LL * (SOFF_LA + CHUNK);
#ifdef CG_SMEM_BYTES // what generator/kernels/ssd_fwd.lua launches with
static_assert(SMEM_BYTES == CG_SMEM_BYTES, "ssd_fwd.lua smem_bytes() disagrees with the layout here");
static_assert(SMEM_STATES_BYTES == CG_SMEM_STATES, "ssd_fwd.lua smem_states() disagrees with the layout here");
#endif

static_assert(ssdc::Sizes<DK, DV, CHUNK, BDV, WARPS>::ok, "the sizes (ssd_common.cuh)");
static_assert(STAGES == 1 || STAGES == 2, "stages: 1 or 2");
static_assert(!THREE_PHASE || STAGES == 1, "3phase: one chunk per CTA, nothing to pipeline");
static_assert(OFF_STAGE % 4 == 0 && STAGE_FLOATS % 4 == 0 && OFF_P % 4 == 0 && SOFF_V % 4 == 0 && SOFF_LA % 4 == 0,
              "16-byte aligned tiles");

typedef cg_i64 i64;

// Storage types (cg_device.cuh): float, cg_bf16 or cg_f16; q, k, v: ssd_common.cuh.
#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_O TO;
using ssdc::TK;
using ssdc::TQ;
using ssdc::TV;
using ssdc::tp;

// ------------------------------------------------------------- warp matmul
using ssdc::ld_cols;
using ssdc::ld_pair;
using ssdc::ld_rows;
using ssdc::tile_foreach;
// Warp tiles of the three matmul shapes (ssd_common.cuh: the largest that gives every warp one).
typedef ssdc::Tile<CHUNK, CHUNK, WARPS> TileP; // P = Q K^T
typedef ssdc::Tile<CHUNK, BDV, WARPS> TileO;   // O = Q S + P V
typedef ssdc::Tile<DKP, BDV, WARPS> TileS;     // S = (K .* w)^T V

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

// One chunk's buffers: its inputs (Q absent in the states launch) and the cumsums.
struct Bufs {
    float *Q, *K, *V, *LA, *A, *EA, *W;
};
// seq and out: stage st (STAGES of them after the S, P, A tiles).
__device__ __forceinline__ Bufs bufs_stage(float *sm, float *st) {
    return Bufs{st + ST_Q, st + ST_K, st + ST_V, st + ST_LA, sm + OFF_A, sm + OFF_A + CHUNK, sm + OFF_A + 2 * CHUNK};
}
__device__ __forceinline__ Bufs bufs_states(float *sm) {
    return Bufs{
        nullptr, sm + SOFF_K, sm + SOFF_V, sm + SOFF_LA, sm + SOFF_A, sm + SOFF_A + CHUNK, sm + SOFF_A + 2 * CHUNK};
}

#if defined(CG_P_PRECISION_MMA16)
static_assert(sizeof(TQ) == 2 && sizeof(TK) == 2, "mma16: 16-bit q and k (ssd_fwd.lua valid())");
static_assert(ST_Q16 % 4 == 0 && ST_K16 % 4 == 0 && LDQ16 % 8 == 0, "16-byte aligned raw tiles");
// The raw 16-bit tile `off` floats past a stage's Q tile.
template <class T> __device__ __forceinline__ T *raw16(const float *q, int off) {
    return reinterpret_cast<T *>(const_cast<float *>(q) + off);
}
#endif

template <int W4, int LD, class T>
__device__ __forceinline__ void load_tile(float *dst, const T *src, i64 ld, int n, int w) {
    ssdc::load_tile_t<CHUNK, W4, LD, NTHREADS, T>(dst, src, ld, n, w);
}

// Tokens [t0, t0 + n) of a chunk into b (zero beyond n, dk, dv) by cp.async (16-bit
// tensors: loaded and widened); padding is stored directly. The caller commits and waits.
__device__ __forceinline__ void load_chunk(const cg_ssd_fwd_params &p, const Cta &c, const Bufs &b, i64 t0, int n) {
    const TQ *qb = tp<const TQ>(p.q) + c.b * p.q.s0 + t0 * p.q.s1 + c.g * p.q.s2;
    const TK *kb = tp<const TK>(p.k) + c.b * p.k.s0 + t0 * p.k.s1 + c.g * p.k.s2;
    const TV *vb = tp<const TV>(p.v) + c.b * p.v.s0 + t0 * p.v.s1 + c.h * p.v.s2 + c.j0;
    const float *lb = p.la.p + c.b * p.la.s0 + t0 * p.la.s1 + c.h * p.la.s2;
#if defined(CG_P_PRECISION_MMA16) // with the scores (b.Q): q, k also as stored, for m16n8k16
    if (b.Q) {
        ssdc::load_tile16_raw<CHUNK, DKP / 4, LDQ, LDQ16, NTHREADS, TQ>(b.Q, raw16<TQ>(b.Q, ST_Q16 - ST_Q), qb, p.q.s1,
                                                                        n, DK);
        ssdc::load_tile16_raw<CHUNK, DKP / 4, LDK, LDQ16, NTHREADS, TK>(b.K, raw16<TK>(b.Q, ST_K16 - ST_Q), kb, p.k.s1,
                                                                        n, DK);
    } else load_tile<DKP / 4, LDK>(b.K, kb, p.k.s1, n, DK);
#else
    if (b.Q) load_tile<DKP / 4, LDQ>(b.Q, qb, p.q.s1, n, DK);
    load_tile<DKP / 4, LDK>(b.K, kb, p.k.s1, n, DK);
#endif
    const int w = DV - c.j0 < BDV ? (int)(DV - c.j0) : BDV;
    load_tile<BDV / 4, LDV>(b.V, vb, p.v.s1, n, w);
    ssdc::load_column<CHUNK, NTHREADS>(b.LA, lb, p.la.s1, n);
}

// A = cumsum(la), exp(A), w = exp(A_last - A) of the chunk in b, by warp 0.
__device__ __forceinline__ void chunk_cumsum(const Bufs &b) { ssdc::chunk_cumsum<CHUNK>(b.LA, b.A, b.EA, b.W); }

// The operand stores (ssdc::round_tile, scale_rows; docs/perf-model.md): the chunk's tiles
// that only the mma reads rounded to tf32 once (tf32; a no-op otherwise), between the
// barriers after the cumsum. Q and V always; K too in the out launch, where nothing but
// Q K^T reads it (seq and states: K becomes K .* w, kw_store).
__device__ __forceinline__ void round_inputs(const Bufs &b) {
    if (b.Q) ssdc::round_tile<CHUNK, DKP / 4, LDQ, NTHREADS, TQ>(b.Q);
    if (THREE_PHASE && b.Q) ssdc::round_tile<CHUNK, DKP / 4, LDK, NTHREADS, TK>(b.K);
    ssdc::round_tile<CHUNK, BDV / 4, LDV, NTHREADS, TV>(b.V);
}
// K .* w in place of K (chunk_state's operand, computed once), after the last read of K
// by Q K^T and before the barrier ahead of chunk_state; the cumsum (w) is complete.
__device__ __forceinline__ void kw_store(const Bufs &b) { ssdc::scale_rows<CHUNK, DKP / 4, LDK, NTHREADS>(b.K, b.W); }
// warp_mma's RND flags: Q K^T (K rounded in the out launch only), Q S (S rounded as the
// out launch loads it; seq's S is the running state, read in fp32 too).
constexpr int RND_QK = THREE_PHASE ? ssdc::RND_AB : ssdc::RND_A;
constexpr int RND_QS = THREE_PHASE ? ssdc::RND_AB : ssdc::RND_A;

// P = (Q K^T) .* M into smem (zero above the diagonal: a reader's k range ends at its
// own tile's last row, which may pass this tile's).
__device__ __forceinline__ void chunk_scores(float *sm, const Bufs &b) {
    typedef TileP T;
    const int warp = threadIdx.x >> 5;
    const float *Q = b.Q, *K = b.K, *A = b.A, *LO = b.LA; // LO: the cumsum's low parts, over la
    float *P = sm + OFF_P;
    for (int tile = warp; tile < T::TILES; tile += WARPS) {
        const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
        float acc[T::MM][T::NN][4];
        ssdc::tile_zero(acc);
#if defined(CG_P_PRECISION_MMA16) // the raw 16-bit q, k by m16n8k16, ldmatrix fragments
        if (n0 < m0 + T::TM)
            ssdc::warp_mma16_abt<TQ, LDQ16, LDQ16>(acc, raw16<TQ>(Q, ST_Q16 - ST_Q) + m0 * LDQ16,
                                                   raw16<TK>(Q, ST_K16 - ST_Q) + n0 * LDQ16, 0, DKP);
#else
        if (n0 < m0 + T::TM) // Q [CHUNK, DKP] K^T [DKP, CHUNK], both read as 64-bit k pairs
            ssdc::warp_mma<PREC, true, RND_QK>(
                acc, 0, DKP, [&](int m, int k) { return ld_pair(Q + (m0 + m) * LDQ + k); },
                [&](int k, int n) { return ld_pair(K + (n0 + n) * LDK + k); });
#endif
        tile_foreach(acc, [&](int r, int cc, float &x) {
            const int i = m0 + r, j = n0 + cc;
            // a select, not a product: above the diagonal x * exp(positive) may be Inf or NaN
            P[i * LDP + j] = j <= i ? ssdc::mma_store(x * expf(ssdc::seg_sum(A, LO, i, j))) : 0.f; // read by P V only
        });
    }
}

// Element (i, j) of O as the exact sum (a select where the mma multiplies by P's zeros):
// exp(A_i) (Q S0)_ij + sum over k <= i of P_ik V_kj, by FFMA from the tiles chunk_output
// reads. The mma's P V runs k over the whole diagonal tile, so it also multiplies P's
// zeros above the diagonal with the rows k > i of V; 0 x Inf or NaN is NaN, so a NaN or
// Inf in v at token k turned rows i < k of its tile to NaN, rows that do not depend on it
// (issue #39). Only an output that came out non-finite is recomputed this way (a finite
// one met no non-finite V row), so the common path pays one test per output.
__device__ __noinline__ float output_exact(const float *Q, const float *S, const float *P, const float *V,
                                           const float *EA, int i, int j, bool with_state) {
    float s = 0.f;
    if (with_state) {
#pragma unroll 1
        for (int k = 0; k < DKP; ++k) s = fmaf(Q[i * LDQ + k], S[k * LDS + j], s);
        s *= EA[i];
    }
#pragma unroll 1
    for (int k = 0; k <= i; ++k) s = fmaf(P[i * LDP + k], V[k * LDV + j], s);
    return s;
}

// A chunk whose loads have landed (this thread's copies): after a barrier its cumsums and
// rounded inputs, then P (chunk_scores), each step ended by a barrier.
__device__ __forceinline__ void chunk_prepare(float *sm, const Bufs &b) {
    __syncthreads();
    chunk_cumsum(b);
    round_inputs(b);
    __syncthreads();
    chunk_scores(sm, b);
    __syncthreads();
}

// O = diag(exp(A)) Q S0 + P V for rows < n, columns < dv; with_state false: S0 = 0.
__device__ __forceinline__ void chunk_output(const cg_ssd_fwd_params &p, const Cta &c, float *sm, const Bufs &b, i64 t0,
                                             int n, bool with_state) {
    typedef TileO T;
    const int warp = threadIdx.x >> 5;
    const float *Q = b.Q, *V = b.V, *S = sm + OFF_S, *P = sm + OFF_P, *EA = b.EA;
    TO *ob = tp<TO>(p.o) + c.b * p.o.s0 + t0 * p.o.s1 + c.h * p.o.s2 + c.j0;
    for (int tile = warp; tile < T::TILES; tile += WARPS) {
        const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
        if (m0 >= n) continue; // only padding rows
        float acc[T::MM][T::NN][4];
        ssdc::tile_zero(acc);
        if (with_state) { // Q [CHUNK, DKP] (64-bit k pairs) S [DKP, BDV] (rows k, k+1)
            ssdc::warp_mma<PREC, true, RND_QS>(
                acc, 0, DKP, [&](int m, int k) { return ld_pair(Q + (m0 + m) * LDQ + k); },
                [&](int k, int nn) { return ld_rows(S + k * LDS + n0 + nn, LDS, 1); });
            tile_foreach(acc, [&](int r, int, float &x) { x *= EA[m0 + r]; });
        }
        // P [CHUNK, CHUNK] V [CHUNK, BDV], the mma's k order
        ssdc::warp_mma<PREC, false, ssdc::RND_AB>(
            acc, 0, m0 + T::TM, [&](int m, int k) { return ld_cols(P + (m0 + m) * LDP + k, 4); },
            [&](int k, int nn) { return ld_rows(V + k * LDV + n0 + nn, LDV, 4); });
        bool bad = false; // an output came out Inf or NaN
        tile_foreach(acc, [&](int r, int cc, float &x) {
            const int i = m0 + r, j = n0 + cc;
            if (i < n && c.j0 + j < DV) {
                ob[i * p.o.s1 + j] = cg_round<TO>(x); // rounded once
                bad |= !ssdc::finite(x);
            }
        });
        if (bad) { // rare: the lane's non-finite outputs again, exactly (output_exact)
            const int lane = threadIdx.x & 31;
#pragma unroll 1
            for (int e = 0; e < T::MM * T::NN * 4; ++e) {
                const int i = m0 + e / (T::NN * 4) * 16 + (lane >> 2) + (e >> 1 & 1) * 8;
                const int j = n0 + e / 4 % T::NN * 8 + 2 * (lane & 3) + (e & 1);
                if (i >= n || c.j0 + j >= DV) continue;
                TO &o = ob[i * p.o.s1 + j];
                if (!ssdc::finite(cg_f32(o))) o = cg_round<TO>(output_exact(Q, S, P, V, EA, i, j, with_state));
            }
        }
    }
}

// The chunk's state over the whole [DKP, BDV] tile: out(i, j, init(i, j) + ((K .* w)^T V)_ij),
// with K .* w already in the K tile (kw_store) and V stored by mma_store.
template <class FI, class FO> __device__ __forceinline__ void chunk_state(const Bufs &b, FI init, FO out) {
    typedef TileS T;
    const int warp = threadIdx.x >> 5;
    const float *K = b.K, *V = b.V;
    for (int tile = warp; tile < T::TILES; tile += WARPS) {
        const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
        float acc[T::MM][T::NN][4];
        tile_foreach(acc, [&](int r, int cc, float &x) { x = init(m0 + r, n0 + cc); });
        // (K .* w)^T [DKP, CHUNK] V [CHUNK, BDV], the mma's k order
        ssdc::warp_mma<PREC, false, ssdc::RND_AB>(
            acc, 0, CHUNK, [&](int m, int k) { return ld_rows(K + k * LDK + m0 + m, LDK, 4); },
            [&](int k, int nn) { return ld_rows(V + k * LDV + n0 + nn, LDV, 4); });
        tile_foreach(acc, [&](int r, int cc, float &x) { out(m0 + r, n0 + cc, x); });
    }
}

// S tile from a [.., dk, dv] tensor row-block at src (pitch ld, dv contiguous), zero-padded.
__device__ __forceinline__ void state_load(float *sm, const float *src, i64 ld, i64 j0) {
    float *S = sm + OFF_S;
#pragma unroll 1 // rolled: compile time
    for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
        const int i = e / BDV, j = e - i * BDV;
        const float x = (src && i < DK && j0 + j < DV) ? src[i * ld + j] : 0.f;
        S[i * LDS + j] = THREE_PHASE ? ssdc::mma_store(x) : x; // out: read by Q S only
    }
}

__device__ __forceinline__ void state_store(const float *sm, float *dst, i64 ld, i64 j0) {
    const float *S = sm + OFF_S;
#pragma unroll 1 // rolled: compile time
    for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
        const int i = e / BDV, j = e - i * BDV;
        if (i < DK && j0 + j < DV) dst[i * ld + j] = S[i * LDS + j];
    }
}

__device__ __forceinline__ int chunk_len(const cg_ssd_fwd_params &p, i64 ci) { return ssdc::chunk_len<CHUNK>(p.T, ci); }

// 3phase phases 1 and 3: a CTA's chunk (varlen: slot) ci of row bh = b * H + h and dv tile
// dvt, from blockIdx.x = (bh * nchunks + ci) * NDVT + dvt; its n tokens from t0
// (ssd_common.cuh; varlen: n = 0 for an unused slot).
struct Slot {
    i64 dvt, ci, bh, t0;
    int n;
    Cta c;
};
__device__ __forceinline__ Slot slot_of_block(const cg_ssd_fwd_params &p) {
    Slot s;
    s.dvt = blockIdx.x % NDVT;
    const i64 rest = blockIdx.x / NDVT;
    s.ci = rest % p.nchunks, s.bh = rest / p.nchunks;
    s.c = cta_coords(p, s.dvt, s.bh);
    s.n = ssdc::slot_tokens<CHUNK>(p, s.ci, &s.t0);
    return s;
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
#ifdef CG_VARLEN
    // grid NDVT * nseq * H (B = 1): sequence sn's tokens [ta, ta + tlen), its state h0[sn], hT[sn]
    const i64 sn = bh / p.H;
    const Cta c = cta_coords(p, dvt, bh - sn * p.H);
    const ssdc::VSeq sq = ssdc::seq_chunks<CHUNK>(p.cu, sn, p.T);
    const i64 ta = sq.start, tlen = sq.end - sq.start, nch = sq.nch;
#else
    const Cta c = cta_coords(p, dvt, bh);
    const i64 sn = c.b, ta = 0, tlen = p.T, nch = p.nchunks;
#endif
    const float *h0 = p.h0.p ? p.h0.p + sn * p.h0.s0 + c.h * p.h0.s1 + c.j0 : nullptr;
    state_load(sm, h0, p.h0.s2, c.j0);
    float *stage0 = sm + OFF_STAGE;
    if (STAGES == 2) {
        load_chunk(p, c, bufs_stage(sm, stage0), ta, ssdc::chunk_len<CHUNK>(tlen, 0));
        cg_cp_async_commit();
    }
    float *S = sm + OFF_S;
    for (i64 ci = 0; ci < nch; ++ci) {
        const Bufs b = bufs_stage(sm, stage0 + (STAGES == 2 ? (int)(ci & 1) * STAGE_FLOATS : 0));
        const i64 t0 = ta + ci * CHUNK;
        const int n = ssdc::chunk_len<CHUNK>(tlen, ci);
        if (STAGES == 2) {
            // The other stage was last read by chunk ci-1, which ended with a barrier.
            if (ci + 1 < nch)
                load_chunk(p, c, bufs_stage(sm, stage0 + (int)((ci + 1) & 1) * STAGE_FLOATS), t0 + CHUNK,
                           ssdc::chunk_len<CHUNK>(tlen, ci + 1));
            cg_cp_async_commit();
            cg_cp_async_wait<1>(); // chunk ci has landed (this thread's copies)
        } else {
            load_chunk(p, c, b, t0, n);
            ssdc::landed();
        }
        chunk_prepare(sm, b);
        kw_store(b); // K's last reader (chunk_scores) is done; the barrier below orders it
        chunk_output(p, c, sm, b, t0, n, ci > 0 || h0 != nullptr);
        const bool last = ci + 1 == nch;
        if (!last || p.hT.p) {
            __syncthreads(); // every warp is done reading S
            const float gamma = b.EA[CHUNK - 1];
            chunk_state(
                b, [&](int i, int j) { return gamma * S[i * LDS + j]; },
                [&](int i, int j, float x) { S[i * LDS + j] = x; });
        }
        __syncthreads();
    }
    if (p.hT.p) state_store(sm, p.hT.p + sn * p.hT.s0 + c.h * p.hT.s1 + c.j0, p.hT.s2, c.j0);
}
#else
// ------------------------------------------------------ three-phase strategy
// Workspace: states [B*H, nchunks, DK, DV] then decays [B*H, nchunks].
// Phase 1, grid NDVT * nchunks * B * H, blockIdx.x = ((b*H + h) * nchunks + c) * NDVT + dvt:
// U_c = (K .* w)^T V into the chunk's state slot, gamma_c = exp(A_last). Its own
// (smaller) shared memory: K, V and the cumsums only.
SSD_ENTRY cg_ssd_fwd_states(cg_ssd_fwd_params p) {
    using namespace ssd;
    CG_DYN_SMEM(float, sm);
    const Slot s = slot_of_block(p);
    const Cta &c = s.c;
    const Bufs b = bufs_states(sm);
#ifdef CG_VARLEN
    if (s.n == 0) return; // an unused slot: the scan reads only its sequences' slots
#endif
    load_chunk(p, c, b, s.t0, s.n);
    ssdc::landed();
    __syncthreads();
    chunk_cumsum(b);
    round_inputs(b); // V
    __syncthreads();
    kw_store(b);
    __syncthreads();
    const i64 slot = s.bh * p.nchunks + s.ci;
    float *u = p.ws + slot * (i64)(DK * DV) + c.j0;
    chunk_state(
        b, [](int, int) { return 0.f; },
        [&](int i, int j, float x) {
            if (i < DK && c.j0 + j < DV) u[(i64)i * DV + j] = x;
        });
    if (s.dvt == 0 && threadIdx.x == 0) p.ws[p.B * p.H * p.nchunks * (i64)(DK * DV) + slot] = b.EA[CHUNK - 1];
}

// Phase 2, one thread per (b, h, i, j): S0^0 = h0, S0^{c+1} = gamma_c S0^c + U_c; the
// slot of chunk c ends up holding S0^c; hT = the state after the last chunk.
// Varlen: one thread per (sequence b, h, i, j) over that sequence's slots (B = 1: the
// workspace rows are the heads), from h0[b] (0-length: hT[b] = h0[b]).
SSD_ENTRY cg_ssd_fwd_scan(cg_ssd_fwd_params p) {
    using namespace ssd;
    const i64 e = (i64)blockIdx.x * NTHREADS + threadIdx.x;
#ifdef CG_VARLEN
    const i64 nb = p.nseq;
#else
    const i64 nb = p.B;
#endif
    if (e >= nb * p.H * (i64)(DK * DV)) return;
    const i64 bh = e / (DK * DV), ij = e - bh * (DK * DV);
    const i64 i = ij / DV, j = ij - i * DV, b = bh / p.H, h = bh - b * p.H;
    float s = p.h0.p ? p.h0.p[b * p.h0.s0 + h * p.h0.s1 + i * p.h0.s2 + j] : 0.f;
#ifdef CG_VARLEN
    const ssdc::VSeq sq = ssdc::seq_chunks<CHUNK>(p.cu, b, p.T);
    const i64 row = h * p.nchunks + sq.base; // sequence b's first slot in head h's row
    float *u = p.ws + row * (i64)(DK * DV) + ij;
    const float *gam = p.ws + p.H * p.nchunks * (i64)(DK * DV) + row;
    s = ssdc::state_scan<DK * DV>(u, gam, sq.nch, s);
#else
    float *u = p.ws + bh * p.nchunks * (i64)(DK * DV) + ij;
    const float *gam = p.ws + p.B * p.H * p.nchunks * (i64)(DK * DV) + bh * p.nchunks;
    s = ssdc::state_scan<DK * DV>(u, gam, p.nchunks, s);
#endif
    if (p.hT.p) p.hT.p[b * p.hT.s0 + h * p.hT.s1 + i * p.hT.s2 + j] = s;
}

// Phase 3, grid as phase 1: O of chunk c from its entering state S0^c.
SSD_ENTRY cg_ssd_fwd_out(cg_ssd_fwd_params p) {
    using namespace ssd;
    CG_DYN_SMEM(float, sm);
    const Slot s = slot_of_block(p);
    const Cta &c = s.c;
    const Bufs b = bufs_stage(sm, sm + OFF_STAGE);
#ifdef CG_VARLEN
    if (s.n == 0) return; // an unused slot
#endif
    load_chunk(p, c, b, s.t0, s.n);
    cg_cp_async_commit();
    state_load(sm, p.ws + (s.bh * p.nchunks + s.ci) * (i64)(DK * DV) + c.j0, DV, c.j0);
    cg_cp_async_wait_all();
    chunk_prepare(sm, b);
    chunk_output(p, c, sm, b, s.t0, s.n, true);
}
#endif
