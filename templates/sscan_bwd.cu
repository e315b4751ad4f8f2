// sscan_bwd.cu -- selective scan (Mamba-1 S6) backward, one specialization per (N, G, config).
//
// Rendered by generator/kernels/sscan_bwd.lua, which defines CG_N, CG_G, CG_P_CHUNK,
// CG_P_DIM_BLOCK, CG_P_WARPS, CG_P_SEGMENT, CG_P_STRATEGY_{SEQ,PAR} (and CG_SMEM_BYTES,
// checked below), and the storage types of sscan_fwd.cu plus CG_T_DY, CG_T_DX,
// CG_T_DDELTA, CG_T_DB, CG_T_DC, CG_T_DZ (float when not defined). The thread layout
// and the forward step are those of sscan_fwd.cu (included). 16-bit outputs are
// rounded once: dx, ddelta, dz as they are stored, dB and dC (sums over channel
// blocks) through the float partials pB, pC and the reduce pass.
//
// Math, per (b, d) and state n, with dy' the gradient into y
// (dy' = dy * silu(z) with z), a_t = exp(dt_t A) and g the gradient of the state:
//   g_t = C_t dy'_t + a_{t+1} g_{t+1}  (g_{L-1} starts from dhT)
//   dC_t += dy'_t h_t;  dx_t = sum_n g B_t dt + D dy'_t;  dB_t += g dt x_t;
//   ddt_t = sum_n g (A a_t h_{t-1} + B_t x_t);  dA += g dt a_t h_{t-1};  dh0 = a_0 g_0.
// g needs no h, so it can run ahead of the gradients; the gradients need h and g at
// the same step.
//
// Passes (deterministic: no atomics, every sum in a fixed order). Time is cut in
// segments of SEG steps; nseg = ceil(L / SEG).
//  states, strategy seq (grid B * nblk, one CTA per (b, channel block) over all of L):
//     the forward recurrence storing the state entering each segment (ckpt), then the
//     reverse recurrence of g alone storing g entering each segment's last step (gst),
//     and dh0.
//  local + carry, strategy par (for small B * D: parallel over time): local, grid
//     B * nblk * nseg, runs each segment from zero, forward (end state U, sum of dt)
//     and backward (g at its first step, V); carry, one thread per (b, d, n), walks
//     the segments: ckpt_s = S, S = exp(A sdt_s) S + U_s from h0, and backward
//     gst_s = E, E = exp(A sdt_s) E + V_s from dhT, dh0 = E.
//  grads (both strategies), parallel over time: one work item per (b, segment, unit,
//     split): a unit is a run of whole groups (one group, or the groups of about one
//     channel block), a split a fixed part of the unit's channel blocks. For each block
//     of its split in order: recompute the segment's states from ckpt into this CTA's
//     hbuf (and dz), then walk the segment backwards from gst writing dx, ddelta and
//     dB/dC: per step the block's channels of each group summed in channel order
//     through shared memory and added, block by block, into dB/dC (one split) or the
//     split's partial slot; dA, dD, ddelta_bias per (b, segment) partials.
//  reduce: dB, dC = the split partials in split order (when split); dA, dD,
//     ddelta_bias = the (b, segment) partials, b-major.
// Memory: ckpt, gst, pA B*D*N*nseg each; hbuf per grads CTA (a grid capped per SM);
// the dB/dC partials B*L*G*N*nsplit with nsplit <= 8. Nothing grows with L*D*N.
// Varlen (CG_VARLEN, docs/varlen.md; the offsets read and clamped as in sscan_fwd.cu):
// B = 1, the segments stay on the time grid of the packed row, so the workspace is that
// of one row. ckpt of a segment holds the state entering it of the sequence holding its
// first step, gst the state gradient entering its last step of the sequence holding that
// step (dhT[n] when the sequence ends there). seq: the states pass runs per (sequence,
// channel block) and writes dh0[n]. par: local restarts at every sequence start (from 0,
// forward and backward: sdt since the last start, and sdt of the head, the part of the
// first sequence, in the second half of sdt); carry restarts from h0 / dhT at the
// sequences' ends and writes dh0 of the 0-length sequences. grads resets h to h0[n] at
// each start and g to dhT[n] at each end inside its segment (and, par, writes dh0[n] at
// the start). dA, dD, ddelta_bias are sums over all steps: unchanged.
#define SSCAN_NO_FWD_ENTRY 1
#include "sscan_fwd.cu"

#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined

namespace sscan {

typedef CG_T_DY TDY;
typedef CG_T_DX TDX;
typedef CG_T_DDELTA TDDELTA;
typedef CG_T_DB TDB;
typedef CG_T_DC TDC;
typedef CG_T_DZ TDZ;
// dB, dC of 16-bit storage are summed in the float partials, then rounded by the
// reduce pass (sscan_bwd.lua sizes pB, pC for it: bc_partials()).
constexpr bool BC_PARTIAL = sizeof(TDB) != 4 || sizeof(TDC) != 4;

constexpr int SEG = CG_P_SEGMENT;
static_assert(SEG % CHUNK == 0, "segment: a multiple of chunk");
constexpr i64 PER = (i64)NPT * NT; // floats of one state of a CTA's channels: [NPT][NT]

// Grads-pass shared memory (floats): staged dt, softplus derivative, x, dy' of one chunk
// [CHUNK][BD], the staged B and C rows [CHUNK][GB][N] each (16-byte aligned), the
// per-channel dB and dC terms [CHUNK][BD][NP] (odd pitch NP), then, when
// CG_SSCAN_HB_SMEM (sscan_bwd.lua: where it fits), the segment's recomputed states
// hb [SEG + 1][NPT][NT] (else hb is this CTA's slot of the hbuf workspace).
#ifndef CG_SSCAN_HB_SMEM
#define CG_SSCAN_HB_SMEM 0
#endif
constexpr bool HB_SMEM = CG_SSCAN_HB_SMEM != 0;
constexpr int NP = N | 1;
constexpr int M_DT = 0;
constexpr int M_SG = M_DT + CHUNK * BD;
constexpr int M_X = M_SG + CHUNK * BD;
constexpr int M_DY = M_X + CHUNK * BD;
constexpr int M_B = M_DY + CHUNK * BD;
constexpr int M_C = M_B + BC_FLOATS;
constexpr int M_RB = M_C + BC_FLOATS;
constexpr int M_RC = M_RB + CHUNK * BD * NP;
constexpr int M_H = M_RC + CHUNK * BD * NP;
constexpr int M_FLOATS = M_H + (HB_SMEM ? (SEG + 1) * (int)PER : 0);
static_assert(F_FLOATS <= M_FLOATS, "the state passes' staging fits in the grads pass's");
#ifdef CG_SMEM_BYTES // what generator/kernels/sscan_bwd.lua launches the grads pass with
static_assert(4LL * M_FLOATS == CG_SMEM_BYTES, "sscan_bwd.lua smem_grads() disagrees with the layout here");
#endif

__device__ __forceinline__ i64 max64(i64 a, i64 b) { return a > b ? a : b; }

__device__ __forceinline__ FwdIO bwd_io(const cg_sscan_bwd_params &p) {
    FwdIO io;
    io.x = p.x, io.delta = p.delta, io.A = p.A, io.Bm = p.Bm, io.Cm = p.Cm, io.Dv = p.Dv, io.z = p.z;
    io.dbias = p.dbias, io.y.p = nullptr, io.ckpt = nullptr, io.segment = SEG, io.n = p.n;
    return io;
}

// dy' (dy, times silu(z) when zb) of nt rows (strides dys1, zs1) of the block's
// channels (strides dys2, zs2; the first live exist) into s_dy ([CHUNK][BD], zero past
// live and beyond nt), 4 channels per thread and iteration (dvec, zvec: 16-byte loads).
SSCAN_COPY void copy_dy(float *s_dy, const TDY *dyb, i64 dys1, i64 dys2, bool dvec, const TZ *zb, i64 zs1, i64 zs2,
                        bool zvec, int live, int nt) {
    for (int e = threadIdx.x; e < CHUNK * (BD / 4); e += NT) {
        const int t = e / (BD / 4), c = 4 * (e - t * (BD / 4));
        float v[4] = {0.f, 0.f, 0.f, 0.f}, zv[4];
        if (t < nt) {
            ld4(dyb + t * dys1, dys2, c, live, dvec, v);
            if (zb) {
                ld4(zb + t * zs1, zs2, c, live, zvec, zv);
#pragma unroll
                for (int q = 0; q < 4; ++q) v[q] *= zv[q] * sigmoid(zv[q]);
            }
        }
        *reinterpret_cast<float4 *>(s_dy + t * BD + c) = make_float4(v[0], v[1], v[2], v[3]);
    }
}

// Stage dy' (the gradient into y: dy, times silu(z) with z) of steps [t0, t0 + nt) of
// the block's channels into s_dy ([CHUNK][BD], zero outside [0, D) and beyond nt).
__device__ __forceinline__ void stage_dy(const cg_sscan_bwd_params &p, i64 b, i64 d0, i64 t0, int nt, float *s_dy) {
    copy_dy(s_dy, tp<const TDY>(p.dy) + b * p.dy.s0 + t0 * p.dy.s1 + d0 * p.dy.s2, p.dy.s1, p.dy.s2, rows16<TDY>(p.dy),
            p.z.p ? tp<const TZ>(p.z) + b * p.z.s0 + t0 * p.z.s1 + d0 * p.z.s2 : nullptr, p.z.s1, p.z.s2,
            p.z.p && rows16<TZ>(p.z), (int)min64(BD, p.n.D - d0), nt);
}

// The reverse recurrence of the state gradient alone over steps tb - 1 down to ta
// (ta a multiple of SEG, so chunks start at ta + k * CHUNK): g <- a_t (g + C_t dy'_t).
__device__ __forceinline__ void gscan_range(const cg_sscan_bwd_params &p, float *sm, i64 b, i64 d0, const Thr &th,
                                            const float (&A)[NPT], float (&g)[NPT], i64 ta, i64 tb) {
    float *s_dt = sm + F_DT, *s_dy = sm + F_Y, *s_c = sm + F_C;
    for (i64 t0 = ta + (tb - 1 - ta) / CHUNK * CHUNK; t0 >= ta; t0 -= CHUNK) {
        const int nt = (int)min64(CHUNK, tb - t0);
        stage_bc<TC>(p.Cm, b, th, t0, nt, s_c);
        stage_dt_x(p.x, p.delta, p.dbias, p.n, b, d0, t0, nt, s_dt, nullptr, nullptr);
        stage_dy(p, b, d0, t0, nt, s_dy);
        staged();
        for (int t = nt - 1; t >= 0; --t) {
            const float dt = s_dt[t * BD + th.ch], dyv = s_dy[t * BD + th.ch];
            const float *Ct = s_c + (t * GB + th.gi) * N + th.j;
#pragma unroll
            for (int k = 0; k < NPT; ++k) {
                const int s = th.j + TPC * k;
                if (FULL || s < N) g[k] = expf(dt * A[k]) * fmaf(Ct[TPC * k], dyv, g[k]);
            }
        }
        __syncthreads(); // s_dt, s_dy are restaged next
    }
}

// Copies between a CTA's state registers and its slot ([NPT][NT] floats at slot).
__device__ __forceinline__ void put_state(float *slot, const float (&v)[NPT]) {
#pragma unroll
    for (int k = 0; k < NPT; ++k) slot[k * NT + threadIdx.x] = v[k];
}
__device__ __forceinline__ void get_state(const float *slot, float (&v)[NPT]) {
#pragma unroll
    for (int k = 0; k < NPT; ++k) v[k] = slot[k * NT + threadIdx.x];
}

// Where a grads work item sums dB or dC: the output itself (one split, float) or the
// split's partial slot viewed as [b, l, g, n].
__device__ __forceinline__ cg_ktensor bc_target(const cg_sscan_bwd_params &p, const cg_ktensor &out, float *part,
                                                i64 split) {
    if (p.nsplit == 1 && !BC_PARTIAL) return out;
    cg_ktensor t;
    t.p = part + split * N;
    t.s3 = 1;
    t.s2 = p.nsplit * N;
    t.s1 = p.n.G * t.s2;
    t.s0 = p.n.L * t.s1;
    return t;
}

// One channel block k of a grads work item: segment sgi of batch row b, the unit's
// channels [ca, cb); first_blk: k is the first block of the split (its dB/dC sums start
// there). hb: this CTA's state buffer [SEG + 1][NPT][NT].
__device__ __forceinline__ void grads_block(const cg_sscan_bwd_params &p, float *sm, float *hb, i64 b, i64 k, i64 sgi,
                                            i64 ca, i64 cb, bool first_blk, const cg_ktensor &aB,
                                            const cg_ktensor &aC) {
    const cg_sscan_dims &n = p.n;
    const i64 d0 = k * BD;
    const Thr th = thread_coords(n, d0);
    const bool own = th.live && th.d >= ca && th.d < cb; // this item writes this channel's outputs
    const int tid = threadIdx.x;
    float *s_dt = sm + M_DT, *s_sg = sm + M_SG, *s_x = sm + M_X, *s_dy = sm + M_DY;
    float *s_rb = sm + M_RB, *s_rc = sm + M_RC, *s_b = sm + M_B, *s_c = sm + M_C;
    const float Dd = p.Dv.p ? p.Dv.p[th.dd * p.Dv.s0] : 0.f;
    const i64 s0 = sgi * SEG, s1 = min64(n.L, s0 + SEG);
    const i64 slot = ((b * n.nblk + k) * n.nseg + sgi) * PER;

    float A[NPT], h[NPT], g[NPT], dA[NPT];
    load_A(p.A, th, A);
    get_state(p.ckpt + slot, h);
    get_state(p.gst + slot, g);
#pragma unroll
    for (int q = 0; q < NPT; ++q) dA[q] = 0.f;
    float accD = 0.f, accBias = 0.f; // lane 0 of each channel
    const bool want_dz = p.z.p && p.dz.p;

    // ---- forward: hb[i] = the state entering step s0 + i (i = 0 .. s1 - s0: the last
    // slot is the state after the segment); dz needs y, so it is done here
    put_state(hb, h);
#ifdef CG_VARLEN // the next sequence start in the segment (nxt > s1: none)
    i64 vn = cu_upper(p.cu, p.nseq, n.L, s0 - 1);
    i64 nxt = vn < p.nseq ? cu_at(p.cu, vn, n.L) : n.L + 1;
#endif
    for (i64 t0 = s0; t0 < s1; t0 += CHUNK) {
        const int nt = (int)min64(CHUNK, s1 - t0);
        stage_bc<TB>(p.Bm, b, th, t0, nt, s_b);
        if (want_dz) stage_bc<TC>(p.Cm, b, th, t0, nt, s_c);
        stage_dt_x(p.x, p.delta, p.dbias, n, b, d0, t0, nt, s_dt, s_x, nullptr);
        staged();
        for (int t = 0; t < nt; ++t) {
            const float dt = s_dt[t * BD + th.ch], xv = s_x[t * BD + th.ch], dtx = dt * xv;
            const i64 tt = t0 + t;
            const float *Bt = s_b + (t * GB + th.gi) * N + th.j, *Ct = s_c + (t * GB + th.gi) * N + th.j;
            float yp = 0.f;
#ifdef CG_VARLEN
            if (tt == nxt) { // a sequence starts: from its h0
                vn = cu_upper(p.cu, p.nseq, n.L, tt);
                load_state(p.h0, vn - 1, th, h);
                nxt = vn < p.nseq ? cu_at(p.cu, vn, n.L) : n.L + 1;
            }
#endif
#pragma unroll
            for (int q = 0; q < NPT; ++q) {
                const int s = th.j + TPC * q;
                if (FULL || s < N) {
                    h[q] = expf(dt * A[q]) * h[q] + dtx * Bt[TPC * q];
                    if (want_dz) yp = fmaf(Ct[TPC * q], h[q], yp);
                }
            }
            put_state(hb + (tt - s0 + 1) * PER, h);
            if (want_dz) {
                yp = chan_sum(yp);
                if (th.j == 0 && own) {
                    const float yv = fmaf(Dd, xv, yp);
                    const float zv = cg_f32(tp<const TZ>(p.z)[b * p.z.s0 + tt * p.z.s1 + th.d * p.z.s2]);
                    const float sg = sigmoid(zv);
                    const float dyv = cg_f32(tp<const TDY>(p.dy)[b * p.dy.s0 + tt * p.dy.s1 + th.d * p.dy.s2]);
                    tp<TDZ>(p.dz)[b * p.dz.s0 + tt * p.dz.s1 + th.d * p.dz.s2] =
                        cg_round<TDZ>(dyv * yv * sg * (1.f + zv * (1.f - sg)));
                }
            }
        }
        __syncthreads();
    }

    // ---- the unit's channels of this block, and the groups they belong to
    const i64 cl = max64(d0, ca), ch = min64(d0 + BD, cb);
    const i64 gfirst = G == 1 ? 0 : udiv(cl, n.dpg);
    const int ngs = G == 1 ? 1 : (int)(udiv(ch - 1, n.dpg) - gfirst + 1);

    // ---- reverse walk, one chunk at a time (chunks start at s0 + multiples of CHUNK);
    // the states come back from hb (keeping them in registers costs NPT more)
#ifdef CG_VARLEN // the sequence holding the current step and its start (-1: none)
    i64 vq = cu_upper(p.cu, p.nseq, n.L, s1 - 1) - 1;
    i64 vst = vq >= 0 ? cu_at(p.cu, vq, n.L) : -1;
#endif
    for (i64 t0 = s0 + (s1 - 1 - s0) / CHUNK * CHUNK; t0 >= s0; t0 -= CHUNK) {
        const int nt = (int)min64(CHUNK, s1 - t0);
        stage_bc<TB>(p.Bm, b, th, t0, nt, s_b);
        stage_bc<TC>(p.Cm, b, th, t0, nt, s_c);
        stage_dt_x(p.x, p.delta, p.dbias, n, b, d0, t0, nt, s_dt, s_x, s_sg);
        stage_dy(p, b, d0, t0, nt, s_dy);
        staged();
        for (int t = nt - 1; t >= 0; --t) {
            const int e = t * BD + th.ch;
            const float dt = s_dt[e], xv = s_x[e], dyv = s_dy[e];
            const i64 tt = t0 + t;
            const float *Bt = s_b + (t * GB + th.gi) * N + th.j, *Ct = s_c + (t * GB + th.gi) * N + th.j;
            const float *hp = hb + (tt - s0) * PER + tid, *hc = hp + PER;
            float *rb = s_rb + e * NP, *rc = s_rc + e * NP;
            float dxp = 0.f, ddtp = 0.f;
#ifdef CG_VARLEN
            const bool at_start = tt == vst; // the state entering tt is h0 of its sequence
            const float *h0p = at_start && p.h0.p ? p.h0.p + vq * p.h0.s0 + th.dd * p.h0.s1 : nullptr;
#endif
#pragma unroll
            for (int q = 0; q < NPT; ++q) {
                const int s = th.j + TPC * q;
                if (FULL || s < N) {
#ifdef CG_VARLEN
                    const float hprev = at_start ? (h0p ? h0p[s * p.h0.s2] : 0.f) : hp[q * NT];
                    const float Bv = Bt[TPC * q], Cv = Ct[TPC * q];
#else
                    const float hprev = hp[q * NT], Bv = Bt[TPC * q], Cv = Ct[TPC * q];
#endif
                    const float a = expf(dt * A[q]);
                    rc[s] = dyv * hc[q * NT];
                    g[q] = fmaf(Cv, dyv, g[q]);
                    dxp = fmaf(g[q], Bv, dxp);
                    rb[s] = g[q] * dt * xv;
                    const float gha = g[q] * a * hprev;
                    ddtp = fmaf(A[q], gha, fmaf(g[q] * Bv, xv, ddtp));
                    dA[q] = fmaf(gha, dt, dA[q]);
                    g[q] *= a;
                }
            }
#ifdef CG_VARLEN
            if (at_start) { // g is dh0 of the sequence; the step before ends the previous one
#if defined(CG_P_STRATEGY_PAR)
                if (own) store_state(p.dh0, vq, th, g);
#endif
                vq = cu_upper(p.cu, p.nseq, n.L, tt - 1) - 1;
                vst = vq >= 0 ? cu_at(p.cu, vq, n.L) : -1;
                const i64 gq = vq < 0 ? 0 : vq;
                if (p.dhT.p) load_state(p.dhT, gq, th, g);
                else {
#pragma unroll
                    for (int q = 0; q < NPT; ++q) g[q] = 0.f;
                }
            }
#endif
            dxp = chan_sum(dxp);
            ddtp = chan_sum(ddtp);
            if (th.j == 0 && own) {
                const float dxv = fmaf(dxp, dt, Dd * dyv), ddel = ddtp * s_sg[e];
                tp<TDX>(p.dx)[b * p.dx.s0 + tt * p.dx.s1 + th.d * p.dx.s2] = cg_round<TDX>(dxv);
                tp<TDDELTA>(p.ddelta)[b * p.ddelta.s0 + tt * p.ddelta.s1 + th.d * p.ddelta.s2] =
                    cg_round<TDDELTA>(ddel);
                accD = fmaf(dyv, xv, accD);
                accBias += ddel;
            }
        }
        __syncthreads();
        // dB, dC of this chunk: per (step, group, n), the unit's channels of the group in
        // this block in order, then added to what the split's earlier blocks summed.
        for (int e = tid; e < nt * ngs * N; e += NT) {
            const int s = e % N, r = e / N, gs = r % ngs, t = r / ngs;
            const i64 gg = gfirst + gs;
            const int cbeg = (int)(max64(gg * n.dpg, cl) - d0), cend = (int)(min64((gg + 1) * n.dpg, ch) - d0);
            float sb = 0.f, sc = 0.f;
            for (int c = cbeg; c < cend; ++c) {
                sb += s_rb[(t * BD + c) * NP + s];
                sc += s_rc[(t * BD + c) * NP + s];
            }
            const bool first = first_blk || gg * n.dpg >= d0; // the group's first block in the split
            const i64 tt = t0 + t;
            float *ob = aB.p + b * aB.s0 + tt * aB.s1 + gg * aB.s2 + s * aB.s3;
            float *oc = aC.p + b * aC.s0 + tt * aC.s1 + gg * aC.s2 + s * aC.s3;
            *ob = first ? sb : *ob + sb;
            *oc = first ? sc : *oc + sc;
        }
        __syncthreads();
    }

    // ---- this segment's share of dA, dD, ddelta_bias
    if (own) {
        const i64 o = (b * n.nseg + sgi) * n.D + th.d;
#pragma unroll
        for (int q = 0; q < NPT; ++q) {
            const int s = th.j + TPC * q;
            if (FULL || s < N) p.pA[o * N + s] = dA[q];
        }
        if (th.j == 0) {
            p.pD[o] = accD;
            p.pbias[o] = accBias;
        }
    }
}

} // namespace sscan

#if defined(CG_P_STRATEGY_SEQ) && defined(CG_VARLEN)
// Launch 1 (seq, varlen), grid nseq * nblk, blockIdx.x = sequence * nblk + channel block:
// the sequence's steps, cut at the segment boundaries, forward from h0[n] (ckpt of the
// segments starting inside it), then backward from dhT[n] (gst of the segments whose last
// step is inside it); dh0[n] (a 0-length sequence: dhT[n]).
SSCAN_ENTRY cg_sscan_bwd_states(cg_sscan_bwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const cg_sscan_dims &n = p.n;
    const i64 sq = udiv(blockIdx.x, n.nblk), blk = umod(blockIdx.x, n.nblk), d0 = blk * BD;
    const Thr th = thread_coords(n, d0);
    i64 ta, tb;
    seq_range(p.cu, sq, n.L, &ta, &tb);
    float A[NPT], h[NPT];
    load_A(p.A, th, A);
    const FwdIO io = bwd_io(p);
    const i64 sa = udiv(ta, SEG), sb = tb > ta ? udiv(tb - 1, SEG) : sa - 1; // segments it meets
    float *ck = p.ckpt + blk * n.nseg * PER, *gs = p.gst + blk * n.nseg * PER;
    load_state(p.h0, sq, th, h);
    for (i64 sgi = sa; sgi <= sb; ++sgi) {
        const i64 s0 = sgi * SEG;
        if (s0 >= ta) put_state(ck + sgi * PER, h);
        scan_range(io, sm, 0, d0, th, A, h, max64(ta, s0), min64(tb, s0 + SEG));
    }
    load_state(p.dhT, sq, th, h); // h is dead: reuse it for g
    for (i64 sgi = sb; sgi >= sa; --sgi) {
        const i64 s0 = sgi * SEG, s1 = min64(n.L, s0 + SEG);
        if (tb >= s1) put_state(gs + sgi * PER, h);
        gscan_range(p, sm, 0, d0, th, A, h, max64(ta, s0), min64(tb, s1));
    }
    store_state(p.dh0, sq, th, h);
}
#elif defined(CG_P_STRATEGY_SEQ)
// Launch 1 (seq), grid B * nblk, blockIdx.x = b * nblk + channel block.
SSCAN_ENTRY cg_sscan_bwd_states(cg_sscan_bwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const cg_sscan_dims &n = p.n;
    const i64 b = udiv(blockIdx.x, n.nblk), d0 = umod(blockIdx.x, n.nblk) * BD;
    const Thr th = thread_coords(n, d0);
    float A[NPT], h[NPT];
    load_A(p.A, th, A);
    load_state(p.h0, b, th, h);
    FwdIO io = bwd_io(p);
    io.ckpt = p.ckpt + (i64)blockIdx.x * n.nseg * PER;
    scan_range(io, sm, b, d0, th, A, h, 0, n.L);
    // h is dead: reuse it for g
    load_state(p.dhT, b, th, h);
    float *gs = p.gst + (i64)blockIdx.x * n.nseg * PER;
    for (i64 sgi = n.nseg - 1; sgi >= 0; --sgi) {
        put_state(gs + sgi * PER, h);
        gscan_range(p, sm, b, d0, th, A, h, sgi * SEG, min64(n.L, sgi * SEG + SEG));
    }
    store_state(p.dh0, b, th, h);
}
#else
// Launch 1 (par), grid B * nblk * nseg, blockIdx.x = (b * nblk + block) * nseg + segment:
// the segment from zero, forward (end state into its ckpt slot, sum of dt into sdt)
// and backward (g into its gst slot).
SSCAN_ENTRY cg_sscan_bwd_local(cg_sscan_bwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const cg_sscan_dims &n = p.n;
    const i64 sgi = umod(blockIdx.x, n.nseg), bblk = udiv(blockIdx.x, n.nseg);
    const i64 b = udiv(bblk, n.nblk), d0 = umod(bblk, n.nblk) * BD;
    const Thr th = thread_coords(n, d0);
    const i64 s0 = sgi * SEG, s1 = min64(n.L, s0 + SEG);
    float A[NPT], v[NPT];
    load_A(p.A, th, A);
#pragma unroll
    for (int k = 0; k < NPT; ++k) v[k] = 0.f;
#ifdef CG_VARLEN // from 0 at each sequence start; the head's sum of dt in sdt's second half
    cg_ktensor none;
    none.p = nullptr;
    float head;
    const float sdt = scan_seqs(bwd_io(p), p.cu, p.nseq, none, none, sm, d0, th, A, v, s0, s1, &head);
    if (th.j == 0) p.sdt[n.nblk * n.nseg * BD + (i64)blockIdx.x * BD + th.ch] = head;
#else
    const float sdt = scan_range(bwd_io(p), sm, b, d0, th, A, v, s0, s1);
#endif
    put_state(p.ckpt + (i64)blockIdx.x * PER, v);
    if (th.j == 0) p.sdt[(i64)blockIdx.x * BD + th.ch] = sdt;
#pragma unroll
    for (int k = 0; k < NPT; ++k) v[k] = 0.f;
#ifdef CG_VARLEN // backward over the head only (g of the later sequences restarts at their ends)
    const i64 q0 = cu_upper(p.cu, p.nseq, n.L, s0);
    const i64 e0 = q0 < p.nseq ? cu_at(p.cu, q0, n.L) : n.L;
    gscan_range(p, sm, 0, d0, th, A, v, s0, e0 > s0 && e0 < s1 ? e0 : s1);
#else
    gscan_range(p, sm, b, d0, th, A, v, s0, s1);
#endif
    put_state(p.gst + (i64)blockIdx.x * PER, v);
}

// Launch 2 (par), one thread per (b, block, state slot k, thread): the segments'
// entering states from h0 and state gradients from dhT; dh0.
SSCAN_ENTRY cg_sscan_bwd_carry(cg_sscan_bwd_params p) {
    using namespace sscan;
    const cg_sscan_dims &n = p.n;
    const i64 e = (i64)blockIdx.x * NT + threadIdx.x;
    if (e >= n.B * n.nblk * PER) return;
    const i64 bblk = e / PER, r = e - bblk * PER, k = r / NT, tid = r - k * NT;
    const i64 b = udiv(bblk, n.nblk), d = umod(bblk, n.nblk) * BD + tid / TPC, s = tid % TPC + TPC * k;
    if (d >= n.D || s >= N) return;
    const i64 ns = n.nseg;
    const float a = p.A.p[d * p.A.s0 + s * p.A.s1];
    float *ck = p.ckpt + bblk * ns * PER + r, *gs = p.gst + bblk * ns * PER + r;
    const float *sdt = p.sdt + bblk * ns * BD + tid / TPC;
    float st = p.h0.p ? p.h0.p[b * p.h0.s0 + d * p.h0.s1 + s * p.h0.s2] : 0.f;
    for (i64 sgi = 0; sgi < ns; ++sgi) {
        const float u = ck[sgi * PER];
        ck[sgi * PER] = st;
#ifdef CG_VARLEN // a segment with a start carries from h0 of its last sequence
        i64 last;
        if (starts_in(p.cu, p.nseq, n.L, sgi * SEG, min64(n.L, sgi * SEG + SEG), &last))
            st = p.h0.p ? p.h0.p[last * p.h0.s0 + d * p.h0.s1 + s * p.h0.s2] : 0.f;
#endif
        st = fmaf(expf(a * sdt[sgi * BD]), st, u);
    }
#ifdef CG_VARLEN
    // Backward: E = g entering a segment's last step (dhT of its sequence where that step
    // ends one), g at a segment's first step = exp(A sdt_head) X + V, X = E when the head
    // reaches the segment's end, else dhT of the head's sequence.
    const float *shd = sdt + n.nblk * ns * BD;
    float gin = 0.f;
    for (i64 sgi = ns - 1; sgi >= 0; --sgi) {
        const i64 s0 = sgi * SEG, s1 = min64(n.L, s0 + SEG);
        const i64 qe = cu_upper(p.cu, p.nseq, n.L, s1 - 1); // first start after s1 - 1
        float gt = gin;
        if (s1 == n.L || (qe < p.nseq && cu_at(p.cu, qe, n.L) == s1)) { // s1 - 1 ends its sequence
            const i64 q = qe - 1 < 0 ? 0 : qe - 1;
            gt = p.dhT.p ? p.dhT.p[q * p.dhT.s0 + d * p.dhT.s1 + s * p.dhT.s2] : 0.f;
        }
        const float v = gs[sgi * PER];
        gs[sgi * PER] = gt;
        const i64 q0 = cu_upper(p.cu, p.nseq, n.L, s0); // first start after s0
        if (q0 < p.nseq && cu_at(p.cu, q0, n.L) < s1) { // the head ends inside: from dhT of its sequence
            const i64 q = q0 - 1 < 0 ? 0 : q0 - 1;
            gt = p.dhT.p ? p.dhT.p[q * p.dhT.s0 + d * p.dhT.s1 + s * p.dhT.s2] : 0.f;
        }
        gin = fmaf(expf(a * shd[sgi * BD]), gt, v);
    }
    // dh0 of the 0-length sequences (the others: the grads pass, at their starts)
    if (p.dh0.p)
        for (i64 q = 0; q < p.nseq; ++q) {
            i64 qa, qb;
            seq_range(p.cu, q, n.L, &qa, &qb);
            if (qa == qb)
                p.dh0.p[q * p.dh0.s0 + d * p.dh0.s1 + s * p.dh0.s2] =
                    p.dhT.p ? p.dhT.p[q * p.dhT.s0 + d * p.dhT.s1 + s * p.dhT.s2] : 0.f;
        }
#else
    float gt = p.dhT.p ? p.dhT.p[b * p.dhT.s0 + d * p.dhT.s1 + s * p.dhT.s2] : 0.f;
    for (i64 sgi = ns - 1; sgi >= 0; --sgi) {
        const float v = gs[sgi * PER];
        gs[sgi * PER] = gt;
        gt = fmaf(expf(a * sdt[sgi * BD]), gt, v);
    }
    if (p.dh0.p) p.dh0.p[b * p.dh0.s0 + d * p.dh0.s1 + s * p.dh0.s2] = gt;
#endif
}
#endif

// Grads launch: work items w = ((b * nseg + segment) * nunit + unit) * nsplit + split,
// grid-strided (the grid is capped so the state buffers hb stay a fixed size; an item's
// results do not depend on which CTA runs it).
SSCAN_ENTRY cg_sscan_bwd_grads(cg_sscan_bwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const cg_sscan_dims &n = p.n;
    float *hb = HB_SMEM ? sm + M_H : p.hbuf + (i64)blockIdx.x * (SEG + 1) * PER;
    const i64 ucs = p.gpu * n.dpg; // channels of a unit
    for (i64 w = blockIdx.x; w < p.nwork; w += gridDim.x) {
        const i64 split = umod(w, p.nsplit), r1 = udiv(w, p.nsplit);
        const i64 unit = umod(r1, p.nunit), r2 = udiv(r1, p.nunit);
        const i64 sgi = umod(r2, n.nseg), b = udiv(r2, n.nseg);
        const i64 ca = unit * ucs, cb = min64(n.D, ca + ucs);
        const i64 kf = udiv(ca, BD), nk = udiv(cb - 1, BD) - kf + 1; // blocks meeting the unit
        const i64 ka = kf + udiv(nk * split, p.nsplit), kb = kf + udiv(nk * (split + 1), p.nsplit);
        const cg_ktensor aB = bc_target(p, p.dB, p.pB, split), aC = bc_target(p, p.dC, p.pC, split);
        for (i64 k = ka; k < kb; ++k) grads_block(p, sm, hb, b, k, sgi, ca, cb, k == ka, aB, aC);
    }
}

// Reduce launch, one thread per output element: [B, L, G, N] of dB and dC (split only),
// then [D, N] of dA, then [D] of dD and ddelta_bias.
SSCAN_ENTRY cg_sscan_bwd_reduce(cg_sscan_bwd_params p) {
    using namespace sscan;
    const cg_sscan_dims &n = p.n;
    i64 e = (i64)blockIdx.x * NT + threadIdx.x; // < 2^31 (sscan_bwd.lua)
    const i64 nbc = p.nsplit > 1 || BC_PARTIAL ? n.B * n.L * n.G * N : 0;
    if (e < nbc) {
        const i64 s = e % N, r = e / N, gg = umod(r, n.G), r2 = udiv(r, n.G), t = umod(r2, n.L), b = udiv(r2, n.L);
        const float *pb = p.pB + r * p.nsplit * N + s, *pc = p.pC + r * p.nsplit * N + s;
        float sb = 0.f, sc = 0.f;
        for (i64 q = 0; q < p.nsplit; ++q) {
            sb += pb[q * N];
            sc += pc[q * N];
        }
        tp<TDB>(p.dB)[b * p.dB.s0 + t * p.dB.s1 + gg * p.dB.s2 + s * p.dB.s3] = cg_round<TDB>(sb);
        tp<TDC>(p.dC)[b * p.dC.s0 + t * p.dC.s1 + gg * p.dC.s2 + s * p.dC.s3] = cg_round<TDC>(sc);
        return;
    }
    e -= nbc;
    const i64 nbs = n.B * n.nseg; // partials per element, b-major
    if (e < n.D * N) {
        float acc = 0.f;
        for (i64 q = 0; q < nbs; ++q) acc += p.pA[q * n.D * N + e];
        const i64 d = e / N, s = e % N;
        p.dA.p[d * p.dA.s0 + s * p.dA.s1] = acc;
        return;
    }
    e -= n.D * N;
    if (e < n.D) {
        float aD = 0.f, ab = 0.f;
        for (i64 q = 0; q < nbs; ++q) {
            aD += p.pD[q * n.D + e];
            ab += p.pbias[q * n.D + e];
        }
        if (p.dD.p) p.dD.p[e * p.dD.s0] = aD;
        if (p.ddbias.p) p.ddbias.p[e * p.ddbias.s0] = ab;
    }
}
