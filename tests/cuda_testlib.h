/* cuda_testlib.h -- helpers shared by the CUDA tests (test_cuda*.c, test_aot.c): a
 * temporary directory and removing it again (tests/cuda_testlib.c), a tiny kernel
 * source, and building the mock driver of tests/cuda_mock. */
#ifndef CG_CUDA_TESTLIB_H
#define CG_CUDA_TESTLIB_H

#include "chunkgen.h"

/* A new directory /tmp/cg_kcacheXXXXXX (caller frees the name); NULL on failure. */
char *tmpdir(void);
/* chmod -R u+w and rm -rf dir (the tests make read-only directories). */
void rm_rf(const char *dir);

/* The device a test runs backend be on into *dev: the emulated one for emulate, the GPU
 * for cuda. Returns 1, or 0 with the running test skipped ("no CUDA device: why") when
 * there is no GPU. */
struct cg_context;
struct cg_devinfo;
int cg_test_device(struct cg_context *ctx, cg_backend be, struct cg_devinfo *dev);
/* A new context and cg_test_device's *dev for be: NULL (a failure, or the test skipped,
 * and nothing to free) when either is missing. */
struct cg_context *cg_test_device_context(cg_backend be, struct cg_devinfo *dev);

/* One kernel, `tiny`, doubling p[threadIdx.x]. */
extern const char k_tiny_src[];

/* The running test skipped (returns 1) when the mock driver cannot serve it: no NVRTC
 * (the mock loads real CUBINs) or no C compiler (cc) to build it; else 0. */
int mock_driver_skip(void);
/* Build tests/cuda_mock/libcuda_mock.c into the shared library so: 0, or -1 with a
 * test failure. */
int mock_driver_build(const char *so);
/* Run this binary's test `test` in a child process with so as its libcuda
 * (CHUNKGEN_LIBCUDA) and var=value in its environment (made before fork: only exec is
 * safe after it in a process with threads). The child's wait status, or -1 with a test
 * failure when it could not be started. */
int mock_driver_run(const char *so, const char *test, const char *var, const char *value);

#endif
