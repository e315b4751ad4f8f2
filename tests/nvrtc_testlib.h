/* nvrtc_testlib.h -- generated plans through NVRTC and ptxas for the NVRTC sweeps
 * (test_sscan_gen.c, test_ssd16_gen.c, test_gdr_gen.c, test_varlen_gpu.c, ...). Test code,
 * not the library. */
#ifndef CG_TEST_NVRTC_TESTLIB_H
#define CG_TEST_NVRTC_TESTLIB_H

#include "cg_test.h"

#include "gen.h"

/* An NVRTC sweep for sm_arch: its context and device, the kernel cache of
 * CHUNKGEN_TEST_KCACHE (kdir NULL when unset; keyed as the executor keys CUBINs, with
 * nvrtc_id; a compile fills it) and what it reports at its end. */
typedef struct cg_test_nvrtc {
    int arch;
    cg_context *ctx;
    cg_devinfo dev;
    const char *kdir;
    char nvrtc_id[256];
    int ncomp, maxreg; /* kernels compiled, their most registers */
    double t0;         /* start, seconds */
} cg_test_nvrtc;

/* Starts the sweep; 0 (the test skipped or failed, nothing to end) when NVRTC cannot be
 * loaded or arch is unknown. */
int cg_test_nvrtc_begin(cg_test_nvrtc *n, int arch);

/* s stored in the 16-bit dtype dt for the tensors of s->op named in names ("q k v o",
 * one space apart; optional ones are then given): Lua's shape.dtypes lists them. */
void cg_test_shape_half(cg_shape *s, cg_dtype dt, const char *names);

/* Plans kernel for shape s and the extra shape flags (cg__gen_plan) with cfg (NULL: the
 * default) into *p; 0 (a test failure) when the generator refuses. */
int cg_test_nvrtc_plan(cg_test_nvrtc *n, const char *kernel, const cg_shape *s, int flags, const cg_cfg *cfg,
                       cg_plan *p);

/* Compiles p (2 NVRTC threads, as the executor splits) or takes its CUBIN and ptxas log
 * from the kernel cache, then frees p. A test failure when it does not compile or ptxas
 * reports spills; counted in ncomp and maxreg when it compiled. */
void cg_test_nvrtc_nospill(cg_test_nvrtc *n, cg_plan *p);

/* The sweep's sample of kernel's space for shape s and the shape flags (a variant:
 * CG_SWEEP_VALUES of sweep_sample.h; every config under CHUNKGEN_TEST_SWEEP=full). Each
 * config kept is planned for a copy of s that dtypes(copy, arg) may change first (NULL: s
 * as it is), its source must hold every line of the NULL-ended list defines, and it goes
 * through cg_test_nvrtc_nospill. A test failure when the space is empty. */
void cg_test_nvrtc_sample(cg_test_nvrtc *n, const char *kernel, const cg_shape *s, int flags,
                          void (*dtypes)(cg_shape *s, void *arg), void *arg, const char *const *defines);

/* Ends the sweep: "sm_ARCH: N WHAT kernels compiled (NOTE; S s), max R registers" on
 * stderr (note may be ""), and frees the context. */
void cg_test_nvrtc_end(cg_test_nvrtc *n, const char *what, const char *note);

#endif
