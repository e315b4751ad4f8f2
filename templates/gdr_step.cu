// gdr_step.cu -- the gated delta rule's decode step (issue #36; MATH_GDN.md section 5.3),
// one specialization per (dk, use_qk_l2norm, config).
//
// Rendered by generator/kernels/gdr_step.lua, which defines before this text:
//   CG_DK                           head dimension of q and k (dk x cols <= 136, 128 with
//                                   two columns: gdr_step.lua)
//   CG_L2NORM                       1: q and k L2-normalised (use_qk_l2norm)
//   CG_P_BLOCK_DV                   threads per CTA
//   CG_P_COLS                       columns of the state per thread: j, j + block_dv, ...
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_BETA, CG_T_CACHE, CG_T_O   storage type of each (float
//                                   when not defined, else cg_bf16 or cg_f16)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Per batch entry b (slot src = idx[b]; src < 0 or >= S: padding, o = 0, no state read
// or written), value head h of q/k head h / (H / G), column j, with the state column
// s[i] = cache[src, h, i, j] kept in registers (float32), for each token t (gdr_fwd's
// recurrence, docs/gdr.md):
//   rk = 1 / |k_t|, rq = scale / |q_t| with the L2 norm (|x| = sqrt(x.x + 1e-6)), else
//   rk = 1, rq = scale;  a = exp(g_t);
//   p = sum_i k_t[i] s[i];  u = beta_t (v_t[j] - a rk p);  s[i] = a s[i] + rk k_t[i] u;
//   o_t[j] = rq sum_i q_t[i] s[i];  the column stored (rounded once) to slot dst[b, t] when
//   dst is given and that is a slot, else to src after the last token.
// The CTA stages q_t and k_t (dk floats each) in shared memory per token; every thread
// reads them in two passes over its columns (broadcast reads, step_common.cuh's staged):
// the first sums k.s, q.s per column and q.k, |q|^2, |k|^2 (no reduction across threads,
// no further barrier), the second updates the columns; o_t[j] = rq (a q.s + rk u q.k)
// with q.s of the column before the token.
// Validation refuses calls whose slots would race (two writes to a slot, a slot read by
// one entry and written by another); device indices are not read by it, so an index out
// of range is taken as padding (src) or as no write (dst) here.
#include "step_common.cuh" // cg_device.cuh, cg_kernel_params.h; sizes, slots, ld, st, stage_qk

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined

namespace gdr_step {
using namespace stepc;
constexpr int DK = row_size<CG_DK>(), BDV = block_size<CG_P_BLOCK_DV>(), NC = CG_P_COLS;
static_assert(NC >= 1 && NC <= 4, "cols: 1..4");
} // namespace gdr_step

extern "C" __global__ void __launch_bounds__(CG_P_BLOCK_DV, 1) cg_gdr_step(cg_gdr_step_params p) {
    using namespace gdr_step;
    CG_DYN_SMEM(float, sm);
    float *qs = sm, *ks = sm + DK;
    const i64 nblk = (p.dv + BDV * NC - 1) / (BDV * NC);
    const i64 blk = blockIdx.x % nblk, bh = blockIdx.x / nblk, b = bh / p.H, h = bh - b * p.H;
    const i64 g = h / (p.H / p.G), j0 = blk * BDV * NC + threadIdx.x; // column c: j0 + c BDV
    const i64 src = slot(p.idx, b, 0, p.S);
    if (src < 0) { // padding: zeros, nothing read or written
        for (i64 t = 0; t < p.T; t++)
            for (int c = 0; c < NC; c++)
                if (j0 + c * BDV < p.dv) st<CG_T_O>(p.o, b * p.o.s0 + t * p.o.s1 + h * p.o.s2 + j0 + c * BDV, 0.f);
        return;
    }
    float s[NC][DK];
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (j0 + c * BDV < p.dv) {
            ld_strided<CG_T_CACHE, DK>(p.cache, src * p.cache.s0 + h * p.cache.s1 + j0 + c * BDV, p.cache.s2, s[c]);
        } else {
#pragma unroll
            for (int i = 0; i < DK; i++) s[c][i] = 0.f;
        }
    }
    const float scale = (float)p.scale;
    for (i64 t = 0; t < p.T; t++) {
        stage_qk<CG_T_Q, CG_T_K, DK, BDV>(p.q, p.k, b, t, g, qs, ks);
        const i64 gh = b * p.g.s0 + t * p.g.s1 + h * p.g.s2;
        const float a = expf(reinterpret_cast<const float *>(p.g.p)[gh]);
        const float beta = ld<CG_T_BETA>(p.beta, b * p.beta.s0 + t * p.beta.s1 + h * p.beta.s2);
        const i64 dst = p.dst.p ? slot(p.dst, b, t, p.S) : (t == p.T - 1 ? src : -1);
        // pass 1 over the rows: k.s and q.s of each column before the token; q.k, q.q, k.k
        float pj[NC], oq[NC], u[NC], qk = 0.f, qq = 0.f, kk = 0.f;
#pragma unroll
        for (int c = 0; c < NC; c++) pj[c] = oq[c] = 0.f;
#pragma unroll
        for (int i = 0; i < DK; i++) {
            const float ki = staged(ks, i), qi = staged(qs, i);
            qk += qi * ki;
#if CG_L2NORM
            qq += qi * qi;
            kk += ki * ki;
#endif
#pragma unroll
            for (int c = 0; c < NC; c++) {
                pj[c] += ki * s[c][i];
                oq[c] += qi * s[c][i];
            }
        }
        const float rq = CG_L2NORM ? scale / sqrtf(qq + 1e-6f) : scale, rk = CG_L2NORM ? 1.f / sqrtf(kk + 1e-6f) : 1.f;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const i64 j = j0 + c * BDV;
            const float vj = j < p.dv ? ld<CG_T_V>(p.v, b * p.v.s0 + t * p.v.s1 + h * p.v.s2 + j) : 0.f;
            u[c] = rk * beta * (vj - a * rk * pj[c]); // rk u: the update along the raw k
        }
#pragma unroll
        for (int i = 0; i < DK; i++) {
            const float ki = staged(ks, i);
#pragma unroll
            for (int c = 0; c < NC; c++) s[c][i] = a * s[c][i] + ki * u[c];
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const i64 j = j0 + c * BDV;
            if (j >= p.dv) continue;
            st<CG_T_O>(p.o, b * p.o.s0 + t * p.o.s1 + h * p.o.s2 + j, rq * (a * oq[c] + u[c] * qk)); // q.s after
            if (dst >= 0) st_strided<CG_T_CACHE, DK>(p.cache, dst * p.cache.s0 + h * p.cache.s1 + j, p.cache.s2, s[c]);
        }
    }
}
