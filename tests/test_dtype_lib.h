/* test_dtype_lib.h -- problems of any op built from the op table (runtime/ops.h), with
 * each tensor in the storage dtype the dtype rules give it: the scaffolding of the dtype
 * tests (test_dtype.c: validation and backends; test_dtype_acc.c: accuracy). */
#ifndef TEST_DTYPE_LIB_H
#define TEST_DTYPE_LIB_H

#include "cg_test.h"
#include "ops.h"

typedef struct dtt_prob {
    const cg_op_desc *d;
    int64_t dims[CG_SYM_COUNT];
    int grouped, hm;
    cg_tbuf t[CG_OP_MAX_TENSORS]; /* t[i].t.data NULL: absent */
    cg_args_any args; /* any op's args struct (op_list.h) */
} dtt_prob;

/* Every tensor of op with the symbol values dims (by cg_sym), grouped B/C (sscan) and
 * head-major layout hm (SSD): the 16-bit-capable ones (CG_TD_HALF) in `half`, the others
 * in `other` (CG_F32, or CG_F64 for all); optional tensors given unless their bit is in
 * omit (1u << table index); the sscan's delta_softplus set. Zero-filled. */
void dtt_new(dtt_prob *p, cg_op op, const int64_t dims[CG_SYM_COUNT], int grouped, int hm, cg_dtype half,
             cg_dtype other, unsigned omit);
/* Inputs uniform in their table range (seeded), stored in each tensor's dtype. */
void dtt_fill(dtt_prob *p, uint64_t seed);
/* The inputs of src (same op and dims, any dtypes) into dst, value for value. */
void dtt_copy_inputs(dtt_prob *dst, const dtt_prob *src);
/* a and b: two problems of op with the same dtypes (dtt_new with grouped, no omissions)
 * and the same inputs (seed). */
void dtt_pair(dtt_prob *a, dtt_prob *b, cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_dtype half,
              uint64_t seed);
/* The name of the first output whose bytes differ between a and b (same dtypes); NULL. */
const char *dtt_first_diff(const dtt_prob *a, const dtt_prob *b);
/* The op on p's tensors (args rebuilt from p->t) with backend be. */
cg_status dtt_run(cg_context *ctx, dtt_prob *p, cg_backend be);
/* The args struct of p (rebuilt from p->t, so tests may edit p->t[i].t first). */
const void *dtt_args(dtt_prob *p);
void dtt_free(dtt_prob *p);
/* Checks every output of p (given ones) within its table tolerance for its dtype of r's, the
 * reference on the same inputs; a failure names what and the output. */
void dtt_check_outputs(const dtt_prob *p, const dtt_prob *r, const char *what);
/* Index of tensor name in p's op (aborts when unknown). */
int dtt_idx(const dtt_prob *p, const char *name);

#endif
