/* test_emu_lib.h -- helpers of the emulator's tests (test_emu_lib.c). */
#ifndef TEST_EMU_LIB_H
#define TEST_EMU_LIB_H

#include "chunkgen.h"
#include "gen.h"

/* <source dir>/rel as a malloc'd string, NULL if unreadable. */
char *emu_slurp(const char *rel);
/* A context whose emulator can compile (skips the test when there is no compiler). */
cg_context *emu_ctx(void);
/* Load tests/emu_kernels/<file> (after cg_device.cuh) with the given entries. */
void *emu_module(cg_context *ctx, const char *file, const char *const *entries, int n);
/* The test body with a context (emu_ctx) and the module of file's entries loaded
 * (emu_module): skipped without a compiler, not run when the module does not load (a
 * failure), the context freed after it. */
void emu_with_module(const char *file, const char *const *entries, int n, void (*body)(cg_context *ctx, void *mod));
cg_status emu_launch(cg_context *ctx, void *mod, const char *entry, const unsigned grid[3], const unsigned block[3],
                     int64_t smem, const void *params, size_t psize);

#endif
