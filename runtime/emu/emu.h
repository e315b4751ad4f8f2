/* emu.h -- private interface of the SIMT emulator (runtime/emu/).
 *
 * emu_source.c builds a module's text and cache key from a plan, cg_emu_module.c compiles
 * it with the host C++ compiler into a shared object (cached on disk) and loads it,
 * emu_kexec.c is the executor that runs grids; emu_rt.c is the SIMT runtime those
 * modules call into: fibers, the block scheduler, barriers, warp collectives and the
 * shared-memory race checker (emu_race.c). The module side is emulator/cg_emu.h. */
#ifndef CG_EMU_PRIV_H
#define CG_EMU_PRIV_H

#include "gen.h"

#define CG_EMU_ABI_ONLY
#include "../../emulator/cg_emu.h"

/* ------------------------------------------------ modules (emu_source.c, cg_emu_module.c) */

/* A growing text buffer; oom is set (and the text kept as it was) when realloc fails. */
typedef struct cg_emu_sbuf {
    char *p;
    size_t n, cap;
    int oom;
} cg_emu_sbuf;

/* One entry of a loaded module: its cg_emu_k_<entry> wrapper and parameter size. */
typedef struct cg_emu_entry {
    char name[64];
    void (*fn)(const void *);
    size_t psize;
} cg_emu_entry;

/* Rendered source line -> template file and line (from generator/core.lua's
 * `// ---- begin/end FILE` marks); built for modules that count statistics. */
typedef struct cg_emu_linemap {
    char cu[200]; /* the module's name for the rendered source: <plan name>.cu */
    int nfile;
    char (*file)[64];  /* [nfile] */
    int nline;         /* lines 1..nline */
    int *fidx, *fline; /* [nline + 1]: file index (-1: none) and line in it */
} cg_emu_linemap;

typedef struct cg_emu_module {
    char key[33];
    char name[192];
    void *dl;
    int nentry;
    cg_emu_entry entry[CG_PLAN_MAX_LAUNCH];
    int racecheck;
    int stats; /* instrumented for access statistics (built with -g1) */
    size_t tls_size;
    void *(*tls_touch)(void);
    const void *img_lo, *img_hi; /* the module's loaded segments (statistics) */
    uintptr_t base;              /* load bias: pc - base is an address in the shared object */
    char so_path[4200];          /* statistics: a copy of the shared object for addr2line ("" none) */
    cg_emu_linemap lines;
} cg_emu_module;

typedef struct cg_emu_timer {
    double t0; /* monotonic seconds at timer_start */
    int busy;
} cg_emu_timer;

/* The emulator's part of a context (ctx->part[CG_PART_EMU]). */
/* ---------------------------------------- access statistics (emu_stats*.c) */
enum { CG_EMU_SPACE_SHARED = 0, CG_EMU_SPACE_GLOBAL = 1 };
enum { CG_EMU_NWIDTH = 6 }; /* width classes: 1, 2, 4, 8, 16 bytes, other */

/* One source line's accesses of one kind (space, load or store, width). */
typedef struct cg_emu_line_stat {
    char file[64];         /* template file ("" when unknown) */
    int line;              /* line in it (0 when unknown) */
    int space, store;      /* CG_EMU_SPACE_*, 0 load / 1 store */
    unsigned width;        /* bytes per lane */
    uint64_t requests;     /* warp-wide requests */
    uint64_t units, ideal; /* wavefronts (shared) or sectors (global), and the fewest possible */
} cg_emu_line_stat;

/* One launch's counts: totals per space, requests per width class, and per line. */
typedef struct cg_emu_launch_stats {
    char kernel[64], plan[192];
    unsigned grid[3], block[3];
    size_t smem;
    uint64_t blocks;                          /* blocks counted */
    uint64_t requests[2], units[2], ideal[2]; /* [CG_EMU_SPACE_*] */
    uint64_t by_width[2][CG_EMU_NWIDTH];      /* requests per width class */
    uint64_t dropped;                         /* accesses not counted (log overflow) */
    int nlines;
    cg_emu_line_stat *lines;
} cg_emu_launch_stats;

typedef struct cg_emu_wstats cg_emu_wstats; /* a worker's logs and counters */
typedef struct cg_emu_gstats cg_emu_gstats; /* one grid's counters */

typedef struct cg_emu_state {
    cg_emu_module **mods;
    int n, cap;
    int racecheck;
    int stats;             /* count accesses (modules loaded from now on) */
    char stats_path[4096]; /* CHUNKGEN_EMU_STATS: JSON written at context free */
    cg_emu_launch_stats *launches;
    int nlaunches, launches_cap;
    cg_emu_timer timers[CG_KEXEC_TIMERS];
} cg_emu_state;

/* Everything a module depends on: the cache key text. */
typedef struct cg_emu_modkey {
    cg_emu_sbuf text; /* the module source, with its key line */
    cg_emu_sbuf key;  /* the cache key: compiler, flags, ABI, then the source */
    char hex[33];     /* hash of key */
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
enum { CG_EMU_MOD_RACECHECK = 1, CG_EMU_MOD_STATS = 2 };
cg_status cg__emu_module_key(cg_context *ctx, const cg_plan *plan, int mode, cg_emu_modkey *k);
void cg__emu_key_free(cg_emu_modkey *k);

/* The context's emulator state (emu_state.c: created on first use, freed with the
 * context); NULL when out of memory. */
cg_emu_state *cg__emu_state(cg_context *ctx);
/* dlclose m, remove its kept copy, free it (emu_state.c). */
void cg__emu_module_free(cg_emu_module *m);
/* The kexec load: the module of plan, from this context, the disk cache or the compiler. */
cg_status cg__emu_load(cg_context *ctx, const cg_plan *plan, void **module);

/* ------------------------------------------------------------ runtime (emu_rt.c) */

/* One launch as the runtime sees it. */
typedef struct cg_emu_grid {
    void (*entry)(const void *params); /* the module's cg_emu_k_<entry> */
    const void *params;
    const char *name; /* entry name, for messages */
    unsigned grid[3], block[3];
    size_t smem; /* dynamic shared memory bytes */
    size_t params_size;
    int racecheck;
    cg_emu_gstats *stats;        /* access statistics, NULL when off */
    const void *img_lo, *img_hi; /* the module's image (not counted as global memory) */
    /* race checking of __shared__ statics: the module's TLS block */
    void *dl;        /* dlopen handle */
    size_t tls_size; /* PT_TLS memsz, 0 when none */
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

/* ------------------------------------- access statistics (emu_stats.c, emu_stats_out.c) */
cg_emu_wstats *cg__emu_wstats_new(void);
void cg__emu_wstats_free(cg_emu_wstats *ws);
/* Thread tid loaded (write 0) or stored n bytes at addr by the instruction before pc. */
void cg__emu_wstats_log(cg_emu_wstats *ws, int tid, const void *pc, const void *addr, size_t n, int space, int write);
/* Count the logs of the warps in threads [tid0, tid0 + n): they all stand at one point. */
void cg__emu_wstats_flush(cg_emu_wstats *ws, int tid0, int n);
void cg__emu_wstats_block_done(cg_emu_wstats *ws);
void cg__emu_wstats_reset(cg_emu_wstats *ws);
cg_emu_gstats *cg__emu_gstats_new(void);
void cg__emu_gstats_free(cg_emu_gstats *gs);
/* Add the worker's counters to the grid's (thread-safe) and clear them; -1 when out of memory. */
int cg__emu_wstats_merge(cg_emu_wstats *ws, cg_emu_gstats *gs);
/* gs's instructions, for the report (n packs the table: call it first, then at). */
int cg__emu_gstats_n(cg_emu_gstats *gs);
void cg__emu_gstats_at(const cg_emu_gstats *gs, int i, uintptr_t *pc, int *space, int *write, unsigned *width,
                       uint64_t c[3]);
void cg__emu_gstats_totals(const cg_emu_gstats *gs, uint64_t *blocks, uint64_t *dropped);
/* The launch's statistics from gs, lines resolved, appended to st's list (st: the
 * context's state, cg__emu_state; ctx for messages). */
cg_status cg__emu_stats_finish(cg_context *ctx, cg_emu_state *st, const cg_emu_module *m, const cg_emu_grid *g,
                               cg_emu_gstats *gs);
/* Rendered-line map of a plan's source (for modules that count); 0, or -1 out of memory. */
int cg__emu_linemap_build(cg_emu_linemap *lm, const char *plan_name, const char *source);
void cg__emu_linemap_free(cg_emu_linemap *lm);
void cg__emu_stats_free_launches(cg_emu_state *st);

/* The internal API for reports (tools): turn counting on or off for the modules this
 * context loads from now on (emu_state.c; CHUNKGEN_EMU_STATS=FILE turns it on at the
 * context's first emulator use); the launches counted so far; the JSON of
 * docs/emulator.md of st's launches (written at context free for CHUNKGEN_EMU_STATS). */
cg_status cg__emu_stats_enable(cg_context *ctx, int on);
int cg__emu_stats_count(cg_context *ctx);
const cg_emu_launch_stats *cg__emu_stats_get(cg_context *ctx, int i);
void cg__emu_stats_clear(cg_context *ctx);
cg_status cg__emu_stats_write_json(cg_context *ctx, const cg_emu_state *st, const char *path);

#endif /* CG_EMU_PRIV_H */
