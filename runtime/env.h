/* env.h -- the one table of the environment variables the library reads (runtime/env.c).
 * Every variable is read through cg__env; nothing else in the library calls getenv
 * (ctest arch_env). docs/environment.md and the list at the top of include/chunkgen.h
 * document the same variables (arch_env checks that too). */
#ifndef CG_ENV_H
#define CG_ENV_H

typedef enum cg_env_var {
    CG_ENV_CACHE_DIR = 0,    /* CHUNKGEN_CACHE_DIR */
    CG_ENV_XDG_CACHE_HOME,   /* XDG_CACHE_HOME */
    CG_ENV_HOME,             /* HOME */
    CG_ENV_CONFIG,           /* CHUNKGEN_CONFIG */
    CG_ENV_TUNE_ON_MISS,     /* CHUNKGEN_TUNE_ON_MISS */
    CG_ENV_TUNE_BUDGET,      /* CHUNKGEN_TUNE_BUDGET */
    CG_ENV_TUNE_FAKE_TIMING, /* CHUNKGEN_TUNE_FAKE_TIMING */
    CG_ENV_LIBCUDA,          /* CHUNKGEN_LIBCUDA */
    CG_ENV_NVRTC,            /* CHUNKGEN_NVRTC */
    CG_ENV_CUDA_HOME,        /* CUDA_HOME */
    CG_ENV_CUDA_PATH,        /* CUDA_PATH */
    CG_ENV_NVRTC_TIME_TRACE, /* CHUNKGEN_NVRTC_TIME_TRACE */
    CG_ENV_CPU_ISA,          /* CHUNKGEN_CPU_ISA */
    CG_ENV_LUA_PATH,         /* CHUNKGEN_LUA_PATH */
    CG_ENV_CXX,              /* CXX */
    CG_ENV_EMU_CXXFLAGS,     /* CHUNKGEN_EMU_CXXFLAGS */
    CG_ENV_EMU_RACECHECK,    /* CHUNKGEN_EMU_RACECHECK */
    CG_ENV_EMU_STATS,        /* CHUNKGEN_EMU_STATS */
    CG_ENV_TMPDIR,           /* TMPDIR */
    CG_ENV_COUNT
} cg_env_var;

/* When the library reads a variable. */
typedef enum cg_env_when {
    CG_ENV_PER_CALL = 0, /* afresh by every call that needs it: a change shows at the next call */
    CG_ENV_PER_CONTEXT,  /* when a context first needs it; the context keeps that value */
    CG_ENV_ONCE          /* at its first read in the process; cg__env returns that value from then on */
} cg_env_when;

typedef struct cg_env_desc {
    const char *name; /* the variable */
    cg_env_when when;
    const char *dflt;    /* what happens when it is unset or empty */
    const char *meaning; /* what it sets */
} cg_env_desc;

/* The row of v (NULL for a value outside the enum). */
const cg_env_desc *cg__env_desc(cg_env_var v);
/* The value of v, NULL when unset or empty. For a CG_ENV_ONCE variable, the value it had at
 * its first read in this process. Thread-safe for reads; the library never sets a variable. */
const char *cg__env(cg_env_var v);
/* "per call", "per context" or "once per process" (docs/environment.md's words). */
const char *cg__env_when_name(cg_env_when w);

#endif
