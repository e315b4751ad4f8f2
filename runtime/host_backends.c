/* host_backends.c -- the two host backends behind the backend vtable: the generic CPU
 * path (runtime/cpu/) and the float64 reference (runtime/ref/). Both run every shape.
 * Each op's entry point, cg__cpu_run_<op> and cg__ref_run_<op>, is defined in the op's
 * own file of that backend, or for the cpu kernels built per ISA variant in runtime/cpu/cpu_isa.c
 * (CG_HOST_OP_ENTRY); the tables here are made from the op list. */
#include "internal.h"

static int host_supports(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg) {
    (void)ctx;
    (void)op;
    (void)prob;
    (void)cfg;
    return 1;
}

/* A host backend named NAME whose entry point for op `name` is cg__X_run_<name> and which
 * reads and writes the 16-bit storage dtypes HALF (a CG_DTM mask; 0: float32 only). */
#define HOST_SLOT_cpu(name, E, AT, PT) [E] = cg__cpu_run_##name,
#define HOST_SLOT_ref(name, E, AT, PT) [E] = cg__ref_run_##name,
#define HOST_BACKEND(NAME, X, HALF)                                                                                    \
    static const cg_op_entry X##_entries[CG_OP_COUNT] = {CG_OP_LIST(HOST_SLOT_##X)};                                   \
    static cg_status X##_run(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,  \
                             const cg_exec *ex) {                                                                      \
        (void)vt;                                                                                                      \
        return X##_entries[op](ctx, prob, cfg, ex); /* op < CG_OP_COUNT: cg__backend_run checked */                    \
    }                                                                                                                  \
    const cg_backend_vt cg__backend_##X = {                                                                            \
        .name = NAME, .supports = host_supports, .run = X##_run, .half = HALF, .varlen = 1}

/* cpu: bf16 / fp16 tensors read and written by its kernels (runtime/cpu/cpu_half.h) */
HOST_BACKEND("cpu", cpu, CG_DTM_HALF);
HOST_BACKEND("ref", ref, CG_DTM_HALF);
