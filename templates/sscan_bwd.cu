// sscan_bwd.cu -- selective scan (Mamba-1 S6) backward, one specialization per (N, config).
//
// Rendered by generator/kernels/sscan_bwd.lua, which defines CG_N, CG_P_CHUNK,
// CG_P_DIM_BLOCK, CG_P_WARPS, CG_P_SEGMENT (and CG_SMEM_BYTES, checked below). The
// thread layout and the forward step are those of sscan_fwd.cu (included).
//
// Three launches, deterministic (no atomics; every sum has a fixed order):
//  1. cg_sscan_bwd_ckpt, grid B * nblk: the forward recurrence without outputs, storing
//     the state entering every SEGMENT-th step (ckpt). Memory B * D * N * L / SEGMENT.
//  2. cg_sscan_bwd_main, grid B * nblk: per segment, last first: recompute its states
//     from the checkpoint into this CTA's hbuf (SEGMENT + 1 states; with z also the
//     gradient into y and dz), then walk it backwards (shared/KERNEL_MATH.md):
//        g += C_t dy_t;  dC_t += dy_t h_t;  dx_t = sum_n g B_t dt + D dy_t;
//        dB_t += g dt x_t;  ddt_t = sum_n g (A a h_{t-1} + B_t x_t);
//        dA += g dt a h_{t-1};  g *= a        (a = exp(dt A))
//     Sums over n are lane butterflies; dB, dC sum the channels of a group: inside
//     the CTA in channel order through shared memory, into one partial slot per
//     (channel block, group) of pB, pC; dA, dD, ddelta_bias go to per-batch partials.
//  3. cg_sscan_bwd_reduce: dB, dC = the slots in block order; dA, dD, ddelta_bias = the
//     batch partials in batch order.
#define SSCAN_NO_FWD_ENTRY 1
#include "sscan_fwd.cu"

namespace sscan {

constexpr int SEG = CG_P_SEGMENT;
static_assert(SEG % CHUNK == 0, "segment: a multiple of chunk");

// Main-pass shared memory (floats): staged dt, softplus derivative, x, dy of one chunk
// [CHUNK][BD], then the per-channel dB and dC terms [CHUNK][BD][NP] (odd pitch NP).
constexpr int NP = N | 1;
constexpr int M_DT = 0;
constexpr int M_SG = M_DT + CHUNK * BD;
constexpr int M_X = M_SG + CHUNK * BD;
constexpr int M_DY = M_X + CHUNK * BD;
constexpr int M_RB = M_DY + CHUNK * BD;
constexpr int M_RC = M_RB + CHUNK * BD * NP;
constexpr int M_FLOATS = M_RC + CHUNK * BD * NP;
static_assert(F_FLOATS <= M_FLOATS, "the checkpoint pass's staging fits in the main pass's");
#ifdef CG_SMEM_BYTES // what generator/kernels/sscan_bwd.lua launches the main pass with
static_assert(4LL * M_FLOATS == CG_SMEM_BYTES, "sscan_bwd.lua smem_bytes() disagrees with the layout here");
#endif

} // namespace sscan

// Launch 1, grid B * nblk, blockIdx.x = b * nblk + channel block.
SSCAN_ENTRY cg_sscan_bwd_ckpt(cg_sscan_bwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const i64 b = udiv(blockIdx.x, p.n.nblk), d0 = umod(blockIdx.x, p.n.nblk) * BD;
    const Thr th = thread_coords(p.n, d0);
    float A[NPT], h[NPT];
    load_A(p.A, th, A);
    load_state(p.h0, b, th, h);
    FwdIO io;
    io.x = p.x, io.delta = p.delta, io.A = p.A, io.Bm = p.Bm, io.Cm = p.Cm, io.Dv = p.Dv, io.z = p.z;
    io.dbias = p.dbias, io.y.p = nullptr, io.n = p.n, io.segment = SEG;
    io.ckpt = p.ckpt + (i64)blockIdx.x * p.n.nseg * (i64)(NPT * NT);
    scan_range(io, sm, b, d0, th, A, h, 0, p.n.L);
}

// Launch 2, grid as launch 1.
SSCAN_ENTRY cg_sscan_bwd_main(cg_sscan_bwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const cg_sscan_dims &n = p.n;
    const i64 bblk = blockIdx.x, blk = umod(bblk, n.nblk), b = udiv(bblk, n.nblk), d0 = blk * BD;
    const Thr th = thread_coords(n, d0);
    const int tid = threadIdx.x;
    float *s_dt = sm + M_DT, *s_sg = sm + M_SG, *s_x = sm + M_X, *s_dy = sm + M_DY;
    float *s_rb = sm + M_RB, *s_rc = sm + M_RC;
    const float *Bb = p.Bm.p + b * p.Bm.s0 + th.g * p.Bm.s2;
    const float *Cb = p.Cm.p + b * p.Cm.s0 + th.g * p.Cm.s2;
    const i64 bs3 = p.Bm.s3, cs3 = p.Cm.s3;
    const float Dd = p.Dv.p ? p.Dv.p[th.dd * p.Dv.s0] : 0.f;

    float A[NPT], g[NPT], dA[NPT];
    load_A(p.A, th, A);
    load_state(p.dhT, b, th, g);
#pragma unroll
    for (int k = 0; k < NPT; ++k) dA[k] = 0.f;
    float accD = 0.f, accBias = 0.f; // lane 0 of each channel

    const float *ck = p.ckpt + bblk * n.nseg * (i64)(NPT * NT) + tid;
    float *hb = p.hbuf + bblk * (i64)(SEG + 1) * (NPT * NT) + tid; // slot s: h entering step s0 + s
    float *dyb = p.dybuf + bblk * (i64)SEG * BD;
    // The groups this block's channels meet, and where their dB/dC slots are.
    const i64 dlast = min64(d0 + BD, n.D) - 1;
    const i64 gfirst = udiv(d0, n.dpg);
    const int ngs = (int)(udiv(dlast, n.dpg) - gfirst + 1);

    for (i64 sgi = n.nseg - 1; sgi >= 0; --sgi) {
        const i64 s0 = sgi * SEG, s1 = min64(n.L, s0 + SEG);
        // ---- forward recompute of the segment's states (and dy after the z gate)
        float h[NPT];
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
            h[k] = ck[(sgi * NPT + k) * NT];
            hb[k * NT] = h[k];
        }
        for (i64 t0 = s0; t0 < s1; t0 += CHUNK) {
            const int nt = (int)min64(CHUNK, s1 - t0);
            stage_dt_x(p.x, p.delta, p.dbias, n, b, d0, t0, nt, s_dt, s_x, nullptr);
            __syncthreads();
            for (int t = 0; t < nt; ++t) {
                const float dt = s_dt[t * BD + th.ch], xv = s_x[t * BD + th.ch], dtx = dt * xv;
                const i64 tt = t0 + t;
                const float *Bt = Bb + tt * p.Bm.s1, *Ct = Cb + tt * p.Cm.s1;
                float *hs = hb + (tt - s0 + 1) * (i64)(NPT * NT);
                float yp = 0.f;
#pragma unroll
                for (int k = 0; k < NPT; ++k) {
                    const int s = th.j + TPC * k;
                    if (FULL || s < N) {
                        h[k] = expf(dt * A[k]) * h[k] + dtx * Bt[s * bs3];
                        if (p.z.p) yp = fmaf(Ct[s * cs3], h[k], yp);
                    }
                    hs[k * NT] = h[k];
                }
                if (p.z.p) {
                    yp = chan_sum(yp);
                    if (th.j == 0 && th.live) {
                        const float yv = fmaf(Dd, xv, yp);
                        const i64 o = b * p.z.s0 + tt * p.z.s1 + th.d * p.z.s2;
                        const float zv = p.z.p[o], sg = sigmoid(zv);
                        const float dyv = p.dy.p[b * p.dy.s0 + tt * p.dy.s1 + th.d * p.dy.s2];
                        if (p.dz.p) p.dz.p[b * p.dz.s0 + tt * p.dz.s1 + th.d * p.dz.s2] = dyv * yv * sg * (1.f + zv * (1.f - sg));
                        dyb[(tt - s0) * BD + th.ch] = dyv * zv * sg;
                    }
                }
            }
            __syncthreads();
        }
        // ---- reverse walk, one chunk at a time (chunks start at multiples of CHUNK)
        for (i64 t0 = s0 + (s1 - 1 - s0) / CHUNK * CHUNK; t0 >= s0; t0 -= CHUNK) {
            const int nt = (int)min64(CHUNK, s1 - t0);
            stage_dt_x(p.x, p.delta, p.dbias, n, b, d0, t0, nt, s_dt, s_x, s_sg);
            for (int e = tid; e < CHUNK * BD; e += NT) {
                const int t = e / BD, c = e - t * BD;
                const i64 d = d0 + c, tt = t0 + t;
                float v = 0.f;
                if (t < nt && d < n.D)
                    v = p.z.p ? dyb[(tt - s0) * BD + c] : p.dy.p[b * p.dy.s0 + tt * p.dy.s1 + d * p.dy.s2];
                s_dy[e] = v;
            }
            __syncthreads();
            for (int t = nt - 1; t >= 0; --t) {
                const int e = t * BD + th.ch;
                const float dt = s_dt[e], xv = s_x[e], dyv = s_dy[e];
                const i64 tt = t0 + t;
                const float *Bt = Bb + tt * p.Bm.s1, *Ct = Cb + tt * p.Cm.s1;
                const float *hc = hb + (tt - s0 + 1) * (i64)(NPT * NT), *hp = hc - NPT * NT;
                float *rb = s_rb + e * NP, *rc = s_rc + e * NP;
                float dxp = 0.f, ddtp = 0.f;
#pragma unroll
                for (int k = 0; k < NPT; ++k) {
                    const int s = th.j + TPC * k;
                    if (FULL || s < N) {
                        const float hcur = hc[k * NT], hprev = hp[k * NT];
                        const float Bv = Bt[s * bs3], Cv = Ct[s * cs3];
                        const float a = expf(dt * A[k]);
                        rc[s] = dyv * hcur;
                        g[k] = fmaf(Cv, dyv, g[k]);
                        dxp = fmaf(g[k], Bv, dxp);
                        rb[s] = g[k] * dt * xv;
                        const float gha = g[k] * a * hprev;
                        ddtp = fmaf(A[k], gha, fmaf(g[k] * Bv, xv, ddtp));
                        dA[k] = fmaf(gha, dt, dA[k]);
                        g[k] *= a;
                    }
                }
                dxp = chan_sum(dxp);
                ddtp = chan_sum(ddtp);
                if (th.j == 0 && th.live) {
                    const float dxv = fmaf(dxp, dt, Dd * dyv), ddel = ddtp * s_sg[e];
                    p.dx.p[b * p.dx.s0 + tt * p.dx.s1 + th.d * p.dx.s2] = dxv;
                    p.ddelta.p[b * p.ddelta.s0 + tt * p.ddelta.s1 + th.d * p.ddelta.s2] = ddel;
                    accD = fmaf(dyv, xv, accD);
                    accBias += ddel;
                }
            }
            __syncthreads();
            // dB, dC of this chunk: per (step, group met, n), the block's channels of the
            // group in order, into slot (block - first block of the group).
            for (int e = tid; e < nt * ngs * N; e += NT) {
                const int s = e % N, r = e / N, gs = r % ngs, t = r / ngs;
                const i64 gg = gfirst + gs;
                const int cb = (int)((gg * n.dpg > d0 ? gg * n.dpg : d0) - d0);
                const int ce = (int)(min64(min64(d0 + BD, (gg + 1) * n.dpg), n.D) - d0);
                float sb = 0.f, sc = 0.f;
                for (int c = cb; c < ce; ++c) {
                    sb += s_rb[(t * BD + c) * NP + s];
                    sc += s_rc[(t * BD + c) * NP + s];
                }
                const i64 slot = blk - gg * n.dpg / BD;
                const i64 o = (((b * n.L + t0 + t) * n.G + gg) * p.nbg + slot) * N + s;
                p.pB[o] = sb;
                p.pC[o] = sc;
            }
            __syncthreads();
        }
    }
    if (th.live) {
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
            const int s = th.j + TPC * k;
            if (FULL || s < N) {
                p.pA[(b * n.D + th.d) * N + s] = dA[k];
                if (p.dh0.p) p.dh0.p[b * p.dh0.s0 + th.d * p.dh0.s1 + s * p.dh0.s2] = g[k];
            }
        }
        if (th.j == 0) {
            p.pD[b * n.D + th.d] = accD;
            p.pbias[b * n.D + th.d] = accBias;
        }
    }
}

// Launch 3, one thread per output element: [B, L, G, N] of dB and dC, then [D, N] of
// dA, then [D] of dD and ddelta_bias.
SSCAN_ENTRY cg_sscan_bwd_reduce(cg_sscan_bwd_params p) {
    using namespace sscan;
    const cg_sscan_dims &n = p.n;
    i64 e = (i64)blockIdx.x * NT + threadIdx.x; // < 2^31 (sscan_bwd.lua)
    const i64 nbc = n.B * n.L * n.G * N;
    if (e < nbc) {
        const i64 s = e % N, r = e / N, gg = umod(r, n.G), r2 = udiv(r, n.G), t = umod(r2, n.L), b = udiv(r2, n.L);
        const i64 nslot = (gg * n.dpg + n.dpg - 1) / BD - gg * n.dpg / BD + 1;
        const float *pb = p.pB + (r * p.nbg) * N + s, *pc = p.pC + (r * p.nbg) * N + s;
        float sb = 0.f, sc = 0.f;
        for (i64 q = 0; q < nslot; ++q) {
            sb += pb[q * N];
            sc += pc[q * N];
        }
        p.dB.p[b * p.dB.s0 + t * p.dB.s1 + gg * p.dB.s2 + s * p.dB.s3] = sb;
        p.dC.p[b * p.dC.s0 + t * p.dC.s1 + gg * p.dC.s2 + s * p.dC.s3] = sc;
        return;
    }
    e -= nbc;
    if (e < n.D * N) {
        const i64 d = e / N, s = e % N;
        float acc = 0.f;
        for (i64 b = 0; b < n.B; ++b) acc += p.pA[(b * n.D + d) * N + s];
        p.dA.p[d * p.dA.s0 + s * p.dA.s1] = acc;
        return;
    }
    e -= n.D * N;
    if (e < n.D) {
        float aD = 0.f, ab = 0.f;
        for (i64 b = 0; b < n.B; ++b) {
            aD += p.pD[b * n.D + e];
            ab += p.pbias[b * n.D + e];
        }
        if (p.dD.p) p.dD.p[e * p.dD.s0] = aD;
        if (p.ddbias.p) p.ddbias.p[e * p.ddbias.s0] = ab;
    }
}
