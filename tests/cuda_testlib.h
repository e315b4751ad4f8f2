/* cuda_testlib.h -- helpers shared by the CUDA tests (test_cuda*.c): a temporary
 * directory and removing it again (tests/cuda_testlib.c), and a tiny kernel source. */
#ifndef CG_CUDA_TESTLIB_H
#define CG_CUDA_TESTLIB_H

/* A new directory /tmp/cg_kcacheXXXXXX (caller frees the name); NULL on failure. */
char *tmpdir(void);
/* chmod -R u+w and rm -rf dir (the tests make read-only directories). */
void rm_rf(const char *dir);

/* One kernel, `tiny`, doubling p[threadIdx.x]. */
extern const char k_tiny_src[];

#endif
