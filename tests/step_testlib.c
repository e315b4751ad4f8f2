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

cg_tbuf cg_step_gather(const cg_tbuf *cache0, int64_t B, const int64_t *slots) {
    int64_t sh[CG_MAX_DIMS];
    for (int i = 0; i < cache0->t.ndim; i++) sh[i] = cache0->t.shape[i];
    sh[0] = B;
    cg_tbuf h0 = cg_tbuf_new(cache0->t.dtype, cache0->t.ndim, sh);
    const size_t row = cg_step_bytes(cache0) / (size_t)cache0->t.shape[0];
    for (int64_t b = 0; b < B; b++)
        if (slots[b] >= 0) memcpy((char *)h0.mem + b * row, (const char *)cache0->mem + slots[b] * row, row);
    return h0;
}

void cg_step_check_slots(const char *what, int64_t B, const int64_t *slots, const cg_tbuf *out, const cg_tbuf *out_ref,
                         const cg_tbuf *cache, const cg_tbuf *hT, const cg_tbuf *cache0, double tol) {
    for (int64_t b = 0; b < B; b++) {
        if (slots[b] < 0) {
            CG_CHECK(cg_step_rows_zero(out, b), "%s: padding entry %lld: outputs not zero", what, (long long)b);
            continue;
        }
        const double eo = cg_step_rows_err(out, b, out_ref, b), eh = cg_step_rows_err(cache, slots[b], hT, b);
        CG_CHECK(eo <= tol && eh <= tol, "%s: entry %lld: output err %.3g, state err %.3g (want <= %g)", what,
                 (long long)b, eo, eh, tol);
    }
    const int64_t S = cache->t.shape[0];
    const size_t row = cg_step_bytes(cache) / (size_t)S;
    for (int64_t s = 0; s < S; s++) {
        int named = 0;
        for (int64_t b = 0; b < B; b++) named |= slots[b] == s;
        if (!named)
            CG_CHECK(!memcmp((const char *)cache->mem + s * row, (const char *)cache0->mem + s * row, row),
                     "%s: slot %lld changed", what, (long long)s);
    }
}

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

const cg_step_bad cg_step_bad_cases[] = {
    {"index = S", {0, 1, CG_STEP_BAD_S, 2}, 0, {0}, "state_indices[2] = 9"},
    {"index < -1", {0, -2, 1, 2}, 0, {0}, "state_indices[1] = -2"},
    {"duplicate slot in place", {4, -1, 2, 4}, 0, {0}, "state_indices[3] = 4"},
    {"duplicate dst", {0, 1, 2, 3}, 1, {5, 6, 5, -1}, "dst_indices[2, 0] = 5"},
    {"dst out of range", {0, 1, 2, 3}, 1, {5, 6, CG_STEP_BAD_S, -1}, "dst_indices[2, 0] = 9"},
    {"slot read by one entry, written by another", {0, 1, 2, 3}, 1, {1, 6, 7, 8}, "state_indices[1] = 1"},
};
const int cg_step_nbad = (int)(sizeof cg_step_bad_cases / sizeof cg_step_bad_cases[0]);

void cg_step_check_bad_indices(cg_context *ctx, cg_step_call_fn call, const void *data, cg_tbuf *cache,
                               const cg_tbuf *cache0, cg_tbuf *o) {
    static const cg_backend bes[] = {CG_BACKEND_CPU, CG_BACKEND_REF, CG_BACKEND_EMULATE};
    for (size_t be = 0; be < sizeof bes / sizeof bes[0]; be++) {
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = bes[be];
        for (int i = 0; i < cg_step_nbad; i++) {
            const cg_step_bad *k = &cg_step_bad_cases[i];
            cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){CG_STEP_BAD_B}, k->src);
            cg_tbuf dst = cg_step_idx_buf(2, (int64_t[]){CG_STEP_BAD_B, 1}, k->dst);
            CG_CHECK_REFUSED(ctx, call(ctx, data, 1, cache, &idx, k->use_dst ? &dst : NULL, o, &ex), CG_EINVAL, k->word,
                             k->what);
            CG_CHECK(!memcmp(cache->mem, cache0->mem, cg_step_bytes(cache)), "%s on %s: the cache changed", k->what,
                     cg_backend_name(bes[be]));
            cg_tbuf_free(&idx), cg_tbuf_free(&dst);
        }
    }
}

/* Each of bufs[n] converted in place to dtype dt (its values rounded once). */
static void retype(cg_tbuf *const *bufs, int n, cg_dtype dt) {
    for (int i = 0; i < n; i++) {
        cg_tbuf x = cg_tbuf_new(dt, bufs[i]->t.ndim, bufs[i]->t.shape);
        cg_tbuf_copy(&x, bufs[i]);
        cg_tbuf_free(bufs[i]);
        *bufs[i] = x;
    }
}

void cg_step_check_bf16(cg_context *ctx, cg_step_call_fn call, const void *data, int64_t n, const cg_tbuf *cache0,
                        int64_t B, const int64_t *slots, cg_tbuf *const *inputs, int ninputs, int ondim,
                        const int64_t *oshape, const char *what) {
    const double tol = 1e-2;
    retype(inputs, ninputs, CG_BF16);
    cg_tbuf idx = cg_step_idx_buf(1, &B, slots);
    static const cg_backend bes[3] = {CG_BACKEND_REF, CG_BACKEND_CPU, CG_BACKEND_EMULATE};
    cg_tbuf c[3], o[3];
    for (int i = 0; i < 3; i++) {
        c[i] = cg_tbuf_new(cache0->t.dtype, cache0->t.ndim, cache0->t.shape);
        memcpy(c[i].mem, cache0->mem, cg_step_bytes(&c[i]));
        o[i] = cg_tbuf_new(CG_BF16, ondim, oshape);
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = bes[i];
        CG_CHECK_OK(ctx, call(ctx, data, n, &c[i], &idx, NULL, &o[i], &ex));
    }
    for (int i = 1; i < 3; i++) {
        const double eo = cg_rel_err(&o[i], &o[0]), ec = cg_rel_err(&c[i], &c[0]);
        CG_CHECK(eo <= tol && ec <= tol, "%s on %s: outputs %.3g, cache %.3g (want <= %g)", what,
                 cg_backend_name(bes[i]), eo, ec, tol);
    }
    for (int i = 0; i < 3; i++) cg_tbuf_free(&c[i]), cg_tbuf_free(&o[i]);
    cg_tbuf_free(&idx);
}
