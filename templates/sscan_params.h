/* sscan_params.h -- the params structs of the generated selective-scan kernels
 * (templates/sscan_fwd.cu, templates/sscan_bwd.cu).
 *
 * Included by host C (runtime/launch_sscan.c) and, inlined by the renderer, by the
 * device code (NVRTC and the SIMT emulator): plain C, fixed-width integers and
 * pointers only, every member 8 bytes. Each __global__ entry takes one of these
 * structs by value. Strides are in elements, 64-bit, and any value >= 0 (also for
 * the innermost dimension): the sscan API takes any strides. Logical orders are those
 * of cg_sscan_prob (runtime/internal.h):
 *   x, delta, z, y, dy, dx, ddelta, dz  [b, l, d]       (s0, s1, s2)
 *   A, dA                               [d, n]          (s0, s1)
 *   Bm, Cm, dB, dC                      [b, l, g, n]    (s0..s3; ungrouped: G = 1, s2 = 0)
 *   Dv, dbias, dD, ddbias               [d]             (s0)
 *   h0, hT, dhT, dh0                    [b, d, n]       (s0, s1, s2)
 * An optional tensor is absent when its pointer is NULL. */
#ifndef CG_SSCAN_PARAMS_H
#define CG_SSCAN_PARAMS_H

#if defined(__CUDACC_RTC__)
typedef long long cg_i64; /* NVRTC has no <stdint.h> */
#else
#include <stdint.h>
typedef int64_t cg_i64; /* the same typedef as cg_kernel_params.h: a repeat is fine */
#endif

/* A float tensor of up to four logical dims with four strides. */
typedef struct cg_stensor {
    float *p;
    cg_i64 s0, s1, s2, s3;
} cg_stensor;

/* Sizes shared by every sscan kernel. */
typedef struct cg_sscan_dims {
    cg_i64 B, L, D, N, G; /* N repeats the compiled CG_N (the plan is made per N) */
    cg_i64 dpg;           /* channels per group, D / G */
    cg_i64 softplus;      /* dt = softplus(delta + bias) when 1 */
    cg_i64 nblk;          /* channel blocks, ceil(D / dim_block) */
    cg_i64 segment;       /* steps between checkpoints (the backward; 0 in the forward) */
    cg_i64 nseg;          /* ceil(L / segment) checkpoints per (b, d); 0 in the forward */
} cg_sscan_dims;

/* The forward's `par` strategy splits time in pieces of this many chunks. */
#define CG_SSCAN_PIECE_CHUNKS 16

/* Forward (cg_sscan_fwd*). */
typedef struct cg_sscan_fwd_params {
    cg_stensor x, delta, A, Bm, Cm, Dv, z, dbias, h0; /* inputs */
    cg_stensor y, hT;                                 /* outputs */
    float *ws; /* strategy par: [B * nblk, npiece, NPT, NT] piece states, then
                * [B * nblk, npiece, BD] sums of dt; NULL for seq */
    cg_sscan_dims n; /* par: segment = the piece length, nseg = npiece */
} cg_sscan_fwd_params;

/* Backward (cg_sscan_bwd_*). Workspace regions, in floats, in this order, each rounded
 * up to 16 bytes (sized by ws_floats() of generator/kernels/sscan_bwd.lua, split the
 * same way by runtime/launch_sscan.c); NPT, NT, BD as in the template's traits:
 *   ckpt   [B * nblk, nseg, NPT, NT]             states entering each segment
 *   hbuf   [B * nblk, segment + 1, NPT, NT]      one segment of recomputed states per CTA
 *   dybuf  [B * nblk, segment, BD]               gradient into y (after the z gate)
 *   pB, pC [B, L, G, nbg, N]                     per channel-block partial dB, dC
 *   pA     [B, D, N]                             per batch partial dA
 *   pD, pbias [B, D]                             per batch partial dD, ddelta_bias */
typedef struct cg_sscan_bwd_params {
    cg_stensor x, delta, A, Bm, Cm, Dv, z, dbias, h0, dy, dhT; /* inputs */
    cg_stensor dx, ddelta, dA, dB, dC, dD, dz, ddbias, dh0;    /* outputs */
    float *ckpt, *hbuf, *dybuf, *pB, *pC, *pA, *pD, *pbias;    /* workspace */
    cg_i64 nbg;  /* slots of pB/pC per group: most channel blocks one group meets */
    cg_sscan_dims n;
} cg_sscan_bwd_params;

#endif /* CG_SSCAN_PARAMS_H */
