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

#endif
