// ssd_common.cuh -- device code shared by the SSD kernels (ssd_fwd.cu, ssd_bwd.cu):
// the precision key, the per-warp tile matmul in the three precisions, the accumulator visitor,
// the per-chunk decay cumsum and the forward scan of chunk states over the chunks.
// Each kernel keeps its own traits (sizes, smem layout) and passes what these need
// (chunk length, tile shape) as template arguments; nothing here reads a kernel's traits
// (only the precision define, which both kernels' spaces have, and the storage types of
// q, k, v, which both take). Also the 16-bit staging (issue #15).
#ifndef CG_SSD_COMMON_CUH
#define CG_SSD_COMMON_CUH
#include "cg_device.cuh"
#include "cg_kernel_params.h" // cg_i64
#ifdef CG_VARLEN
#include "cg_varlen.cuh" // cu_at, seq_range
#endif

namespace ssdc {

typedef cg_i64 i64;

// The sizes both kernels' traits require (checked where they name Sizes<...>::ok).
template <int DK, int DV, int CHUNK, int BDV, int WARPS> struct Sizes {
    static_assert(DK >= 1 && DV >= 1, "dk, dv >= 1");
    static_assert(CHUNK % 16 == 0 && CHUNK >= 16, "chunk: a multiple of the 16-row mma tile");
    static_assert(BDV % 16 == 0 && BDV >= 16, "block_dv: a multiple of the 16-column warp tile");
    static_assert(WARPS >= 1 && WARPS <= 32, "warps: 1..32");
    static constexpr bool ok = true;
};

// ------------------------------------------------------------- precision
// From the generator's CG_P_PRECISION_* define (both SSD kernels have the key):
// 0 ieee (FFMA), 1 tf32 (one mma per product), 2 3xtf32 (three); mma16 (16-bit inputs):
// PREC 2 and MMA16.
#if defined(CG_P_PRECISION_IEEE)
constexpr int PREC = 0;
#elif defined(CG_P_PRECISION_TF32)
constexpr int PREC = 1;
#elif defined(CG_P_PRECISION_3XTF32)
constexpr int PREC = 2;
#elif defined(CG_P_PRECISION_MMA16)
constexpr int PREC = 2; // mma16: the 16-bit input x input products by m16n8k16 (ssd_mma16.cuh), the rest 3xtf32
#else
#error "ssd: no CG_P_PRECISION_* defined"
#endif
#if defined(CG_P_PRECISION_MMA16)
constexpr bool MMA16 = true;
#else
constexpr bool MMA16 = false;
#endif

// mma operand words. The tensor core reads the top 19 bits of an A/B word (the tf32
// part; cg_device.cuh), so adding half a tf32 ulp to the bits makes its truncation
// round to nearest, ties away (cvt.rna's result for finite values and quiet NaNs) in
// one integer add instead of cvt.rna's four instructions on sm_90.
__device__ __forceinline__ unsigned tf32_word(float x) { return __float_as_uint(x) + 0x1000u; }
// 3xtf32: hi = x rounded to tf32, lo = x - hi (exact in fp32), truncated to tf32 by the
// tensor core: |x - hi - lo| < 2^-21 |x|, and the dropped lo*lo term is below 2^-22.
// Three instructions (ptxas drops the mask from the mma's own operand, which it ignores:
// IADD, and LOP + FADD for lo).
__device__ __forceinline__ void tf32_split(float x, unsigned &hi, unsigned &lo) {
    hi = (__float_as_uint(x) + 0x1000u) & 0xFFFFE000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}
// The same with hi truncated (x's low 13 bits cleared): two instructions (LOP + FADD; the
// mma reads x's own word as hi). |lo| < 2^-10 |x|, so the error bounds double. warp_mma
// splits the B fragments so (the A fragments keep the rounded split: their pair loads are
// not in the fragment's register order, so an unrounded hi costs a MOV instead of the
// IADD). A 128-term dot product of normal data, rms relative error: 3.8e-7 so, 3.5e-7
// with both rounded, 4.9e-7 with both truncated, 2.1e-7 for sequential fp32 FFMA.
__device__ __forceinline__ void tf32_split_trunc(float x, unsigned &hi, unsigned &lo) {
    hi = __float_as_uint(x) & 0xFFFFE000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}

// tf32 operands rounded once where they are stored (issue #14): an operand tile read
// only by the mma is rounded to tf32 as it is staged or written (round_tile, mma_store),
// and warp_mma's RND flags skip its rounding of that operand. Identical to rounding at
// every use (cvt.rna's result is a function of the value); ieee and 3xtf32 store the
// fp32 value (3xtf32 splits it at use). A 16-bit input widened to fp32 is already a
// tf32 value (8 or 10 mantissa bits), so its tiles are left as they are.
__device__ __forceinline__ float tf32_round(float x) {
    return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
}
__device__ __forceinline__ float mma_store(float x) { return PREC == 1 ? tf32_round(x) : x; }
enum { RND_A = 1, RND_B = 2, RND_AB = 3 }; // warp_mma: which operands were stored by mma_store

// ------------------------------------------------------------- warp matmul
// acc[mm][nn][0..3] += sum_k A(m, k) B(k, n) over one (16 MM) x (8 NN) output tile of a
// warp, k in [k0, k1) (multiples of 8). Each m16n8k8 sub-tile (mm, nn) has the mma
// accumulator layout: lane l owns rows {l/4, l/4 + 8} + 16 mm and columns
// {2(l%4), 2(l%4)+1} + 8 nn, so every precision leaves the same elements in the same
// lanes and the epilogues are shared. Each A fragment is loaded and split once per k
// step and used for NN products, each B fragment for MM.
// Operands come as pair loaders: A(m, k) returns the lane's two k slots of row m,
// B(k, n) those of column n. PAIRED: the slots are k and k+1 (a row-major A or a
// k-contiguous B loads them as one 64-bit word); else k and k+4 (the mma's own k order,
// for operands strided along k). The k order within a step is free as long as A and B
// agree, which one flag for both guarantees; warp_mma passes k = step + 2 (lane%4)
// (PAIRED) or step + lane%4.
// RND (RND_A, RND_B): operands whose values were stored by mma_store (tf32: already
// tf32, used as they are; the other precisions: no difference).
// PREC 0 (ieee): each lane computes the accumulator elements the mma would give it with
// FFMA, over the same pairs.
template <int PREC_, bool PAIRED, int RND = 0, int MM, int NN, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[MM][NN][4], int k0, int k1, FA A, FB B) {
    const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
    if (PREC_ == 0) {
#pragma unroll 1
        for (int k = k0; k < k1; k += 8) {
#pragma unroll 1 // one k pair per trip: deeper unrolling spills the recompute configs
            for (int j = 0; j < 4; ++j) {
                const int kk = PAIRED ? k + 2 * j : k + j;
                float2 a[MM][2];
#pragma unroll
                for (int mm = 0; mm < MM; ++mm) {
                    a[mm][0] = A(mm * 16 + gr, kk);
                    a[mm][1] = A(mm * 16 + gr + 8, kk);
                }
#pragma unroll
                for (int nn = 0; nn < NN; ++nn) {
                    const float2 b0 = B(kk, nn * 8 + 2 * tg), b1 = B(kk, nn * 8 + 2 * tg + 1);
#pragma unroll
                    for (int mm = 0; mm < MM; ++mm) {
                        float *c = acc[mm][nn];
                        c[0] = fmaf(a[mm][0].y, b0.y, fmaf(a[mm][0].x, b0.x, c[0]));
                        c[1] = fmaf(a[mm][0].y, b1.y, fmaf(a[mm][0].x, b1.x, c[1]));
                        c[2] = fmaf(a[mm][1].y, b0.y, fmaf(a[mm][1].x, b0.x, c[2]));
                        c[3] = fmaf(a[mm][1].y, b1.y, fmaf(a[mm][1].x, b1.x, c[3]));
                    }
                }
            }
        }
    } else {
        const int kl = PAIRED ? 2 * tg : tg;
#pragma unroll 1
        for (int k = k0; k < k1; k += 8) {
            // A fragment [16 x 8]: a0 (gr, s0), a1 (gr+8, s0), a2 (gr, s1), a3 (gr+8, s1)
            unsigned ahi[MM][4], alo[MM][4];
#pragma unroll
            for (int mm = 0; mm < MM; ++mm) {
                const float2 r0 = A(mm * 16 + gr, k + kl), r1 = A(mm * 16 + gr + 8, k + kl);
                const float a[4] = {r0.x, r1.x, r0.y, r1.y};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    if (PREC_ == 1) ahi[mm][e] = (RND & RND_A) ? __float_as_uint(a[e]) : tf32_word(a[e]);
                    else tf32_split(a[e], ahi[mm][e], alo[mm][e]);
                }
            }
#pragma unroll
            for (int nn = 0; nn < NN; ++nn) {
                // B fragment [8 x 8]: b0 (s0, gr), b1 (s1, gr)
                const float2 r = B(k + kl, nn * 8 + gr);
                const float b[2] = {r.x, r.y};
                unsigned bhi[2], blo[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (PREC_ == 1) bhi[e] = (RND & RND_B) ? __float_as_uint(b[e]) : tf32_word(b[e]);
                    else tf32_split_trunc(b[e], bhi[e], blo[e]);
                }
#pragma unroll
                for (int mm = 0; mm < MM; ++mm) {
                    if (PREC_ == 2) { // small terms first, then the big one
                        cg_mma_tf32_16x8x8(acc[mm][nn], alo[mm], bhi, acc[mm][nn]);
                        cg_mma_tf32_16x8x8(acc[mm][nn], ahi[mm], blo, acc[mm][nn]);
                    }
                    cg_mma_tf32_16x8x8(acc[mm][nn], ahi[mm], bhi, acc[mm][nn]);
                }
            }
        }
    }
}

// The pair loaders for the common operand shapes: X at p, pitch ld floats.
// Row-major X[r][c] read along c (PAIRED: one 64-bit load; p + r*ld + c must be even).
__device__ __forceinline__ float2 ld_pair(const float *p) { return *reinterpret_cast<const float2 *>(p); }
// Two elements `step` rows apart (an operand strided along k).
__device__ __forceinline__ float2 ld_rows(const float *p, int ld, int step) { return make_float2(p[0], p[step * ld]); }
// Two elements `step` apart along a row.
__device__ __forceinline__ float2 ld_cols(const float *p, int step) { return make_float2(p[0], p[step]); }

// Warp tile for an [M, N] output on W warps (in m16n8 sub-tiles MM x NN): the largest of
// 32x32, 16x32, 32x16, 16x16 that tiles it and still gives every warp a tile; 16x16
// always for ieee (PREC 0: the FFMA path holds its operands in registers, and the
// larger tiles spill in the backward's recompute configs).
template <int M, int N, int W> struct Tile {
    __host__ __device__ static constexpr bool fits(int mm, int nn) {
        return PREC != 0 && M % (16 * mm) == 0 && N % (8 * nn) == 0 && (M / (16 * mm)) * (N / (8 * nn)) >= W;
    }
    static constexpr int MM = fits(2, 4) ? 2 : fits(1, 4) ? 1 : fits(2, 2) ? 2 : 1;
    static constexpr int NN = fits(2, 4) ? 4 : fits(1, 4) ? 4 : 2;
    static constexpr int TM = 16 * MM, TN = 8 * NN;
    static constexpr int TILES_M = M / TM, TILES_N = N / TN, TILES = TILES_M * TILES_N;
};

// Visit the accumulator elements of a lane by adjacent pairs, relative to the tile:
// f(row, col, x0, x1) for (row, col) and (row, col + 1), col even (a 64-bit shared-memory
// access where the row pitch and base are even).
template <int MM, int NN, class F> __device__ __forceinline__ void tile_foreach2(float (&acc)[MM][NN][4], F f) {
    const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
#pragma unroll
    for (int mm = 0; mm < MM; ++mm)
#pragma unroll
        for (int nn = 0; nn < NN; ++nn)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                f(mm * 16 + gr + h * 8, nn * 8 + 2 * tg, acc[mm][nn][2 * h], acc[mm][nn][2 * h + 1]);
}

// The same one element at a time: f(row, col, value&), in the order of the pairs.
template <int MM, int NN, class F> __device__ __forceinline__ void tile_foreach(float (&acc)[MM][NN][4], F f) {
    tile_foreach2(acc, [&](int r, int c, float &x0, float &x1) {
        f(r, c, x0);
        f(r, c + 1, x1);
    });
}

// tile_foreach2 with a per-row value: v = fr(row) once per row of the lane, then
// f(row, col, x0, x1, v). For a row factor read from shared memory before stores the
// compiler cannot tell apart from it (inside f, each store would make it read v again).
template <int MM, int NN, class FR, class F>
__device__ __forceinline__ void tile_foreach2_row(float (&acc)[MM][NN][4], FR fr, F f) {
    const int lane = threadIdx.x & 31, gr = lane >> 2, tg = lane & 3;
#pragma unroll
    for (int mm = 0; mm < MM; ++mm)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mm * 16 + gr + h * 8;
            const float v = fr(r);
#pragma unroll
            for (int nn = 0; nn < NN; ++nn) f(r, nn * 8 + 2 * tg, acc[mm][nn][2 * h], acc[mm][nn][2 * h + 1], v);
        }
}

template <int MM, int NN> __device__ __forceinline__ void tile_zero(float (&acc)[MM][NN][4]) {
#pragma unroll
    for (int mm = 0; mm < MM; ++mm)
#pragma unroll
        for (int nn = 0; nn < NN; ++nn)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mm][nn][e] = 0.f;
}

// The 16x16 tile of scalar element loaders A(m, k), B(k, n) (the backward's interface):
// the mma's own k order, acc[nt][e] = sub-tile (0, nt).
template <int PREC_, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[2][4], int k0, int k1, FA A, FB B) {
    float(&a3)[1][2][4] = *reinterpret_cast<float(*)[1][2][4]>(&acc);
    warp_mma<PREC_, false>(
        a3, k0, k1, [&](int m, int k) { return make_float2(A(m, k), A(m, k + 4)); },
        [&](int k, int n) { return make_float2(B(k, n), B(k + 4, n)); });
}

template <class F> __device__ __forceinline__ void tile_foreach(float (&acc)[2][4], F f) {
    tile_foreach(*reinterpret_cast<float(*)[1][2][4]>(&acc), f);
}

__device__ __forceinline__ void tile_zero(float (&acc)[2][4]) { tile_zero(*reinterpret_cast<float(*)[1][2][4]>(&acc)); }

// ------------------------------------------------------------------- loads
// Whether every row of a w-wide source of row pitch ld elements starts 16-byte aligned
// and w fills whole 16-byte vectors of E elements (E = 4 floats, 8 halves): the vector
// paths of the loads below.
template <int E, class T> __device__ __forceinline__ bool rows_aligned16(const T *src, i64 ld, int w) {
    return w % E == 0 && ld % E == 0 && ((unsigned long long)src & 15u) == 0;
}

// Rows [0, ROWS) x columns [0, 4 W4) of a tile at dst (pitch LD floats, 16-byte aligned
// rows) from src (row pitch ld floats, columns contiguous) by the block's NT threads:
// rows < n and columns < w are copied, the rest zeroed. 16-byte cp.async (.cg) per 4
// columns when every source row starts 16-byte aligned and w % 4 == 0; else 4-byte
// cp.async per element (odd dk, dv or strides). Padding is stored directly. The caller
// commits and waits (landed()) before the barrier after which others read.
// load_tile's 4-byte path, with runtime sizes: one called copy serves every tile of the
// kernel and its loop stays rolled (an inlined, unrolled copy per tile made a third of a
// forward entry's compile time, for the path aligned inputs never take).
__device__ __noinline__ void load_tile_narrow(float *dst, const float *src, i64 ld, int n, int w, int cols, int pitch,
                                              int total, int nt) {
#pragma unroll 1
    for (int e = threadIdx.x; e < total; e += nt) {
        const int r = e / cols, i = e - r * cols;
        float *d = dst + r * pitch + i;
        if (r < n && i < w) cg_cp_async_ca4(d, src + r * ld + i);
        else *d = 0.f;
    }
}

template <int ROWS, int W4, int LD, int NT>
__device__ __forceinline__ void load_tile(float *dst, const float *src, i64 ld, int n, int w) {
    static_assert(LD % 4 == 0, "16-byte aligned rows");
    // rolled too (compile time; an unrolled copy per tile saves only the loop branch)
    if (rows_aligned16<4>(src, ld, w)) {
#pragma unroll 1
        for (int e = threadIdx.x; e < ROWS * W4; e += NT) {
            const int r = e / W4, i = (e - r * W4) * 4;
            float *d = dst + r * LD + i;
            if (r < n && i < w) cg_cp_async_cg16(d, src + r * ld + i);
            else *reinterpret_cast<float4 *>(d) = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    } else {
        load_tile_narrow(dst, src, ld, n, w, W4 * 4, LD, ROWS * W4 * 4, NT);
    }
}

// Rows [0, ROWS) x columns [0, 4 W4) of a staged fp32 tile (pitch LD) rounded in place by
// mma_store, by the block's NT threads (tf32 only; a no-op otherwise). After the barrier
// that follows the tile's landing; a barrier must follow before the mma reads it.
template <int ROWS, int W4, int LD, int NT, class T = float> __device__ __forceinline__ void round_tile(float *t) {
    if (PREC != 1 || sizeof(T) != 4) return;
#pragma unroll 1
    for (int e = threadIdx.x; e < ROWS * W4; e += NT) {
        const int r = e / W4, i = (e - r * W4) * 4;
        float4 &v = *reinterpret_cast<float4 *>(t + r * LD + i);
        const float4 x = v;
        v = make_float4(tf32_round(x.x), tf32_round(x.y), tf32_round(x.z), tf32_round(x.w));
    }
}

// t[r][c] = mma_store(t[r][c] * s[r]) over rows [0, ROWS) x columns [0, 4 W4) in place:
// an operand (K .* w, Q .* exp(A)) computed once instead of at every use (the same fp32
// product). As round_tile: between two barriers, s complete.
template <int ROWS, int W4, int LD, int NT> __device__ __forceinline__ void scale_rows(float *t, const float *s) {
#pragma unroll 1
    for (int e = threadIdx.x; e < ROWS * W4; e += NT) {
        const int r = e / W4, i = (e - r * W4) * 4;
        float4 &v = *reinterpret_cast<float4 *>(t + r * LD + i);
        const float4 x = v;
        const float f = s[r];
        v = make_float4(mma_store(x.x * f), mma_store(x.y * f), mma_store(x.z * f), mma_store(x.w * f));
    }
}

// ---------------------------------------------------------- 16-bit staging
// A tensor stored as bf16 or fp16 (issue #15, docs/dtypes.md) is widened to fp32 as it
// is staged, into the same fp32 tiles as a float32 tensor's (so the matmul core and
// every shared-memory pitch are the same for both). Synchronous loads, converted and
// stored to shared memory by the loading thread: no staging buffer, so no shared memory
// beyond the fp32 layout (the Lua valid() need not know the dtype). The caller's
// landed() is then a no-op for these tiles; its __syncthreads still orders the stores.

// Storage types of the inputs both kernels stage (cg_ttypes.cuh: float, cg_bf16 or
// cg_f16, float when the generator does not define CG_T_<NAME>).
#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_Q TQ;
typedef CG_T_K TK;
typedef CG_T_V TV;

// Tensor t's data as T (cg_ktensor holds a float pointer whatever the storage).
template <class T> __device__ __forceinline__ T *tp(const cg_ktensor &t) { return reinterpret_cast<T *>(t.p); }

// load_tile16's 2-byte path (odd dk, dv or strides), called (one copy per module and
// storage type, rolled loop; as load_tile_narrow).
template <class T>
__device__ __noinline__ void load_tile16_narrow(float *dst, const T *src, i64 ld, int n, int w, int cols, int pitch,
                                                int total, int nt) {
#pragma unroll 1
    for (int e = threadIdx.x; e < total; e += nt) {
        const int r = e / cols, i = e - r * cols;
        dst[r * pitch + i] = r < n && i < w ? cg_f32(src[r * ld + i]) : 0.f;
    }
}

// load_tile of 16-bit T: one 16-byte load of 8 halves per 8 columns when every source
// row starts 16-byte aligned and w % 8 == 0 (W4 * 4 columns: a multiple of 16, so of 8),
// else 2-byte loads per element; widened and stored (two 16-byte shared stores per 8).
template <int ROWS, int W4, int LD, int NT, class T>
__device__ __forceinline__ void load_tile16(float *dst, const T *src, i64 ld, int n, int w) {
    static_assert(sizeof(T) == 2 && LD % 4 == 0 && W4 % 2 == 0, "8 halves per 16 bytes, 16-byte aligned rows");
    constexpr int W8 = W4 / 2;
    if (rows_aligned16<8>(src, ld, w)) {
#pragma unroll 1
        for (int e = threadIdx.x; e < ROWS * W8; e += NT) {
            const int r = e / W8, i = (e - r * W8) * 8;
            float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            if (r < n && i < w) cg_load8(src + r * ld + i, v);
            float *d = dst + r * LD + i;
            *reinterpret_cast<float4 *>(d) = make_float4(v[0], v[1], v[2], v[3]);
            *reinterpret_cast<float4 *>(d + 4) = make_float4(v[4], v[5], v[6], v[7]);
        }
    } else {
        load_tile16_narrow<T>(dst, src, ld, n, w, W4 * 4, LD, ROWS * W4 * 4, NT);
    }
}

// The staging of a tile stored as T: float by cp.async (load_tile), 16-bit widened here.
template <int ROWS, int W4, int LD, int NT, class T>
__device__ __forceinline__ void load_tile_t(float *dst, const T *src, i64 ld, int n, int w) {
    if constexpr (sizeof(T) == 4) load_tile<ROWS, W4, LD, NT>(dst, src, ld, n, w);
    else load_tile16<ROWS, W4, LD, NT, T>(dst, src, ld, n, w);
}

// dst[r] = src[r * ld] for r < n, 0 for n <= r < ROWS (4-byte cp.async; caller waits).
template <int ROWS, int NT> __device__ __forceinline__ void load_column(float *dst, const float *src, i64 ld, int n) {
    for (int r = threadIdx.x; r < ROWS; r += NT) {
        if (r < n) cg_cp_async_ca4(dst + r, src + r * ld);
        else dst[r] = 0.f;
    }
}

// This thread's cp.async copies have landed (a __syncthreads must still follow).
__device__ __forceinline__ void landed() {
    cg_cp_async_commit();
    cg_cp_async_wait_all();
}

// ------------------------------------------------------------------ chunks
// Tokens of chunk ci (CHUNK, except the last chunk of T).
template <int CHUNK> __device__ __forceinline__ int chunk_len(i64 T, i64 ci) {
    const i64 left = T - ci * CHUNK;
    return left < CHUNK ? (int)left : CHUNK;
}

#ifdef CG_VARLEN
// The varlen chunk slots (cg_varlen.cuh, shared with the gated delta rule's kernels).
using cgvl::seq_chunks;
using cgvl::slot_base;
using cgvl::slot_chunk;
using cgvl::VChunk;
using cgvl::VSeq;
#endif

// The tokens [*t0, *t0 + return) of chunk ci of p (the forward's or the backward's
// params): varlen, of slot ci (0: an unused slot, the CTA has nothing to do).
template <int CHUNK, class P> __device__ __forceinline__ int slot_tokens(const P &p, i64 ci, i64 *t0) {
#ifdef CG_VARLEN
    const VChunk v = slot_chunk<CHUNK>(p.cu, p.nseq, p.T, ci);
    *t0 = v.t0;
    return v.len;
#else
    *t0 = ci * CHUNK;
    return chunk_len<CHUNK>(p.T, ci);
#endif
}

// log_alpha below LA_MIN counts as LA_MIN in the cumulative sums: exp of any sum holding
// it is 0 in float32 as it would be, and the sums stay finite (-inf would make the
// difference of two sums after it -inf - -inf = NaN). The CPU path clamps at the same
// value (runtime/cpu/ssd_cpu.h: cg__ssd_clamp_la). NaN passes (the comparison is false).
constexpr float LA_MIN = -1.0e4f;

// From la[0, CHUNK): A = inclusive cumsum of la over the chunk, EA = exp(A) and
// W = exp(A_last - A), by warp 0 (padding tokens have la = 0, so A_last is A at the
// chunk's last real token). The sums run in double and are kept as two floats,
// A[t] = float(sum) and LO[t] = float(sum - A[t]), with LO in place of la (each lane
// reads its own tokens' la before writing): A_i - A_j then comes out to float rounding of
// the difference itself (seg_sum), where a difference of float running sums loses
// |A| * 2^-24 to cancellation: one token of log_alpha -1e4 ahead of both tokens gave
// decays 6e-4 off, -1e10 40% (issue #39).
template <int CHUNK> __device__ __forceinline__ void chunk_cumsum(float *la, float *A, float *EA, float *W) {
    if ((threadIdx.x >> 5) != 0) return;
    static_assert(CHUNK <= 32 * 8, "cumsum: at most 8 tokens per lane");
    constexpr int PER = (CHUNK + 31) / 32;
    const int lane = threadIdx.x & 31;
    double part[PER];
    double run = 0.0;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int t = lane * PER + u;
        const float x = t < CHUNK ? la[t] : 0.f;
        run += x < LA_MIN ? LA_MIN : x;
        part[u] = run;
    }
    double incl = run; // inclusive scan of the lanes' totals
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const double o = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += o;
    }
    double excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0.0;
    const double last = __shfl_sync(0xffffffffu, incl, 31);
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int t = lane * PER + u;
        if (t < CHUNK) {
            const double a = excl + part[u];
            const float hi = (float)a;
            A[t] = hi;
            la[t] = (float)(a - (double)hi); // LO
            EA[t] = expf(hi);
            W[t] = expf((float)(last - a)); // difference first (in double), then exp
        }
    }
}

// A_i - A_j (i >= j: the sum of la over tokens j+1 .. i, <= 0 for gates) from chunk_cumsum's
// two parts. Each float subtraction errs by at most half an ulp of its own result, and
// A_i - A_j differs from A[i] - A[j] only by LO[i] - LO[j], so the error is about 2^-24
// |A_i - A_j| plus 2^-48 |A|: exp of it is accurate to float rounding, and 0 for a
// segment holding a log_alpha <= LA_MIN.
__device__ __forceinline__ float seg_sum(const float *A, const float *LO, int i, int j) {
    return (A[i] - A[j]) + (LO[i] - LO[j]);
}

// x is neither Inf nor NaN (exponent bits not all ones; one LOP and compare, no libm).
__device__ __forceinline__ bool finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

// Forward scan of one state element over the chunks: slot c of u (STRIDE floats apart)
// holds the chunk-local state U_c and ends up holding S0^c, the state entering chunk c
// (S0^0 = s, S0^{c+1} = gam[c] S0^c + U_c). Returns the state after the last chunk.
// u and gam are separate regions of the workspace (__restrict__: the next chunk's loads
// may move above this chunk's store).
template <long long STRIDE>
__device__ __forceinline__ float state_scan(float *__restrict__ u, const float *__restrict__ gam, i64 nchunks,
                                            float s) {
    for (i64 c = 0; c < nchunks; ++c) {
        const float uc = u[c * STRIDE];
        u[c * STRIDE] = s;
        s = fmaf(gam[c], s, uc);
    }
    return s;
}

} // namespace ssdc

#endif // CG_SSD_COMMON_CUH
