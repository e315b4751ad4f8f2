/* emu.h -- private interface of the SIMT emulator (runtime/emu/).
 *
 * emu_source.c builds a module's text and cache key from a plan, cg_emu_module.c compiles
 * it with the host C++ compiler into a shared object (cached on disk) and loads it,
 * emu_kexec.c is the executor that runs grids; emu_rt.c is the SIMT runtime those
 * modules call into: fibers, the block scheduler, barriers, warp collectives and the
 * shared-memory race checker. The module side is emulator/cg_emu.h. */
#ifndef CG_EMU_PRIV_H
#define CG_EMU_PRIV_H

#include "gen.h"

#define CG_EMU_ABI_ONLY
#include "../../emulator/cg_emu.h"

/* ------------------------------------------------ modules (emu_source.c, cg_emu_module.c) */

/* A growing text buffer; oom is set (and the text kept as it was) when realloc fails. */
typedef struct cg_emu_sbuf { char *p; size_t n, cap; int oom; } cg_emu_sbuf;

/* One entry of a loaded module: its cg_emu_k_<entry> wrapper and parameter size. */
typedef struct cg_emu_entry {
    char name[64];
    void (*fn)(const void *);
    size_t psize;
} cg_emu_entry;

typedef struct cg_emu_module {
    char key[33];
    char name[192];
    void *dl;
    int nentry;
    cg_emu_entry entry[CG_PLAN_MAX_LAUNCH];
    int racecheck;
    size_t tls_size;
    void *(*tls_touch)(void);
} cg_emu_module;

typedef struct cg_emu_timer {
    double t0; /* monotonic seconds at timer_start */
    int busy;
} cg_emu_timer;

/* The emulator's part of a context (ctx->part[CG_PART_EMU]). */
typedef struct cg_emu_state {
    cg_emu_module **mods;
    int n, cap;
    int racecheck;
    cg_emu_timer timers[CG_KEXEC_TIMERS];
} cg_emu_state;

/* Everything a module depends on: the cache key text. */
typedef struct cg_emu_modkey {
    cg_emu_sbuf text;  /* the module source, with its key line */
    cg_emu_sbuf key;   /* the cache key: compiler, flags, ABI, then the source */
    char hex[33];   /* hash of key */
    char cxx[512], flags[2048], label[256];
} cg_emu_modkey;

/* Whole file as a NUL-terminated malloc'd string (*len its length); NULL if unreadable. */
char *cg__emu_read_file(const char *path, size_t *len);
/* Run cmd through the shell; *out gets its stdout+stderr (malloc'd). Exit status or -1. */
int cg__emu_run_cmd(const char *cmd, char **out);
/* The host C++ compiler: $CXX, else g++, else c++ (found once per $CXX): its command
 * and first --version line, or CG_EUNSUPPORTED. */
cg_status cg__emu_find_cxx(cg_context *ctx, char *cmd, size_t cmdcap, char *ver, size_t vercap);
/* 1 when launch i of plan has the entry of an earlier launch. */
int cg__emu_entry_seen(const cg_plan *plan, int i);
/* The module text and cache key of plan (ctx may be NULL: no message). Free with
 * cg__emu_key_free, also after an error. */
cg_status cg__emu_module_key(cg_context *ctx, const cg_plan *plan, int racecheck, cg_emu_modkey *k);
void cg__emu_key_free(cg_emu_modkey *k);

/* The context's emulator state (created on first use); NULL when out of memory. */
cg_emu_state *cg__emu_state(cg_context *ctx);
/* The kexec load: the module of plan, from this context, the disk cache or the compiler. */
cg_status cg__emu_load(cg_context *ctx, const cg_plan *plan, void **module);

/* ------------------------------------------------------------ runtime (emu_rt.c) */

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

/* Compile into the disk cache, in parallel (one compiler per pool thread), the
 * modules of plans[0..n) that are not there yet, so the loads that follow are
 * quick. Errors are left for those loads to report. */
cg_status cg__emu_prebuild(cg_context *ctx, const cg_plan *plans, int n);

/* Rewrite `extern __shared__ T name[];` into a pointer to the block's dynamic shared
 * memory (block scope) or a macro (namespace scope). Returns a malloc'd copy, or NULL
 * with a reason in why. */
char *cg__emu_rewrite_source(const char *src, char *why, size_t cap);

#endif /* CG_EMU_PRIV_H */
