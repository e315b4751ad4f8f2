// sscan_step.cu -- the selective-scan decode step (issue #36; mamba's
// selective_state_update), one specialization per (N, config).
//
// Rendered by generator/kernels/sscan_step.lua, which defines before this text:
//   CG_N                            state size (1..64: sscan_step.lua)
//   CG_P_BLOCK_D                    threads per CTA: one channel each
//   CG_T_X, CG_T_DELTA, CG_T_B, CG_T_C, CG_T_Z, CG_T_CACHE, CG_T_Y   storage type of
//                                   each (float when not defined, else cg_bf16 or cg_f16)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Per batch entry b (slot src = idx[b]; src < 0 or >= S: padding, y = 0, no state read
// or written) and channel d of group g = d / (D / G), with h[n] = cache[src, d, n] in
// registers (float32), for each token t:
//   dt = delta (+ bias_d), softplus(dt) if set;  h[n] = exp(dt A[d, n]) h[n] + dt B_t[g, n] x_t
//   y_t = sum_n C_t[g, n] h[n] + D_d x_t;  y_t *= silu(z_t) if z is given;
//   h stored (rounded once) to slot dst[b, t] when dst is given and that is a slot, else to
//   src after the last token.
#include "step_common.cuh" // cg_device.cuh, cg_kernel_params.h; sizes, slot indices, ld, st

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined

namespace sscan_step {
using namespace stepc;
constexpr int N = row_size<CG_N>(), BD = block_size<CG_P_BLOCK_D>();

__device__ __forceinline__ float f32_at(const cg_ktensor &t, i64 off) {
    return reinterpret_cast<const float *>(t.p)[off];
}

} // namespace sscan_step

extern "C" __global__ void __launch_bounds__(CG_P_BLOCK_D, 1) cg_sscan_step(cg_sscan_step_params p) {
    using namespace sscan_step;
    const i64 nblk = (p.nd + BD - 1) / BD;
    const i64 b = blockIdx.x / nblk, d = blockIdx.x % nblk * BD + threadIdx.x;
    if (d >= p.nd) return;
    const i64 src = slot(p.idx, b, 0, p.S);
    if (src < 0) { // padding: zeros, nothing read or written
        for (i64 t = 0; t < p.L; t++) st<CG_T_Y>(p.y, b * p.y.s0 + t * p.y.s1 + d * p.y.s2, 0.f);
        return;
    }
    const i64 g = d / (p.nd / p.G);
    const float Dd = p.Dv.p ? f32_at(p.Dv, d * p.Dv.s0) : 0.f, bias = p.dbias.p ? f32_at(p.dbias, d * p.dbias.s0) : 0.f;
    float h[N], A[N];
    const i64 cs = src * p.cache.s0 + d * p.cache.s1;
#pragma unroll
    for (int n = 0; n < N; n++) {
        h[n] = ld<CG_T_CACHE>(p.cache, cs + n * p.cache.s2);
        A[n] = f32_at(p.A, d * p.A.s0 + n * p.A.s1);
    }
    for (i64 t = 0; t < p.L; t++) {
        float dt = ld<CG_T_DELTA>(p.delta, b * p.delta.s0 + t * p.delta.s1 + d * p.delta.s2) + bias;
        if (p.softplus) dt = dt <= 20.f ? log1pf(expf(dt)) : dt;
        const float x = ld<CG_T_X>(p.x, b * p.x.s0 + t * p.x.s1 + d * p.x.s2), dtx = dt * x;
        const i64 bo = b * p.Bm.s0 + t * p.Bm.s1 + g * p.Bm.s2, co = b * p.Cm.s0 + t * p.Cm.s1 + g * p.Cm.s2;
        float y = 0.f;
#pragma unroll
        for (int n = 0; n < N; n++) {
            h[n] = expf(dt * A[n]) * h[n] + dtx * ld<CG_T_B>(p.Bm, bo + n * p.Bm.s3);
            y += ld<CG_T_C>(p.Cm, co + n * p.Cm.s3) * h[n];
        }
        y += Dd * x;
        if (p.z.p) {
            const float z = ld<CG_T_Z>(p.z, b * p.z.s0 + t * p.z.s1 + d * p.z.s2);
            y *= z / (1.f + expf(-z));
        }
        st<CG_T_Y>(p.y, b * p.y.s0 + t * p.y.s1 + d * p.y.s2, y);
        const i64 dst = p.dst.p ? slot(p.dst, b, t, p.S) : (t == p.L - 1 ? src : -1);
        if (dst >= 0) {
            const i64 ds = dst * p.cache.s0 + d * p.cache.s1;
#pragma unroll
            for (int n = 0; n < N; n++) st<CG_T_CACHE>(p.cache, ds + n * p.cache.s2, h[n]);
        }
    }
}
