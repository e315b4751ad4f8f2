/* env.c -- the one table of the environment variables the library reads, and the one
 * function that reads them (env.h). docs/environment.md documents each row (name, when
 * it is read, default; ctest arch_env compares the two), as does the list at the top of
 * include/chunkgen.h. */
#include "env.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ROW(var, name, when, dflt, meaning) [var] = {name, when, dflt, meaning}

static const cg_env_desc k_env[CG_ENV_COUNT] = {
    /* caches (runtime/context.c) */
    ROW(CG_ENV_CACHE_DIR, "CHUNKGEN_CACHE_DIR", CG_ENV_PER_CALL, "$XDG_CACHE_HOME/chunkgen, else $HOME/.cache/chunkgen",
        "the directory of the on-disk caches (tuned configs, compiled kernels); cg_context_set_cache_dir overrides it"),
    ROW(CG_ENV_XDG_CACHE_HOME, "XDG_CACHE_HOME", CG_ENV_PER_CALL, "$HOME/.cache",
        "the caches are in $XDG_CACHE_HOME/chunkgen when CHUNKGEN_CACHE_DIR is unset"),
    ROW(CG_ENV_HOME, "HOME", CG_ENV_PER_CALL, "/tmp",
        "the caches are in $HOME/.cache/chunkgen when CHUNKGEN_CACHE_DIR and XDG_CACHE_HOME are unset"),
    /* configs and tuning (autotune/) */
    ROW(CG_ENV_CONFIG, "CHUNKGEN_CONFIG", CG_ENV_PER_CALL, "no pins",
        "pins configs for calls whose cg_exec.config is NULL: \"k=v,k=v\" for every op, or scoped "
        "\"ssd_fwd:k=v;sscan:k=v\" (an op or a family; the first part that applies wins)"),
    ROW(CG_ENV_TUNE_ON_MISS, "CHUNKGEN_TUNE_ON_MISS", CG_ENV_PER_CALL, "off",
        "1, yes, true or on: a call whose exact key has no tuned config tunes it first and stores it (when the "
        "context's cg_context_set_tune_on_miss is -1)"),
    ROW(CG_ENV_TUNE_BUDGET, "CHUNKGEN_TUNE_BUDGET", CG_ENV_PER_CALL, "60", "the budget in seconds of a tune on miss"),
    ROW(CG_ENV_TUNE_FAKE_TIMING, "CHUNKGEN_TUNE_FAKE_TIMING", CG_ENV_PER_CALL, "off",
        "set and not 0: the tuner skips timing (verification still runs) and takes a fixed function of (key, "
        "config) as each candidate's median; for the tests of sharded tunes and their merge, never a real tune"),
    /* CUDA (runtime/cuda/) */
    ROW(CG_ENV_LIBCUDA, "CHUNKGEN_LIBCUDA", CG_ENV_ONCE, "libcuda.so.1, else libcuda.so",
        "the path of the CUDA driver library to dlopen (the tests' mock driver), at the first CUDA use"),
    ROW(CG_ENV_NVRTC, "CHUNKGEN_NVRTC", CG_ENV_ONCE,
        "libnvrtc.so.<the driver's CUDA major>, then newer and older sonames, in $CUDA_HOME/lib64, the loader's "
        "path, /usr/local/cuda/lib64",
        "the path of the NVRTC library to dlopen, the only one tried"),
    ROW(CG_ENV_CUDA_HOME, "CUDA_HOME", CG_ENV_ONCE, "$CUDA_PATH", "NVRTC is looked for in $CUDA_HOME/lib64 first"),
    ROW(CG_ENV_CUDA_PATH, "CUDA_PATH", CG_ENV_ONCE, "not looked in", "stands for CUDA_HOME when that is unset"),
    ROW(CG_ENV_NVRTC_TIME_TRACE, "CHUNKGEN_NVRTC_TIME_TRACE", CG_ENV_PER_CALL, "off",
        "a directory: every NVRTC compile writes its --fdevice-time-trace there, as <kernel>-sm<arch>.json (NVRTC 13 "
        "or newer; not in the kernel cache's key)"),
    /* CPU path (runtime/cpu/) */
    ROW(CG_ENV_CPU_ISA, "CHUNKGEN_CPU_ISA", CG_ENV_ONCE, "the best variant this CPU runs (cpuid)",
        "avx512, avx2 or baseline: the CPU path's kernel variant; one the CPU cannot run is refused with a warning"),
    /* generator (runtime/lua_gen.c, runtime/emu/) */
    ROW(CG_ENV_LUA_PATH, "CHUNKGEN_LUA_PATH", CG_ENV_PER_CALL, "the copies embedded in the library",
        "a source checkout: generator/, templates/ and emulator/cg_emu.h are read from it"),
    /* emulator (runtime/emu/) */
    ROW(CG_ENV_CXX, "CXX", CG_ENV_PER_CALL, "g++, else c++",
        "the host C++ compiler that builds the emulate backend's modules"),
    ROW(CG_ENV_EMU_CXXFLAGS, "CHUNKGEN_EMU_CXXFLAGS", CG_ENV_PER_CALL, "none",
        "extra flags for the emulator's C++ compiler (part of the module cache key)"),
    ROW(CG_ENV_EMU_RACECHECK, "CHUNKGEN_EMU_RACECHECK", CG_ENV_PER_CONTEXT, "off",
        "set and not 0: the emulator's race checker"),
    ROW(CG_ENV_EMU_STATS, "CHUNKGEN_EMU_STATS", CG_ENV_PER_CONTEXT, "off",
        "a path: the emulator counts memory accesses and writes their statistics there as JSON when the context "
        "is freed (docs/emulator.md)"),
    ROW(CG_ENV_TMPDIR, "TMPDIR", CG_ENV_PER_CALL, "/tmp", "where the emulator makes its temporary build directories"),
};

const cg_env_desc *cg__env_desc(cg_env_var v) { return (unsigned)v < CG_ENV_COUNT ? &k_env[v] : NULL; }

const char *cg__env_when_name(cg_env_when w) {
    switch (w) {
    case CG_ENV_PER_CALL: return "per call";
    case CG_ENV_PER_CONTEXT: return "per context";
    case CG_ENV_ONCE: return "once per process";
    }
    return "";
}

/* The values of the CG_ENV_ONCE variables, taken at their first read (never freed). */
static pthread_mutex_t g_once_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_once_val[CG_ENV_COUNT];
static int g_once_read[CG_ENV_COUNT];

const char *cg__env(cg_env_var v) {
    const cg_env_desc *d = cg__env_desc(v);
    if (!d) return NULL;
    if (d->when != CG_ENV_ONCE) {
        const char *s = getenv(d->name);
        return s && *s ? s : NULL;
    }
    pthread_mutex_lock(&g_once_mu);
    if (!g_once_read[v]) {
        const char *s = getenv(d->name);
        g_once_val[v] = s && *s ? strdup(s) : NULL; /* out of memory: as if unset */
        g_once_read[v] = 1;
    }
    const char *r = g_once_val[v];
    pthread_mutex_unlock(&g_once_mu);
    return r;
}
