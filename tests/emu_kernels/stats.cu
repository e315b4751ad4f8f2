#include "cg_device.cuh"
// stats.cu -- access patterns with known costs for the emulator's statistics
// (tests/test_emu.c, model in docs/emulator.md). The test finds each access by the
// `// @name` mark on its line; one launch per stride. Dynamic shared memory: 8192 floats.

struct emu_stats_params {
    const float *x;
    float *out;
    int sstride, gstride; // shared / global stride in floats
};

extern "C" __global__ void emu_stats_access(emu_stats_params p) {
    extern __shared__ __align__(16) float s[];
    const int t = threadIdx.x;
    for (int i = t; i < 8192; i += blockDim.x) s[i] = (float)i; // @fill
    __syncthreads();
    float v = s[t * p.sstride];                                         // @sstride
    const float4 q = reinterpret_cast<const float4 *>(s)[t];            // @f4
    const float4 qs = reinterpret_cast<const float4 *>(s)[(t * p.sstride) & 511]; // @f4s
    const float2 r = reinterpret_cast<const float2 *>(s)[t];            // @f2
    const float2 r2 = reinterpret_cast<const float2 *>(s + 4096)[2 * t]; // @f2s2
    const float g = p.x[(long long)t * p.gstride];                      // @gstride
    const float4 g4 = reinterpret_cast<const float4 *>(p.x)[t];         // @g4
    p.out[blockIdx.x * blockDim.x + t] = v + q.x + q.w + qs.y + r.y + r2.x + r2.y + g + g4.z; // @gout
}

// 16-byte cp.async of contiguous rows: 16 sectors and 4 shared wavefronts per warp.
extern "C" __global__ void emu_stats_cp16(emu_stats_params p) {
    extern __shared__ __align__(16) float s[];
    const int t = threadIdx.x;
    cg_cp_async_cg16(&s[4 * t], &p.x[4 * t]); // @cp16
    cg_cp_async_wait_all();
    __syncthreads();
    p.out[t] = s[4 * ((t + 1) % blockDim.x)];
}
