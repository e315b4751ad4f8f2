/* sscan_params.h -- the params structs of the generated selective-scan kernels
 * (templates/sscan_fwd.cu, templates/sscan_bwd.cu).
 *
 * Inlined by the renderer into the device code (NVRTC and the SIMT emulator); the
 * host packs them from the `args` list of generator/kernels/sscan_*.lua (see
 * cg_kernel_params.h): plain C, fixed-width integers and pointers only, every member
 * 8 bytes, in the order of that list. Each __global__ entry takes one by value. Strides are in elements, 64-bit, and any value >= 0 (also for
 * the innermost dimension): the sscan API takes any strides. Logical orders are those
 * of cg_sscan_prob (runtime/internal.h):
 *   x, delta, z, y, dy, dx, ddelta, dz  [b, l, d]       (s0, s1, s2)
 *   A, dA                               [d, n]          (s0, s1)
 *   Bm, Cm, dB, dC                      [b, l, g, n]    (s0..s3; ungrouped: G = 1, s2 = 0)
 *   Dv, dbias, dD, ddbias               [d]             (s0)
 *   h0, hT, dhT, dh0                    [b, d, n]       (s0, s1, s2)
 * An optional tensor is absent when its pointer is NULL.
 * Varlen (docs/varlen.md; the generator defines CG_VARLEN when shape.nseq > 0): B = 1,
 * nseq sequences packed along l, the states [nseq, d, n]; the params end in cu_seqlens
 * and nseq (CG_SSCAN_VARLEN_ARGS), so the other kernels' params are unchanged. */
#ifndef CG_SSCAN_PARAMS_H
#define CG_SSCAN_PARAMS_H

#include "cg_kernel_params.h" /* cg_i64, cg_ktensor */

/* Sizes shared by every sscan kernel. */
typedef struct cg_sscan_dims {
    cg_i64 B, L, D, N, G; /* N repeats the compiled CG_N (the plan is made per N) */
    cg_i64 dpg;           /* channels per group, D / G */
    cg_i64 softplus;      /* dt = softplus(delta + bias) when 1 */
    cg_i64 nblk;          /* channel blocks, ceil(D / dim_block) */
    cg_i64 segment;       /* steps between checkpoints (the backward; 0 in the forward) */
    cg_i64 nseg;          /* ceil(L / segment) checkpoints per (b, d); 0 in the forward */
} cg_sscan_dims;

/* The varlen members, last: cu_seqlens [nseq + 1] and nseq (sscan_*.lua: {cu =
 * "cu_seqlens"}, {int = nseq}). The sscan strategy seq grids over (sequence, channel
 * block); strategy par keeps its time grid and resets the state at every sequence start
 * inside a piece (segment). */
#define CG_SSCAN_VARLEN_ARGS CG_VARLEN_ARGS /* cg_kernel_params.h */

/* The forward's `par` strategy splits time in pieces of this many chunks. */
#define CG_SSCAN_PIECE_CHUNKS 16

/* Forward (cg_sscan_fwd*). */
typedef struct cg_sscan_fwd_params {
    cg_ktensor x, delta, A, Bm, Cm, Dv, z, dbias, h0; /* inputs */
    cg_ktensor y, hT;                                 /* outputs */
    float *ws;                                        /* strategy par: [B * nblk, npiece, NPT, NT] piece states, then
                * [B * nblk, npiece, BD] sums of dt; NULL for seq */
    cg_sscan_dims n;                                  /* par: segment = the piece length, nseg = npiece */
    CG_SSCAN_VARLEN_ARGS
} cg_sscan_fwd_params;

/* Backward (cg_sscan_bwd_*), see templates/sscan_bwd.cu. Workspace regions, in floats,
 * in this order, each rounded up to 16 bytes (the named regions of the plan, from
 * ws_floats() of generator/kernels/sscan_bwd.lua); NPT,
 * NT, BD, SEG as in the template's traits, P the grid of the grads pass:
 *   ckpt   [B * nblk, nseg, NPT, NT]   state entering each segment
 *   gst    [B * nblk, nseg, NPT, NT]   state gradient entering each segment's last step
 *   sdt    [B * nblk, nseg, BD]        strategy par: sum of dt over each segment (else empty)
 *   hbuf   [P, SEG + 1, NPT, NT]       per grads CTA: one segment of recomputed states
 *                                      (empty when they fit in shared memory: CG_SSCAN_HB_SMEM)
 *   pB, pC [B, L, G, nsplit, N]        per split partial dB, dC (empty when nsplit = 1:
 *                                      the grads pass sums straight into dB, dC)
 *   pA     [B, nseg, D, N]             per (batch, segment) partial dA
 *   pD, pbias [B, nseg, D]             per (batch, segment) partial dD, ddelta_bias
 * None grows with L * D * N: the states are L / SEG per (b, d, n), the dB/dC partials
 * have a fixed number of splits (at most 8) instead of one per channel block. */
typedef struct cg_sscan_bwd_params {
    cg_ktensor x, delta, A, Bm, Cm, Dv, z, dbias, h0, dy, dhT;  /* inputs */
    cg_ktensor dx, ddelta, dA, dB, dC, dD, dz, ddbias, dh0;     /* outputs */
    float *ckpt, *gst, *sdt, *hbuf, *pB, *pC, *pA, *pD, *pbias; /* workspace */
    /* Work of the grads pass: channel units of gpu whole groups (gpu = max(1, BD / dpg)),
     * each unit's channel blocks split into nsplit runs; nwork = B * nseg * nunit * nsplit
     * items, grid-strided over its CTAs. */
    cg_i64 gpu, nunit, nsplit, nwork;
    cg_sscan_dims n;
    CG_SSCAN_VARLEN_ARGS
} cg_sscan_bwd_params;

/* The grads pass splits a unit's channel blocks so that about this many work items
 * exist, at most CG_SSCAN_SPLIT_MAX runs (the dB/dC partials grow with it). */
#define CG_SSCAN_SPLIT_TARGET 1024
#define CG_SSCAN_SPLIT_MAX 8

#endif /* CG_SSCAN_PARAMS_H */
