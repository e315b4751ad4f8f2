// gdr_fwd.cu -- gated delta rule forward (MATH_GDN.md section 2), one specialization per
// (dk, dv, l2norm, config).
//
// Rendered by generator/kernels/gdr_fwd.lua, which defines before this text:
//   CG_DK, CG_DV, CG_L2NORM          key and value head sizes; q and k L2-normalised (1)
//   CG_P_CHUNK, CG_P_BLOCK_DV, CG_P_WARPS   chunk length, dv tile of the state and output
//                                    passes, warps per CTA
//   CG_T_Q, CG_T_K, CG_T_V, CG_T_BETA, CG_T_O   storage type of those tensors (float when not
//                                    defined, else cg_bf16 or cg_f16); g, h0, hT are float32
//   CG_P_PRECISION_{IEEE,3XTF32,MMA16}  the matrix unit (gdr_mma.cuh): float32 FMA, 3xtf32
//                                    mma (float32 inputs), m16n8k16 for Q K^T and K K^T (16-bit)
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
// backward runs them too). ieee: float32 FMA, each thread owning elements by a stride-NT
// loop; 3xtf32 / mma16: q and k (and v in prep) staged in shared memory, the chunk GEMMs
// (K K^T, W, U, W S, K^T Vn, Q K^T, Q S0, P Vn) by mma.sync over 16x16 warp tiles, the
// triangular solve in float32 FMA. Every sum has one fixed order (deterministic).
// Any dk, dv, T; any strides (64-bit offsets); 16-bit q, k, v, beta widened as read, o
// rounded once as stored; the workspace is float32.
#include "gdr_common.cuh"

namespace gdr {

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_O TO;

// out: P [C][C], G, 1/|q|, 1/|k| [C]; the mma precisions also Q, K [C][LDK] and (mma16)
// their raw 16-bit copies.
constexpr int OUT_P = 0, OUT_G = C * C, OUT_RQ = OUT_G + C, OUT_RK = OUT_RQ + C, OUT_Q = OUT_RK + C,
              OUT_K = OUT_Q + KT_FLOATS, OUT_Q16 = OUT_K + KT_FLOATS, OUT_K16 = OUT_Q16 + KH_FLOATS,
              OUT_FLOATS = OUT_K16 + KH_FLOATS;

// The out pass on the matrix unit, Q and K staged, after P (qk_gated_mma): per 16x16 tile
// of the C x BV output diag(gam / |q|) Q S0 + P Vn.
template <class F>
__device__ __forceinline__ void out_o_mma(const float *sm, const float *hs, const float *vn, i64 j0, int len, F store) {
    const float *sP = sm + OUT_P, *sG = sm + OUT_G, *sRq = sm + OUT_RQ, *sQ = sm + OUT_Q;
    gemm_tiles<C, BV, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, DKP, [&](int m, int k) { return sQ[m * LDK + k]; },
                [&](int k, int n) { return k < DK && j0 + n < DV ? hs[k * DV + j0 + n] : 0.f; });
            ssdc::tile_foreach(acc, [&](int r, int, float &x) { x *= expf(sG[m0 + r]) * sRq[m0 + r]; });
            mma_tile(
                acc, m0, n0, C, [&](int m, int k) { return sP[m * C + k]; },
                [&](int k, int n) { return j0 + n < DV ? vn[k * DV + j0 + n] : 0.f; });
        },
        [&](int r, int c, float x) {
            if (r < len && j0 + c < DV) store(r, j0 + c, x);
        });
}
#ifdef CG_SMEM_OUT // what generator/kernels/gdr_fwd.lua launches with (prep, state: gdr_common.cuh)
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
    store_state(p.hT, rw, sm + ST_S);
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
    if constexpr (MMA) {
        stage<C, DKP, LDK, LDH, NT, MMA16>(sm + OUT_Q, reinterpret_cast<TQ *>(sm + OUT_Q16), p.q, w.b, ch.t0, w.qh, 0,
                                           len, DK);
        stage<C, DKP, LDK, LDH, NT, MMA16>(sm + OUT_K, reinterpret_cast<TK *>(sm + OUT_K16), p.k, w.b, ch.t0, w.qh, 0,
                                           len, DK);
    }
    __syncthreads();
    if constexpr (MMA)
        qk_gated_mma(sP, sm + OUT_Q, sm + OUT_K, reinterpret_cast<const TQ *>(sm + OUT_Q16),
                     reinterpret_cast<const TK *>(sm + OUT_K16), sG, sRq, sRk, len);
    else
        tril_dots<DK>(
            sP, len,
            [&](int i, int j, int x) {
                return ld4<TQ>(p.q, w.b, ch.t0 + i, w.qh, x) * ld4<TK>(p.k, w.b, ch.t0 + j, w.qh, x);
            },
            [&](int i, int j, float d) { return d * sRq[i] * sRk[j] * expf(sG[i] - sG[j]); });
    __syncthreads();
    const float *hs = p.hs + w.base * DK * DV;
    const float *vn = p.u + w.base * C * DV;
    const float scale = (float)p.scale;
    TO *o = reinterpret_cast<TO *>(p.o.p) + w.b * p.o.s0 + ch.t0 * p.o.s1 + w.h * p.o.s2;
    if constexpr (MMA) {
        out_o_mma(sm, hs, vn, j0, len,
                  [&](int r, i64 j, float a) { o[r * p.o.s1 + j * p.o.s3] = cg_round<TO>(scale * a); });
        return;
    }
    for (int e = tid; e < C * BV; e += NT) {
        const int r = e / BV, c = e % BV;
        const i64 j = j0 + c;
        if (r >= len || j >= DV) continue;
        float a = 0.f;
#pragma unroll 4
        for (int i = 0; i < DK; ++i) a += ld4<TQ>(p.q, w.b, ch.t0 + r, w.qh, i) * hs[i * DV + j];
        a *= expf(sG[r]) * sRq[r];
        for (int m = 0; m <= r; ++m) a += sP[r * C + m] * vn[m * DV + j];
        o[r * p.o.s1 + j * p.o.s3] = cg_round<TO>(scale * a);
    }
}
