// gdr_bwd.cu -- gated delta rule backward (MATH_GDN.md section 3), one specialization per
// (dk, dv, l2norm, config); rendered by generator/kernels/gdr_bwd.lua (defines as in
// gdr_common.cuh; CG_T_DOUT, CG_T_DQ, CG_T_DK, CG_T_DV, CG_T_DBETA for 16-bit storage;
// CG_SMEM_PREP, CG_SMEM_STATE, CG_SMEM_GRADS the Lua side's shared memory).
//
// Launches, in order (workspace: cg_gdr_bwd_params):
//   prep    per (b, h, slot): gc, rs, W, U as the forward, and A, kk, pm;
//   state   per (row, h, dv tile): the states forward (hs, Vn over U); then from dS = dhT,
//           per chunk last to first: dhs = dS (the gradient of the state at the chunk's
//           end), dVn = s ((Qn Kn^T) o Dm)^T dO + Kt dS, dS = gamC dS + s (diag(gam) Qn)^T dO
//           - W^T dVn (Kt rows exp(G_C' - G_r) kn_r); dh0 = dS;
//   grads   per (b, h, slot), S0 = hs, dSC = dhs:
//             dP = s (dO Vn^T) o Dm;  dQn = s diag(gam) dO S0^T + dP Kn;
//             dKn = dP^T Qn + diag(exp(G_C' - G)) Vn dSC^T;  dW = -dVn S0^T (over W)
//             dG_r = qn_r . dQn_r - kn_r . dKn_r;  dG_C' += gamC <S0, dSC> + sum_r kn_r . dK_state_r
//           then the WY backward: dKbg = A^T dW, dVb = A^T dVn, dKn += diag(beta gam) dKbg,
//           dbeta = rowsum(dKbg o gam Kn) + rowsum(dVb o V), dG += rowsum(dKbg o Kbg),
//           dv = diag(beta) dVb, dAmat = dW Kbg^T + dVn Vb^T, dL = strictly_lower(-A^T dAmat
//           A^T), dLg = dL o Gam, dbeta_i += sum_j dLg_ij kk_ij, dKn += diag(beta) dLg Kn +
//           dLg^T diag(beta) Kn, dG_i += sum_j dL_ij L_ij - sum_j dL_ji L_ji;
//           dg = the chunk-local reverse cumsum of dG; dQn, dKn to the workspace;
//   reduce  per (b, q/k head, slot): dq, dk = the group's value heads' dQn, dKn summed in
//           head order, through the L2 norm's backward rstd (dy - (dy . y) y).
// Every sum has one fixed order (deterministic). precision (gdr_mma.cuh): ieee, float32
// FMA throughout; 3xtf32 / mma16, the products of prep and of the state pass (both
// directions: W S, K^T Vn, Pm^T dO, K dS, Q^T dO, W^T dVn) by mma.sync from staged q, k,
// dO tiles; the grads pass's products too (dP, dQn, dKn, dW, dAmat, M, dL, the Gram term's
// dKn, the WY backward's A^T dW and A^T dVn); the reduce pass is float32 FMA in every
// precision.
#define CG_GDR_BWD 1 // prep also stores pm (gdr_common.cuh)
#include "gdr_common.cuh"

namespace gdr {

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_DOUT TDO;
typedef CG_T_DQ TDQ;
typedef CG_T_DK TDK;
typedef CG_T_DV TDV;
typedef CG_T_DBETA TDB;

// grads: A, M (dP, then dAmat, then dLg), T1, dL [C][C]; per row G, beta, 1/|q|, 1/|k|, dG,
// dbeta, and two spare; NT partial sums; the mma precisions' per-row partial sums of the
// WY backward, [C][DKP / 16].
constexpr int GR_A = 0, GR_M = C * C, GR_T = 2 * C * C, GR_DL = 3 * C * C, GR_G = 4 * C * C, GR_B = GR_G + C,
              GR_RQ = GR_B + C, GR_RK = GR_RQ + C, GR_DG = GR_RK + C, GR_DB = GR_DG + C, GR_RED = GR_DB + 3 * C,
              GR_RS = GR_RED + NT, GR_FLOATS = GR_RS + (MMA ? C * (DKP / 16) : 0);
// The state pass beyond states_fwd's layout (ST_FLOATS), mma precisions: Q [C][LDK] and a
// dO tile [C][BV + 4] of the chunk (K: states_fwd's ST_K).
constexpr int LDO = BV + 4;
constexpr int RS_Q = ST_FLOATS, RS_DO = RS_Q + KT_FLOATS, RS_FLOATS = RS_DO + (MMA ? C * LDO : 0);
#ifdef CG_SMEM_GRADS // what generator/kernels/gdr_bwd.lua launches with (prep, state: gdr_common.cuh)
static_assert(4 * GR_FLOATS == CG_SMEM_GRADS, "gdr_bwd.lua smem_grads() disagrees with the layout here");
static_assert(4 * RS_FLOATS == CG_SMEM_RSTATE, "gdr_bwd.lua smem_rstate() disagrees with the layout here");
#endif

// The grads pass's first products on the matrix unit (operands read from global memory and
// the workspace: dv may be any size): dP = s (dO Vn^T) o Dm into GR_M ...
template <class P>
__device__ __forceinline__ void grads_dp_mma(const P &p, float *sm, const Where &w, i64 t0, int len, const float *Vn,
                                             float s) {
    constexpr int DVP = (DV + 7) / 8 * 8;
    float *sM = sm + GR_M;
    const float *sG = sm + GR_G;
    gemm_tiles<C, C, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, DVP,
                [&](int r, int j) { return r < len && j < DV ? ld4<TDO>(p.dout, w.b, t0 + r, w.h, j) : 0.f; },
                [&](int j, int m) { return j < DV ? Vn[m * DV + j] : 0.f; });
        },
        [&](int r, int m, float d) { sM[r * C + m] = r < len && m <= r ? s * expf(sG[r] - sG[m]) * d : 0.f; });
}
// ... then per 16x16 tile of [C][DK]: dQn = s diag(gam) dO S0^T + dP diag(1/|k|) K, dKn = dP^T
// diag(1/|q|) Q + diag(exp(G_C' - G)) Vn dSC^T, dW = -dVn S0^T (to the workspace); returns
// this thread's part of the last row's dG terms, sum_r kn_r . dK_state_r.
template <class P>
__device__ __forceinline__ float grads_dqk_mma(const P &p, float *sm, const Where &w, i64 t0, int len, const float *S0,
                                               const float *dSC, const float *Vn, const float *dVn, float s, float gl) {
    constexpr int DVP = (DV + 7) / 8 * 8;
    const float *sM = sm + GR_M, *sG = sm + GR_G, *sRq = sm + GR_RQ, *sRk = sm + GR_RK;
    const i64 cb = w.base;
    float *dW = p.w + cb * C * DK, *dqp = p.dqp + cb * C * DK, *dkp = p.dkp + cb * C * DK;
    const auto kn = [&](int m, int i) { return m < len && i < DK ? sRk[m] * ld4<TK>(p.k, w.b, t0 + m, w.qh, i) : 0.f; };
    const auto sdv = [&](const float *X) { // X[i][j], i < DK, j < DV (S0, dSC) as B(j, i)
        return [=](int j, int i) { return i < DK && j < DV ? X[i * DV + j] : 0.f; };
    };
    const auto rows = [&](const float *X, float sg) { // X[r][j] (Vn, dVn), rows < len
        return [=](int r, int j) { return r < len && j < DV ? sg * X[r * DV + j] : 0.f; };
    };
    float part = 0.f;
    tiles<C, DKP, NT>([&](int m0, int n0) {
        float dq[2][4], dk[2][4], dw[2][4];
        ssdc::tile_zero(dq), ssdc::tile_zero(dk), ssdc::tile_zero(dw);
        mma_tile(
            dq, m0, n0, DVP,
            [&](int r, int j) { return r < len && j < DV ? ld4<TDO>(p.dout, w.b, t0 + r, w.h, j) : 0.f; }, sdv(S0));
        mma_tile(dk, m0, n0, DVP, rows(Vn, 1.f), sdv(dSC));
        mma_tile(dw, m0, n0, DVP, rows(dVn, -1.f), sdv(S0));
        ssdc::tile_foreach(dq, [&](int r, int, float &x) { x *= s * expf(sG[m0 + r]); });
        ssdc::tile_foreach(dk, [&](int r, int c, float &x) {
            x *= expf(gl - sG[m0 + r]);
            part += kn(m0 + r, n0 + c) * x; // kn_r . dK_state_r
        });
        mma_tile(
            dq, m0, n0, C, [&](int r, int m) { return sM[r * C + m]; }, kn);
        mma_tile(
            dk, m0, n0, C, [&](int r, int m) { return sM[m * C + r]; },
            [&](int m, int i) { return m < len && i < DK ? sRq[m] * ld4<TQ>(p.q, w.b, t0 + m, w.qh, i) : 0.f; });
        tile_index([&](int r, int i, int e) {
            r += m0, i += n0;
            if (i >= DK) return;
            const bool in = r < len;
            dqp[r * DK + i] = in ? dq[e >> 2][e & 3] : 0.f;
            dkp[r * DK + i] = in ? dk[e >> 2][e & 3] : 0.f;
            dW[r * DK + i] = in ? dw[e >> 2][e & 3] : 0.f;
        });
    });
    return part;
}

// ... the WY backward's row products: dKbg = A^T dW (dKn += diag(beta gam) dKbg) and dVb =
// A^T dVn (dv = diag(beta) dVb), DKP columns at a time, with the row sums dbeta += gam
// rowsum(dKbg o Kn) + rowsum(dVb o V), dG += beta gam rowsum(dKbg o Kn): per 16x16 tile a
// quad's butterfly sum per row into GR_RS [row][column tile], then per row in tile order
// (a fixed order: deterministic) ...
// One pass of it: the tiles of A^T X (X [C][ld] in rows < len: dVn's past len are not
// written; columns x0 + n < wd), f(row, col, a) applied to each element returning its
// row-sum term; the tiles' row sums into red [C][DKP / 16].
template <class F>
__device__ __forceinline__ void wy_rows_mma(const float *sA, float *red, const float *X, int ld, int x0, int wd,
                                            int len, F f) {
    const int lane = (int)threadIdx.x & 31;
    tiles<C, DKP, NT>([&](int m0, int n0) {
        float acc[2][4], c[2][4];
        ssdc::tile_zero(acc);
        mma_tile(
            acc, m0, n0, C, [&](int r, int m) { return sA[m * C + r]; },
            [&](int m, int x) { return m < len && x0 + x < wd ? X[m * ld + x0 + x] : 0.f; });
        tile_index([&](int r, int x, int e) {
            r += m0, x += n0;
            c[e >> 2][e & 3] = r < len && x0 + x < wd ? f(r, x0 + x, acc[e >> 2][e & 3]) : 0.f;
        });
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float v = (c[0][2 * h] + c[0][2 * h + 1]) + (c[1][2 * h] + c[1][2 * h + 1]);
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            if ((lane & 3) == 0) red[(m0 + (lane >> 2) + 8 * h) * (DKP / 16) + n0 / 16] = v;
        }
    });
    __syncthreads();
}
template <class P>
__device__ __forceinline__ void grads_wyrow_mma(const P &p, float *sm, const Where &w, i64 t0, int len, const float *dW,
                                                const float *dVn) {
    constexpr int NR = DKP / 16;
    const float *sA = sm + GR_A, *sG = sm + GR_G, *sB = sm + GR_B, *sRk = sm + GR_RK;
    float *sdG = sm + GR_DG, *sdB = sm + GR_DB, *red = sm + GR_RS, *dkp = p.dkp + w.base * C * DK;
    const auto rowsum = [&](int r) {
        float a = 0.f;
        for (int t = 0; t < NR; ++t) a += red[r * NR + t];
        return a;
    };
    wy_rows_mma(sA, red, dW, DK, 0, DK, len, [&](int r, int i, float a) {
        dkp[r * DK + i] += sB[r] * expf(sG[r]) * a;
        return a * sRk[r] * ld4<TK>(p.k, w.b, t0 + r, w.qh, i);
    });
    for (int r = (int)threadIdx.x; r < len; r += NT) {
        const float gam = expf(sG[r]), s1 = rowsum(r);
        sdB[r] += gam * s1;
        sdG[r] += sB[r] * gam * s1;
    }
    __syncthreads();
    for (int y0 = 0; y0 < DV; y0 += DKP) {
        wy_rows_mma(sA, red, dVn, DV, y0, DV, len, [&](int r, int y, float a) {
            tpw<TDV>(p.dv)[off4(p.dv, w.b, t0 + r, w.h, y)] = cg_round<TDV>(sB[r] * a);
            return a * ld4<TV>(p.v, w.b, t0 + r, w.h, y);
        });
        for (int r = (int)threadIdx.x; r < len; r += NT) sdB[r] += rowsum(r);
        __syncthreads();
    }
}
// ... dAmat = dW Kbg^T + dVn Vb^T into GR_T (Kbg = diag(beta gam / |k|) K, Vb = diag(beta) V) ...
template <class P>
__device__ __forceinline__ void grads_wy_mma(const P &p, float *sm, const Where &w, i64 t0, int len, const float *dW,
                                             const float *dVn) {
    constexpr int DVP = (DV + 7) / 8 * 8;
    float *sT = sm + GR_T;
    const float *sG = sm + GR_G, *sB = sm + GR_B, *sRk = sm + GR_RK;
    gemm_tiles<C, C, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, DKP, [&](int r, int i) { return r < len && i < DK ? dW[r * DK + i] : 0.f; },
                [&](int i, int m) { return m < len && i < DK ? sRk[m] * ld4<TK>(p.k, w.b, t0 + m, w.qh, i) : 0.f; });
            ssdc::tile_foreach(acc, [&](int, int c, float &x) { x *= expf(sG[n0 + c]); });
            mma_tile(
                acc, m0, n0, DVP, [&](int r, int y) { return r < len && y < DV ? dVn[r * DV + y] : 0.f; },
                [&](int y, int m) { return m < len && y < DV ? ld4<TV>(p.v, w.b, t0 + m, w.h, y) : 0.f; });
        },
        [&](int r, int m, float x) { sT[r * C + m] = r < len && m < len ? sB[m] * x : 0.f; });
}
// ... and the Gram term's dKn += diag(beta) dLg Kn + dLg^T diag(beta) Kn (dLg in GR_T).
template <class P>
__device__ __forceinline__ void grads_gram_dk_mma(const P &p, float *sm, const Where &w, i64 t0, int len) {
    const float *sT = sm + GR_T, *sB = sm + GR_B, *sRk = sm + GR_RK;
    float *dkp = p.dkp + w.base * C * DK;
    const auto kn = [&](int m, int x) { return m < len && x < DK ? sRk[m] * ld4<TK>(p.k, w.b, t0 + m, w.qh, x) : 0.f; };
    gemm_tiles<C, DKP, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, C, [&](int r, int j) { return sB[r] * sT[r * C + j]; }, kn);
            mma_tile(
                acc, m0, n0, C, [&](int r, int i) { return sT[i * C + r]; },
                [&](int i, int x) { return sB[i] * kn(i, x); });
        },
        [&](int r, int x, float v) {
            if (r < len && x < DK) dkp[r * DK + x] += v;
        });
}

// The reverse state pass's products on the matrix unit, Q, K and the dO tile staged:
// dVn = s Pm^T dO + diag(co) K dS (into p.dvn and sD) ...
template <class P>
__device__ __forceinline__ void rstate_dvn_mma(const P &p, float *sm, const Rows &rw, i64 base, int len, float scale) {
    const float *dS = sm + ST_S, *sCo = sm + ST_CO, *sK = sm + ST_K, *sDO = sm + RS_DO, *pm = p.pm + base * C * C;
    float *sD = sm + ST_V;
    gemm_tiles<C, BV, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, C, [&](int m, int k) { return scale * pm[k * C + m]; },
                [&](int k, int n) { return sDO[k * LDO + n]; });
            mma_tile(
                acc, m0, n0, DKP, [&](int m, int k) { return sCo[m] * sK[m * LDK + k]; },
                [&](int k, int n) { return k < DK ? dS[k * BV + n] : 0.f; });
        },
        [&](int r, int c, float x) {
            const i64 j = rw.j0 + c;
            const bool in = r < len && j < DV;
            if (in) p.dvn[(base * C + r) * DV + j] = x;
            sD[r * BV + c] = in ? x : 0.f;
        });
}
// ... and dS = gamC dS + (diag(x) Q)^T dO - W^T dVn, in place.
template <class P> __device__ __forceinline__ void rstate_ds_mma(const P &p, float *sm, i64 base, int len, float gam) {
    float *dS = sm + ST_S;
    const float *sD = sm + ST_V, *sX = sm + ST_X, *sQ = sm + RS_Q, *sDO = sm + RS_DO, *wc = p.w + base * C * DK;
    gemm_tiles<DKP, BV, NT>(
        [&](float(&acc)[2][4], int m0, int n0) {
            mma_tile(
                acc, m0, n0, C, [&](int m, int k) { return sX[k] * sQ[k * LDK + m]; },
                [&](int k, int n) { return sDO[k * LDO + n]; });
            mma_tile(
                acc, m0, n0, C, [&](int m, int k) { return k < len && m < DK ? -wc[k * DK + m] : 0.f; },
                [&](int k, int n) { return sD[k * BV + n]; });
        },
        [&](int i, int c, float x) {
            if (i < DK) dS[i * BV + c] = gam * dS[i * BV + c] + x;
        });
}

} // namespace gdr

GDR_ENTRY cg_gdr_bwd_prep(cg_gdr_bwd_params p) {
    CG_DYN_SMEM(float, sm);
    gdr::prep(p, sm, blockIdx.x, p.am, p.kk, p.pm);
}

GDR_ENTRY cg_gdr_bwd_state(cg_gdr_bwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const int tid = (int)threadIdx.x;
    const Rows rw = rows_of(p, blockIdx.x);
    states_fwd(p, sm, rw);
    float *dS = sm + ST_S, *sD = sm + ST_V, *sG = sm + ST_G, *sCo = sm + ST_CO, *sX = sm + ST_X;
    const float scale = (float)p.scale;
    load_state(dS, p.dhT, rw);
    __syncthreads();
    for (i64 k = rw.ns - 1; k >= 0; --k) {
        const i64 base = rw.bh * p.nslot + rw.s0 + k;
        const Chunk ch = rows_chunk(p, rw, k);
        const int len = ch.len;
        store_ws(p.dhs + base * DK * DV, rw, dS);
        for (int r = tid; r < C; r += NT) {
            sG[r] = r < len ? p.gc[base * C + r] : 0.f;
            sCo[r] = r < len ? p.rs[(base * C + r) * 2 + 1] : 0.f;
            sX[r] = r < len ? p.rs[(base * C + r) * 2] : 0.f;
        }
        if constexpr (MMA) {
            stage<C, DKP, LDK, 0, NT, false>(sm + ST_K, (TK *)nullptr, p.k, rw.b, ch.t0, rw.qh, 0, len, DK);
            stage<C, DKP, LDK, 0, NT, false>(sm + RS_Q, (TQ *)nullptr, p.q, rw.b, ch.t0, rw.qh, 0, len, DK);
            stage<C, BV, LDO, 0, NT, false>(sm + RS_DO, (TDO *)nullptr, p.dout, rw.b, ch.t0, rw.h, rw.j0, len,
                                            (int)(DV - rw.j0));
        }
        __syncthreads();
        const float gl = sG[len - 1];
        for (int r = tid; r < len; r += NT) {
            sCo[r] *= expf(gl - sG[r]);
            sX[r] *= scale * expf(sG[r]);
        }
        __syncthreads();
        const float *pm = p.pm + base * C * C;
        if constexpr (MMA) rstate_dvn_mma(p, sm, rw, base, len, scale);
        for (int e = tid; e < C * BV && !MMA; e += NT) {
            const int r = e / BV, c = e % BV;
            const i64 j = rw.j0 + c;
            float v = 0.f;
            if (r < len && j < DV) {
                float a = 0.f;
                for (int m = r; m < len; ++m) a += pm[m * C + r] * ld4<TDO>(p.dout, rw.b, ch.t0 + m, rw.h, j);
                float d = 0.f;
#pragma unroll 4
                for (int i = 0; i < DK; ++i) d += ld4<TK>(p.k, rw.b, ch.t0 + r, rw.qh, i) * dS[i * BV + c];
                v = scale * a + sCo[r] * d;
                p.dvn[(base * C + r) * DV + j] = v;
            }
            sD[e] = v;
        }
        __syncthreads();
        const float gam = expf(gl);
        if constexpr (MMA) rstate_ds_mma(p, sm, base, len, gam);
        for (int e = tid; e < DK * BV && !MMA; e += NT) {
            const int i = e / BV, c = e % BV;
            const i64 j = rw.j0 + c;
            float a = gam * dS[e];
            if (j < DV)
                for (int r = 0; r < len; ++r)
                    a += sX[r] * ld4<TQ>(p.q, rw.b, ch.t0 + r, rw.qh, i) * ld4<TDO>(p.dout, rw.b, ch.t0 + r, rw.h, j) -
                         p.w[(base * C + r) * DK + i] * sD[r * BV + c];
            dS[e] = a;
        }
        __syncthreads();
    }
    store_state(p.dh0, rw, dS);
}

GDR_ENTRY cg_gdr_bwd_grads(cg_gdr_bwd_params p) {
    using namespace gdr;
    CG_DYN_SMEM(float, sm);
    const Where w = where_of(p, blockIdx.x);
    const Chunk ch = chunk_at(p, w.slot);
    if (ch.len == 0) return;
    const int tid = (int)threadIdx.x, len = ch.len;
    const float s = (float)p.scale;
    const i64 cb = w.base, t0 = ch.t0;
    const float *S0 = p.hs + cb * DK * DV, *dSC = p.dhs + cb * DK * DV, *Vn = p.u + cb * C * DV;
    const float *dVn = p.dvn + cb * C * DV, *KK = p.kk + cb * C * C;
    float *dW = p.w + cb * C * DK, *dqp = p.dqp + cb * C * DK, *dkp = p.dkp + cb * C * DK;
    float *sA = sm + GR_A, *sM = sm + GR_M, *sT = sm + GR_T, *sDL = sm + GR_DL, *sG = sm + GR_G, *sB = sm + GR_B;
    float *sRq = sm + GR_RQ, *sRk = sm + GR_RK, *sdG = sm + GR_DG, *sdB = sm + GR_DB, *sRed = sm + GR_RED;
    for (int r = tid; r < C; r += NT) {
        sG[r] = p.gc[cb * C + r];
        sRq[r] = p.rs[(cb * C + r) * 2];
        sRk[r] = p.rs[(cb * C + r) * 2 + 1];
        sB[r] = r < len ? ld3<TBETA>(p.beta, w.b, t0 + r, w.h) : 0.f;
        sdG[r] = 0.f;
        sdB[r] = 0.f;
    }
    for (int e = tid; e < C * C; e += NT) sA[e] = p.am[cb * C * C + e];
    __syncthreads();
    const float gl = sG[len - 1], gamC = expf(gl);
    // dP = s (dO Vn^T) o Dm
    if constexpr (MMA) grads_dp_mma(p, sm, w, t0, len, Vn, s);
    else
        tril_dots<DV>(
            sM, len, [&](int r, int m, int j) { return ld4<TDO>(p.dout, w.b, t0 + r, w.h, j) * Vn[m * DV + j]; },
            [&](int r, int m, float d) { return s * expf(sG[r] - sG[m]) * d; });
    __syncthreads();
    // dQn, dKn (intra and state parts), dW; partial sums of the last row's dG terms
    float part = 0.f;
    if constexpr (MMA) part = grads_dqk_mma(p, sm, w, t0, len, S0, dSC, Vn, dVn, s, gl);
    for (int e = tid; e < C * DK && !MMA; e += NT) {
        const int r = e / DK, i = e % DK;
        float dq = 0.f, dk = 0.f, dw = 0.f;
        if (r < len) {
            float a = 0.f, ks = 0.f;
#pragma unroll 4
            for (int j = 0; j < DV; ++j) {
                a += ld4<TDO>(p.dout, w.b, t0 + r, w.h, j) * S0[i * DV + j];
                ks += Vn[r * DV + j] * dSC[i * DV + j];
                dw -= dVn[r * DV + j] * S0[i * DV + j];
            }
            dq = s * expf(sG[r]) * a;
            for (int m = 0; m <= r; ++m) dq += sM[r * C + m] * sRk[m] * ld4<TK>(p.k, w.b, t0 + m, w.qh, i);
            for (int m = r; m < len; ++m) dk += sM[m * C + r] * sRq[m] * ld4<TQ>(p.q, w.b, t0 + m, w.qh, i);
            const float kst = expf(gl - sG[r]) * ks;
            dk += kst;
            part += sRk[r] * ld4<TK>(p.k, w.b, t0 + r, w.qh, i) * kst;
        }
        dqp[r * DK + i] = dq;
        dkp[r * DK + i] = dk;
        dW[r * DK + i] = dw;
    }
    for (int e = tid; e < DK * DV; e += NT) part += gamC * S0[e] * dSC[e];
    sRed[tid] = part;
    __syncthreads();
    for (int r = tid; r < len; r += NT) {
        float a = 0.f;
#pragma unroll 4
        for (int i = 0; i < DK; ++i)
            a += sRq[r] * ld4<TQ>(p.q, w.b, t0 + r, w.qh, i) * dqp[r * DK + i] -
                 sRk[r] * ld4<TK>(p.k, w.b, t0 + r, w.qh, i) * dkp[r * DK + i];
        sdG[r] = a;
    }
    __syncthreads();
    if (tid == 0) {
        float a = 0.f;
        for (int x = 0; x < NT; ++x) a += sRed[x];
        sdG[len - 1] += a;
    }
    __syncthreads();
    // WY backward, per row r: dKbg_r = (A^T dW)_r, dVb_r = (A^T dVn)_r
    if constexpr (MMA) grads_wyrow_mma(p, sm, w, t0, len, dW, dVn);
    for (int r = tid; r < len && !MMA; r += NT) {
        const float gam = expf(sG[r]);
        float s1 = 0.f, s2 = 0.f;
#pragma unroll 4
        for (int i = 0; i < DK; ++i) {
            float a = 0.f;
            for (int m = r; m < len; ++m) a += sA[m * C + r] * dW[m * DK + i];
            dkp[r * DK + i] += sB[r] * gam * a;
            s1 += a * sRk[r] * ld4<TK>(p.k, w.b, t0 + r, w.qh, i);
        }
#pragma unroll 4
        for (int y = 0; y < DV; ++y) {
            float a = 0.f;
            for (int m = r; m < len; ++m) a += sA[m * C + r] * dVn[m * DV + y];
            tpw<TDV>(p.dv)[off4(p.dv, w.b, t0 + r, w.h, y)] = cg_round<TDV>(sB[r] * a);
            s2 += a * ld4<TV>(p.v, w.b, t0 + r, w.h, y);
        }
        sdB[r] += gam * s1 + s2;
        sdG[r] += sB[r] * gam * s1;
    }
    // dAmat = dW Kbg^T + dVn Vb^T
    if constexpr (MMA) grads_wy_mma(p, sm, w, t0, len, dW, dVn);
    for (int e = tid; e < C * C && !MMA; e += NT) {
        const int r = e / C, m = e % C;
        float v = 0.f;
        if (r < len && m < len) {
            float a = 0.f, b = 0.f;
#pragma unroll 4
            for (int i = 0; i < DK; ++i) a += dW[r * DK + i] * sRk[m] * ld4<TK>(p.k, w.b, t0 + m, w.qh, i);
#pragma unroll 4
            for (int y = 0; y < DV; ++y) b += dVn[r * DV + y] * ld4<TV>(p.v, w.b, t0 + m, w.h, y);
            v = sB[m] * (expf(sG[m]) * a + b);
        }
        sT[e] = v;
    }
    __syncthreads();
    // M = dAmat A^T
    if constexpr (MMA)
        gemm_mma<C, C, NT>(
            C, [&](int r, int x) { return sT[r * C + x]; }, [&](int x, int m) { return sA[m * C + x]; },
            [&](int r, int m, float x) { sM[r * C + m] = x; });
    for (int e = tid; e < C * C && !MMA; e += NT) {
        const int r = e / C, m = e % C;
        float a = 0.f;
        for (int x = 0; x <= m; ++x) a += sT[r * C + x] * sA[m * C + x];
        sM[e] = a;
    }
    __syncthreads();
    // dL = strictly_lower(-A^T M); sT = dLg = dL o Gam
    if constexpr (MMA)
        gemm_mma<C, C, NT>(
            C, [&](int i, int x) { return -sA[x * C + i]; }, [&](int x, int j) { return sM[x * C + j]; },
            [&](int i, int j, float v) {
                const bool lo = i < len && j < i;
                sDL[i * C + j] = lo ? v : 0.f;
                sT[i * C + j] = lo ? v * expf(sG[i] - sG[j]) : 0.f;
            });
    for (int e = tid; e < C * C && !MMA; e += NT) {
        const int i = e / C, j = e % C;
        float v = 0.f;
        if (i < len && j < i) {
            for (int x = i; x < len; ++x) v -= sA[x * C + i] * sM[x * C + j];
        }
        sDL[e] = v;
        sT[e] = j < i && i < len ? v * expf(sG[i] - sG[j]) : 0.f;
    }
    __syncthreads();
    // dbeta, dG of the Gram term (per row), dKn of it (per element)
    for (int i = tid; i < len; i += NT) {
        float db = 0.f, dg = 0.f;
        for (int j = 0; j < i; ++j) {
            db += sT[i * C + j] * KK[i * C + j];
            dg += sDL[i * C + j] * sB[i] * KK[i * C + j] * expf(sG[i] - sG[j]);
        }
        for (int j = i + 1; j < len; ++j) dg -= sDL[j * C + i] * sB[j] * KK[j * C + i] * expf(sG[j] - sG[i]);
        sdB[i] += db;
        sdG[i] += dg;
    }
    if constexpr (MMA) grads_gram_dk_mma(p, sm, w, t0, len);
    for (int e = tid; e < C * DK && !MMA; e += NT) {
        const int r = e / DK, x = e % DK;
        if (r >= len) continue;
        float a = 0.f, b = 0.f;
        for (int j = 0; j < r; ++j) a += sT[r * C + j] * sRk[j] * ld4<TK>(p.k, w.b, t0 + j, w.qh, x);
        for (int i = r + 1; i < len; ++i) b += sT[i * C + r] * sB[i] * sRk[i] * ld4<TK>(p.k, w.b, t0 + i, w.qh, x);
        dkp[r * DK + x] += sB[r] * a + b;
    }
    __syncthreads();
    if (tid == 0) { // dg: the chunk-local reverse cumsum of dG, in token order from the end
        float a = 0.f;
        for (int r = len - 1; r >= 0; --r) {
            a += sdG[r];
            p.dg.p[off3(p.dg, w.b, t0 + r, w.h)] = a;
        }
    }
    for (int r = tid; r < len; r += NT) tpw<TDB>(p.dbeta)[off3(p.dbeta, w.b, t0 + r, w.h)] = cg_round<TDB>(sdB[r]);
}

// Per (b, q/k head, slot): dq, dk over the group's value heads, through the L2 norm.
GDR_ENTRY cg_gdr_bwd_reduce(cg_gdr_bwd_params p) {
    using namespace gdr;
    const i64 slot = umod(blockIdx.x, p.nslot), bg = udiv(blockIdx.x, p.nslot);
    const i64 b = udiv(bg, p.G), qh = umod(bg, p.G), hpg = udiv(p.H, p.G);
    const Chunk ch = chunk_at(p, slot);
    const i64 base0 = (b * p.H + qh * hpg) * p.nslot + slot; // the group's first value head
    for (int r = (int)threadIdx.x; r < ch.len; r += NT) {
        const i64 t = ch.t0 + r;
        for (int which = 0; which < 2; ++which) {
            const float *part = which ? p.dkp : p.dqp;
            const cg_ktensor &x = which ? p.k : p.q;
            const float rn = p.rs[(base0 * C + r) * 2 + which];
            float dot = 0.f;
            if (L2) {
#pragma unroll 4
                for (int i = 0; i < DK; ++i) {
                    float d = 0.f;
                    for (i64 hh = 0; hh < hpg; ++hh) d += part[((base0 + hh * p.nslot) * C + r) * DK + i];
                    dot += d * rn * (which ? ld4<TK>(x, b, t, qh, i) : ld4<TQ>(x, b, t, qh, i));
                }
            }
#pragma unroll 4
            for (int i = 0; i < DK; ++i) {
                float d = 0.f;
                for (i64 hh = 0; hh < hpg; ++hh) d += part[((base0 + hh * p.nslot) * C + r) * DK + i];
                if (L2) d = rn * (d - dot * rn * (which ? ld4<TK>(x, b, t, qh, i) : ld4<TQ>(x, b, t, qh, i)));
                if (which) tpw<TDK>(p.dk)[off4(p.dk, b, t, qh, i)] = cg_round<TDK>(d);
                else tpw<TDQ>(p.dq)[off4(p.dq, b, t, qh, i)] = cg_round<TDQ>(d);
            }
        }
    }
}
