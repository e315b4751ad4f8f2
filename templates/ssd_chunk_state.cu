// ssd_chunk_state.cu -- phase 1 of the three-phase SSD forward (KERNEL_MATH.md).
//
// Per (b, h, chunk c) of C tokens, with A_j the cumulative sum of log_alpha from the
// chunk's first token (inclusive) and `last` its final valid row:
//   U_c = (K ⊙ w)^T V   [dk, dv],   w_j = exp(A_last - A_j),   gamma_c = exp(A_last).
// One CTA computes one [BLOCK_DK, BLOCK_DV] tile of U_c in FFMA (precision ieee):
// it stages the chunk's K tile (rows pre-scaled by w) and V tile in shared memory,
// then every thread accumulates an RM x RN register micro-tile over the chunk's rows
// in order, so the reduction order is fixed and the result deterministic.
// Any dk, dv, T: rows past T and columns past dk/dv load as 0 and are never stored.
// Grid: x = (dk tiles * dv tiles) * chunks, y = H, z = B; head h reads group
// h / (H / G) of k.
#include "ssd_chunk_state_params.h"

namespace cg_ssd_chunk_state {

// ---------------------------------------------------------------- traits
constexpr int DK = CG_DK;                 // baked-in shape
constexpr int DV = CG_DV;
constexpr int CHUNK = CG_P_CHUNK;         // tokens per chunk
constexpr int BLOCK_DK = CG_P_BLOCK_DK;   // U tile rows per CTA
constexpr int BLOCK_DV = CG_P_BLOCK_DV;   // U tile columns per CTA
constexpr int WARPS = CG_P_WARPS;
constexpr int NT = WARPS * 32;            // threads per CTA
// A warp spans 32 consecutive dv columns: coalesced stores, conflict-free V reads,
// and one broadcast K value per row.
constexpr int TJ = BLOCK_DV < 32 ? BLOCK_DV : 32;  // threads along dv
constexpr int TI = NT / TJ;                        // threads along dk
constexpr int RM = BLOCK_DK / TI;                  // U rows per thread
constexpr int RN = BLOCK_DV / TJ;                  // U columns per thread
constexpr int TILES_DK = (DK + BLOCK_DK - 1) / BLOCK_DK;
constexpr int TILES_DV = (DV + BLOCK_DV - 1) / BLOCK_DV;
constexpr int TILES = TILES_DK * TILES_DV;
// dynamic shared memory, in floats: A, w [CHUNK]; K tile [CHUNK, BLOCK_DK]; V tile [CHUNK, BLOCK_DV]
constexpr int SMEM_FLOATS = 2 * CHUNK + CHUNK * BLOCK_DK + CHUNK * BLOCK_DV;

static_assert(DK >= 1 && DV >= 1, "shape");
static_assert(NT % TJ == 0, "threads must tile the dv direction");
static_assert(TI >= 1 && TI <= BLOCK_DK && BLOCK_DK % TI == 0, "thread rows must tile BLOCK_DK");
static_assert(BLOCK_DV % TJ == 0, "thread columns must tile BLOCK_DV");
static_assert(RM * RN <= 64, "accumulators per thread beyond the register budget");
#if !CG_P_PRECISION_IEEE
#error "ssd_chunk_state implements precision ieee only"
#endif

}  // namespace cg_ssd_chunk_state

extern "C" __global__ void __launch_bounds__(cg_ssd_chunk_state::NT, 1)
ssd_chunk_state(cg_ssd_chunk_state_params p) {
    using namespace cg_ssd_chunk_state;
    extern __shared__ float smem[];
    float *A = smem;                        // [CHUNK] cumulative log decay
    float *w = A + CHUNK;                   // [CHUNK] exp(A_last - A_j), 0 past the end
    float *Ks = w + CHUNK;                  // [CHUNK, BLOCK_DK] rows of K scaled by w
    float *Vs = Ks + CHUNK * BLOCK_DK;      // [CHUNK, BLOCK_DV]

    const int tid = (int)threadIdx.x;
    const int tile = (int)(blockIdx.x % TILES);
    const int64_t c = (int64_t)(blockIdx.x / TILES);
    const int64_t h = blockIdx.y, b = blockIdx.z;
    const int64_t g = h / (p.H / p.G);
    const int i0 = (tile / TILES_DV) * BLOCK_DK;   // first dk row of the tile
    const int j0 = (tile % TILES_DV) * BLOCK_DV;   // first dv column
    const int64_t t0 = c * CHUNK;
    const int len = (int)(p.T - t0 < CHUNK ? p.T - t0 : CHUNK);

    // Cumulative decay: one thread, in token order. CHUNK adds are negligible next
    // to the CHUNK * BLOCK_DK * BLOCK_DV FMAs below.
    if (tid == 0) {
        const float *la = p.la + b * p.la_sb + t0 * p.la_st + h * p.la_sh;
        float acc = 0.f;
        for (int r = 0; r < len; ++r) {
            acc += la[r * p.la_st];
            A[r] = acc;
        }
    }
    __syncthreads();
    const float a_last = A[len - 1];
    for (int r = tid; r < CHUNK; r += NT) w[r] = r < len ? expf(a_last - A[r]) : 0.f;
    __syncthreads();

    const float *kp = p.k + b * p.k_sb + t0 * p.k_st + g * p.k_sg;
    for (int e = tid; e < CHUNK * BLOCK_DK; e += NT) {
        const int r = e / BLOCK_DK, i = i0 + e % BLOCK_DK;
        Ks[e] = (r < len && i < DK) ? kp[r * p.k_st + i] * w[r] : 0.f;
    }
    const float *vp = p.v + b * p.v_sb + t0 * p.v_st + h * p.v_sh;
    for (int e = tid; e < CHUNK * BLOCK_DV; e += NT) {
        const int r = e / BLOCK_DV, j = j0 + e % BLOCK_DV;
        Vs[e] = (r < len && j < DV) ? vp[r * p.v_st + j] : 0.f;
    }
    __syncthreads();

    const int ti = tid / TJ, tj = tid % TJ;
    float acc[RM][RN];
#pragma unroll
    for (int m = 0; m < RM; ++m)
#pragma unroll
        for (int n = 0; n < RN; ++n) acc[m][n] = 0.f;
    for (int r = 0; r < len; ++r) {
        float kr[RM], vr[RN];
#pragma unroll
        for (int m = 0; m < RM; ++m) kr[m] = Ks[r * BLOCK_DK + ti + m * TI];
#pragma unroll
        for (int n = 0; n < RN; ++n) vr[n] = Vs[r * BLOCK_DV + tj + n * TJ];
#pragma unroll
        for (int m = 0; m < RM; ++m)
#pragma unroll
            for (int n = 0; n < RN; ++n) acc[m][n] = fmaf(kr[m], vr[n], acc[m][n]);
    }

    float *U = p.U + b * p.U_sb + h * p.U_sh + c * p.U_sc;
#pragma unroll
    for (int m = 0; m < RM; ++m) {
        const int i = i0 + ti + m * TI;
        if (i >= DK) continue;
#pragma unroll
        for (int n = 0; n < RN; ++n) {
            const int j = j0 + tj + n * TJ;
            if (j < DV) U[i * p.U_si + j] = acc[m][n];
        }
    }
    if (tile == 0 && tid == 0) p.gamma[b * p.gamma_sb + h * p.gamma_sh + c] = expf(a_last);
}
