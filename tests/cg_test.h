/* cg_test.h -- the one test binary's registry and helpers (libuv style).
 * A test is `CG_TEST(name) { ... }` at the start of a line; CMake finds each one and
 * registers it with ctest as `cg_tests name`. */
#ifndef CG_TEST_H
#define CG_TEST_H

#include "chunkgen.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*cg_test_fn)(void);
void cg_test_register(const char *name, cg_test_fn fn, const char *file);

#define CG_TEST(name)                                                              \
    static void cg_test_##name(void);                                              \
    __attribute__((constructor)) static void cg_test_reg_##name(void) {           \
        cg_test_register(#name, cg_test_##name, __FILE__);                         \
    }                                                                              \
    static void cg_test_##name(void)

/* Failures are counted; a test with any failed check fails. */
extern int cg_test_failures;
void cg_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Mark the running test skipped with a reason (e.g. no GPU). */
void cg_test_skip(const char *reason);


/* Print the failed condition (not counted; cg_test_fail that follows counts). */
void cg_test_cond(const char *file, int line, const char *cond);

#define CG_CHECK(cond, ...)                                                        \
    do {                                                                           \
        if (!(cond)) {                                                             \
            cg_test_cond(__FILE__, __LINE__, #cond);                               \
            cg_test_fail(__FILE__, __LINE__, __VA_ARGS__);                         \
        }                                                                          \
    } while (0)

#define CG_CHECK_OK(ctx, expr)                                                     \
    do {                                                                           \
        cg_status st_ = (expr);                                                    \
        if (st_ != CG_OK)                                                          \
            cg_test_fail(__FILE__, __LINE__, "%s returned %s: %s", #expr,          \
                         cg_status_str(st_), cg_errmsg(ctx));                      \
    } while (0)

/* Declares the test's context ctx; a failure, and a return from the (void) test, when it
 * cannot be created. */
#define CG_TEST_CONTEXT(ctx)                                                       \
    cg_context *ctx = NULL;                                                        \
    CG_CHECK_OK(ctx, cg_context_create(&ctx));                                     \
    if (!ctx) return

/* The call expr was refused: its status is want and, with word not NULL, the message
 * names word; what labels the call in a failure. */
#define CG_CHECK_REFUSED(ctx, expr, want, word, what)                                                    \
    do {                                                                                                 \
        cg_status rs_ = (expr);                                                                          \
        const char *rw_ = (word);                                                                        \
        CG_CHECK(rs_ == (want), "%s: got %s: %s", what, cg_status_str(rs_), cg_errmsg(ctx));             \
        if (rw_) CG_CHECK(strstr(cg_errmsg(ctx), rw_) != NULL, "message does not name %s: %s", rw_,      \
                          cg_errmsg(ctx));                                                               \
    } while (0)

/* A new context and the generator's kernel and CPU-space names (*names NULL-terminated,
 * owned by the context); NULL after a failed check. */
cg_context *cg_test_gen_kernels(const char ***names, int *n);
/* Declares names, n and ctx from cg_test_gen_kernels; returns from the (void) test
 * when it failed. */
#define CG_TEST_KERNELS(ctx, names, n)                                             \
    const char **names;                                                            \
    int n;                                                                         \
    cg_context *ctx = cg_test_gen_kernels(&names, &n);                             \
    if (!ctx) return

/* Deterministic pseudo-random numbers (splitmix64). */
typedef struct cg_rng { uint64_t s; } cg_rng;
static inline uint64_t cg_rng_next(cg_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [lo, hi). */
static inline double cg_rng_uniform(cg_rng *r, double lo, double hi) {
    return lo + (hi - lo) * ((double)(cg_rng_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

/* A host buffer with its tensor descriptor. Strided layouts are built by the caller. */
typedef struct cg_tbuf {
    cg_tensor t;
    void *mem;       /* owned */
    int64_t count;   /* elements allocated */
} cg_tbuf;

/* Allocate a contiguous tensor of dtype and shape, zero-filled. */
cg_tbuf cg_tbuf_new(cg_dtype dtype, int ndim, const int64_t *shape);
/* Allocate a tensor whose memory is laid out in the order `perm` of its dims (perm[0]
 * outermost), so its strides are a permutation; the shape stays in logical order. */
cg_tbuf cg_tbuf_new_perm(cg_dtype dtype, int ndim, const int64_t *shape, const int *perm);
void cg_tbuf_free(cg_tbuf *b);
/* Fill with uniform values in [lo, hi). */
void cg_tbuf_fill(cg_tbuf *b, cg_rng *r, double lo, double hi);
/* Element by logical index (ndim indices); any dtype (CG_BF16 / CG_F16 stores round once,
 * to nearest even: runtime/half.h). */
double cg_tbuf_get(const cg_tbuf *b, const int64_t *idx);
void cg_tbuf_set(cg_tbuf *b, const int64_t *idx, double v);
/* Copy values from src into dst (same shape, any dtype/strides). */
void cg_tbuf_copy(cg_tbuf *dst, const cg_tbuf *src);
/* max|a - ref| / max|ref| over the shape (ref max 0 -> absolute error). */
double cg_rel_err(const cg_tbuf *a, const cg_tbuf *ref);
/* sqrt(mean((a - ref)^2)) / (sqrt(mean(ref^2)) + 1e-8): fla's error ratio (its tests'
 * get_err_ratio / assert_close); NaN in a -> INFINITY. */
double cg_rms_err(const cg_tbuf *a, const cg_tbuf *ref);

#endif
