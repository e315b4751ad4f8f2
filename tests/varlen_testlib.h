/* varlen_testlib.h -- packed variable-length problems (cu_seqlens, docs/varlen.md) built
 * from the op table (test_dtype_lib.h), shared by tests/test_varlen*.c. */
#ifndef VARLEN_TESTLIB_H
#define VARLEN_TESTLIB_H

#include "test_dtype_lib.h"

/* The lengths of issue #16: a length 1, T not a multiple of any chunk, a 0-length gap. */
#define VL_NLENS 6
extern const int64_t vl_lens[VL_NLENS];

/* flags of vl_packed_new / vl_check_packed */
#define VL_UNGROUPED 1 /* sscan B, C as [B, L, N] (else [B, L, G, N]) */
#define VL_SEQ_MAJOR 2 /* sscan x, delta, z, y and their gradients in [B, D, L] memory */
#define VL_BF16 4      /* the 16-bit-capable tensors in bf16 (no comparison with the reference) */

/* The packed problem: dims with B = 1 and the seq symbol = sum of lens; states [n, ...]. */
void vl_packed_new(dtt_prob *p, cg_op op, int64_t dims[CG_SYM_COUNT], int hm, const int64_t *lens, int n,
                   unsigned omit, int flags);
/* cu_seqlens of lens, int32 or int64. */
cg_tbuf vl_cu_new(cg_dtype dt, const int64_t *lens, int n);
/* The op on p with offsets cu (NULL: none) on backend be, config pinned (NULL: default). */
cg_status vl_run_packed(cg_context *ctx, dtt_prob *p, cg_backend be, const cg_tbuf *cu, const char *config);
/* One packed call of op (lengths vl_lens) on backend be against its per-sequence calls on
 * be, forward or every gradient, states per sequence; and, be not ref, against the float64
 * reference's packed call. */
void vl_check_packed(cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt,
                     unsigned omit, uint64_t seed, int flags);
/* The same with config pinned for the packed and every per-sequence call: they must agree
 * exactly (the same kernels on the same chunks). */
void vl_check_packed_cfg(cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt,
                         unsigned omit, uint64_t seed, int flags, const char *config);
/* The same on lengths lens[0 .. nlens - 1]. */
void vl_check_packed_lens(cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt,
                          unsigned omit, uint64_t seed, int flags, const int64_t *lens, int nlens);

#endif
