/* step_testlib.c -- helpers of the decode-step tests (step_testlib.h). */
#include "step_testlib.h"

#include "ops.h" /* cg_erracc */

/* Token t of a [B, T, ...] buffer as a [B, 1, ...] tensor (same strides). */
cg_tensor cg_step_token(const cg_tbuf *b, int64_t t) {
    cg_tensor x = b->t;
    x.data = (char *)b->mem + t * b->t.stride[1] * (int64_t)cg_dtype_size(b->t.dtype);
    x.shape[1] = 1;
    return x;
}

cg_tbuf cg_step_idx_buf(int ndim, const int64_t *shape, const int64_t *vals) {
    cg_tbuf b = cg_tbuf_new(CG_I32, ndim, shape);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    for (int64_t i = 0; i < n; i++) ((int32_t *)b.mem)[i] = (int32_t)vals[i];
    return b;
}

size_t cg_step_bytes(const cg_tbuf *b) { return (size_t)b->count * cg_dtype_size(b->t.dtype); }

cg_tbuf cg_step_rand(cg_rng *r, cg_dtype dt, int ndim, const int64_t *shape, double lo, double hi) {
    cg_tbuf b = cg_tbuf_new(dt, ndim, shape);
    cg_tbuf_fill(&b, r, lo, hi);
    return b;
}

/* Elements [b, ...] of a [B, ...] buffer: the relative error of a against ref over entry b's rows. */
double cg_step_rows_err(const cg_tbuf *a, int64_t ia, const cg_tbuf *ref, int64_t ir) {
    int64_t n = 1;
    for (int i = 1; i < a->t.ndim; i++) n *= a->t.shape[i];
    cg_erracc e = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t ix[4] = {ia, 0, 0, 0}, rx[4] = {ir, 0, 0, 0};
        for (int64_t r = k, i = a->t.ndim - 1; i >= 1; i--) ix[i] = rx[i] = r % a->t.shape[i], r /= a->t.shape[i];
        cg__erracc_add(&e, cg_tbuf_get(a, ix), cg_tbuf_get(ref, rx));
    }
    return cg__erracc_value(&e);
}

/* Whether entry b's rows of a [B, ...] buffer are all exactly zero. */
int cg_step_rows_zero(const cg_tbuf *a, int64_t b) {
    int64_t n = 1;
    for (int i = 1; i < a->t.ndim; i++) n *= a->t.shape[i];
    for (int64_t k = 0; k < n; k++) {
        int64_t ix[4] = {b, 0, 0, 0};
        for (int64_t r = k, i = a->t.ndim - 1; i >= 1; i--) ix[i] = r % a->t.shape[i], r /= a->t.shape[i];
        if (cg_tbuf_get(a, ix) != 0.0) return 0;
    }
    return 1;
}
