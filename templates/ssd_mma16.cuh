// ssd_mma16.cuh -- the SSD's tensor-core path for products of two 16-bit inputs
// (precision=mma16, issue #15, docs/dtypes.md): the warp matmul over bf16 / fp16 operands
// (mma.sync m16n8k16, fp32 accumulate, fragments by ldmatrix from a raw 16-bit copy of
// the tiles) and the staging that makes that copy beside the widened fp32 tile.
// Used for the input x input products only: Q K^T (forward scores, backward P) and
// dO V^T (backward dP). Every other product of an mma16 kernel runs as 3xtf32
// (ssd_common.cuh sets PREC = 2 for it). A product of two bf16 or two fp16 values is
// exact in fp32, so these products round only in the fp32 accumulation, as 3xtf32 does.
#ifndef CG_SSD_MMA16_CUH
#define CG_SSD_MMA16_CUH
#include "ssd_common.cuh"

namespace ssdc {

// Row pitch, in halves, of a raw 16-bit tile of width W (a multiple of 16): W + 8. A row
// is then an odd number of 16-byte units ((W + 8) / 8, W / 8 even), so the 8 rows of an
// 8x8 matrix that one ldmatrix phase reads land in 8 distinct 16-byte bank groups: no
// bank conflicts (the emulator's bank counters check it, tests/test_ssd16_gen.c).
template <int W> struct Pitch16 {
    static_assert(W % 16 == 0, "raw 16-bit tiles: a multiple of 16 columns");
    static constexpr int LD = W + 8;
};

// acc[mm][nn] += A B^T over the warp tile: A rows [0, 16 MM) and B rows [0, 8 NN) of two
// row-major [rows, k] 16-bit tiles (pitches LDA, LDB halves, 16-byte aligned rows), k in
// [k0, k1) (multiples of 16). The accumulator layout is warp_mma's (the m16n8 C layout),
// so its epilogues apply unchanged. A fragment (row-major 16x16): ldmatrix.x4, lane l
// addressing row (l % 8) + 8 ((l / 8) % 2), columns 8 (l / 16) -- matrices (rows 0-7,
// k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = registers a0..a3 of the mma. B
// fragment ("col": B^T row-major = the B tile's rows as n): an 8x8 matrix of rows n,
// columns k gives lane (g, t) B^T[g][2t..2t+1] = B[2t..2t+1][g], the mma's b layout,
// without .trans; ldmatrix.x4 fetches (n-tile nn, k 0-7), (nn, 8-15), (nn+1, 0-7),
// (nn+1, 8-15), .x2 a last odd n-tile.
template <class T, int LDA, int LDB, int MM, int NN>
__device__ __forceinline__ void warp_mma16_abt(float (&acc)[MM][NN][4], const T *A, const T *B, int k0, int k1) {
    static_assert(sizeof(T) == 2 && LDA % 8 == 0 && LDB % 8 == 0, "16-byte aligned rows of halves");
    const int lane = threadIdx.x & 31;
    const int ar = (lane & 7) + ((lane >> 3) & 1) * 8, ac = (lane >> 4) * 8; // A: row, k of the lane's address
    const int br = (lane & 7) + (lane >> 4) * 8, bc = ((lane >> 3) & 1) * 8; // B (x4): n, k
#pragma unroll 1
    for (int k = k0; k < k1; k += 16) {
        unsigned a[MM][4];
#pragma unroll
        for (int mm = 0; mm < MM; ++mm) cg_ldmatrix_x4(a[mm], A + (mm * 16 + ar) * LDA + k + ac);
#pragma unroll
        for (int nn = 0; nn < NN; nn += 2) {
            unsigned b[4];
            if (nn + 1 < NN) cg_ldmatrix_x4(b, B + (nn * 8 + br) * LDB + k + bc);
            else cg_ldmatrix_x2(b, B + (nn * 8 + (lane & 7)) * LDB + k + bc);
#pragma unroll
            for (int mm = 0; mm < MM; ++mm) {
                cg_mma_h16_16x8x16<T>(acc[mm][nn], a[mm], b, acc[mm][nn]);
                if (nn + 1 < NN) cg_mma_h16_16x8x16<T>(acc[mm][nn + 1], a[mm], b + 2, acc[mm][nn + 1]);
            }
        }
    }
}

// The 16-bit staging with a raw copy: rows [0, ROWS) x columns [0, 4 W4) of src (row
// pitch ld elements, columns contiguous, storage T) widened into the fp32 tile dst
// (pitch LD floats) as load_tile16 does, and the same values as they are stored (the raw
// halves, zero padding) into dst16 (pitch LD16 halves). Synchronous: 16-byte loads of 8
// halves where every source row is 16-byte aligned and w % 8 == 0 (one 16-byte store of
// the halves, two of the floats), else 2-byte loads. The caller's barrier orders them.
template <class T>
__device__ __noinline__ void load_tile16_raw_narrow(float *dst, T *dst16, const T *src, i64 ld, int n, int w, int cols,
                                                    int pitch, int pitch16, int total, int nt) {
#pragma unroll 1
    for (int e = threadIdx.x; e < total; e += nt) {
        const int r = e / cols, i = e - r * cols;
        const T x = r < n && i < w ? src[r * ld + i] : T{0};
        dst[r * pitch + i] = cg_f32(x);
        dst16[r * pitch16 + i] = x;
    }
}

template <int ROWS, int W4, int LD, int LD16, int NT, class T>
__device__ __forceinline__ void load_tile16_raw(float *dst, T *dst16, const T *src, i64 ld, int n, int w) {
    static_assert(sizeof(T) == 2 && LD % 4 == 0 && LD16 % 8 == 0 && W4 % 2 == 0, "16-byte aligned rows");
    constexpr int W8 = W4 / 2;
    if (rows_aligned16<8>(src, ld, w)) {
#pragma unroll 1
        for (int e = threadIdx.x; e < ROWS * W8; e += NT) {
            const int r = e / W8, i = (e - r * W8) * 8;
            uint4 u = {0u, 0u, 0u, 0u};
            if (r < n && i < w) u = *reinterpret_cast<const uint4 *>(src + r * ld + i);
            *reinterpret_cast<uint4 *>(dst16 + r * LD16 + i) = u;
            float *d = dst + r * LD + i;
            *reinterpret_cast<float4 *>(d) = make_float4(cg_lo<T>(u.x), cg_hi<T>(u.x), cg_lo<T>(u.y), cg_hi<T>(u.y));
            *reinterpret_cast<float4 *>(d + 4) =
                make_float4(cg_lo<T>(u.z), cg_hi<T>(u.z), cg_lo<T>(u.w), cg_hi<T>(u.w));
        }
    } else {
        load_tile16_raw_narrow<T>(dst, dst16, src, ld, n, w, W4 * 4, LD, LD16, ROWS * W4 * 4, NT);
    }
}

} // namespace ssdc

#endif // CG_SSD_MMA16_CUH
