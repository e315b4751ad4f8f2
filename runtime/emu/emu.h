/* emu.h -- private interface of the SIMT emulator (runtime/emu/).
 *
 * emu_kexec.c compiles rendered kernels with the host C++ compiler into shared objects
 * (cached on disk), loads them and runs grids; emu_rt.c is the SIMT runtime those
 * modules call into: fibers, the block scheduler, barriers, warp collectives and the
 * shared-memory race checker. The module side is emulator/cg_emu.h. */
#ifndef CG_EMU_PRIV_H
#define CG_EMU_PRIV_H

#include "gen.h"

#define CG_EMU_ABI_ONLY
#include "../../emulator/cg_emu.h"

/* One launch as the runtime sees it. */
typedef struct cg_emu_grid {
    void (*entry)(const void *params); /* the module's cg_emu_k_<entry> */
    const void *params;
    const char *name;                  /* entry name, for messages */
    unsigned grid[3], block[3];
    size_t smem;                       /* dynamic shared memory bytes */
    int racecheck;
    /* race checking of __shared__ statics: the module's TLS block */
    void *dl;                          /* dlopen handle */
    size_t tls_size;                   /* PT_TLS memsz, 0 when none */
    void *(*tls_touch)(void);
} cg_emu_grid;

/* Run blocks [b0, b1) (linear block index, x fastest) of g on the calling thread.
 * 0, or -1 with a message in msg. */
int cg__emu_run_blocks(const cg_emu_grid *g, int64_t b0, int64_t b1, char *msg, size_t cap);

/* The services bound into every module. */
extern const cg_emu_api cg__emu_api;

/* Shared-memory race checking for the modules loaded from now on (also on when the
 * environment has CHUNKGEN_EMU_RACECHECK=1). Checked modules are built separately. */
void cg__emu_set_racecheck(cg_context *ctx, int on);

/* Compile into the disk cache, in parallel (one compiler per pool thread), the
 * modules of plans[0..n) that are not there yet, so the loads that follow are
 * quick. Errors are left for those loads to report. */
cg_status cg__emu_prebuild(cg_context *ctx, const cg_plan *plans, int n);

/* The source the emulator compiles for plan (header, rewritten kernel, entry
 * wrappers), malloc'd; for inspection. */
cg_status cg__emu_source(cg_context *ctx, const cg_plan *plan, char **out);

/* Rewrite `extern __shared__ T name[];` into a pointer to the block's dynamic shared
 * memory (block scope) or a macro (namespace scope). Returns a malloc'd copy, or NULL
 * with a reason in why. */
char *cg__emu_rewrite_source(const char *src, char *why, size_t cap);

#endif /* CG_EMU_PRIV_H */
