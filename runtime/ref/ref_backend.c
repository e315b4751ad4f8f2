/* ref_backend.c -- the float64 reference as a backend: runs every problem. */
#include "internal.h"

static int ref_supports(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg) {
    (void)ctx;
    (void)op;
    (void)prob;
    (void)cfg;
    return 1;
}

const cg_backend_vt cg__backend_ref = {
    .name = "ref",
    .supports = ref_supports,
    .ssd_fwd = cg__ssd_ref_fwd,
    .ssd_bwd = cg__ssd_ref_bwd,
    .sscan_fwd = cg__sscan_ref_fwd,
    .sscan_bwd = cg__sscan_ref_bwd,
};
