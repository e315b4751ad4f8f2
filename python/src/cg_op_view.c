/* cg_op_view.c -- the op table through cg_op_view.h's plain C interface. */
#include "cg_op_view.h"

#include "ops.h"

const char *cgov_op_name(cg_op op) { return cg__op_desc(op)->name; }
int cgov_ntensors(cg_op op) { return cg__op_desc(op)->nt; }
const char *cgov_tensor_name(cg_op op, int i) { return cg__op_desc(op)->t[i].name; }
int cgov_is_output(cg_op op, int i) { return cg__op_desc(op)->t[i].role == CG_TD_OUT; }

cg_tensor *cgov_tensor(cg_op op, cgov_args *args, int i) {
    return (cg_tensor *)((char *)args + cg__op_desc(op)->t[i].arg_off);
}

cg_tensor *cgov_cu(cg_op op, cgov_args *args) {
    return (cg_tensor *)((char *)args + cg__op_desc(op)->varlen->arg_off);
}

void cgov_set_flag(cg_op op, cgov_args *args, int flag) {
    const cg_op_desc *d = cg__op_desc(op);
    if (d->layout_arg_off != (size_t)-1)
        *(cg_layout *)((char *)args + d->layout_arg_off) = flag ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
    for (int k = 0; k < d->nscalar; k++) *(int *)((char *)args + d->scalar[k].arg_off) = flag != 0;
}

cg_status cgov_call(cg_context *ctx, cg_op op, const cgov_args *args, const cg_exec *exec) {
    return cg_run(ctx, op, args, exec);
}
