// sscan_fwd.cu -- selective scan (Mamba-1 S6) forward, one specialization per (N, G, config).
//
// Rendered by generator/kernels/sscan_fwd.lua (and, included, by sscan_bwd.cu), which
// defines before this text:
//   CG_N                                       state size (1..256)
//   CG_G                                       groups of B and C (ungrouped B/C: 1,
//                                              with group stride 0)
//   CG_P_CHUNK, CG_P_DIM_BLOCK, CG_P_WARPS     time steps staged per iteration,
//                                              channels per CTA, warps per CTA
//   CG_P_STRATEGY_{SEQ,PAR}                    (forward only) see below
//   CG_T_X, CG_T_DELTA, CG_T_B, CG_T_C, CG_T_Z, CG_T_Y   storage type of each of those
//                                              tensors: float when not defined, else
//                                              cg_bf16 or cg_f16 (issue #15; the
//                                              backward adds its dy and gradients)
// The same text compiles under NVRTC and, with -DCG_EMULATE, under the SIMT emulator.
//
// Math, per (b, d) and state n:
//   dt = delta + bias, softplus(dt) if set;   h_t = exp(dt A_dn) h_{t-1} + dt B_tn x_t
//   y_t = sum_n C_tn h_tn + D_d x_t,  y_t *= silu(z_t) if z is given.
// Thread layout: a CTA owns BD consecutive channels of one batch row; each channel is
// owned by TPC = 32 * WARPS / BD consecutive lanes of one warp, lane j of them keeping
// the states n = j, j + TPC, ... (NPT of them) in registers. Sums over n are xor
// butterflies inside the lane group (bit-identical in every lane, so deterministic).
// Per iteration the CTA stages CHUNK steps of its channels' dt and x and of the B and
// C rows of the groups its channels belong to in shared memory (x, B, C by cp.async:
// 16 bytes when the rows are contiguous and 16-byte aligned, 4 bytes otherwise; dt is
// loaded and transformed), runs the CHUNK steps from shared memory only (32-bit
// shared-memory indices; the 64-bit offsets are computed once per staged element),
// then writes y through shared memory. A 16-bit tensor is widened to float as it is
// staged (x, B, C: one 16-byte load of 8 halves where rows are contiguous and aligned,
// 2-byte loads otherwise; delta, z: 8 bytes of 4 halves, or 2) and y is rounded once
// as it is stored; the math and the states are float32. Any D (channels past D compute on zeros and
// store nothing), any L (the last chunk is short), any strides, 64-bit offsets.
// Strategies:
//   seq  one CTA per (b, channel block) walks all L steps.
//   par  for small B * D: time split in pieces of CG_SSCAN_PIECE_CHUNKS * CHUNK steps;
//        (1) per (b, block, piece) the local scan from h = 0 -> end state U_p and
//        sum(dt) (the piece's decay is exp(A sum(dt))), (2) a carry pass per (b, d, n):
//        S_{p+1} = exp(A sdt_p) S_p + U_p from h0 (writes hT), (3) per piece the scan
//        again from S_p, writing y.
// Varlen (CG_VARLEN, docs/varlen.md): B = 1 and nseq sequences packed along L, their
// offsets read on the device (cu_at: every one clamped to [0, L], each end to [start,
// L]). seq: one CTA per (sequence, channel block) scans the sequence from h0[n] and
// writes hT[n]. par: the pieces stay on the time grid; (1) and (3) restart the state at
// every sequence start inside the piece (scan_seqs), (2) carries only into a piece with
// no start, else from h0 of its last sequence; (3) writes hT of the sequences ending in
// the piece (and of the 0-length ones starting there).
#include "cg_device.cuh"
#include "sscan_params.h"
#ifdef CG_VARLEN
#include "cg_varlen.cuh"
#endif

namespace sscan {

constexpr int N = CG_N;
constexpr int G = CG_G; // n.G at run time; with one group every channel reads group 0
constexpr int CHUNK = CG_P_CHUNK;
constexpr int BD = CG_P_DIM_BLOCK;
constexpr int WARPS = CG_P_WARPS;
constexpr int NT = 32 * WARPS;
constexpr int TPC = NT / BD;             // lanes per channel
constexpr int NPT = (N + TPC - 1) / TPC; // states per lane
constexpr bool FULL = NPT * TPC == N;    // no masked states

static_assert(N >= 1 && N <= 256, "N: 1..256");
static_assert(G >= 1, "G: at least one group");
static_assert(CHUNK >= 1 && CHUNK <= 64, "chunk: 1..64");
static_assert(WARPS >= 1 && NT <= 1024, "warps: 1..32");
static_assert(NT % BD == 0 && TPC >= 1 && TPC <= 32 && (TPC & (TPC - 1)) == 0,
              "dim_block: a channel's lanes are a power of two within one warp");

typedef cg_i64 i64;

static_assert(BD % 8 == 0, "dim_block: a multiple of 8 (16-byte rows of staged x, 8 halves)");

// Storage types (cg_device.cuh): float, cg_bf16 or cg_f16.
#include "cg_ttypes.cuh" // CG_T_<tensor>: float when not defined
typedef CG_T_X TX;
typedef CG_T_DELTA TDELTA;
typedef CG_T_B TB;
typedef CG_T_C TC;
typedef CG_T_Z TZ;
typedef CG_T_Y TY;

// Tensor t's data as T (cg_ktensor holds a float pointer whatever the storage).
template <class T> __device__ __forceinline__ T *tp(const cg_ktensor &t) { return reinterpret_cast<T *>(t.p); }
// Elements of T in 16 bytes.
template <class T> struct Vec { static constexpr int W = 16 / (int)sizeof(T); };

// Groups of B and C one block of channels can meet (the staged rows per step).
constexpr int GB = G == 1 ? 1 : (G < BD ? G : BD);
// Forward shared memory (floats): dt, x, y of one chunk, [CHUNK][BD] each, then the B
// and C rows of the block's groups, [CHUNK][GB][N] each (16-byte aligned: CHUNK * BD is
// a multiple of 4).
constexpr int BC_FLOATS = CHUNK * GB * N;
constexpr int F_DT = 0;
constexpr int F_X = F_DT + CHUNK * BD;
constexpr int F_Y = F_X + CHUNK * BD;
constexpr int F_B = F_Y + CHUNK * BD;
constexpr int F_C = F_B + BC_FLOATS;
constexpr int F_FLOATS = F_C + BC_FLOATS;

__device__ __forceinline__ float softplus(float v) { return v <= 20.f ? log1pf(expf(v)) : v; }
__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// Sum of v over the TPC lanes of a channel; every lane of the warp calls it.
__device__ __forceinline__ float chan_sum(float v) {
#pragma unroll
    for (int o = TPC / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ i64 min64(i64 a, i64 b) { return a < b ? a : b; }

// Quotient and remainder of indices the constraints keep below 2^32 (grid sizes, D, L,
// element counts of the reductions): 32-bit division is inline, a 64-bit one by a
// run-time divisor is a called subroutine that makes ptxas spill around the call.
__device__ __forceinline__ i64 udiv(i64 a, i64 b) { return (i64)((unsigned)a / (unsigned)b); }
__device__ __forceinline__ i64 umod(i64 a, i64 b) { return (i64)((unsigned)a % (unsigned)b); }

// This thread's place: channel ch of the block (d = d0 + ch; dd = d clamped into
// [0, D) for addressing), lane j within the channel, group g of dd; the block's groups
// [g0, g0 + ngb) (its live channels'), gi = g - g0 the row of g in the staged B and C.
struct Thr {
    int ch, j, gi, ngb;
    i64 d, dd, g, g0;
    bool live;
};

__device__ __forceinline__ Thr thread_coords(const cg_sscan_dims &n, i64 d0) {
    Thr t;
    t.ch = (int)threadIdx.x / TPC;
    t.j = (int)threadIdx.x % TPC;
    t.d = d0 + t.ch;
    t.live = t.d < n.D;
    t.dd = t.live ? t.d : n.D - 1;
    t.g = G == 1 ? 0 : udiv(t.dd, n.dpg);
    t.g0 = G == 1 ? 0 : udiv(d0, n.dpg);
    t.ngb = G == 1 ? 1 : (int)(udiv(min64(d0 + BD, n.D) - 1, n.dpg) - t.g0 + 1);
    t.gi = (int)(t.g - t.g0);
    return t;
}

__device__ __forceinline__ bool align16(const void *p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// A [b, l, d] tensor of T whose rows over d are contiguous and 16-byte aligned (for
// every b, l and every d multiple of 16 bytes' worth): 4 float channels or 8 halves
// move in one 16-byte access.
template <class T> __device__ __forceinline__ bool rows16(const cg_ktensor &t) {
    return t.s2 == 1 && ((t.s0 | t.s1) & (Vec<T>::W - 1)) == 0 && align16(t.p);
}

// Channels c .. c + 3 (those below live; c a multiple of 4) of a row at row (channel
// stride s) into v, widened (0 for the others); one 16-byte load (8 for halves) when
// vec and all 4 are live.
template <class T> __device__ __forceinline__ void ld4(const T *row, i64 s, int c, int live, bool vec, float (&v)[4]) {
    if (vec && c + 4 <= live) {
        if constexpr (sizeof(T) == 4) {
            const float4 q = *reinterpret_cast<const float4 *>(row + c);
            v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
            const uint2 q = *reinterpret_cast<const uint2 *>(row + c);
            v[0] = cg_lo<T>(q.x), v[1] = cg_hi<T>(q.x), v[2] = cg_lo<T>(q.y), v[3] = cg_hi<T>(q.y);
        }
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = c + q < live ? cg_f32(row[(c + q) * s]) : 0.f;
}

// v into channels c .. c + 3 (those below live) of a row, rounded to T, as ld4.
template <class T> __device__ __forceinline__ void st4(T *row, i64 s, int c, int live, bool vec, const float (&v)[4]) {
    if (vec && c + 4 <= live) {
        if constexpr (sizeof(T) == 4) {
            *reinterpret_cast<float4 *>(row + c) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
            uint2 q;
            q.x = cg_pack2<T>(v[0], v[1]);
            q.y = cg_pack2<T>(v[2], v[3]);
            *reinterpret_cast<uint2 *>(row + c) = q;
        }
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q)
        if (c + q < live) row[(c + q) * s] = cg_round<T>(v[q]);
}

// 8 values of T widened into shared memory at dst (16-byte aligned) from one 16-byte
// load at src (16-byte aligned).
template <class T> __device__ __forceinline__ void ld8_to_smem(float *dst, const T *src) {
    float v[8];
    cg_load8(src, v);
    *reinterpret_cast<float4 *>(dst) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(dst + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

// The staging copies are called functions (__noinline__) with scalar arguments: each
// is compiled once per module instead of once per chunk loop (compile time), and the
// call costs little next to the copies.
#define SSCAN_COPY __device__ __noinline__

// Copies of nt rows (stride s1) of ngb groups (stride s2) of N states (stride s3) of T
// from base into s ([CHUNK][GB][N]); vec: 16-byte pieces (rows contiguous, aligned).
// float: cp.async; halves: loaded and widened here.
template <class T> SSCAN_COPY void copy_bc(float *s, const T *base, i64 s1, i64 s2, i64 s3, int ngb, int nt, bool vec) {
    constexpr int W = Vec<T>::W;
    if (vec) {
        constexpr int NV = N % W == 0 ? N / W : 1; // 16-byte pieces of a row
        for (int e = threadIdx.x; e < nt * ngb * NV; e += NT) {
            const int v = e % NV, r = e / NV, gi = G == 1 ? 0 : r % ngb, t = G == 1 ? r : r / ngb;
            if constexpr (sizeof(T) == 4)
                cg_cp_async_ca16(s + (t * GB + gi) * N + W * v, base + t * s1 + gi * s2 + W * v);
            else ld8_to_smem(s + (t * GB + gi) * N + W * v, base + t * s1 + gi * s2 + W * v);
        }
    } else {
        for (int e = threadIdx.x; e < nt * ngb * N; e += NT) {
            const int k = e % N, r = e / N, gi = G == 1 ? 0 : r % ngb, t = G == 1 ? r : r / ngb;
            if constexpr (sizeof(T) == 4) cg_cp_async_ca4(s + (t * GB + gi) * N + k, base + t * s1 + gi * s2 + k * s3);
            else s[(t * GB + gi) * N + k] = cg_f32(base[t * s1 + gi * s2 + k * s3]);
        }
    }
}

// Issue the copies of rows [t0, t0 + nt) of B or C ([b, l, g, n], stored as T) for the
// groups [th.g0, th.g0 + th.ngb) into s ([CHUNK][GB][N]). The caller commits, waits and
// synchronizes (staged()) before reading.
template <class T>
__device__ __forceinline__ void stage_bc(const cg_ktensor &m, i64 b, const Thr &th, i64 t0, int nt, float *s) {
    constexpr int W = Vec<T>::W;
    copy_bc<T>(s, tp<const T>(m) + b * m.s0 + t0 * m.s1 + th.g0 * m.s2, m.s1, m.s2, m.s3, th.ngb, nt,
               N % W == 0 && m.s3 == 1 && ((m.s0 | m.s1 | m.s2) & (W - 1)) == 0 && align16(m.p));
}

// Copies of nt rows (stride s1) of the block's channels (stride s2; the first live of
// them exist) of T from base into s_x ([CHUNK][BD]; zero past live; any: a valid
// address for the zero fills); vec: 16-byte pieces. float: cp.async; halves: loaded
// and widened here.
template <class T>
SSCAN_COPY void copy_x(float *s_x, const T *base, const T *any, i64 s1, i64 s2, int live, int nt, bool vec) {
    constexpr int W = Vec<T>::W;
    if (vec) { // base is 16-byte aligned: d0 is a multiple of 8
        for (int e = threadIdx.x; e < nt * (BD / W); e += NT) {
            const int t = e / (BD / W), c = W * (e - t * (BD / W));
            float *dst = s_x + t * BD + c;
            const T *src = base + t * s1 + c;
            if constexpr (sizeof(T) == 4) {
                if (c + W <= live) {
                    cg_cp_async_ca16(dst, src);
                } else {
#pragma unroll
                    for (int q = 0; q < W; ++q)
                        cg_cp_async_ca4_zfill(dst + q, c + q < live ? src + q : any, c + q < live ? 4 : 0);
                }
            } else {
                if (c + W <= live) {
                    ld8_to_smem(dst, src);
                } else {
#pragma unroll
                    for (int q = 0; q < W; ++q) dst[q] = c + q < live ? cg_f32(src[q]) : 0.f;
                }
            }
        }
    } else {
        for (int e = threadIdx.x; e < nt * BD; e += NT) {
            const int t = e / BD, c = e - t * BD;
            const bool in = c < live;
            if constexpr (sizeof(T) == 4) cg_cp_async_ca4_zfill(s_x + e, in ? base + t * s1 + c * s2 : any, in ? 4 : 0);
            else s_x[e] = in ? cg_f32(base[t * s1 + c * s2]) : 0.f;
        }
    }
}

// Issue the copies of x at steps [t0, t0 + nt) of the block's channels into s_x
// ([CHUNK][BD]; zero for channels past D).
__device__ __forceinline__ void stage_x(const cg_ktensor &x, const cg_sscan_dims &n, i64 b, i64 d0, i64 t0, int nt,
                                        float *s_x) {
    const TX *xp = tp<const TX>(x);
    copy_x<TX>(s_x, xp + b * x.s0 + t0 * x.s1 + d0 * x.s2, xp, x.s1, x.s2, (int)min64(BD, n.D - d0), nt, rows16<TX>(x));
}

// The staged copies have landed and every thread sees them.
__device__ __forceinline__ void staged() {
    cg_cp_async_commit();
    cg_cp_async_wait_all();
    __syncthreads();
}

// dt of the raw delta (+ bias) value, and with sg the softplus derivative sigmoid(raw).
__device__ __forceinline__ float dt_of(float raw, bool softplus_on, float *sg) {
    if (!softplus_on) {
        if (sg) *sg = 1.f;
        return raw;
    }
    if (sg) *sg = sigmoid(raw);
    return softplus(raw);
}

// dt of nt rows (stride s1) of the block's channels (stride s2, the first live exist)
// of delta at base, plus bias (channel stride bs; NULL: none), softplus when sp, into
// s_dt ([CHUNK][BD]; zero past live and beyond nt) and, with s_sg, the softplus
// derivative; 4 channels per thread and iteration (vec: one 16-byte load).
template <class T>
SSCAN_COPY void copy_dt(float *s_dt, float *s_sg, const T *base, i64 s1, i64 s2, const float *bias, i64 bs, int live,
                        int nt, bool vec, bool sp) {
    for (int e = threadIdx.x; e < CHUNK * (BD / 4); e += NT) {
        const int t = e / (BD / 4), c = 4 * (e - t * (BD / 4));
        float v[4] = {0.f, 0.f, 0.f, 0.f}, sg[4] = {0.f, 0.f, 0.f, 0.f};
        if (t < nt) {
            ld4(base + t * s1, s2, c, live, vec, v);
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (c + q < live) {
                    if (bias) v[q] += bias[(c + q) * bs];
                    v[q] = dt_of(v[q], sp, s_sg ? &sg[q] : nullptr);
                }
        }
        *reinterpret_cast<float4 *>(s_dt + t * BD + c) = make_float4(v[0], v[1], v[2], v[3]);
        if (s_sg) *reinterpret_cast<float4 *>(s_sg + t * BD + c) = make_float4(sg[0], sg[1], sg[2], sg[3]);
    }
}

// Stage dt and x of steps [t0, t0 + nt) of the block's channels into s_dt, s_x
// ([CHUNK][BD]; dt zero outside [0, D) and beyond nt, x zero past D): x by cp.async
// (the caller commits, waits and synchronizes: staged()), dt loaded here, 4 channels
// per thread and iteration (one 16-byte load when delta's rows are contiguous and
// aligned); s_x may be NULL; with s_sg also the softplus derivative.
__device__ __forceinline__ void stage_dt_x(const cg_ktensor &x, const cg_ktensor &delta, const cg_ktensor &bias,
                                           const cg_sscan_dims &n, i64 b, i64 d0, i64 t0, int nt, float *s_dt,
                                           float *s_x, float *s_sg) {
    if (s_x) stage_x(x, n, b, d0, t0, nt, s_x);
    copy_dt<TDELTA>(s_dt, s_sg, tp<const TDELTA>(delta) + b * delta.s0 + t0 * delta.s1 + d0 * delta.s2, delta.s1,
                    delta.s2, bias.p ? bias.p + d0 * bias.s0 : nullptr, bias.s0, (int)min64(BD, n.D - d0), nt,
                    rows16<TDELTA>(delta), n.softplus != 0);
}

// What a forward pass over a range of steps reads and writes.
struct FwdIO {
    cg_ktensor x, delta, A, Bm, Cm, Dv, z, dbias;
    cg_ktensor y; // y.p NULL: no outputs
    float *ckpt;  // NULL, or checkpoint slots of this CTA: [nseg][NPT][NT]
    i64 segment;  // steps between checkpoints
    cg_sscan_dims n;
};

// The recurrence of this CTA's channels over steps [ta, tb) from the states in h,
// leaving the states after tb - 1 in h. With io.y.p: writes y; with io.ckpt: stores
// the states entering steps ta, ta + segment, ... in its slots 0, 1, ... (segment a
// multiple of CHUNK). Returns sum(dt) over the range for channel t.d (in every lane).
__device__ __forceinline__ float scan_range(const FwdIO &io, float *sm, i64 b, i64 d0, const Thr &th,
                                            const float (&A)[NPT], float (&h)[NPT], i64 ta, i64 tb) {
    const cg_sscan_dims &n = io.n;
    float *s_dt = sm + F_DT, *s_x = sm + F_X, *s_y = sm + F_Y, *s_b = sm + F_B, *s_c = sm + F_C;
    float sdt = 0.f;
    i64 next_ck = ta, nck = 0;
    for (i64 t0 = ta; t0 < tb; t0 += CHUNK) {
        const int nt = (int)min64(CHUNK, tb - t0);
        if (io.ckpt && t0 == next_ck) { // the first state of a segment
            float *ck = io.ckpt + nck * (i64)(NPT * NT) + threadIdx.x;
#pragma unroll
            for (int k = 0; k < NPT; ++k) ck[k * NT] = h[k];
            ++nck;
            next_ck += io.segment;
        }
        stage_bc<TB>(io.Bm, b, th, t0, nt, s_b);
        if (io.y.p) stage_bc<TC>(io.Cm, b, th, t0, nt, s_c);
        stage_dt_x(io.x, io.delta, io.dbias, n, b, d0, t0, nt, s_dt, s_x, nullptr);
        staged();
        for (int t = 0; t < nt; ++t) {
            const float dt = s_dt[t * BD + th.ch], dtx = dt * s_x[t * BD + th.ch];
            const float *Bt = s_b + (t * GB + th.gi) * N + th.j, *Ct = s_c + (t * GB + th.gi) * N + th.j;
            float yp = 0.f;
            sdt += dt;
#pragma unroll
            for (int k = 0; k < NPT; ++k) {
                const int s = th.j + TPC * k;
                if (FULL || s < N) {
                    h[k] = expf(dt * A[k]) * h[k] + dtx * Bt[TPC * k];
                    if (io.y.p) yp = fmaf(Ct[TPC * k], h[k], yp);
                }
            }
            if (io.y.p) {
                yp = chan_sum(yp);
                if (th.j == 0) s_y[t * BD + th.ch] = yp;
            }
        }
        __syncthreads();
        if (io.y.p) { // 4 channels per thread and iteration
            const int live = (int)min64(BD, n.D - d0);
            const bool zvec = io.z.p && rows16<TZ>(io.z), yvec = rows16<TY>(io.y);
            for (int e = threadIdx.x; e < nt * (BD / 4); e += NT) {
                const int t = e / (BD / 4), c = 4 * (e - t * (BD / 4));
                const i64 tt = t0 + t;
                float yv[4], zv[4];
                if (io.z.p)
                    ld4(tp<const TZ>(io.z) + b * io.z.s0 + tt * io.z.s1 + d0 * io.z.s2, io.z.s2, c, live, zvec, zv);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    yv[q] = s_y[t * BD + c + q];
                    if (io.Dv.p && c + q < live)
                        yv[q] = fmaf(io.Dv.p[(d0 + c + q) * io.Dv.s0], s_x[t * BD + c + q], yv[q]);
                    if (io.z.p) yv[q] *= zv[q] * sigmoid(zv[q]);
                }
                st4(tp<TY>(io.y) + b * io.y.s0 + tt * io.y.s1 + d0 * io.y.s2, io.y.s2, c, live, yvec, yv);
            }
            __syncthreads(); // s_x, s_y are restaged next
        }
    }
    return sdt;
}

__device__ __forceinline__ void load_A(const cg_ktensor &A, const Thr &th, float (&a)[NPT]) {
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
        const int s = th.j + TPC * k;
        a[k] = (FULL || s < N) ? A.p[th.dd * A.s0 + s * A.s1] : 0.f;
    }
}

// h = h0[b, d, :] (0 when absent, and for masked states).
__device__ __forceinline__ void load_state(const cg_ktensor &h0, i64 b, const Thr &th, float (&h)[NPT]) {
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
        const int s = th.j + TPC * k;
        h[k] = (h0.p && (FULL || s < N)) ? h0.p[b * h0.s0 + th.dd * h0.s1 + s * h0.s2] : 0.f;
    }
}

__device__ __forceinline__ void store_state(const cg_ktensor &hT, i64 b, const Thr &th, const float (&h)[NPT]) {
    if (!hT.p || !th.live) return;
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
        const int s = th.j + TPC * k;
        if (FULL || s < N) hT.p[b * hT.s0 + th.d * hT.s1 + s * hT.s2] = h[k];
    }
}

#ifdef CG_VARLEN
using cgvl::cu_at; // cg_varlen.cuh: the clamped offsets, the sequence of a step
using cgvl::cu_upper;
using cgvl::seq_range;

// The recurrence of this CTA's channels over steps [ta, tb) of the packed row (b = 0),
// the state restarting at every sequence start in the range: from h0[n] with h0.p, else
// from 0. h enters as the state at ta (used when ta starts no sequence) and leaves as
// the state after tb - 1. With hT.p: writes hT[n] of each sequence that ends in (ta,
// tb]. Returns sum(dt) since the last start (or ta) for channel t.d; *head: sum(dt)
// over the first sequence's part of the range ([ta, the next start or tb)).
__device__ __forceinline__ float scan_seqs(const FwdIO &io, const cg_kcu &cu, i64 nseq, const cg_ktensor &h0,
                                           const cg_ktensor &hT, float *sm, i64 d0, const Thr &th,
                                           const float (&A)[NPT], float (&h)[NPT], i64 ta, i64 tb, float *head) {
    const i64 L = io.n.L;
    float sdt = 0.f;
    bool first = true;
    for (i64 t = ta; t < tb;) {
        const i64 n = cu_upper(cu, nseq, L, t) - 1; // the sequence holding t (-1: before cu[0])
        if (n >= 0 && cu_at(cu, n, L) == t) {       // it starts here
            if (h0.p) load_state(h0, n, th, h);
            else {
#pragma unroll
                for (int k = 0; k < NPT; ++k) h[k] = 0.f;
            }
            sdt = 0.f;
        }
        i64 e = cu_at(cu, n + 1, L);
        const bool ends = e > t && e <= tb;
        if (!ends) e = tb; // past the range, or offsets out of order: the rest of the range
        sdt += scan_range(io, sm, 0, d0, th, A, h, t, e);
        if (first) *head = sdt;
        first = false;
        if (ends && n >= 0) store_state(hT, n, th, h);
        t = e;
    }
    if (first) *head = 0.f;
    return sdt;
}

// 1 when a sequence starts in [ta, tb) (tb > ta); *last: the sequence holding tb - 1.
__device__ __forceinline__ bool starts_in(const cg_kcu &cu, i64 nseq, i64 L, i64 ta, i64 tb, i64 *last) {
    *last = cu_upper(cu, nseq, L, tb - 1) - 1;
    return *last >= 0 && cu_at(cu, *last, L) >= ta;
}
#endif

} // namespace sscan

#if defined(CG_EMULATE)
#define SSCAN_ENTRY extern "C" __global__ void
#else
#define SSCAN_ENTRY extern "C" __global__ void __launch_bounds__(sscan::NT, 1)
#endif

#ifndef SSCAN_NO_FWD_ENTRY
namespace sscan {
#ifdef CG_SMEM_BYTES // what generator/kernels/sscan_fwd.lua launches with
static_assert(4LL * F_FLOATS == CG_SMEM_BYTES, "sscan_fwd.lua smem_bytes() disagrees with the layout here");
#endif
__device__ __forceinline__ FwdIO fwd_io(const cg_sscan_fwd_params &p) {
    FwdIO io;
    io.x = p.x, io.delta = p.delta, io.A = p.A, io.Bm = p.Bm, io.Cm = p.Cm, io.Dv = p.Dv, io.z = p.z;
    io.dbias = p.dbias, io.y = p.y, io.ckpt = nullptr, io.segment = 1, io.n = p.n;
    return io;
}
} // namespace sscan

#if !defined(CG_P_STRATEGY_PAR) && defined(CG_VARLEN)
// grid: nseq * nblk CTAs, blockIdx.x = sequence * nblk + channel block: the sequence's
// steps from h0[n] (0-length: hT[n] = h0[n]).
SSCAN_ENTRY cg_sscan_fwd(cg_sscan_fwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const i64 sq = udiv(blockIdx.x, p.n.nblk), d0 = umod(blockIdx.x, p.n.nblk) * BD;
    const Thr th = thread_coords(p.n, d0);
    i64 ta, tb;
    seq_range(p.cu, sq, p.n.L, &ta, &tb);
    float A[NPT], h[NPT];
    load_A(p.A, th, A);
    load_state(p.h0, sq, th, h);
    scan_range(fwd_io(p), sm, 0, d0, th, A, h, ta, tb);
    store_state(p.hT, sq, th, h);
}
#elif !defined(CG_P_STRATEGY_PAR)
// grid: B * nblk CTAs, blockIdx.x = b * nblk + channel block.
SSCAN_ENTRY cg_sscan_fwd(cg_sscan_fwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    const i64 b = udiv(blockIdx.x, p.n.nblk), d0 = umod(blockIdx.x, p.n.nblk) * BD;
    const Thr th = thread_coords(p.n, d0);
    float A[NPT], h[NPT];
    load_A(p.A, th, A);
    load_state(p.h0, b, th, h);
    scan_range(fwd_io(p), sm, b, d0, th, A, h, 0, p.n.L);
    store_state(p.hT, b, th, h);
}
#else
// Workspace p.ws: U [B * nblk, npiece, NPT, NT] end states of each piece
// from zero, then sdt [B * nblk, npiece, BD] sums of dt; n.segment = PIECE, n.nseg = npiece.
namespace sscan {
// The piece of a phase-1 or phase-3 CTA, blockIdx.x = (b * nblk + blk) * npiece + piece,
// and this thread's NPT x NT slot of U (stride NT) for it.
struct Piece {
    i64 np, piece, bblk, b, d0;
    Thr th;
    float *u;
};

// The CTA's piece, A of this thread's channel and h: zero (phase 1) or the state entering
// the piece (phase 3, from the slot phase 2 left it in).
__device__ __forceinline__ Piece piece_begin(const cg_sscan_fwd_params &p, bool entering, float (&A)[NPT],
                                             float (&h)[NPT]) {
    Piece c;
    c.np = p.n.nseg, c.piece = umod(blockIdx.x, c.np), c.bblk = udiv(blockIdx.x, c.np);
    c.b = udiv(c.bblk, p.n.nblk), c.d0 = umod(c.bblk, p.n.nblk) * BD;
    c.th = thread_coords(p.n, c.d0);
    c.u = p.ws + (c.bblk * c.np + c.piece) * (i64)(NPT * NT) + threadIdx.x;
    load_A(p.A, c.th, A);
#pragma unroll
    for (int k = 0; k < NPT; ++k) h[k] = entering ? c.u[k * NT] : 0.f;
    return c;
}
} // namespace sscan

// Phase 1, grid B * nblk * npiece.
SSCAN_ENTRY cg_sscan_fwd_local(cg_sscan_fwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    float A[NPT], h[NPT];
    const Piece pc = piece_begin(p, false, A, h);
    FwdIO io = fwd_io(p);
    io.y.p = nullptr;
    const i64 ta = pc.piece * p.n.segment;
#ifdef CG_VARLEN // restarting from 0 at each sequence start: sdt since the last one
    cg_ktensor none;
    none.p = nullptr;
    float head;
    const float sdt =
        scan_seqs(io, p.cu, p.nseq, none, none, sm, pc.d0, pc.th, A, h, ta, min64(p.n.L, ta + p.n.segment), &head);
#else
    const float sdt = scan_range(io, sm, pc.b, pc.d0, pc.th, A, h, ta, min64(p.n.L, ta + p.n.segment));
#endif
#pragma unroll
    for (int k = 0; k < NPT; ++k) pc.u[k * NT] = h[k];
    if (pc.th.j == 0)
        p.ws[p.n.B * p.n.nblk * pc.np * (i64)(NPT * NT) + (pc.bblk * pc.np + pc.piece) * BD + pc.th.ch] = sdt;
}

// Phase 2, one thread per (b, block, state slot k, thread): S_0 = h0, the slot of
// piece p becomes S_p (the state entering it); hT = the state after the last piece.
SSCAN_ENTRY cg_sscan_fwd_carry(cg_sscan_fwd_params p) {
    using namespace sscan;
    const i64 e = (i64)blockIdx.x * NT + threadIdx.x;
    const i64 per = (i64)NPT * NT;
    if (e >= p.n.B * p.n.nblk * per) return;
    const i64 bblk = e / per, r = e - bblk * per, k = r / NT, tid = r - k * NT;
    const i64 b = udiv(bblk, p.n.nblk), d = umod(bblk, p.n.nblk) * BD + tid / TPC, s = tid % TPC + TPC * k;
    if (d >= p.n.D || s >= N) return;
    const i64 np = p.n.nseg;
    const float a = p.A.p[d * p.A.s0 + s * p.A.s1];
    float st = p.h0.p ? p.h0.p[b * p.h0.s0 + d * p.h0.s1 + s * p.h0.s2] : 0.f;
    float *u = p.ws + bblk * np * per + r;
    const float *sdt = p.ws + p.n.B * p.n.nblk * np * per + bblk * np * BD + tid / TPC;
    for (i64 pc = 0; pc < np; ++pc) {
        const float uc = u[pc * per];
        u[pc * per] = st;
#ifdef CG_VARLEN // a piece with a start carries from h0 of its last sequence (0 without h0)
        i64 last;
        if (starts_in(p.cu, p.nseq, p.n.L, pc * p.n.segment, min64(p.n.L, (pc + 1) * p.n.segment), &last))
            st = p.h0.p ? p.h0.p[last * p.h0.s0 + d * p.h0.s1 + s * p.h0.s2] : 0.f;
#endif
        st = fmaf(expf(a * sdt[pc * BD]), st, uc);
    }
#ifndef CG_VARLEN // varlen: phase 3 writes hT per sequence
    if (p.hT.p) p.hT.p[b * p.hT.s0 + d * p.hT.s1 + s * p.hT.s2] = st;
#endif
}

// Phase 3, grid as phase 1: y of each piece from its entering state.
SSCAN_ENTRY cg_sscan_fwd_out(cg_sscan_fwd_params p) {
    using namespace sscan;
    CG_DYN_SMEM(float, sm);
    float A[NPT], h[NPT];
    const Piece pc = piece_begin(p, true, A, h);
    const i64 ta = pc.piece * p.n.segment, d0 = pc.d0;
#ifdef CG_VARLEN
    const i64 tb = min64(p.n.L, ta + p.n.segment);
    float head;
    scan_seqs(fwd_io(p), p.cu, p.nseq, p.h0, p.hT, sm, d0, pc.th, A, h, ta, tb, &head);
    // 0-length sequences starting in the piece (or at L, by the last piece): hT = h0
    if (p.hT.p)
        for (i64 q = cu_upper(p.cu, p.nseq, p.n.L, ta - 1); q < p.nseq; ++q) {
            i64 qa, qb;
            seq_range(p.cu, q, p.n.L, &qa, &qb);
            if (qa >= tb && !(tb == p.n.L && qa == tb)) break;
            if (qa == qb) {
                load_state(p.h0, q, pc.th, h);
                store_state(p.hT, q, pc.th, h);
            }
        }
#else
    scan_range(fwd_io(p), sm, pc.b, d0, pc.th, A, h, ta, min64(p.n.L, ta + p.n.segment));
#endif
}
#endif
#endif // SSCAN_NO_FWD_ENTRY
