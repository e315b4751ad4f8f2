/* cg_op_view.h -- the op table as the public header describes it (cg_op_describe,
 * cg_op_tensor_info, cg_op_args_tensor ...), in the few calls the XLA FFI shim
 * (cg_jax_ffi.cc) and the CPython module's argument builder (cg_args.c) need: neither
 * lists an op's tensors itself, and neither names an op. Tensor i is in the op table's
 * order: inputs first. */
#ifndef CG_OP_VIEW_H
#define CG_OP_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "chunkgen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room for any op's args struct (cg_op_info.args_size, checked by cgov_ok). */
#define CGOV_ARGS_BYTES 4096
typedef struct cgov_args {
    union {
        unsigned char bytes[CGOV_ARGS_BYTES]; /* first: cgov_args{} zeroes it all */
        int64_t align_;
        void *align_p_;
    } u;
} cgov_args;

/* Number of ops (cg_op_count). */
int cgov_nops(void);
/* Whether op is an op whose args struct fits a cgov_args. */
int cgov_ok(cg_op op);
const char *cgov_op_name(cg_op op);
int cgov_ntensors(cg_op op);
const char *cgov_tensor_name(cg_op op, int i);
int cgov_is_output(cg_op op, int i);
/* Whether tensor i is an input the call writes in place (CG_TENSOR_INPLACE: a decode step's cache). */
int cgov_is_inplace(cg_op op, int i);
/* Tensor i's slot in args (an args struct of op's type). */
cg_tensor *cgov_tensor(cg_op op, cgov_args *args, int i);
/* The op's cu_seqlens slot in args (tensor ntensors; docs/varlen.md). */
cg_tensor *cgov_cu(cg_op op, cgov_args *args);
/* The op's int flag: bit 0 its layout when it has one (1: head-major), then a bit per
 * scalar option in cg_op_info.scalars order (sscan: bit 0 delta_softplus; gdr: bit 0 the
 * layout, bit 1 use_qk_l2norm). */
void cgov_set_flag(cg_op op, cgov_args *args, int flag);
/* The op's real (double) arguments (cg_op_info.reals: gdr's scale), in table order. */
int cgov_nreals(cg_op op);
const char *cgov_real_name(cg_op op, int k);
/* Set real argument k of args to r[k] for k < n (n must be cgov_nreals(op); a value is the
 * library's to check: cg_validate names it). */
void cgov_set_reals(cg_op op, cgov_args *args, const double *r, int n);
/* The op's call on args (cg_run). */
cg_status cgov_call(cg_context *ctx, cg_op op, const cgov_args *args, const cg_exec *exec);

#ifdef __cplusplus
}
#endif

#endif
