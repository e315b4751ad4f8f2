// step_common.cuh -- what the decode-step kernels share (ssd_step.cu, sscan_step.cu,
// gdr_step.cu, issue #36): their compile-time sizes, the slot indices and the loads and
// stores of storage types.
#ifndef CG_STEP_COMMON_CUH
#define CG_STEP_COMMON_CUH

#include "cg_device.cuh"
#include "cg_kernel_params.h"

namespace stepc {

typedef cg_i64 i64;

// A kernel's compile-time sizes, checked once: the state row a thread keeps in registers
// (CG_DK, CG_N: 1..256) and its threads per CTA (CG_P_BLOCK_*: 1..1024).
template <int R> __host__ __device__ constexpr int row_size() {
    static_assert(R >= 1 && R <= 256, "state row (dk, N): 1..256");
    return R;
}
template <int B> __host__ __device__ constexpr int block_size() {
    static_assert(B >= 1 && B <= 1024, "threads per CTA: 1..1024");
    return B;
}

// Element (a, c) of an index tensor: int32, or int64 when its s3 is 1 (runtime/launch.c).
__device__ __forceinline__ i64 index_at(const cg_ktensor &t, i64 a, i64 c) {
    const i64 off = a * t.s0 + c * t.s1;
    return t.s3 ? reinterpret_cast<const long long *>(t.p)[off] : (i64) reinterpret_cast<const int *>(t.p)[off];
}

// The slot an index names, or -1 (padding, no write; an index out of range, which the
// host validation refuses but device indices are not read by it, is taken as -1 too).
__device__ __forceinline__ i64 slot(const cg_ktensor &t, i64 a, i64 c, i64 S) {
    const i64 x = index_at(t, a, c);
    return x >= 0 && x < S ? x : -1;
}

// Element off of a tensor of storage type T, as float; x stored rounded once.
template <class T> __device__ __forceinline__ float ld(const cg_ktensor &t, i64 off) {
    return cg_f32(reinterpret_cast<const T *>(t.p)[off]);
}
template <class T> __device__ __forceinline__ void st(const cg_ktensor &t, i64 off, float x) {
    reinterpret_cast<T *>(t.p)[off] = cg_round<T>(x);
}

// x, opaque to the compiler (no instruction): what is derived from it (an address) is
// computed where it is used, not ahead of a loop and kept in registers.
__device__ __forceinline__ i64 opaque(i64 x) {
#ifdef CG_EMULATE
    asm volatile("" : "+r"(x));
#else
    asm volatile("" : "+l"(x));
#endif
    return x;
}

// N elements off, off + stride, ... of a tensor of storage type T: as floats into x, or
// from x rounded once. The offset steps one stride at a time through opaque(): in a loop
// over tokens the compiler would otherwise hoist N 64-bit addresses beside a thread's N
// floats of state (gdr_step at dk 128: 254 registers and spills, 188 without).
template <class T, int N>
__device__ __forceinline__ void ld_strided(const cg_ktensor &t, i64 off, i64 stride, float *x) {
#pragma unroll
    for (int i = 0; i < N; i++, off = opaque(off + stride)) x[i] = ld<T>(t, off);
}
template <class T, int N>
__device__ __forceinline__ void st_strided(const cg_ktensor &t, i64 off, i64 stride, const float *x) {
#pragma unroll
    for (int i = 0; i < N; i++, off = opaque(off + stride)) st<T>(t, off, x[i]);
}

// Token t's rows of q and k (entry b, group g: DK elements each, storage types TQ, TK)
// staged as floats into qs and ks by the CTA's BLOCK threads, between two barriers (the
// first: the previous token's rows read by every thread).
template <class TQ, class TK, int DK, int BLOCK>
__device__ __forceinline__ void stage_qk(const cg_ktensor &q, const cg_ktensor &k, i64 b, i64 t, i64 g, float *qs,
                                         float *ks) {
    __syncthreads();
    for (int i = threadIdx.x; i < DK; i += BLOCK) {
        qs[i] = ld<TQ>(q, b * q.s0 + t * q.s1 + g * q.s2 + i);
        ks[i] = ld<TK>(k, b * k.s0 + t * k.s1 + g * k.s2 + i);
    }
    __syncthreads();
}

// Element i of a row staged in shared memory, read where it is used: a volatile read,
// which neither the compiler nor ptxas merges with another or hoists. In a fully unrolled
// pass over a thread's state column ptxas would otherwise load the whole staged rows
// ahead into registers beside the state (gdr_step at dk 128: 255 registers and spills;
// 215 and none so).
__device__ __forceinline__ float staged(const float *row, int i) {
    return reinterpret_cast<const volatile float *>(row)[i];
}

} // namespace stepc

#endif // CG_STEP_COMMON_CUH
