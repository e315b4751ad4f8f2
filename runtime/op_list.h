/* op_list.h -- the ops, one line each; what the code that handles any op derives from it.
 *
 *   X(name, cg_op constant, public args struct, problem struct)
 *
 * name is the op's name: the op table's row (runtime/ops.c, cg_op_name) and the public
 * entry point cg_<name> (runtime/dispatch.c defines them all from this list; the public
 * header declares each). A host backend's entry point for the op is cg__<backend>_run_<name>,
 * defined in the op's own file of that backend (runtime/cpu/cpu_isa.c for the cpu kernels
 * built per ISA variant) with CG_HOST_OP_ENTRY (internal.h). The
 * lines are in cg_op's order (include/chunkgen.h), which the compiler checks below;
 * tests/test_op_list.c checks each line against its op table row. A new op adds its
 * line(s) here: docs/architecture.md, "Adding an op". */
#ifndef CG_OP_LIST_H
#define CG_OP_LIST_H

#include "chunkgen.h"

#define CG_OP_LIST(X)                                                                                                  \
    X(ssd_fwd, CG_OP_SSD_FWD, cg_ssd_fwd_args, cg_ssd_prob)                                                            \
    X(ssd_bwd, CG_OP_SSD_BWD, cg_ssd_bwd_args, cg_ssd_prob)                                                            \
    X(sscan_fwd, CG_OP_SSCAN_FWD, cg_sscan_fwd_args, cg_sscan_prob)                                                    \
    X(sscan_bwd, CG_OP_SSCAN_BWD, cg_sscan_bwd_args, cg_sscan_prob)                                                    \
    X(gdr_fwd, CG_OP_GDR_FWD, cg_gdr_fwd_args, cg_gdr_prob)                                                            \
    X(gdr_bwd, CG_OP_GDR_BWD, cg_gdr_bwd_args, cg_gdr_prob)                                                            \
    X(ssd_step, CG_OP_SSD_STEP, cg_ssd_step_args, cg_ssd_step_prob)                                                    \
    X(sscan_step, CG_OP_SSCAN_STEP, cg_sscan_step_args, cg_sscan_step_prob)                                            \
    X(gdr_step, CG_OP_GDR_STEP, cg_gdr_step_args, cg_gdr_step_prob)                                                    \
    X(lru_fwd, CG_OP_LRU_FWD, cg_lru_fwd_args, cg_lru_prob)                                                            \
    X(lru_bwd, CG_OP_LRU_BWD, cg_lru_bwd_args, cg_lru_prob)

/* CG_OP_COUNT: the number of ops (the op table has one row each). */
#define CG__OP_INDEX(name, E, AT, PT) CG__OP_INDEX_##name,
enum cg__op_index { CG_OP_LIST(CG__OP_INDEX) CG_OP_COUNT };
#undef CG__OP_INDEX
/* each line's constant is its place in the list */
#define CG__OP_ORDER(name, E, AT, PT)                                                                                  \
    _Static_assert((int)(E) == (int)CG__OP_INDEX_##name, "op_list.h: " #name " is out of cg_op's order");
CG_OP_LIST(CG__OP_ORDER)
#undef CG__OP_ORDER
_Static_assert(CG_OP_COUNT <= 32, "an op set is a 32-bit mask (1u << op)");

/* Every op, as a mask of bits 1u << op. */
#define CG_OP_MASK_ALL ((unsigned)((1ull << CG_OP_COUNT) - 1u))

/* The name of op's cg_op constant ("CG_OP_SSD_FWD"), for messages; "" for an unknown op. */
#define CG__OP_CONST(name, E, AT, PT) #E,
static inline const char *cg__op_const(cg_op op) {
    static const char *const k[CG_OP_COUNT] = {CG_OP_LIST(CG__OP_CONST)};
    return (unsigned)op < CG_OP_COUNT ? k[op] : "";
}
#undef CG__OP_CONST

#endif /* CG_OP_LIST_H */
