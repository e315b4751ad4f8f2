// ssd_common.cuh -- device code shared by the SSD kernels (ssd_fwd.cu, ssd_bwd.cu):
// the per-warp 16x16 tile matmul in the three precisions, the accumulator visitor,
// the per-chunk decay cumsum and the forward scan of chunk states over the chunks.
// Each kernel keeps its own traits (sizes, smem layout) and passes what these need
// (precision, chunk length) as template arguments; nothing here reads a kernel's traits.
#ifndef CG_SSD_COMMON_CUH
#define CG_SSD_COMMON_CUH
#include "cg_device.cuh"
#include "cg_kernel_params.h" // cg_i64

namespace ssdc {

typedef cg_i64 i64;

// ------------------------------------------------------------- warp matmul
// acc[nt][0..3] += sum_k A(m, k) B(k, n) over one 16x16 output tile, k in [k0, k1)
// (multiples of 8). Lane l owns rows {l/4, l/4 + 8} and columns {2(l%4), 2(l%4)+1} of
// each 8-column half nt: the m16n8k8 accumulator layout, so every precision leaves the
// same elements in the same lanes and the epilogues are shared.
// PREC: 0 ieee (FFMA, each lane computes the accumulator elements the mma would give
// it), 1 tf32 (one mma), 2 3xtf32 (hi*lo + lo*hi + hi*hi).
template <int PREC, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[2][4], int k0, int k1, FA A, FB B) {
    const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
    if (PREC == 0) {
#pragma unroll 2 // deeper unrolling spills (ptxas caps this loop near 96 registers)
        for (int k = k0; k < k1; ++k) {
            const float a0 = A(gr, k), a1 = A(gr + 8, k);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                const float b0 = B(k, nt * 8 + 2 * tg), b1 = B(k, nt * 8 + 2 * tg + 1);
                acc[nt][0] = fmaf(a0, b0, acc[nt][0]);
                acc[nt][1] = fmaf(a0, b1, acc[nt][1]);
                acc[nt][2] = fmaf(a1, b0, acc[nt][2]);
                acc[nt][3] = fmaf(a1, b1, acc[nt][3]);
            }
        }
    } else {
        for (int k = k0; k < k1; k += 8) {
            // A fragment [16 x 8]: a0 (gr, tg), a1 (gr+8, tg), a2 (gr, tg+4), a3 (gr+8, tg+4)
            const float a[4] = {A(gr, k + tg), A(gr + 8, k + tg), A(gr, k + tg + 4), A(gr + 8, k + tg + 4)};
            unsigned ahi[4], alo[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (PREC == 1) ahi[e] = cg_to_tf32(a[e]);
                else cg_split_tf32(a[e], ahi[e], alo[e]);
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                // B fragment [8 x 8]: b0 (tg, gr), b1 (tg+4, gr)
                const float b[2] = {B(k + tg, nt * 8 + gr), B(k + tg + 4, nt * 8 + gr)};
                unsigned bhi[2], blo[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (PREC == 1) bhi[e] = cg_to_tf32(b[e]);
                    else cg_split_tf32(b[e], bhi[e], blo[e]);
                }
                if (PREC == 2) { // small terms first, then the big one
                    cg_mma_tf32_16x8x8(acc[nt], alo, bhi, acc[nt]);
                    cg_mma_tf32_16x8x8(acc[nt], ahi, blo, acc[nt]);
                }
                cg_mma_tf32_16x8x8(acc[nt], ahi, bhi, acc[nt]);
            }
        }
    }
}

// Visit the accumulator elements of a lane: f(row, col, value&) with row in [0, 16)
// and col in [0, 16) relative to the tile.
template <class F>
__device__ __forceinline__ void tile_foreach(float (&acc)[2][4], F f) {
    const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(gr + (e >> 1) * 8, nt * 8 + 2 * tg + (e & 1), acc[nt][e]);
}

__device__ __forceinline__ void tile_zero(float (&acc)[2][4]) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
}

// ------------------------------------------------------------------ chunks
// Tokens of chunk ci (CHUNK, except the last chunk of T).
template <int CHUNK>
__device__ __forceinline__ int chunk_len(i64 T, i64 ci) {
    const i64 left = T - ci * CHUNK;
    return left < CHUNK ? (int)left : CHUNK;
}

// From la[0, CHUNK): A = inclusive cumsum of la over the chunk, EA = exp(A) and
// W = exp(A_last - A), by warp 0 (padding tokens have la = 0, so A_last is A at the
// chunk's last real token).
template <int CHUNK>
__device__ __forceinline__ void chunk_cumsum(const float *la, float *A, float *EA, float *W) {
    if ((threadIdx.x >> 5) != 0) return;
    static_assert(CHUNK <= 32 * 8, "cumsum: at most 8 tokens per lane");
    constexpr int PER = (CHUNK + 31) / 32;
    const int lane = threadIdx.x & 31;
    float part[PER];
    float run = 0.f;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int t = lane * PER + u;
        run += t < CHUNK ? la[t] : 0.f;
        part[u] = run;
    }
    float incl = run; // inclusive scan of the lanes' totals
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const float o = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += o;
    }
    float excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0.f;
    const float last = __shfl_sync(0xffffffffu, incl, 31);
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int t = lane * PER + u;
        if (t < CHUNK) {
            const float a = excl + part[u];
            A[t] = a;
            EA[t] = expf(a);
            W[t] = expf(last - a); // difference first, then exp
        }
    }
}

// Forward scan of one state element over the chunks: slot c of u (STRIDE floats apart)
// holds the chunk-local state U_c and ends up holding S0^c, the state entering chunk c
// (S0^0 = s, S0^{c+1} = gam[c] S0^c + U_c). Returns the state after the last chunk.
template <long long STRIDE>
__device__ __forceinline__ float state_scan(float *u, const float *gam, i64 nchunks, float s) {
    for (i64 c = 0; c < nchunks; ++c) {
        const float uc = u[c * STRIDE];
        u[c * STRIDE] = s;
        s = fmaf(gam[c], s, uc);
    }
    return s;
}

} // namespace ssdc

#endif // CG_SSD_COMMON_CUH
