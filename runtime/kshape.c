/* kshape.c -- a call's shape as the generator and the caches see it: the shape of a
 * validated problem (cg__shape_of_prob), the one equality of shapes (cg_shape_equal), the
 * canonical 16-bit mask, and what Lua's shape table adds to the symbols, made from a shape
 * in one place (cg__shape_kflags through the op table's kflag column, cg__shape_dtypes).
 * Below the dispatcher (the launcher and the CPU path key their caches by a shape); the
 * text syntax and the way from a call's args are runtime/shape.c's. */
#include "gen.h"
#include "ops.h"

#include <string.h>

#define BIT(i) ((uint64_t)1 << (i))

int cg__shape_present(const cg_op_desc *d, const cg_shape *s, int i) {
    return !d->t[i].optional || (s->given & BIT(i));
}

void cg__shape_input_dtypes(const cg_op_desc *d, const cg_shape *s, int dt[]) {
    for (int i = 0; i < d->nt; i++) {
        dt[i] = -1;
        if (!cg__shape_present(d, s, i) || d->t[i].role != CG_TD_IN) continue;
        dt[i] = s->dtype == CG_F64 ? CG_F64 : (s->half & BIT(i)) ? (int)s->dtype : CG_F32;
    }
}

cg_status cg__shape_half_mask(cg_context *ctx, const cg_op_desc *d, const cg_shape *s, uint64_t *mask) {
    int dt[CG_OP_MAX_TENSORS];
    cg_dtype want[CG_OP_MAX_TENSORS], math;
    cg__shape_input_dtypes(d, s, dt);
    cg_status st = cg__op_dtypes(ctx, d, dt, want, &math);
    if (st) return st;
    *mask = 0;
    for (int i = 0; i < d->nt; i++) {
        if (!cg__shape_present(d, s, i)) continue;
        const int x = d->t[i].role == CG_TD_IN ? dt[i] : (int)want[i];
        if (cg__dtype_half((cg_dtype)x)) *mask |= BIT(i);
    }
    return CG_OK;
}

/* *in in this header's layout (the growth rule, as cg__abi_in: size 0 is this layout,
 * newer members must be zero); -1 when it is not a shape this library can read. */
static int shape_read(const cg_shape *in, cg_shape *out) {
    size_t size;
    memcpy(&size, in, sizeof size);
    size = size ? size : sizeof *out;
    memset(out, 0, sizeof *out);
    for (size_t i = sizeof *out; i < size; i++)
        if (((const unsigned char *)in)[i]) return -1;
    memcpy(out, in, size < sizeof *out ? size : sizeof *out);
    return size < sizeof(size_t) ? -1 : 0;
}

int cg_shape_equal(const cg_shape *a, const cg_shape *b) {
    cg_shape x, y;
    if (!a || !b) return a == b;
    if (shape_read(a, &x) || shape_read(b, &y)) return 0;
    if (x.op != y.op || x.layout != y.layout || x.dtype != y.dtype || x.half != y.half || x.given != y.given ||
        x.scalars != y.scalars || x.grouped != y.grouped || x.nseq != y.nseq || x.longest != y.longest)
        return 0;
    return !memcmp(x.dim, y.dim, sizeof x.dim);
}

void cg__shape_of_prob(const cg_op_desc *d, const void *prob, cg_shape *s) {
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    s->op = d->op;
    for (int k = 1; k < CG_SYM_COUNT; k++)
        if (d->dim_off[k] != (size_t)-1) s->dim[k] = cg__prob_dim(d, prob, (cg_sym)k);
    s->grouped = cg__prob_grouped(d, prob);
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].optional && cg__prob_view(d, prob, i)->p) s->given |= BIT(i);
    for (int k = 0; k < d->nscalar; k++)
        if (*(const int *)((const char *)prob + d->scalar[k].prob_off)) s->scalars |= 1u << k;
    s->dtype = *(const cg_dtype *)((const char *)prob + d->dtype_off);
    const int h = cg__prob_half(d, prob);
    if (h >= 0) { /* the present tensors' bits (validation checked the outputs' dtypes) */
        s->dtype = cg__prob_view(d, prob, h)->dt;
        int outputs_made = 1;
        for (int i = 0; i < d->nt; i++) {
            const cg_view *v = cg__prob_view(d, prob, i);
            if (v->p && v->dt == s->dtype) s->half |= BIT(i);
            if (!v->p && !d->t[i].optional) outputs_made = 0; /* cg_shape_of: outputs not made yet */
        }
        uint64_t mask; /* their bits as they will be (a validated problem: always CG_OK) */
        if (!outputs_made && cg__shape_half_mask(NULL, d, s, &mask) == CG_OK) s->half = mask;
    }
    s->nseq = *cg__prob_nseq(d, prob);
}

int cg__shape_kflags(const cg_shape *s, int extra) {
    const cg_op_desc *d = cg__op_desc(s->op);
    int flags = extra | (s->grouped ? CG_KS_GROUPED : 0);
    for (int i = 0; i < d->nt; i++) /* the op table's kflag column: an optional tensor given */
        if ((s->given & BIT(i)) && d->t[i].kflag) flags |= d->t[i].kflag;
    for (int k = 0; k < d->nscalar; k++) /* ... or a scalar option set */
        if (s->scalars & (1u << k)) flags |= d->scalar[k].kflag;
    return flags;
}

void cg__shape_dtypes(const cg_shape *s, char buf[CG_KS_DTYPES_CAP]) {
    const cg_op_desc *d = cg__op_desc(s->op);
    size_t n = 0;
    memset(buf, 0, CG_KS_DTYPES_CAP);
    if (!cg__dtype_half(s->dtype)) return;
    for (int i = 0; i < d->nt; i++) {
        if (!cg__shape_present(d, s, i) || !(s->half & BIT(i))) continue;
        int k =
            snprintf(buf + n, CG_KS_DTYPES_CAP - n, "%s%s=%s", n ? " " : "", d->t[i].name, cg__dtype_word(s->dtype));
        if (k < 0 || (size_t)k >= CG_KS_DTYPES_CAP - n) break; /* cannot happen: 24 tensors of short names */
        n += (size_t)k;
    }
}
