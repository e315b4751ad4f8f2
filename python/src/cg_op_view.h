/* cg_op_view.h -- the library's op table (runtime/ops.h) seen through a plain C interface
 * that C++ can include (ops.h pulls in C11 headers C++ does not take). Used by the XLA FFI
 * shim (cg_jax_ffi.cc) and by the CPython module's argument builder (cg_args.c): neither
 * lists an op's tensors itself. Tensor i is in the op table's order: inputs first. */
#ifndef CG_OP_VIEW_H
#define CG_OP_VIEW_H

#include <stddef.h>

#include "chunkgen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every op's args struct fits this (a union of the four). */
typedef union cgov_args {
    cg_ssd_fwd_args ssd_fwd;
    cg_ssd_bwd_args ssd_bwd;
    cg_sscan_fwd_args sscan_fwd;
    cg_sscan_bwd_args sscan_bwd;
} cgov_args;

#define CGOV_NOPS (CG_OP_SSCAN_BWD + 1)

const char *cgov_op_name(cg_op op);
int cgov_ntensors(cg_op op);
const char *cgov_tensor_name(cg_op op, int i);
int cgov_is_output(cg_op op, int i);
/* Tensor i's slot in args (an args struct of op's type). */
cg_tensor *cgov_tensor(cg_op op, cgov_args *args, int i);
/* The op's cu_seqlens slot in args (its op table `varlen` row; docs/varlen.md). */
cg_tensor *cgov_cu(cg_op op, cgov_args *args);
/* The op's int flag: layout for SSD (nonzero: head-major), its scalars (delta_softplus). */
void cgov_set_flag(cg_op op, cgov_args *args, int flag);
/* The public entry point of op on args (cg_ssd_fwd ...). */
cg_status cgov_call(cg_context *ctx, cg_op op, const cgov_args *args, const cg_exec *exec);

#ifdef __cplusplus
}
#endif

#endif
