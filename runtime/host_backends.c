/* host_backends.c -- the two host backends behind the backend vtable: the generic CPU
 * path (runtime/cpu/) and the float64 reference (runtime/ref/). Both run every shape. */
#include "internal.h"

static int host_supports(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg) {
    (void)ctx;
    (void)op;
    (void)prob;
    (void)cfg;
    return 1;
}

/* A host backend named NAME whose entry points are cg__ssd_X_fwd ... cg__sscan_X_bwd and
 * which reads and writes the 16-bit storage dtypes HALF (a CG_DTM mask; 0: float32 only). */
#define HOST_BACKEND(NAME, X, HALF)                                                                             \
    {.name = NAME, .supports = host_supports, .ssd_fwd = cg__ssd_##X##_fwd, .ssd_bwd = cg__ssd_##X##_bwd,        \
     .sscan_fwd = cg__sscan_##X##_fwd, .sscan_bwd = cg__sscan_##X##_bwd, .half = HALF, .varlen = 1}

/* cpu: bf16 / fp16 tensors read and written by its kernels (runtime/cpu/cpu_half.h) */
const cg_backend_vt cg__backend_cpu = HOST_BACKEND("cpu", cpu, CG_DTM_HALF);
const cg_backend_vt cg__backend_ref = HOST_BACKEND("ref", ref, CG_DTM_HALF);
