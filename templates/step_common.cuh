// step_common.cuh -- what the decode-step kernels share (ssd_step.cu, sscan_step.cu,
// issue #36): the slot indices and the loads and stores of storage types.
#ifndef CG_STEP_COMMON_CUH
#define CG_STEP_COMMON_CUH

#include "cg_device.cuh"
#include "cg_kernel_params.h"

namespace stepc {

typedef cg_i64 i64;

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

} // namespace stepc

#endif // CG_STEP_COMMON_CUH
