/* cg_kernel_params.h -- the params structs that generated kernels take by value.
 *
 * Inlined by the renderer into the device code (NVRTC and the SIMT emulator), and
 * included by host C only for cg_ktensor (runtime/launch.c) and by tests, so it must
 * stay plain C: fixed-width integers and pointers only, no padding (every member is 8
 * bytes). Every __global__ entry takes exactly one of these structs by value. The host
 * does not fill them by name: the kernel's Lua plan() lists its arguments in member
 * order (tensors, workspace regions, integers) and runtime/launch.c packs them, so the
 * member order here and the `args` list of generator/kernels/<kernel>.lua are one
 * fact written twice (the launch checks the total size against the entry's).
 * Strides are in elements and 64-bit; the SSD kernels index the innermost dimension
 * with stride 1 (validation guarantees it: CG_TD_CONTIG in runtime/ops.c). */
#ifndef CG_KERNEL_PARAMS_H
#define CG_KERNEL_PARAMS_H

#if defined(__CUDACC_RTC__)
typedef long long cg_i64; /* NVRTC has no <stdint.h> */
#else
#include <stdint.h>
typedef int64_t cg_i64;
#endif

/* The one kernel-tensor struct: a float tensor of up to four logical dims
 * [d0, d1, d2, d3], element (a, b, c, x) at p[a * s0 + b * s1 + c * s2 + x * s3].
 * Absent when p is NULL. */
typedef struct cg_ktensor {
    float *p;
    cg_i64 s0, s1, s2, s3;
} cg_ktensor;

/* A variable-length batch's offsets (docs/varlen.md): cu_seqlens [nseq + 1], int32 or
 * (wide = 1) int64, element i at p[i * s0]; the generator's {cu = "cu_seqlens"} argument
 * (runtime/launch.c packs it). The kernels clamp every value they read. */
typedef struct cg_kcu {
    const void *p;
    cg_i64 s0, wide;
} cg_kcu;

/* The varlen members, last in a params struct (the generator's {cu = "cu_seqlens"},
 * {int = nseq} arguments, rendered with CG_VARLEN only: every other kernel's params are
 * unchanged). B = 1 then, nseq sequences packed along the time axis. */
#ifdef CG_VARLEN
#define CG_VARLEN_ARGS                                                                                                 \
    cg_kcu cu;                                                                                                         \
    cg_i64 nseq;
#else
#define CG_VARLEN_ARGS
#endif

/* SSD forward (templates/ssd_fwd.cu). Logical orders, as in runtime/internal.h:
 *   q, k [b, t, g, i]; v, o [b, t, h, j]; la [b, t, h] (s2 unused);
 *   h0, hT [b, h, i, j].
 * ws: workspace of the three-phase strategy (chunk states and decays), NULL for
 * the sequential one. Read-only tensors are q, k, v, la, h0. */
typedef struct cg_ssd_fwd_params {
    cg_ktensor q, k, v, la, h0; /* inputs; h0.p NULL: zero initial state */
    cg_ktensor o, hT;           /* outputs; hT.p NULL: not wanted */
    float *ws;                  /* [B*H, nchunks, dk, dv] states, then [B*H, nchunks] decays */
    cg_i64 B, T, G, H, dk, dv;  /* dk, dv repeat the compiled CG_DK, CG_DV (checked) */
    cg_i64 nchunks;             /* ceil(T / chunk); varlen: the chunk slots, ceil(T / chunk) + nseq */
    CG_VARLEN_ARGS              /* varlen (ssd_common.cuh): h0, hT [nseq, h, i, j] */
} cg_ssd_fwd_params;

/* SSD backward (templates/ssd_bwd.cu). Logical orders as for the forward, and
 *   dout, dv [b, t, h, j]; dq, dk [b, t, g, i] (summed over the group's heads);
 *   dla [b, t, h]; dhT, dh0 [b, h, i, j].
 * ws: workspace (layout in ssd_bwd.cu; its size comes from generator/kernels/ssd_bwd.lua).
 * Read-only tensors are q, k, v, la, h0, dout, dhT. */
typedef struct cg_ssd_bwd_params {
    cg_ktensor q, k, v, la, h0, dout, dhT; /* inputs; h0.p, dhT.p NULL: zero */
    cg_ktensor dq, dk, dv, dla, dh0;       /* outputs; dh0.p NULL: not wanted */
    float *ws;
    cg_i64 B, T, G, H, dim_k, dim_v; /* dim_k, dim_v repeat the compiled CG_DK, CG_DV */
    cg_i64 nchunks;                  /* ceil(T / chunk) */
    CG_VARLEN_ARGS                   /* varlen: h0, dhT, dh0 [nseq, h, i, j] */
} cg_ssd_bwd_params;

/* Gated delta rule forward (templates/gdr_fwd.cu). Logical orders, as in runtime/internal.h:
 *   q, k [b, t, g, i]; v, o [b, t, h, j]; g, beta [b, t, h] (s2 unused); h0, hT [b, h, i, j].
 * Workspace (generator/kernels/gdr_fwd.lua), per chunk slot of each (b, h), slot-major
 * within (b, h): gc [C] the chunk-local cumsum of g, rs [C][2] 1/|q_r| and 1/|k_r| (1
 * without the L2 norm), w [C][dk], u [C][dv] (U, then Vn), hs [dk][dv] the state entering
 * the chunk. Read-only tensors are q, k, v, g, beta, h0. */
typedef struct cg_gdr_fwd_params {
    cg_ktensor q, k, v, g, beta, h0; /* inputs; h0.p NULL: zero initial state */
    cg_ktensor o, hT;                /* outputs; hT.p NULL: not wanted */
    float *gc, *rs, *w, *u, *hs;     /* workspace */
    cg_i64 B, T, G, H;
    double scale;  /* resolved (never 0) */
    cg_i64 nslot;  /* chunk slots per (b, h): ceil(T / chunk) (+ nseq varlen) */
    cg_i64 ndvt;   /* dv tiles, ceil(dv / block_dv) */
    CG_VARLEN_ARGS /* varlen: h0, hT [nseq, h, i, j] */
} cg_gdr_fwd_params;

/* Gated delta rule backward (templates/gdr_bwd.cu). Logical orders as for the forward, and
 *   dout, dv [b, t, h, j]; dq, dk [b, t, g, i] (summed over the group's value heads);
 *   dg, dbeta [b, t, h]; dhT, dh0 [b, h, i, j].
 * Workspace (generator/kernels/gdr_bwd.lua), per chunk slot of each (b, h) as the
 * forward's gc, rs, w (W, then dW), u (U, then Vn), hs, and am [C][C] A = (I + L)^-1,
 * kk [C][C] kn_i . kn_j, pm [C][C] (qn_i . kn_j) exp(G_i - G_j) (j <= i), dhs [dk][dv] the
 * state gradient at the chunk's end, dvn [C][dv], dqp, dkp [C][dk] the gradients of the
 * normalised q and k of this value head (summed over the group by the last launch).
 * Read-only tensors are q, k, v, g, beta, h0, dout, dhT. */
typedef struct cg_gdr_bwd_params {
    cg_ktensor q, k, v, g, beta, h0, dout, dhT;                         /* inputs; h0.p, dhT.p NULL: zero */
    cg_ktensor dq, dk, dv, dg, dbeta, dh0;                              /* outputs; dh0.p NULL: not wanted */
    float *gc, *rs, *w, *u, *hs, *am, *kk, *pm, *dhs, *dvn, *dqp, *dkp; /* workspace */
    cg_i64 B, T, G, H;
    double scale;
    cg_i64 nslot, ndvt;
    CG_VARLEN_ARGS /* varlen: h0, dhT, dh0 [nseq, h, i, j] */
} cg_gdr_bwd_params;

/* SSD decode step (templates/ssd_step.cu, issue #36). Logical orders: q, k [b, t, g, i];
 * v, o [b, t, h, j]; la [b, t, h]; cache [slot, h, i, j]; the slot indices idx [b] and dst
 * [b, t] (dst.p NULL: absent) are int32, or int64 when their s3 is 1 (runtime/launch.c:
 * an index tensor's rank is at most 2, so s3 carries its width). */
typedef struct cg_ssd_step_params {
    cg_ktensor q, k, v, la, cache, idx, dst, o;
    cg_i64 B, T, G, H, dk, dv, S;
} cg_ssd_step_params;

/* Selective-scan decode step (templates/sscan_step.cu, issue #36). Logical orders as the
 * selective scan's: x, delta, z, y [b, t, d]; A [d, n]; Bm, Cm [b, t, g, n]; Dv, dbias
 * [d]; cache [slot, d, n]; idx [b] and dst [b, t] as in cg_ssd_step_params. */
typedef struct cg_sscan_step_params {
    cg_ktensor x, delta, A, Bm, Cm, Dv, z, dbias, cache, idx, dst, y;
    cg_i64 nb, L, nd, N, G, S; /* the symbols B, L, D, N, G, S */
    cg_i64 softplus;
} cg_sscan_step_params;

/* Gated delta rule decode step (templates/gdr_step.cu, issue #36). Logical orders as the
 * SSD step's: q, k [b, t, g, i]; v, o [b, t, h, j]; g, beta [b, t, h]; cache [slot, h, i, j];
 * idx [b] and dst [b, t] as in cg_ssd_step_params; scale the op's validated real argument. */
typedef struct cg_gdr_step_params {
    cg_ktensor q, k, v, g, beta, cache, idx, dst, o;
    cg_i64 B, T, G, H, dk, dv, S;
    double scale;
} cg_gdr_step_params;

#endif /* CG_KERNEL_PARAMS_H */
