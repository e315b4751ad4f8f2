/* test_util.c -- tensor buffers for tests, and a context with the kernel list. */
#include "cg_test.h"
#include "ops.h"
#include "gen.h"

cg_context *cg_test_gen_kernels(const char ***names, int *n) {
    cg_context *ctx = NULL;
    *names = NULL;
    *n = 0;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    if (ctx && cg__gen_kernels(ctx, names, n) != CG_OK) {
        cg_test_fail(__FILE__, __LINE__, "cg__gen_kernels: %s", cg_errmsg(ctx));
        cg_context_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

static size_t dsize(cg_dtype dt) { return cg__dtype_size(dt); }

cg_tbuf cg_tbuf_new_perm(cg_dtype dtype, int ndim, const int64_t *shape, const int *perm) {
    cg_tbuf b;
    memset(&b, 0, sizeof b);
    b.t.dtype = dtype;
    b.t.ndim = ndim;
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) b.t.shape[i] = shape[i];
    for (int k = ndim - 1; k >= 0; k--) {
        int d = perm ? perm[k] : k;
        b.t.stride[d] = count;
        count *= shape[d];
    }
    b.count = count;
    b.mem = calloc((size_t)(count ? count : 1), dsize(dtype));
    if (!b.mem) abort();
    b.t.data = b.mem;
    return b;
}

cg_tbuf cg_tbuf_new(cg_dtype dtype, int ndim, const int64_t *shape) {
    return cg_tbuf_new_perm(dtype, ndim, shape, NULL);
}

void cg_tbuf_free(cg_tbuf *b) {
    free(b->mem);
    memset(b, 0, sizeof *b);
}

static int64_t offset(const cg_tbuf *b, const int64_t *idx) {
    int64_t off = 0;
    for (int i = 0; i < b->t.ndim; i++) off += idx[i] * b->t.stride[i];
    return off;
}

/* Element off of b's memory as a one-dimensional view (any dtype: internal.h's load/store). */
static cg_view flat(const cg_tbuf *b) {
    cg_view v = {b->t.data, b->t.dtype, {1, 0, 0, 0}};
    return v;
}

double cg_tbuf_get(const cg_tbuf *b, const int64_t *idx) {
    cg_view v = flat(b);
    return cg__vload(&v, offset(b, idx), 0, 0, 0);
}

void cg_tbuf_set(cg_tbuf *b, const int64_t *idx, double x) {
    cg_view v = flat(b); /* 16-bit dtypes: x rounded once, to nearest even */
    cg__vstore(&v, offset(b, idx), 0, 0, 0, x);
}

/* Visit every logical index in row-major order. */
static int next_index(const cg_tensor *t, int64_t *idx) {
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (++idx[i] < t->shape[i]) return 1;
        idx[i] = 0;
    }
    return 0;
}

static int64_t numel(const cg_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

void cg_tbuf_fill(cg_tbuf *b, cg_rng *r, double lo, double hi) {
    int64_t idx[CG_MAX_DIMS] = {0};
    if (numel(&b->t) == 0) return;
    do cg_tbuf_set(b, idx, cg_rng_uniform(r, lo, hi));
    while (next_index(&b->t, idx));
}

void cg_tbuf_copy(cg_tbuf *dst, const cg_tbuf *src) {
    int64_t idx[CG_MAX_DIMS] = {0};
    if (numel(&src->t) == 0) return;
    do cg_tbuf_set(dst, idx, cg_tbuf_get(src, idx));
    while (next_index(&src->t, idx));
}

double cg_rel_err(const cg_tbuf *a, const cg_tbuf *ref) {
    int64_t idx[CG_MAX_DIMS] = {0};
    cg_erracc e = {0};
    if (numel(&ref->t) == 0) return 0;
    do cg__erracc_add(&e, cg_tbuf_get(a, idx), cg_tbuf_get(ref, idx));
    while (next_index(&ref->t, idx));
    return cg__erracc_value(&e); /* NaN in the output is an error (INFINITY) */
}

double cg_rms_err(const cg_tbuf *a, const cg_tbuf *ref) {
    int64_t idx[CG_MAX_DIMS] = {0};
    double se = 0, sr = 0;
    if (numel(&ref->t) == 0) return 0;
    do {
        const double x = cg_tbuf_get(a, idx), r = cg_tbuf_get(ref, idx);
        se += (x - r) * (x - r), sr += r * r;
    } while (next_index(&ref->t, idx));
    const double n = (double)numel(&ref->t), err = sqrt(se / n) / (sqrt(sr / n) + 1e-8);
    return isnan(err) ? INFINITY : err; /* NaN in the output is an error */
}
