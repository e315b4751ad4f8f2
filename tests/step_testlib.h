/* step_testlib.h -- helpers of the decode-step tests (test_step.c, test_gdr_step.c):
 * token slices of [B, T, ...] buffers, index buffers, per-entry errors. */
#ifndef CG_STEP_TESTLIB_H
#define CG_STEP_TESTLIB_H

#include "cg_test.h"

/* Token t of a [B, T, ...] buffer as a [B, 1, ...] tensor (same strides). */
cg_tensor cg_step_token(const cg_tbuf *b, int64_t t);
/* A CG_I32 buffer of the given shape holding vals. */
cg_tbuf cg_step_idx_buf(int ndim, const int64_t *shape, const int64_t *vals);
/* The rows of cache0 [S, ...] that slots[B] name, as a [B, ...] buffer of its dtype (a
 * padding entry, slot < 0: zeros): the states a step call's entries start from. */
cg_tbuf cg_step_gather(const cg_tbuf *cache0, int64_t B, const int64_t *slots);
/* Step calls over tokens against the chunked forward from cg_step_gather's states: entry b
 * (slot slots[b] of the cache) has its outputs, out's rows b, within tol of out_ref's and
 * its slot's state in cache within tol of hT's row b; a padding entry's outputs are all
 * zero; every slot no entry names is bit-identical to cache0's. what names the run. */
void cg_step_check_slots(const char *what, int64_t B, const int64_t *slots, const cg_tbuf *out, const cg_tbuf *out_ref,
                         const cg_tbuf *cache, const cg_tbuf *hT, const cg_tbuf *cache0, double tol);
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
/* One step call of the caller's data (its first n tokens) on cache into o, with the index
 * buffers given (dst NULL: no dst_indices), on ex. */
typedef cg_status (*cg_step_call_fn)(cg_context *ctx, const void *data, int64_t n, cg_tbuf *cache, cg_tbuf *idx,
                                     cg_tbuf *dst, cg_tbuf *o, const cg_exec *ex);
/* Defines NAME, a cg_step_call_fn: ARGS(data, 0, n, cache, idx, dst, OUT) (OUT: o or o->t,
 * what ARGS takes) of type ARGS_T through STEP. */
#define CG_STEP_CALL(NAME, ARGS_T, ARGS, STEP, OUT)                                                          \
    static cg_status NAME(cg_context *ctx, const void *d, int64_t n, cg_tbuf *cache, cg_tbuf *idx, cg_tbuf *dst, \
                          cg_tbuf *o, const cg_exec *ex) {                                                   \
        ARGS_T a = ARGS(d, 0, n, cache, idx, dst, OUT);                                                      \
        return STEP(ctx, &a, ex);                                                                            \
    }

/* The bfloat16 step: inputs[ninputs] of data rounded to bfloat16 in place (its cache0
 * as made, bfloat16), then call (n tokens of data) on the reference, the cpu and emulate, each
 * on a copy of cache0 with state_indices slots[B] into a fresh bfloat16 output of shape
 * (ondim, oshape): the cpu's and emulate's outputs and caches within 1e-2 of the
 * reference's. what labels a failure. */
void cg_step_check_bf16(cg_context *ctx, cg_step_call_fn call, const void *data, int64_t n, const cg_tbuf *cache0,
                        int64_t B, const int64_t *slots, cg_tbuf *const *inputs, int ninputs, int ondim,
                        const int64_t *oshape, const char *what);
/* Every cg_step_bad_cases entry through call (one token, 4 entries) on the cpu, ref and
 * emulate backends: refused with CG_EINVAL and a message naming the entry, cache
 * bit-identical to cache0 afterwards. */
void cg_step_check_bad_indices(cg_context *ctx, cg_step_call_fn call, const void *data, cg_tbuf *cache,
                               const cg_tbuf *cache0, cg_tbuf *o);

#endif
