/* step_testlib.h -- helpers of the decode-step tests (test_step.c, test_gdr_step.c):
 * token slices of [B, T, ...] buffers, index buffers, per-entry errors. */
#ifndef CG_STEP_TESTLIB_H
#define CG_STEP_TESTLIB_H

#include "cg_test.h"

/* Token t of a [B, T, ...] buffer as a [B, 1, ...] tensor (same strides). */
cg_tensor cg_step_token(const cg_tbuf *b, int64_t t);
/* A CG_I32 buffer of the given shape holding vals. */
cg_tbuf cg_step_idx_buf(int ndim, const int64_t *shape, const int64_t *vals);
/* Bytes of a buffer's elements. */
size_t cg_step_bytes(const cg_tbuf *b);
/* A buffer filled uniformly in [lo, hi). */
cg_tbuf cg_step_rand(cg_rng *r, cg_dtype dt, int ndim, const int64_t *shape, double lo, double hi);
/* The relative error of a's rows [ia, ...] against ref's rows [ir, ...]. */
double cg_step_rows_err(const cg_tbuf *a, int64_t ia, const cg_tbuf *ref, int64_t ir);
/* Whether a's rows [b, ...] are all exactly zero. */
int cg_step_rows_zero(const cg_tbuf *a, int64_t b);

/* Bad slot indices of one token for 4 entries over a cache of 9 slots (every step test's
 * sizes): what is wrong, state_indices [4], whether dst_indices [4, 1] is given and its
 * values, and what the message must name. */
enum { CG_STEP_BAD_B = 4, CG_STEP_BAD_S = 9 };
typedef struct cg_step_bad {
    const char *what;
    int64_t src[CG_STEP_BAD_B];
    int use_dst;
    int64_t dst[CG_STEP_BAD_B];
    const char *word;
} cg_step_bad;
extern const cg_step_bad cg_step_bad_cases[];
extern const int cg_step_nbad;
/* One step call of the caller's data (one token, 4 entries) on cache into o, with the
 * index buffers given (dst NULL: no dst_indices), on ex. */
typedef cg_status (*cg_step_call_fn)(cg_context *ctx, const void *data, cg_tbuf *cache, cg_tbuf *idx, cg_tbuf *dst,
                                     cg_tbuf *o, const cg_exec *ex);
/* Every cg_step_bad_cases entry through call on the cpu, ref and emulate backends: refused
 * with CG_EINVAL and a message naming the entry, cache bit-identical to cache0 afterwards. */
void cg_step_check_bad_indices(cg_context *ctx, cg_step_call_fn call, const void *data, cg_tbuf *cache,
                               const cg_tbuf *cache0, cg_tbuf *o);

#endif
