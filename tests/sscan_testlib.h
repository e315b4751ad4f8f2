/* sscan_testlib.h -- the selective scan's test problems shared by test_sscan_cpu.c and
 * test_sscan_gen.c: a case's shape and options, its tensor slots with their shapes (and
 * mamba's [B, D, L] memory order), and the public args of a set of buffers. Test code,
 * not the library. */
#ifndef CG_TEST_SSCAN_TESTLIB_H
#define CG_TEST_SSCAN_TESTLIB_H

#include "cg_test.h"

typedef struct sst_case {
    int64_t B, L, D, N, G; /* G = 0: ungrouped B/C [B, L, N] */
    int z, Dv, bias, softplus, h0, dhT;
    int outs;              /* hT and dh0 requested */
    int strided;           /* [B, D, L] memory for the [B, L, D] tensors, [B, G, N, L] for B/C */
    const char *config;    /* config pins (NULL: the default) */
} sst_case;

/* Tensor slots: inputs, forward outputs, backward outputs. */
enum { T_X, T_DELTA, T_A, T_B, T_C, T_D, T_Z, T_BIAS, T_H0, T_DY, T_DHT, T_Y, T_HT,
       T_DX, T_DDELTA, T_DA, T_DB, T_DC, T_DD, T_DZ, T_DBIAS, T_DH0, T_COUNT };
extern const char *const sst_names[T_COUNT]; /* the public names: "x", ..., "dh0" */

typedef struct sst_set {
    cg_tbuf t[T_COUNT];
    int on[T_COUNT]; /* passed (an optional tensor left out: 0) */
} sst_set;

/* The shape of slot i in sh (returns its rank); with *permuted, perm is its memory order
 * (the strided case's). */
int sst_dims(const sst_case *c, int i, int64_t *sh, int *perm, int *permuted);
/* Whether slot i is passed: the optional inputs by the case's flags, hT and dh0 by outs. */
int sst_on(const sst_case *c, int i);
void sst_free(sst_set *s);
/* Slot i's tensor, or an absent one when it is not passed. */
cg_tensor sst_opt(const sst_set *s, int i);
cg_sscan_fwd_args sst_fwd_args(const sst_set *s, const sst_case *c);
cg_sscan_bwd_args sst_bwd_args(const sst_set *s, const sst_case *c);

#endif
