// gdr_mma.cuh -- the gated delta rule's matrix-unit path (issue #35): the chunk GEMMs on
// tensor cores through SSD's warp matmuls (ssd_common.cuh warp_mma, ssd_mma16.cuh
// warp_mma16_abt), the staging of q / k / v tiles into shared memory, and the walk of a
// block's 16x16 output tiles over its warps.
//
// The key is the space's `precision` (generator/kernels/gdr_fwd.lua), the same words as
// SSD's: ieee (float32 FMA, the kernels' own stride-NT loops; no mma), 3xtf32 (float32
// inputs: every product as three tf32 mma, float32 accuracy), mma16 (16-bit q and k: the
// input x input products Q K^T and K K^T by m16n8k16 from raw 16-bit copies of the
// tiles, every other product 3xtf32). Both kernels have the key (a kernel without it would
// be ieee). The triangular solve stays float32 FMA in every precision (MATH_GDN.md's
// pitfalls).
// Everything here takes its sizes as template arguments (gdr_common.cuh holds them).
#ifndef CG_GDR_MMA_CUH
#define CG_GDR_MMA_CUH
#if !defined(CG_P_PRECISION_IEEE) && !defined(CG_P_PRECISION_3XTF32) && !defined(CG_P_PRECISION_MMA16)
#define CG_P_PRECISION_IEEE 1 // a kernel without the key: float32 FMA
#endif
#include "ssd_mma16.cuh"

namespace gdr {

constexpr bool MMA = ssdc::PREC != 0; // the chunk GEMMs on the matrix unit
constexpr bool MMA16 = ssdc::MMA16;   // ... Q K^T and K K^T by m16n8k16

// Rows [0, ROWS) x columns [0, COLS) of the tile at dst (pitch LD floats) from rows
// t0 + r (r < n) and columns x0 + x (x < w) of head hd of batch row b of a
// [b, t, head, x] tensor of storage T (any strides), widened to float32; zero elsewhere.
// RAW: the same values as stored (raw halves, zero padding) into dst16 (pitch LD16).
// By the block's NT threads; the caller's barrier orders the stores.
template <int ROWS, int COLS, int LD, int LD16, int NT, bool RAW, class T>
__device__ __forceinline__ void stage(float *dst, T *dst16, const cg_ktensor &t, cg_i64 b, cg_i64 t0, cg_i64 hd,
                                      cg_i64 x0, int n, int w) {
    const T *src = reinterpret_cast<const T *>(t.p) + b * t.s0 + t0 * t.s1 + hd * t.s2 + x0 * t.s3;
#pragma unroll 1
    for (int e = threadIdx.x; e < ROWS * COLS; e += NT) {
        const int r = e / COLS, x = e - r * COLS;
        const T v = r < n && x < w ? src[r * t.s1 + x * t.s3] : T{0};
        dst[r * LD + x] = cg_f32(v);
        if constexpr (RAW) dst16[r * LD16 + x] = v;
    }
}

// f(m0, n0) for each 16x16 tile of an [M, N] output (multiples of 16), dealt to the NT / 32
// warps round robin: warp-uniform, as the mma needs.
template <int M, int N, int NT, class F> __device__ __forceinline__ void tiles(F f) {
    static_assert(M % 16 == 0 && N % 16 == 0, "16x16 warp tiles");
    constexpr int TN = N / 16, NTILE = (M / 16) * TN;
#pragma unroll 1
    for (int t = (int)(threadIdx.x >> 5); t < NTILE; t += NT / 32) f((t / TN) * 16, (t - (t / TN) * TN) * 16);
}

// For each 16x16 tile (m0, n0) of an [M, N] output: acc = 0, mm(acc, m0, n0) (the products),
// then ep(row, col, value&) over the lane's elements of the tile, in block coordinates.
template <int M, int N, int NT, class FM, class FE> __device__ __forceinline__ void gemm_tiles(FM mm, FE ep) {
    tiles<M, N, NT>([&](int m0, int n0) {
        float acc[2][4];
        ssdc::tile_zero(acc);
        mm(acc, m0, n0);
        ssdc::tile_foreach(acc, [&](int r, int c, float &x) { ep(m0 + r, n0 + c, x); });
    });
}

// f(row, col, e) over the lane's elements of a 16x16 tile, relative to the tile: element
// acc[e / 4][e % 4] of its accumulators (ssdc's m16n8 layout, tile_foreach's order). For
// epilogues that read several accumulators of the same tile.
template <class F> __device__ __forceinline__ void tile_index(F f) {
    const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
#pragma unroll
    for (int e = 0; e < 8; ++e) f(gr + (((e & 3) >> 1) << 3), (e >> 2) * 8 + 2 * tg + (e & 1), e);
}

// acc (the 16x16 tile at (m0, n0), ssdc's m16n8 layout) += sum_{k < K} A(m, k) B(k, n), K a
// multiple of 8, by 3xtf32 mma; A, B element loaders in block coordinates (0 past the
// operands' ends).
template <class FA, class FB>
__device__ __forceinline__ void mma_tile(float (&acc)[2][4], int m0, int n0, int K, FA A, FB B) {
    ssdc::warp_mma<ssdc::PREC>(
        acc, 0, K, [&](int m, int k) { return A(m0 + m, k); }, [&](int k, int n) { return B(k, n0 + n); });
}

// The [M, N] product sum_{k < K} A(m, k) B(k, n) by mma_tile, tile by tile (gemm_tiles):
// ep(row, col, value&) over its elements.
template <int M, int N, int NT, class FA, class FB, class FE>
__device__ __forceinline__ void gemm_mma(int K, FA A, FB B, FE ep) {
    gemm_tiles<M, N, NT>([&](float(&acc)[2][4], int m0, int n0) { mma_tile(acc, m0, n0, K, A, B); }, ep);
}

// acc += A[m0 .. m0 + 16) B[n0 .. n0 + 16)^T over k < K (a multiple of 16) of two raw
// 16-bit row-major tiles of pitch LD16 halves, by m16n8k16 mma.
template <int LD16, class T>
__device__ __forceinline__ void mma16_abt_tile(float (&acc)[2][4], const T *A, const T *B, int m0, int n0, int K) {
    float(&a3)[1][2][4] = *reinterpret_cast<float(*)[1][2][4]>(&acc);
    ssdc::warp_mma16_abt<T, LD16, LD16, 1, 2>(a3, A + m0 * LD16, B + n0 * LD16, 0, K);
}

// acc += X[m0 ..) Y[n0 ..)^T over the DKP columns of two staged [rows][DKP] tiles: X, Y
// float32 (pitch LD), X16, Y16 their raw 16-bit copies (pitch LD16) under mma16.
template <int DKP, int LD, int LD16, class T>
__device__ __forceinline__ void mma_abt(float (&acc)[2][4], const float *X, const float *Y, const T *X16, const T *Y16,
                                        int m0, int n0) {
    if constexpr (MMA16) mma16_abt_tile<LD16>(acc, X16, Y16, m0, n0, DKP);
    else
        mma_tile(
            acc, m0, n0, DKP, [&](int m, int k) { return X[m * LD + k]; }, [&](int k, int n) { return Y[n * LD + k]; });
}

} // namespace gdr

#endif // CG_GDR_MMA_CUH
