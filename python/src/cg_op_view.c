/* cg_op_view.c -- the op table through cg_op_view.h's few calls, over the public API. */
#include "cg_op_view.h"

static cg_op_info info_of(cg_op op) {
    cg_op_info in = CG__INIT(cg_op_info);
    if (cg_op_describe(NULL, op, &in) != CG_OK) in.ntensors = 0;
    return in;
}

static cg_tensor_info tensor_of(cg_op op, int i) {
    cg_tensor_info t = CG__INIT(cg_tensor_info);
    if (cg_op_tensor_info(NULL, op, i, &t) != CG_OK) t.name = "?";
    return t;
}

int cgov_nops(void) { return cg_op_count(); }
int cgov_ok(cg_op op) { return cg_op_name(op) && info_of(op).args_size <= CGOV_ARGS_BYTES; }
const char *cgov_op_name(cg_op op) { return cg_op_name(op); }
int cgov_ntensors(cg_op op) { return info_of(op).ntensors; }
const char *cgov_tensor_name(cg_op op, int i) { return tensor_of(op, i).name; }
int cgov_is_output(cg_op op, int i) { return tensor_of(op, i).output; }
int cgov_is_inplace(cg_op op, int i) { return (tensor_of(op, i).flags & CG_TENSOR_INPLACE) != 0; }
cg_tensor *cgov_tensor(cg_op op, cgov_args *args, int i) { return cg_op_args_tensor(op, args, i); }
cg_tensor *cgov_cu(cg_op op, cgov_args *args) { return cg_op_args_tensor(op, args, info_of(op).ntensors); }

void cgov_set_flag(cg_op op, cgov_args *args, int flag) {
    cg_layout *layout = cg_op_args_layout(op, args);
    int bit = 0;
    if (layout) *layout = (flag >> bit++) & 1 ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
    for (int k = 0, *p; (p = cg_op_args_scalar(op, args, k)); k++) *p = (flag >> bit++) & 1;
}

int cgov_nreals(cg_op op) { return info_of(op).nreals; }
const char *cgov_real_name(cg_op op, int k) {
    cg_op_info in = info_of(op);
    return k >= 0 && k < in.nreals ? in.reals[k] : "?";
}

void cgov_set_reals(cg_op op, cgov_args *args, const double *r, int n) {
    double *p;
    for (int k = 0; k < n && (p = cg_op_args_real(op, args, k)); k++) *p = r[k];
}

cg_status cgov_call(cg_context *ctx, cg_op op, const cgov_args *args, const cg_exec *exec) {
    return cg_run(ctx, op, args, exec);
}
