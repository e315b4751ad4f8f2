/* test_dtype_lib.c -- problems built from the op table, in any storage dtypes. */
#include "test_dtype_lib.h"

#include <stdlib.h>
#include <string.h>

int dtt_idx(const dtt_prob *p, const char *name) {
    int i = cg__op_tensor(p->d, name);
    if (i < 0) abort();
    return i;
}

void dtt_new(dtt_prob *p, cg_op op, const int64_t dims[CG_SYM_COUNT], int grouped, int hm, cg_dtype half,
             cg_dtype other, unsigned omit) {
    memset(p, 0, sizeof *p);
    const cg_op_desc *d = p->d = cg__op_desc(op);
    memcpy(p->dims, dims, sizeof p->dims);
    p->dims[CG_SYM_NONE] = 1;
    if (!grouped) p->dims[CG_SYM_G] = 1;
    p->grouped = grouped;
    p->hm = hm;
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *t = &d->t[i];
        if (t->optional && (omit >> i & 1u)) continue;
        if (t->requires && (omit >> cg__op_tensor(d, t->requires) & 1u)) continue;
        int64_t shape[4];
        int n = cg__op_given_shape(d, i, p->dims, grouped, hm, shape);
        p->t[i] = cg_tbuf_new((t->flags & CG_TD_HALF) ? half : other, n, shape);
    }
}

void dtt_fill(dtt_prob *p, uint64_t seed) {
    cg_rng r = {seed};
    for (int i = 0; i < p->d->nt; i++)
        if (p->t[i].t.data && p->d->t[i].role == CG_TD_IN) cg_tbuf_fill(&p->t[i], &r, p->d->t[i].lo, p->d->t[i].hi);
}

void dtt_copy_inputs(dtt_prob *dst, const dtt_prob *src) {
    for (int i = 0; i < src->d->nt; i++)
        if (src->t[i].t.data && dst->t[i].t.data && src->d->t[i].role == CG_TD_IN) cg_tbuf_copy(&dst->t[i], &src->t[i]);
}

void dtt_pair(dtt_prob *a, dtt_prob *b, cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_dtype half,
              uint64_t seed) {
    dtt_new(a, op, dims, 1, hm, half, CG_F32, 0);
    dtt_new(b, op, dims, 1, hm, half, CG_F32, 0);
    dtt_fill(a, seed);
    dtt_copy_inputs(b, a);
}

const char *dtt_first_diff(const dtt_prob *a, const dtt_prob *b) {
    for (int i = 0; i < a->d->nt; i++) {
        if (a->d->t[i].role != CG_TD_OUT || !a->t[i].t.data) continue;
        if (memcmp(a->t[i].mem, b->t[i].mem, (size_t)a->t[i].count * cg__dtype_size(a->t[i].t.dtype)))
            return a->d->t[i].name;
    }
    return NULL;
}

const void *dtt_args(dtt_prob *p) {
    const cg_op_desc *d = p->d;
    memset(&p->args, 0, sizeof p->args);
    *(size_t *)&p->args = d->args_size;
    if (d->layout_arg_off != (size_t)-1)
        *(cg_layout *)((char *)&p->args + d->layout_arg_off) = p->hm ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
    for (int k = 0; k < d->nscalar; k++) *(int *)((char *)&p->args + d->scalar[k].arg_off) = 1;
    for (int i = 0; i < d->nt; i++)
        if (p->t[i].t.data) *cg__args_tensor(d, &p->args, i) = p->t[i].t;
    return &p->args;
}

cg_status dtt_run(cg_context *ctx, dtt_prob *p, cg_backend be) {
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    return cg_run(ctx, p->d->op, dtt_args(p), &ex);
}

void dtt_free(dtt_prob *p) {
    for (int i = 0; i < CG_OP_MAX_TENSORS; i++) cg_tbuf_free(&p->t[i]);
}

void dtt_check_outputs(const dtt_prob *p, const dtt_prob *r, const char *what) {
    for (int i = 0; i < p->d->nt; i++) {
        const cg_tdesc *t = &p->d->t[i];
        if (t->role != CG_TD_OUT || !p->t[i].t.data) continue;
        const double err = cg_rel_err(&p->t[i], &r->t[i]), tol = cg__tol_dtype(t->tol, p->t[i].t.dtype);
        CG_CHECK(err <= tol, "%s: %s rel err %.3g > %.0e", what, t->name, err, tol);
    }
}
