/* cpu_backend.c -- the generic CPU path behind the backend vtable. It runs every shape. */
#include "internal.h"

static int cpu_supports(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg) { return 1; }

const cg_backend_vt cg__backend_cpu = {
    .name = "cpu",
    .supports = cpu_supports,
    .ssd_fwd = cg__ssd_cpu_fwd,
    .ssd_bwd = cg__ssd_cpu_bwd,
    .sscan_fwd = cg__sscan_cpu_fwd,
    .sscan_bwd = cg__sscan_cpu_bwd,
};
