/* nvrtc_testlib.h -- one generated plan through NVRTC and ptxas for the 16-bit NVRTC
 * sweeps (test_sscan_gen.c, test_ssd16_gen.c). Test code, not the library. */
#ifndef CG_TEST_NVRTC_TESTLIB_H
#define CG_TEST_NVRTC_TESTLIB_H

#include "cg_test.h"

#include "gen.h"

/* Compile p for sm_arch (2 NVRTC threads, as the executor splits), or take the CUBIN and
 * its ptxas log from the kernel cache kdir (NULL: none; keyed as the executor keys
 * CUBINs, with nvrtc_id; a compile fills it). A test failure when it does not compile or
 * ptxas reports spills. Returns 1 when it compiled (*maxreg raised to its registers). */
int cg_test_nvrtc_nospill(cg_context *ctx, const char *kdir, const char *nvrtc_id, int arch, const cg_plan *p,
                          int *maxreg);

/* The start of an NVRTC sweep for sm_arch: a context and *dev, the kernel cache of
 * CHUNKGEN_TEST_KCACHE (*kdir NULL when unset) and its nvrtc_id; NULL (the test skipped
 * or failed) when NVRTC cannot be loaded or arch is unknown. */
cg_context *cg_test_nvrtc_begin(int arch, cg_devinfo *dev, const char **kdir, char *nvrtc_id, size_t cap);

#endif
