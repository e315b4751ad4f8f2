// ssd_step.cu -- the SSD decode step (issue #36), one specialization per (dk, config).
//
// Rendered by generator/kernels/ssd_step.lua, which defines before this text:
//   CG_DK                           head dimension of q and k (1..136: ssd_step.lua)
//   CG_P_BLOCK_DV                   threads per CTA: one column of the state each
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_CACHE, CG_T_O   storage type of each (float when not
//                                   defined, else cg_bf16 or cg_f16)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Per batch entry b (slot src = idx[b]; src < 0 or >= S: padding, o = 0, no state read
// or written), head h, column j, with the state column s[i] = cache[src, h, i, j] kept in
// registers (float32):
//   for each token t:  s[i] = exp(la_t) s[i] + k_t[i] v_t[j];  o_t[j] = sum_i q_t[i] s[i];
//                      the column stored (rounded once) to slot dst[b, t] when dst is
//                      given and that is a slot, else to src after the last token.
// The CTA stages q_t and k_t (dk floats each) in shared memory per token. Validation
// refuses calls whose slots would race (two writes to a slot, a slot read by one entry
// and written by another); device indices are not read by it, so an index out of range
// is taken as padding (src) or as no write (dst) here.
#include "step_common.cuh" // cg_device.cuh, cg_kernel_params.h; sizes, slots, ld, st, stage_qk

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined

namespace ssd_step {
using namespace stepc;
constexpr int DK = row_size<CG_DK>(), BDV = block_size<CG_P_BLOCK_DV>();
} // namespace ssd_step

extern "C" __global__ void __launch_bounds__(CG_P_BLOCK_DV, 1) cg_ssd_step(cg_ssd_step_params p) {
    using namespace ssd_step;
    CG_DYN_SMEM(float, sm);
    float *qs = sm, *ks = sm + DK;
    const i64 nblk = (p.dv + BDV - 1) / BDV;
    const i64 blk = blockIdx.x % nblk, bh = blockIdx.x / nblk, b = bh / p.H, h = bh - b * p.H;
    const i64 g = h / (p.H / p.G), j = blk * BDV + threadIdx.x;
    const bool col = j < p.dv;
    const i64 src = slot(p.idx, b, 0, p.S);
    if (src < 0) { // padding: zeros, nothing read or written
        for (i64 t = 0; col && t < p.T; t++) st<CG_T_O>(p.o, b * p.o.s0 + t * p.o.s1 + h * p.o.s2 + j, 0.f);
        return;
    }
    float s[DK];
    const i64 cs = src * p.cache.s0 + h * p.cache.s1 + j;
#pragma unroll
    for (int i = 0; i < DK; i++) s[i] = col ? ld<CG_T_CACHE>(p.cache, cs + i * p.cache.s2) : 0.f;
    for (i64 t = 0; t < p.T; t++) {
        stage_qk<CG_T_Q, CG_T_K, DK, BDV>(p.q, p.k, b, t, g, qs, ks);
        const float a = expf(reinterpret_cast<const float *>(p.la.p)[b * p.la.s0 + t * p.la.s1 + h * p.la.s2]);
        const float vj = col ? ld<CG_T_V>(p.v, b * p.v.s0 + t * p.v.s1 + h * p.v.s2 + j) : 0.f;
        float o = 0.f;
#pragma unroll
        for (int i = 0; i < DK; i++) {
            s[i] = a * s[i] + ks[i] * vj;
            o += qs[i] * s[i];
        }
        if (!col) continue;
        st<CG_T_O>(p.o, b * p.o.s0 + t * p.o.s1 + h * p.o.s2 + j, o);
        const i64 dst = p.dst.p ? slot(p.dst, b, t, p.S) : (t == p.T - 1 ? src : -1);
        if (dst >= 0) {
            const i64 ds = dst * p.cache.s0 + h * p.cache.s1 + j;
#pragma unroll
            for (int i = 0; i < DK; i++) st<CG_T_CACHE>(p.cache, ds + i * p.cache.s2, s[i]);
        }
    }
}
