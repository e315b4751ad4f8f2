/* op_info.c -- the op table (runtime/ops.c) seen from outside: cg_op_describe,
 * cg_op_tensor_info and the args accessors of chunkgen.h. Nothing here lists an op's
 * tensors: every fact is read from the table. */
#include "op_info.h"

#include <string.h>

int cg_op_count(void) { return CG_OP_COUNT; }

const char *cg_op_name(cg_op op) { return (unsigned)op < CG_OP_COUNT ? cg__op_desc(op)->name : NULL; }

cg_status cg_op_parse(const char *name, cg_op *op) {
    const cg_op_desc *d = cg__op_find(name);
    if (!d) return CG_EINVAL;
    if (op) *op = d->op;
    return CG_OK;
}

const cg_op_desc *cg__op_checked(cg_context *ctx, cg_op op) {
    if ((unsigned)op < CG_OP_COUNT) return cg__op_desc(op);
    (void)cg__err(ctx, CG_EINVAL, "op: %d but expected a cg_op value (0 .. %d: %s ...)", (int)op, CG_OP_COUNT - 1,
                  cg__op_const(0));
    return NULL;
}

/* Tensor i of d, cu_seqlens being tensor nt; NULL when out of range. */
const cg_tdesc *cg__op_tdesc(const cg_op_desc *d, int i) {
    if (i >= 0 && i < d->nt) return &d->t[i];
    return i == d->nt && d->varlen ? d->varlen : NULL;
}

cg_status cg_op_describe(cg_context *ctx, cg_op op, cg_op_info *info) {
    const cg_op_desc *d = cg__op_checked(ctx, op);
    if (!d) return CG_EINVAL;
    cg_op_info o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.op = d->op;
    o.name = d->name;
    o.family = d->family;
    o.bwd = d->bwd;
    o.args_type = d->args_type;
    o.args_size = d->args_size;
    o.ntensors = d->nt;
    for (int s = 1; s < CG_SYM_COUNT; s++)
        if (d->dim_off[s] != (size_t)-1) o.syms[o.nsyms++] = (cg_sym)s;
    o.seq = d->seq;
    o.divisible = d->divisible;
    o.divisor = d->divisor;
    o.nkey = d->nkey;
    for (int k = 0; k < d->nkey; k++) o.key[k] = d->key[k];
    CG_ASSERT(d->nscalar <= CG_OP_MAX_SCALARS);
    o.nscalars = d->nscalar;
    for (int k = 0; k < d->nscalar; k++) o.scalars[k] = d->scalar[k].name;
    CG_ASSERT(d->nreal <= CG_OP_MAX_SCALARS);
    o.nreals = d->nreal;
    for (int k = 0; k < d->nreal; k++) o.reals[k] = d->real[k].name;
    o.has_layout = d->layout_arg_off != (size_t)-1;
    o.has_varlen = d->varlen != NULL;
    for (int i = 0; i < d->nt; i++) o.groupable |= (d->t[i].flags & CG_TD_GROUPABLE) != 0;
    for (int s = 0; s < CG_SHAPE_MAX_SYMS; s++) o.sym_from[s] = -1;
    for (int i = d->nt - 1; i >= 0; i--) /* the first required input that has the symbol (cg__op_derive_dims) */
        for (int k = 0; k < 4 && d->t[i].role == CG_TD_IN && !d->t[i].optional; k++)
            if (d->t[i].ext[k] != CG_SYM_NONE && d->dim_off[d->t[i].ext[k]] != (size_t)-1)
                o.sym_from[d->t[i].ext[k]] = i;
    return cg__abi_out(ctx, "info", info, &o, sizeof o);
}

cg_status cg_op_tensor_info(cg_context *ctx, cg_op op, int i, cg_tensor_info *info) {
    const cg_op_desc *d = cg__op_checked(ctx, op);
    if (!d) return CG_EINVAL;
    const cg_tdesc *t = cg__op_tdesc(d, i);
    if (!t)
        return cg__err(ctx, CG_EINVAL, "i: %d but expected 0 .. %d (the tensors of %s%s)", i,
                       d->nt - (d->varlen == NULL), d->name, d->varlen ? ", cu_seqlens last" : "");
    cg_tensor_info o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.name = t->name;
    o.file = t->file ? t->file : t->name;
    o.output = t->role == CG_TD_OUT;
    o.optional = t->optional;
    o.requires = t->requires;
    o.grad_of = t->grad_of;
    for (int k = 0; k < 4; k++)
        if (t->ext[k] != CG_SYM_NONE) o.ext[o.ndim++] = t->ext[k];
    if ((t->flags & CG_TD_INDEX) && !o.ndim) o.ndim = 1; /* cu_seqlens [N + 1]: no symbol of its own */
    o.flags = (unsigned)t->flags;
    o.lo = t->lo;
    o.hi = t->hi;
    o.tol_f32 = cg__tol_dtype(t->tol, CG_F32);
    o.tol_bf16 = cg__tol_dtype(t->tol, CG_BF16);
    o.tol_f16 = cg__tol_dtype(t->tol, CG_F16);
    return cg__abi_out(ctx, "info", info, &o, sizeof o);
}

cg_tensor *cg_op_args_tensor(cg_op op, void *args, int i) {
    if ((unsigned)op >= CG_OP_COUNT || !args) return NULL;
    const cg_op_desc *d = cg__op_desc(op);
    const cg_tdesc *t = cg__op_tdesc(d, i);
    return t ? (cg_tensor *)((char *)args + t->arg_off) : NULL;
}

int *cg_op_args_scalar(cg_op op, void *args, int k) {
    if ((unsigned)op >= CG_OP_COUNT || !args) return NULL;
    const cg_op_desc *d = cg__op_desc(op);
    return k >= 0 && k < d->nscalar ? (int *)((char *)args + d->scalar[k].arg_off) : NULL;
}

double *cg_op_args_real(cg_op op, void *args, int k) {
    if ((unsigned)op >= CG_OP_COUNT || !args) return NULL;
    const cg_op_desc *d = cg__op_desc(op);
    return k >= 0 && k < d->nreal ? (double *)((char *)args + d->real[k].arg_off) : NULL;
}

cg_layout *cg_op_args_layout(cg_op op, void *args) {
    if ((unsigned)op >= CG_OP_COUNT || !args) return NULL;
    const cg_op_desc *d = cg__op_desc(op);
    return d->layout_arg_off == (size_t)-1 ? NULL : (cg_layout *)((char *)args + d->layout_arg_off);
}

int cg_op_tensor_dims(cg_op op, int i, cg_layout layout, int grouped, cg_sym syms[CG_MAX_DIMS]) {
    if ((unsigned)op >= CG_OP_COUNT || !syms) return 0;
    const cg_op_desc *d = cg__op_desc(op);
    const cg_tdesc *t = cg__op_tdesc(d, i);
    if (!t) return 0;
    for (int k = 0; k < CG_MAX_DIMS; k++) syms[k] = CG_SYM_NONE;
    if (i == d->nt) return 1; /* cu_seqlens [N + 1] */
    int order[4];
    const int n =
        cg__op_given_order(d, i, grouped || d->grouped_off == (size_t)-1, layout == CG_LAYOUT_HEAD_MAJOR, order);
    for (int k = 0; k < n; k++) syms[k] = t->ext[order[k]];
    return n;
}

cg_status cg_op_dtypes(cg_context *ctx, cg_op op, const int *dt, cg_dtype *want) {
    const cg_op_desc *d = cg__op_checked(ctx, op);
    if (!d) return CG_EINVAL;
    if (!dt || !want)
        return cg__err(ctx, CG_EINVAL, "%s: null pointer (expected arrays of %d dtypes)", dt ? "want" : "dt", d->nt);
    cg_dtype math;
    cg_status st = cg__op_dtypes(ctx, d, dt, want, &math);
    for (int i = 0; !st && i < d->nt; i++)
        if (dt[i] >= 0 && d->t[i].role == CG_TD_IN) want[i] = (cg_dtype)dt[i]; /* accepted as given */
    return st;
}
