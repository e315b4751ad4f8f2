/* gdr_cpu.c -- the cpu backend's entry points for the gated delta rule: its chunked path
 * (runtime/cpu/gdr_cpu_chunk*.c, the WY form on the SSD micro-kernels, per ISA variant).
 * A sequential float32 path (the recurrence of runtime/ref/ref_gdr.c token by token) was
 * slower at every length measured, T = 1 included (docs/bench.md), and is gone. */
#include "internal.h"
#include "ops.h"

/* ----------------------------------------------------------- entry points */

/* The cpu backend runs the chunked path (gdr_cpu_chunk*.c: keys chunk and threads). */
cg_status cg__gdr_cpu_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__gdr_cpu_chunk_fwd(ctx, p, cfg, ex);
}

cg_status cg__gdr_cpu_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__gdr_cpu_chunk_bwd(ctx, p, cfg, ex);
}

/* The cpu backend's entry points for the gated delta rule (host_backends.c). */
CG_HOST_OP_ENTRY(cpu, gdr_fwd, cg_gdr_prob, cg__gdr_cpu_fwd)
CG_HOST_OP_ENTRY(cpu, gdr_bwd, cg_gdr_prob, cg__gdr_cpu_bwd)
