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
cg_status emu_launch(cg_context *ctx, void *mod, const char *entry, const unsigned grid[3], const unsigned block[3],
                     int64_t smem, const void *params, size_t psize);

#endif
