/* gdr_testlib.h -- the gated delta rule's test cases built from the op table (test_dtype_lib.h):
 * one case struct, its problem and its run, shared by test_gdr.c (cpu backend, the chunked
 * path) and test_gdr_gen.c (generated kernels under the emulator). */
#ifndef GDR_TESTLIB_H
#define GDR_TESTLIB_H

#include "test_dtype_lib.h"

typedef struct gdr_case {
    const char *name;
    int64_t B, T, G, H, dk, dv;
    int hm, l2norm, states; /* head-major; use_qk_l2norm; h0, hT, dhT and dh0 given */
    double blo, bhi;        /* beta's range (0, 0: the table's) */
    double glo, ghi;        /* g's range (0, 0: the table's) */
    double scale;           /* 0: dk^-1/2 */
    int nseq;               /* varlen: sequences (B = 1); offsets in cu */
    int64_t cu[4];
} gdr_case;

/* Cases both the cpu (test_gdr.c) and the emulator (test_gdr_gen.c) tables run: T = 1; T not
 * a multiple of a chunk with grouped heads, head-major; a varlen batch with a 1-token sequence. */
#define GDR_CASE_T1 {"t1", 1, 1, 1, 1, 8, 8, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}}
#define GDR_CASE_T37_HEAD {"t37_g2h6_dk48_dv40_head", 2, 37, 2, 6, 48, 40, 1, 1, 1, 0, 0, 0, 0, 0, 0, {0}}
#define GDR_CASE_VARLEN {"varlen_1_37_70", 1, 108, 2, 4, 16, 24, 0, 1, 1, 0, 0, 0, 0, 0, 3, {0, 1, 38, 108}}

/* The problem of case c for op (gdr_fwd or gdr_bwd): tensors in `half` (the 16-bit-capable
 * ones) and `other`, states per sequence when varlen, inputs drawn from seed, then beta's
 * and g's ranges the case's redrawn from seed ^ salt; the offsets into *cu (zeroed when
 * not varlen; cg_tbuf_free it either way). */
void gdr_case_new(dtt_prob *p, cg_tbuf *cu, cg_op op, const gdr_case *c, cg_dtype half, cg_dtype other,
                  uint64_t seed, uint64_t salt);
/* p's args with the case's options (L2 norm, scale, the offsets cu when varlen). */
void *gdr_case_args(dtt_prob *p, const cg_tbuf *cu, const gdr_case *c);
/* p on backend be with the case's options, config pinned to cfg (NULL: the default). */
cg_status gdr_case_run(cg_context *ctx, dtt_prob *p, const cg_tbuf *cu, const gdr_case *c, cg_backend be,
                       const char *cfg);
/* fla's own accuracy check for 16-bit inputs (its tests' assert_close: the relative RMS
 * error cg_rms_err against the reference r on the same rounded inputs): o and hT within
 * 5e-3, dq, dk, dv and dh0 within 8e-3, dbeta and dg within 2e-2; printed, output by output,
 * after `what`. Nothing is checked when q is float32 or float64 (dtt_check_outputs holds those). */
void gdr_check_fla_rms(const dtt_prob *p, const dtt_prob *r, const char *what);

#endif
