// gdr_fwd.cu -- gated delta rule forward (MATH_GDN.md section 2), one specialization per
// (dk, dv, l2norm, config).
//
// Rendered by generator/kernels/gdr_fwd.lua, which defines before this text:
//   CG_DK, CG_DV, CG_L2NORM          key and value head sizes; q and k L2-normalised (1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS   chunk length, dv tile of the state and output
//                                    passes, warps per CTA
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_BETA, CG_T_O   storage type of those tensors (float when not
//                                    defined, else cg_bf16 or cg_f16); g, h0, hT are float32
//   CG_SMEM_PREP, CG_SMEM_STATE, CG_SMEM_OUT   the Lua side's shared memory (checked below)
//   CG_VARLEN                        cu_seqlens given (docs/varlen.md)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Per (sequence, value head h; q/k head h / (H / G)), chunks of C tokens, local rows r:
//   G_r = g_1 + ... + g_r (chunk-local), gam_r = exp(G_r); kn, qn the rows (normalised when
//   CG_L2NORM: x / sqrt(|x|^2 + 1e-6));
//   L_ij = beta_i (kn_i . kn_j) exp(G_i - G_j) for i > j;  A = (I + L)^-1 (forward substitution)
//   W = A diag(beta gam) Kn,  U = A diag(beta) V
//   per chunk in order: h[c] = S;  Vn = U - W S;  S = gamC S + sum_r exp(G_C' - G_r) kn_r Vn_r^T
//   O = scale [diag(gam) Qn S0 + ((Qn Kn^T) o Dm) Vn],  Dm_ij = exp(G_i - G_j) for j <= i.
// Launches (one stream, in order): prep per (b, h, chunk slot); state per (row, h, dv tile);
// out per (b, h, chunk slot, dv tile). Prep and the state pass are gdr_common.cuh's (the
// backward runs them too). Plain float32 FMA throughout (no mma yet); each thread
// owns elements by a stride-NT loop, so every sum has one fixed order (deterministic).
// Any dk, dv, T; any strides (64-bit offsets); 16-bit q, k, v, beta widened as read, o
// rounded once as stored; the workspace is float32.
#include "gdr_common.cuh"

namespace gdr {

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_O TO;

// out: P [C][C], G, 1/|q|, 1/|k| [C].
constexpr int OUT_P = 0, OUT_G = C * C, OUT_RQ = OUT_G + C, OUT_RK = OUT_RQ + C, OUT_FLOATS = OUT_RK + C;
#ifdef CG_SMEM_PREP // what generator/kernels/gdr_fwd.lua launches with
static_assert(4 * PREP_FLOATS == CG_SMEM_PREP, "gdr_fwd.lua smem_prep() disagrees with the layout here");
static_assert(4 * ST_FLOATS == CG_SMEM_STATE, "gdr_fwd.lua smem_state() disagrees with the layout here");
static_assert(4 * OUT_FLOATS == CG_SMEM_OUT, "gdr_fwd.lua smem_out() disagrees with the layout here");
#endif

} // namespace gdr

// Per (b, h, chunk slot): gc, rs, W and U of the chunk.
GDR_ENTRY cg_gdr_fwd_prep(cg_gdr_fwd_params p) {
    CG_DYN_SMEM(float, sm);
    gdr::prep(p, sm, blockIdx.x, nullptr, nullptr, nullptr);
}

// Per (row, h, dv tile): the chunks in order from h0; the entering states into hs, Vn over
// U, hT at the end.
GDR_ENTRY cg_gdr_fwd_state(cg_gdr_fwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const Rows rw = rows_of(p, blockIdx.x);
    states_fwd(p, sm, rw);
    if (p.hT.p)
        for (int e = (int)threadIdx.x; e < DK * BV; e += NT) {
            const int i = e / BV, c = e % BV;
            const i64 j = rw.j0 + c;
            if (j < DV) p.hT.p[rw.n * p.hT.s0 + rw.h * p.hT.s1 + i * p.hT.s2 + j * p.hT.s3] = sm[ST_S + e];
        }
}

// Per (b, h, chunk slot, dv tile): O = scale [diag(gam) Qn S0 + ((Qn Kn^T) o Dm) Vn].
GDR_ENTRY cg_gdr_fwd_out(cg_gdr_fwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const i64 tile = umod(blockIdx.x, p.ndvt);
    const Where w = where_of(p, udiv(blockIdx.x, p.ndvt));
    const Chunk ch = chunk_at(p, w.slot);
    if (ch.len == 0) return;
    const int tid = (int)threadIdx.x, len = ch.len;
    const i64 j0 = tile * BV;
    float *sP = sm + OUT_P, *sG = sm + OUT_G, *sRq = sm + OUT_RQ, *sRk = sm + OUT_RK;
    for (int r = tid; r < C; r += NT) {
        sG[r] = p.gc[w.base * C + r];
        sRq[r] = p.rs[(w.base * C + r) * 2];
        sRk[r] = p.rs[(w.base * C + r) * 2 + 1];
    }
    __syncthreads();
    for (int e = tid; e < C * C; e += NT) {
        const int i = e / C, j = e % C;
        float v = 0.f;
        if (i < len && j <= i) {
            float d = 0.f;
            #pragma unroll 4
            for (int x = 0; x < DK; ++x) d += ld4<TQ>(p.q, w.b, ch.t0 + i, w.qh, x) * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
            v = d * sRq[i] * sRk[j] * expf(sG[i] - sG[j]);
        }
        sP[e] = v;
    }
    __syncthreads();
    const float *hs = p.hs + w.base * DK * DV;
    const float *vn = p.u + w.base * C * DV;
    const float scale = (float)p.scale;
    for (int e = tid; e < C * BV; e += NT) {
        const int r = e / BV, c = e % BV;
        const i64 j = j0 + c;
        if (r >= len || j >= DV) continue;
        float a = 0.f;
        #pragma unroll 4
        for (int i = 0; i < DK; ++i) a += ld4<TQ>(p.q, w.b, ch.t0 + r, w.qh, i) * hs[i * DV + j];
        a *= expf(sG[r]) * sRq[r];
        for (int m = 0; m <= r; ++m) a += sP[r * C + m] * vn[m * DV + j];
        reinterpret_cast<TO *>(p.o.p)[w.b * p.o.s0 + (ch.t0 + r) * p.o.s1 + w.h * p.o.s2 + j * p.o.s3] =
            cg_round<TO>(scale * a);
    }
}
