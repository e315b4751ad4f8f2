/*
 * chunkgen.h -- the one public header of chunkgen.
 *
 * chunkgen computes two chunked linear recurrences, forward and backward:
 *   - SSD (Mamba-2 style gated linear attention, grouped q/k, scalar decay per head)
 *   - selective scan (Mamba-1 S6)
 * on a CPU path (any shape), a float64 reference, and generated CUDA kernels.
 *
 * Conventions
 *   - Every call returns a cg_status: CG_OK (0) or a negative code. The detailed
 *     message (which argument, what was expected) is kept on the context and read
 *     with cg_errmsg(); the library owns that string.
 *   - Tensors are described by cg_tensor: a data pointer, a dtype, a shape and
 *     64-bit strides counted in elements. The library never copies or keeps the
 *     caller's buffers beyond a call.
 *   - An optional tensor is absent when its data pointer is NULL.
 *   - Destroying NULL is a harmless no-op.
 *
 * ABI and growth rule (binaries built against an older header keep working)
 *   - Every args struct (cg_ssd_fwd_args, ...) and cg_exec starts with `size_t size`:
 *     the sizeof of that struct in the header the caller was compiled with. Set it with
 *     the CG_..._INIT macros (CG_SSD_FWD_ARGS_INIT, CG_EXEC_INIT, ...), or leave it 0:
 *     size 0 means "this header's layout", so `cg_exec e = {0}` and designated
 *     initializers that do not name .size keep working.
 *   - The library reads only the first `size` bytes and treats the rest as zero (an
 *     absent optional tensor, a default setting). A size larger than the library's
 *     struct is accepted when the extra bytes are all zero, else the call fails with
 *     CG_EUNSUPPORTED (a newer caller asked for something this library lacks). A size
 *     smaller than sizeof(size_t) is CG_EINVAL.
 *   - Members are only ever appended, never removed, reordered or retyped; a zero value
 *     of a new member means the old behaviour. If a struct ends in padding, a new
 *     member goes after an explicit reserved member covering it, never into the
 *     padding itself. cg_tensor and the enums' existing values never change.
 *   - Removing or changing anything else is a new SONAME (libchunkgen.so.N+1) and a new
 *     CG_VERSION_MAJOR. Within one major version the library is backward compatible:
 *     a binary runs with any library whose CG_VERSION_NUMBER is >= the header's it was
 *     compiled with (check cg_version_number() at run time if you need a newer call).
 *   - Only `cg_` symbols are exported from libchunkgen.so; each is declared CG_API here.
 *
 * Environment variables the library reads (each call reads them afresh unless noted; an
 * empty value is an unset one; the one table: runtime/env.c, docs/environment.md)
 *   CHUNKGEN_CACHE_DIR     the on-disk caches (tuned configs, compiled kernels); else
 *                          $XDG_CACHE_HOME/chunkgen, else $HOME/.cache/chunkgen
 *                          (cg_context_set_cache_dir overrides all three)
 *   CHUNKGEN_CONFIG        pins configs for calls whose cg_exec.config is NULL:
 *                          "k=v,k=v" for every op, or scoped "ssd_fwd:k=v;sscan:k=v"
 *                          (an op or a family, the first part that applies wins)
 *   CHUNKGEN_TUNE_ON_MISS  1/yes/true/on: tune an exact key on its first miss (see
 *                          cg_context_set_tune_on_miss); CHUNKGEN_TUNE_BUDGET: that
 *                          tune's budget in seconds (default 60);
 *                          CHUNKGEN_TUNE_FAKE_TIMING: tests only, no real timing
 *   CHUNKGEN_LIBCUDA       path of the CUDA driver library to dlopen instead of
 *                          libcuda.so.1 (read once per process, at the first CUDA use)
 *   CHUNKGEN_NVRTC         path of the NVRTC library; else libnvrtc.so.<driver major>
 *                          and newer/older sonames in $CUDA_HOME/lib64 (or
 *                          $CUDA_PATH/lib64), the loader path, /usr/local/cuda/lib64
 *                          (all three read once per process)
 *   CHUNKGEN_NVRTC_TIME_TRACE  a directory for every NVRTC compile's time trace
 *   CHUNKGEN_CPU_ISA       avx512, avx2 or baseline: the CPU path's kernel variant
 *                          (default: the best this CPU runs, from cpuid; one it cannot
 *                          run is refused with a warning). Read once per process.
 *   CHUNKGEN_LUA_PATH      a source checkout: read generator/, templates/ and
 *                          emulator/cg_emu.h from disk instead of the embedded copies
 *   CXX                    the host C++ compiler of the emulate backend (else g++,
 *                          else c++); CHUNKGEN_EMU_CXXFLAGS: extra flags for it;
 *                          CHUNKGEN_EMU_RACECHECK=1: the emulator's race checker;
 *                          CHUNKGEN_EMU_STATS=FILE: its access statistics, written at
 *                          cg_context_free (these two read when a context first uses
 *                          the emulator); TMPDIR: its temporary build directories
 *
 * Process-wide state (everything else lives in a cg_context)
 *   - the CUDA driver and NVRTC libraries: dlopen'ed once per process (pthread_once),
 *     never unloaded; thread-safe.
 *   - the index of the tuned-config store, one per cache directory, shared by all
 *     contexts behind a mutex; rereads a directory that changed (other processes'
 *     writes show within about a second); thread-safe.
 *   - the emulator's detected C++ compiler (mutex) and its per-thread worker keys.
 *   - one-time warnings (host-copy fallback, an unwritable cache, a stale cached
 *     module): atomic flags, said once per process.
 *   - the log callback (cg_set_log_callback): one per process, used by every context.
 *   - thread pools are per context (created lazily by the first CPU call, freed by
 *     cg_context_free; in a child after fork() each context makes a new one on its next
 *     CPU call), as are loaded modules, scratch buffers and the last error.
 *   Calls on different contexts may run concurrently from different threads; one
 *   context must not be used by two threads at once.
 */
#ifndef CHUNKGEN_H
#define CHUNKGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CG_API marks the exported functions of libchunkgen.so (the library is built with
 * hidden visibility for everything else). */
#if defined(__GNUC__) || defined(__clang__)
#define CG_API __attribute__((visibility("default")))
#else
#define CG_API
#endif

/* The project's one version (CMakeLists.txt reads it from here). */
#define CG_VERSION_MAJOR 0
#define CG_VERSION_MINOR 1
#define CG_VERSION_PATCH 0
#define CG_VERSION_STRING "0.1.0"
/* The value of a public struct with its size set and every other member zero
 * (designated in C, so -Wmissing-field-initializers stays quiet). */
#ifdef __cplusplus
#define CG__INIT(type) (cg__init_cxx<type>()) /* value-initialized, then .size (end of file) */
#else
#define CG__INIT(type) {.size = sizeof(type)}
#endif

/* MAJOR*10000 + MINOR*100 + PATCH, e.g. 100 for 0.1.0; compare with cg_version_number(). */
#define CG_VERSION_NUMBER (CG_VERSION_MAJOR * 10000 + CG_VERSION_MINOR * 100 + CG_VERSION_PATCH)

/* (name, value, description): the one table of status codes. */
#define CG_STATUS_MAP(X)                                                   \
    X(OK, 0, "ok")                                                         \
    X(EINVAL, -1, "invalid argument")                                      \
    X(ENOMEM, -2, "out of memory")                                         \
    X(EUNSUPPORTED, -3, "not supported by the chosen backend")             \
    X(ENODEV, -4, "no CUDA driver or device")                              \
    X(ECOMPILE, -5, "kernel compilation failed")                           \
    X(ELAUNCH, -6, "kernel launch or execution failed")                    \
    X(EIO, -7, "input/output error")                                       \
    X(ELUA, -8, "error in a Lua script")                                   \
    X(ENOTFOUND, -9, "not found")                                          \
    X(EINTERNAL, -10, "internal error")

typedef enum cg_status {
#define CG__STATUS_ENUM(name, value, text) CG_##name = value,
    CG_STATUS_MAP(CG__STATUS_ENUM)
#undef CG__STATUS_ENUM
} cg_status;

/* Static text of a status code; never NULL. */
CG_API const char *cg_status_str(cg_status status);

/* Runtime version string, e.g. "0.1.0". */
CG_API const char *cg_version(void);
/* Runtime version as CG_VERSION_NUMBER, e.g. 100 for 0.1.0. */
CG_API int cg_version_number(void);

typedef enum cg_dtype {
    CG_F32 = 0,  /* every backend */
    CG_F64 = 1,  /* the float64 reference backend only */
    CG_BF16 = 2, /* bfloat16 storage, float32 math: the tensors docs/dtypes.md lists (q, k, v, x, B, C, ...) */
    CG_F16 = 3,  /* IEEE half storage, float32 math (likewise); backends without 16-bit kernels refuse them */
    CG_I32 = 4,  /* int32 index tensor: cu_seqlens only (docs/varlen.md) */
    CG_I64 = 5   /* int64 index tensor: cu_seqlens only */
} cg_dtype;

/* "f32", "f64", "bf16", "f16", "i32", "i64": the dtype's word (the shape syntax's, the
 * CLI's --dtype, the tuning key's); static. NULL for an unknown value. */
CG_API const char *cg_dtype_name(cg_dtype dtype);
/* The dtype whose word is name into *dtype; CG_EINVAL for an unknown word. */
CG_API cg_status cg_dtype_parse(const char *name, cg_dtype *dtype);
/* Bytes of one element (also its alignment); 0 for an unknown value. */
CG_API size_t cg_dtype_size(cg_dtype dtype);
/* The library's one bfloat16 / IEEE half conversion (every host backend's): narrowing
 * rounds to nearest, ties to even, NaN stays a quiet NaN with its sign, overflow gives
 * +-inf, half subnormals are exact; widening is exact. */
CG_API float cg_bf16_to_f32(uint16_t h);
CG_API uint16_t cg_f32_to_bf16(float x);
CG_API float cg_f16_to_f32(uint16_t h);
CG_API uint16_t cg_f32_to_f16(float x);

typedef enum cg_backend {
    /* CUDA when the pointers are device pointers and a kernel exists; else CPU (device
     * pointers then go through host copies: slow, synchronizing, warned once) */
    CG_BACKEND_AUTO = 0,
    CG_BACKEND_CPU = 1,  /* the generic multithreaded CPU path */
    CG_BACKEND_CUDA = 2, /* generated CUDA kernels (needs a driver and a GPU) */
    CG_BACKEND_EMULATE = 3, /* generated CUDA kernels run on the CPU by the SIMT emulator */
    CG_BACKEND_REF = 4   /* float64 sequential scan, the ground truth; slow */
} cg_backend;

/* Name of a backend ("auto", "cpu", "cuda", "emulate", "ref"); never NULL. */
CG_API const char *cg_backend_name(cg_backend backend);
/* Parse a backend name; returns CG_EINVAL for an unknown name. */
CG_API cg_status cg_backend_parse(const char *name, cg_backend *out);

/* Order in which the SSD tensors' shapes are given (sscan tensors are always
 * given in their logical order, see below). */
typedef enum cg_layout {
    CG_LAYOUT_TOKEN_MAJOR = 0, /* [B, T, heads, dim], as fla and mamba */
    CG_LAYOUT_HEAD_MAJOR = 1   /* [B, heads, T, dim] */
} cg_layout;

#define CG_MAX_DIMS 4

typedef struct cg_tensor {
    void *data;                  /* NULL: absent (allowed for optional tensors only) */
    cg_dtype dtype;
    int ndim;
    int64_t shape[CG_MAX_DIMS];
    int64_t stride[CG_MAX_DIMS]; /* in elements; all zero means contiguous row-major */
} cg_tensor;

/* A contiguous row-major tensor over caller-owned memory. */
CG_API cg_tensor cg_tensor_contiguous(void *data, cg_dtype dtype, int ndim, const int64_t *shape);

/* -------------------------------------------------------------------- log
 * The library prints nothing itself: warnings (a corrupt cache entry skipped, a slow
 * fallback taken), and the dispatch lines asked for with cg_exec.verbose, go to one
 * process-wide callback. The default writes each to stderr as "chunkgen: warning: TEXT"
 * (CG_LOG_INFO lines without the "warning: "). msg is valid during the call only. The
 * callback may be called from any thread that calls into the library, and must not call
 * into the library. */
typedef enum cg_log_level {
    CG_LOG_ERROR = 0,
    CG_LOG_WARN = 1,
    CG_LOG_INFO = 2
} cg_log_level;
typedef void (*cg_log_fn)(cg_log_level level, const char *msg, void *user);
/* Install fn (with its user pointer) for the whole process; NULL restores the default.
 * Safe to call at any time from any thread. */
CG_API void cg_set_log_callback(cg_log_fn fn, void *user);
/* Logger off: cg_set_log_callback(cg_log_silent, NULL) makes the library write nothing
 * anywhere (it then prints nothing at all: progress goes to cg_context_set_progress, which
 * is off until set). cg_log_silent drops every message. The default (no callback set, or
 * after cg_set_log_callback(NULL, NULL)) stays cg_log_stderr, as it always was. */
CG_API void cg_log_silent(cg_log_level level, const char *msg, void *user);
/* The default callback: "chunkgen: [error: |warning: ]TEXT" and a newline on stderr. */
CG_API void cg_log_stderr(cg_log_level level, const char *msg, void *user);

/* ---------------------------------------------------------------- context */

/* A context holds the caches, loaded modules, scratch buffers and the last error of
 * its calls. It is not thread-safe: use one context per thread (or serialize calls on
 * it). Contexts are independent; many contexts and processes may share the on-disk
 * caches. */
typedef struct cg_context cg_context;

/* Create a context. *out is owned by the caller and released by cg_context_free. */
CG_API cg_status cg_context_create(cg_context **out);
/* Free a context and everything it owns (threads, caches, loaded modules). NULL is a no-op. */
CG_API void cg_context_free(cg_context *ctx);
/* Last error message of ctx (owned by ctx, valid until the next call on ctx); "" when none. */
CG_API const char *cg_errmsg(const cg_context *ctx);
/* Default number of CPU threads (0 = all online cores). */
CG_API cg_status cg_context_set_threads(cg_context *ctx, int threads);
/* Directory of the on-disk caches (copied). NULL restores the default
 * ($CHUNKGEN_CACHE_DIR, else $XDG_CACHE_HOME/chunkgen, else ~/.cache/chunkgen). */
CG_API cg_status cg_context_set_cache_dir(cg_context *ctx, const char *dir);
/* Tune on a miss: when no tuned config exists for a call's exact key, tune that key
 * first (once, within $CHUNKGEN_TUNE_BUDGET seconds, default 60) and store it.
 * 1 on, 0 off, -1 (the default) follows $CHUNKGEN_TUNE_ON_MISS. */
CG_API cg_status cg_context_set_tune_on_miss(cg_context *ctx, int on);
/* One line describing the last successful op call: backend, kernel or path, config
 * and where the config came from. Owned by ctx. */
CG_API const char *cg_last_dispatch(const cg_context *ctx);

/* How to run one call. A NULL cg_exec means CG_EXEC_INIT: backend auto, tuned or
 * default config, default stream. */
typedef struct cg_exec {
    size_t size;            /* sizeof(cg_exec) of the caller's header, or 0 (see the growth rule) */
    cg_backend backend;
    const char *config;     /* NULL: tuned or default config; else pinned, e.g. "chunk=64,threads=2" */
    void *stream;           /* CUstream for the cuda backend; NULL: the default stream */
    void *workspace;        /* optional caller-owned scratch (device memory for cuda) */
    size_t workspace_bytes;
    int verbose;            /* send the dispatch line to the log callback (CG_LOG_INFO) */
} cg_exec;
#define CG_EXEC_INIT CG__INIT(cg_exec)

/* ---------------------------------------------------------------- kernels
 * The generated kernels, the compiled-kernel cache and the machine, for tools (the
 * chunkgen CLI's gen, info and build-kernels, export/import of kernels, benchmarks).
 * Text and arrays these calls hand to the caller are malloc'd by the library: release
 * them with cg_free. A kernel is named as cg_kernel_list says: a generated CUDA kernel
 * (ssd_fwd, ssd_bwd, sscan_fwd, sscan_bwd, ...) or a CPU space (ssd_cpu, sscan_cpu). */

/* Release memory a cg_ call handed to the caller (text, arrays, images). NULL is a no-op. */
CG_API void cg_free(void *p);

/* The host CPU, a GPU and the toolchain, as one report (cg_device_query). Fields that
 * do not apply or are unknown are 0 or "". */
typedef struct cg_device_info {
    size_t size;              /* sizeof(cg_device_info) of the caller's header, or 0 (see the growth rule) */
    char cpu_model[128];      /* e.g. "AMD EPYC 7B13" */
    int cpu_cores;            /* online cores */
    char cpu_isa[16];         /* the CPU path's variant this process runs: "avx512", "avx2" or "baseline" */
    char cpu_isas[64];        /* every variant this build and CPU can run, best first: "avx2,baseline" */
    int gpu;                  /* 1: the gpu_ fields describe a device; 0: none, gpu_why says why */
    char gpu_why[256];
    char gpu_name[128];
    int gpu_arch;             /* 80, 86, 90, ... */
    int gpu_sm_count;
    int64_t gpu_smem_per_block; /* opt-in maximum of shared memory per block, bytes */
    int gpu_regs_per_block;
    int gpu_emulated;         /* 1: the SIMT emulator's stand-in device (CG_BACKEND_EMULATE) */
    double gpu_clock_mhz, gpu_mem_clock_mhz, gpu_bus_bits, gpu_mem_gb; /* from the driver; 0 unknown */
    int driver_version;       /* CUDA driver, cuDriverGetVersion's 1000*major + 10*minor; 0: none */
    char driver_why[256];     /* no driver: why (what was tried) */
    int nvrtc_version;        /* NVRTC, 1000*major + 10*minor; 0: none, nvrtc_why says why */
    char nvrtc_why[256];
    char nvrtc_id[1024];      /* the NVRTC build as the kernel cache keys name it */
} cg_device_info;
#define CG_DEVICE_INFO_INIT CG__INIT(cg_device_info)

/* Fill *out (caller-owned; its .size set or 0) with the host CPU, and for backend
 * CG_BACKEND_CUDA (the driver's device, or why there is none) or CG_BACKEND_EMULATE (the
 * emulator's stand-in, sm_80) also the toolchain (driver, NVRTC) and that GPU;
 * CG_BACKEND_CPU: the host CPU only (no driver, NVRTC or GPU is looked at). No GPU,
 * driver or NVRTC is not an error (gpu = 0 and the _why fields); CG_EINVAL for auto, ref. */
CG_API cg_status cg_device_query(cg_context *ctx, cg_backend backend, cg_device_info *out);

/* The kernels and CPU spaces there are: *names a NULL-terminated array of *n names,
 * owned by ctx (valid until cg_context_free). n may be NULL. */
CG_API cg_status cg_kernel_list(cg_context *ctx, const char *const **names, int *n);

/* A kernel's description: its backend, its config keys (one line each: "  name  type
 * values, ...  meaning") and constraints. *text is the caller's (cg_free). CG_ENOTFOUND
 * for an unknown kernel (the message lists the kernels). */
CG_API cg_status cg_kernel_describe(cg_context *ctx, const char *kernel, char **text);

/* ------------------------------------------------ kernels: device memory and timers
 * Memory the kernels of a backend address, copies, waits and timers on a stream, for
 * tools that run the cuda backend on buffers of their own (benchmarks, tests). backend:
 * CG_BACKEND_CUDA (device memory; stream a CUstream, NULL the default stream) or
 * CG_BACKEND_EMULATE (the emulator's stand-in: host memory its kernels address, timed
 * with the host clock); else CG_EINVAL. CG_ENODEV without a driver or device. */

/* bytes of the backend's memory into *ptr; the caller's, released with cg_device_free. */
CG_API cg_status cg_device_alloc(cg_context *ctx, cg_backend backend, size_t bytes, void **ptr);
/* Release memory of cg_device_alloc (same ctx and backend). NULL is a no-op. */
CG_API void cg_device_free(cg_context *ctx, cg_backend backend, void *ptr);
/* Copy bytes between caller-owned host memory and the backend's: to_host 0, host src to
 * device dst; 1, device src to host dst. Enqueued on stream: cg_device_sync waits for it. */
CG_API cg_status cg_device_copy(cg_context *ctx, cg_backend backend, void *dst, const void *src, size_t bytes,
                                int to_host, void *stream);
/* Wait until the work enqueued on stream is done. */
CG_API cg_status cg_device_sync(cg_context *ctx, cg_backend backend, void *stream);
/* Time the work enqueued on stream between the two calls: start hands out *token (owned by
 * ctx; at most 4 outstanding per context); stop waits for the stream to reach its mark,
 * writes the milliseconds into *ms and releases the token, also on failure. */
CG_API cg_status cg_device_timer_start(cg_context *ctx, cg_backend backend, void *stream, void **token);
CG_API cg_status cg_device_timer_stop(cg_context *ctx, cg_backend backend, void *stream, void *token, double *ms);
/* Enqueue on stream a write of a ctx-owned buffer larger than the device's L2 cache, so
 * that the next timed work starts cold (a no-op for emulate). */
CG_API cg_status cg_device_flush_l2(cg_context *ctx, cg_backend backend, void *stream);

/* ---------------------------------------------------- kernels: the kernel cache
 * Compiled kernels on disk (CUBINs for cuda, shared objects for the emulator), one
 * self-checking entry file per kernel ("<name>-<hash>.cgk"), keyed by everything the
 * binary depends on (chunkgen version, target arch, compiler build, options, source).
 * A directory argument `dir` may be NULL: ctx's, <cache dir>/kernels. */

/* ctx's kernel cache directory (<cache dir>/kernels) into buf (cap bytes, caller-owned);
 * CG_EINVAL when it does not fit. */
CG_API cg_status cg_kcache_dir(cg_context *ctx, char *buf, size_t cap);

/* One entry of a kernel cache (cg_kcache_list). */
typedef struct cg_kcache_entry {
    size_t size;        /* sizeof(cg_kcache_entry) of the caller's header, or 0 (see the growth rule) */
    char file[256];     /* the entry's file name in the directory */
    int64_t bytes;      /* the file's size */
    int usable;         /* 1: intact and built by this chunkgen version; else why says why not */
    char why[256];
    char kind[16];      /* "cubin", "emulate", ... (from its key; "" when unusable) */
    int arch;           /* a cubin's target, e.g. 90; 0 otherwise */
    char name[192];     /* the kernel's name, e.g. ssd_fwd_dk48_dv40_c64_w4_ieee */
    int bundled;        /* 1: written by cg_kcache_import (from a bundle) */
} cg_kcache_entry;
#define CG_KCACHE_ENTRY_INIT CG__INIT(cg_kcache_entry)

/* The entries of dir, in file-name order: the first cap of them into entries (a
 * caller-owned array of cap structs, each of the size entries[0].size says, 0: this
 * header's; NULL when cap is 0) and their number into *n (may exceed cap: call again
 * with a larger array). A missing directory has no entries. */
CG_API cg_status cg_kcache_list(cg_context *ctx, const char *dir, cg_kcache_entry *entries, int cap, int *n);

/* The whole entry file `file` (a name from cg_kcache_list) of dir, checked, into *image
 * (the caller's, cg_free) of *len bytes: the unit cg_kcache_import takes on another
 * machine. CG_ENOTFOUND when absent, CG_EINVAL when file is not an entry name or the
 * entry is damaged (the message says how). */
CG_API cg_status cg_kcache_read(cg_context *ctx, const char *dir, const char *file, void **image, size_t *len);

/* Write an entry image (from cg_kcache_read; caller-owned, len bytes) into dir under
 * the name its key hashes to, its log tagged with `origin` (caller's text, e.g. the
 * bundle's file, may be NULL) so that later loads count as bundle hits. Refused with
 * CG_EINVAL and the reason when the image is damaged or was built by another chunkgen
 * version or kind. *added (may be NULL): 1 written, 0 dir already held that key. dry:
 * check only, write nothing. CG_EIO when dir cannot be written. */
CG_API cg_status cg_kcache_import(cg_context *ctx, const char *dir, const void *image, size_t len, const char *origin,
                                  int dry, int *added);

/* -------------------------------------------------------------------- SSD
 * Per (b, h), with g = h / (H / G) and a state S of dk x dv (S before token 0 = h0 or 0):
 *   S_t = exp(log_alpha_t) * S_{t-1} + k_t^T v_t,   o_t = q_t S_t.
 * Shapes, in the order of `layout` (token-major shown; head-major swaps T and heads):
 *   q, k [B, T, G, dk]; v, o, dout [B, T, H, dv]; log_alpha [B, T, H];
 *   h0, hT, dhT, dh0 [B, H, dk, dv] (same in both layouts).
 * The innermost dimension must have stride 1; the others may be anything >= 0
 * that does not make an output overlap itself or another output. */
typedef struct cg_ssd_fwd_args {
    size_t size; /* sizeof(cg_ssd_fwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_layout layout;
    cg_tensor q, k, v, log_alpha, h0; /* inputs; h0 optional */
    cg_tensor o, hT;                  /* outputs; hT optional */
    /* optional, appended (growth rule): packed variable-length batch (docs/varlen.md).
     * CG_I32 or CG_I64 [N + 1], non-decreasing, first 0, last = T; needs B = 1.
     * With it the states (h0, hT) are per sequence: [N, H, dk, dv]. */
    cg_tensor cu_seqlens;
} cg_ssd_fwd_args;
#define CG_SSD_FWD_ARGS_INIT CG__INIT(cg_ssd_fwd_args)

typedef struct cg_ssd_bwd_args {
    size_t size; /* sizeof(cg_ssd_bwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_layout layout;
    cg_tensor q, k, v, log_alpha, h0, dout, dhT; /* inputs; h0, dhT optional */
    cg_tensor dq, dk, dv, dlog_alpha, dh0;      /* outputs; dh0 optional. dq, dk sum over the group's heads */
    /* optional, appended (growth rule): packed variable-length batch (docs/varlen.md).
     * CG_I32 or CG_I64 [N + 1], non-decreasing, first 0, last = T; needs B = 1.
     * With it the states (h0, dhT, dh0) are per sequence: [N, H, dk, dv]. */
    cg_tensor cu_seqlens;
} cg_ssd_bwd_args;
#define CG_SSD_BWD_ARGS_INIT CG__INIT(cg_ssd_bwd_args)

/* SSD forward. Every pointer in args is caller-owned. */
CG_API cg_status cg_ssd_fwd(cg_context *ctx, const cg_ssd_fwd_args *args, const cg_exec *exec);
/* SSD backward (recomputes what it needs; stores no per-token state). */
CG_API cg_status cg_ssd_bwd(cg_context *ctx, const cg_ssd_bwd_args *args, const cg_exec *exec);

/* --------------------------------------------------------- selective scan
 * dt = delta (+ delta_bias), softplus(dt) if delta_softplus;
 *   h_t[d,n] = exp(dt_t[d] A[d,n]) h_{t-1}[d,n] + dt_t[d] B_t[n] x_t[d]
 *   y_t[d] = sum_n C_t[n] h_t[d,n] + D[d] x_t[d];  y_t[d] *= silu(z_t[d]) if z given.
 * Shapes, always in this logical order with any strides >= 0:
 *   x, delta, z, y, dy [B, L, D]; A [D, N]; B, C [B, L, N] or grouped [B, L, G, N]
 *   (channel d uses group d / (D/G)); D, delta_bias [D]; h0, hT, dhT, dh0 [B, D, N]. */
typedef struct cg_sscan_fwd_args {
    size_t size; /* sizeof(cg_sscan_fwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_tensor x, delta, A, B, C, D, z, delta_bias, h0; /* D, z, delta_bias, h0 optional */
    int delta_softplus;
    cg_tensor y, hT;                                   /* hT optional */
    /* optional, appended (growth rule): packed variable-length batch (docs/varlen.md).
     * CG_I32 or CG_I64 [N + 1], non-decreasing, first 0, last = L; needs B = 1.
     * With it the states (h0, hT) are per sequence: [N, D, N]. */
    cg_tensor cu_seqlens;
} cg_sscan_fwd_args;
#define CG_SSCAN_FWD_ARGS_INIT CG__INIT(cg_sscan_fwd_args)

typedef struct cg_sscan_bwd_args {
    size_t size; /* sizeof(cg_sscan_bwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_tensor x, delta, A, B, C, D, z, delta_bias, h0, dy, dhT; /* D, z, delta_bias, h0, dhT optional */
    int delta_softplus;
    /* outputs; dx, ddelta, dA, dB, dC required; dD, dz, ddelta_bias optional and
     * only allowed when D, z, delta_bias are given; dh0 optional. */
    cg_tensor dx, ddelta, dA, dB, dC, dD, dz, ddelta_bias, dh0;
    /* optional, appended (growth rule): packed variable-length batch (docs/varlen.md).
     * CG_I32 or CG_I64 [N + 1], non-decreasing, first 0, last = L; needs B = 1.
     * With it the states (h0, dhT, dh0) are per sequence: [N, D, N]. */
    cg_tensor cu_seqlens;
} cg_sscan_bwd_args;
#define CG_SSCAN_BWD_ARGS_INIT CG__INIT(cg_sscan_bwd_args)

/* Selective-scan forward. */
CG_API cg_status cg_sscan_fwd(cg_context *ctx, const cg_sscan_fwd_args *args, const cg_exec *exec);
/* Selective-scan backward (recomputes states from checkpoints every `segment` steps). */
CG_API cg_status cg_sscan_bwd(cg_context *ctx, const cg_sscan_bwd_args *args, const cg_exec *exec);

/* ------------------------------------------------ ahead of time: prepare, workspace
 * The ops by number, for the calls that take any op's args struct. */
typedef enum cg_op {
    CG_OP_SSD_FWD = 0,   /* args: cg_ssd_fwd_args */
    CG_OP_SSD_BWD = 1,   /* args: cg_ssd_bwd_args */
    CG_OP_SSCAN_FWD = 2, /* args: cg_sscan_fwd_args */
    CG_OP_SSCAN_BWD = 3  /* args: cg_sscan_bwd_args */
} cg_op;

/* Bytes of scratch the call cg_<op>(ctx, args, exec) would take from exec->workspace
 * (kernel memory: device memory for the cuda backend; 0 for the cpu and ref backends,
 * which keep their own), into *bytes. It validates args and chooses the backend and the
 * config exactly as the call would (the tensors' data pointers are looked at, never
 * read or written), and makes the kernel's plan, but compiles and allocates nothing. A
 * call given exec->workspace of at least this many bytes allocates no scratch. */
CG_API cg_status cg_workspace_size(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec, size_t *bytes);

/* Everything the call cg_<op>(ctx, args, exec) needs, done now: the config lookup, the
 * plan, compiling (or fetching from the kernel cache) and loading the kernels, and, when
 * exec->workspace is NULL or too small, the context's own scratch. Later calls with the
 * same shapes, optional tensors, options and exec on ctx then neither compile, load,
 * allocate nor synchronize, so they can be captured into a CUDA graph. bytes (may be
 * NULL): as cg_workspace_size. A call under CUDA graph capture that would still have to
 * compile or allocate fails with CG_EUNSUPPORTED saying so, and leaves the capture intact.
 * (The host-copy fallback of the auto backend always synchronizes: a call that takes it,
 * see cg_last_dispatch, cannot be captured.) */
CG_API cg_status cg_prepare(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec, size_t *bytes);

/* Checks the arguments of the call cg_<op>(ctx, args, exec) as the call does (the same
 * checks and messages: shapes, dtypes and their mix, strides, overlaps, cu_seqlens, the
 * F64 and 16-bit rules of a backend asked for), and nothing more: it chooses no backend
 * or config, plans, compiles, allocates and writes nothing, and reads no tensor data but
 * host cu_seqlens offsets. An output whose data pointer is NULL is not checked (the
 * given ones are, overlaps included), so a caller that makes the outputs from the
 * inputs' extents (a language binding) checks the inputs first and allocates nothing for
 * a call that would be refused. exec may be NULL. CG_OK, or the call's status and
 * cg_errmsg. */
CG_API cg_status cg_validate(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec);

/* ------------------------------------------------------------------ progress
 * Long work -- a tune (cg_tune, and a tune on a miss inside an op call), an import, the
 * cache administration -- reports through the context's progress callback, never by
 * printing: the caller draws its bar and lines from the events (the CLI does). Without a
 * callback (the default) the events are dropped. The callback runs on the thread that
 * called the library, during that call; the event and its strings are valid during the
 * callback only, and it must not call into the library with the same context. */
typedef enum cg_progress_kind {
    CG_PROGRESS_START = 0,  /* a task starts: task; index of count; total = its steps (0: unknown) */
    CG_PROGRESS_STEP = 1,   /* done of total steps of the task; text: its state (e.g. the best so far) */
    CG_PROGRESS_DONE = 2,   /* the task ended; text: its result in one line; level WARN/ERROR when it failed */
    CG_PROGRESS_MESSAGE = 3 /* one line (text) about subject: a key skipped, an entry rejected, a file left */
} cg_progress_kind;
typedef struct cg_progress {
    size_t size;            /* sizeof(cg_progress) of the library that sends it */
    cg_progress_kind kind;
    cg_log_level level;     /* CG_LOG_INFO, or WARN (rejected, skipped, bad) / ERROR (failed) */
    const char *task;       /* what the event is about, e.g. "cpu ssd fwd T=2048"; "" when none */
    const char *subject;    /* a file, an entry or a shape's name; "" when none */
    const char *text;       /* the message or the result; "" when none */
    int index, count;       /* the task's place in its run, 1-based, and the run's tasks; 0 when none */
    int64_t done, total;    /* CG_PROGRESS_START/STEP: steps done and in all */
} cg_progress;
typedef void (*cg_progress_fn)(const cg_progress *event, void *user);
/* Send ctx's progress events to fn(event, user); NULL (the default) drops them. The
 * caller owns user. */
CG_API cg_status cg_context_set_progress(cg_context *ctx, cg_progress_fn fn, void *user);
/* The resolved cache directory of ctx (cg_context_set_cache_dir, else the environment,
 * see the top of this file); owned by the library, valid until the next call on this thread. */
CG_API const char *cg_context_cache_dir(cg_context *ctx);

/* --------------------------------------------------------- the config store
 * Tuned configs live in <cache dir>/configs, one entry per tuning key (op, direction, the
 * shape's key extents, dtype, seq bucket, device, threads, versions; docs/tuning.md). The
 * library alone reads and writes it: these calls list, export and import entries. */

/* Which entries: each NULL member matches all ("all" too); device matches a substring. */
typedef struct cg_config_filter {
    size_t size;             /* sizeof(cg_config_filter) of the caller's header, or 0 (growth rule) */
    const char *backend;     /* "cpu", "cuda", "emulate" */
    const char *op;          /* an op family: "ssd", "sscan" */
    const char *dir;         /* "fwd", "bwd" */
    const char *device;      /* entries whose device name contains this text */
    int partial;             /* 1: also unfinished (interrupted) tunes */
} cg_config_filter;
#define CG_CONFIG_FILTER_INIT CG__INIT(cg_config_filter)

/* One stored entry, read-only, as cg_config_visit shows it (strings owned by the library,
 * valid during the visit's callback). */
typedef struct cg_config_entry {
    size_t size;             /* sizeof(cg_config_entry) of the library */
    const char *key;         /* one line, e.g. "cpu ssd fwd dk128 dv128 G2 H8 T<=2048" */
    const char *backend, *op, *dir;
    const char *device;      /* GPU name, or the CPU model and the CPU path's variant */
    int cc, sm_count;        /* cuda: compute capability x10 and SMs; 0 otherwise */
    int threads;             /* CPU threads of the key; 0 for GPUs */
    const char *nvrtc, *driver, *version; /* NVRTC, driver ("" on CPU) and chunkgen versions */
    int complete, truncated; /* a finished tune; one the budget cut short */
    const char *config;      /* the winner ("" = the default config); NULL when none passed */
    double median_ms;        /* the winner's median time */
    double default_ms;       /* the default config's median; 0 when not measured */
    int ncandidates;         /* configs measured (the entry's JSON lists each) */
    const char *created, *host; /* UTC ISO 8601 time and host name of the tune */
    const char *path;        /* the entry's file */
    const char *json;        /* the entry as cg_config_export writes it (compact JSON) */
} cg_config_entry;
/* Return nonzero to stop the visit. */
typedef int (*cg_config_visit_fn)(const cg_config_entry *entry, void *user);
/* Visit ctx's store entries that match filter (NULL: every finished one), in key order
 * (backend, device, op, extents, fwd before bwd, seq bucket, version). A bad file is
 * skipped with a CG_PROGRESS_MESSAGE (level WARN, subject its path) and counted in *bad
 * (may be NULL). CG_ENOTFOUND (message) when the store directory does not exist. The entry
 * fn gets is the library's, valid during that call only; user is the caller's. */
CG_API cg_status cg_config_visit(cg_context *ctx, const cg_config_filter *filter, cg_config_visit_fn fn, void *user,
                                 int *bad);
/* The store directory of ctx, "<cache dir>/configs" (owned by the library, valid until the
 * next call on this thread). */
CG_API const char *cg_config_store_dir(cg_context *ctx);
/* The matching entries as one JSON document {"schema": 1, "kind": "chunkgen-configs",
 * "chunkgen": VERSION, "exported": TIME, "entries": [...]} (docs/tuning.md), indented,
 * into *json (the caller frees it with cg_free; *len without the final NUL, may be NULL);
 * *count: the entries written (may be NULL). A missing store exports no entries. */
CG_API cg_status cg_config_export(cg_context *ctx, const cg_config_filter *filter, char **json, size_t *len,
                                  int *count);
/* Write n bytes to path as the library writes its own files: a temp file in the same
 * directory, fsync'ed and renamed over path (a reader never sees half a file; a symlink
 * planted at the temp name is not followed). CG_EIO with the reason otherwise. data stays
 * the caller's (not kept). */
CG_API cg_status cg_write_file(cg_context *ctx, const char *path, const void *data, size_t n);

typedef struct cg_import_options {
    size_t size;             /* sizeof(cg_import_options) of the caller's header, or 0 (growth rule) */
    int allow_foreign;       /* 1: keep entries measured on another device */
    int dry_run;             /* 1: check and report, write nothing */
} cg_import_options;
#define CG_IMPORT_OPTIONS_INIT CG__INIT(cg_import_options)
typedef struct cg_import_stats {
    size_t size;             /* sizeof(cg_import_stats) of the caller's header, or 0 (growth rule) */
    int added, replaced;     /* entries written: new keys, and keys whose entry they replaced */
    int kept;                /* entries the merge rule did not take (the store's, or another, won) */
    int rejected;            /* malformed, unfinished, foreign, refused by the constraints, or not written */
    int messages;            /* CG_PROGRESS_MESSAGE events sent, one per entry not simply added */
} cg_import_stats;
#define CG_IMPORT_STATS_INIT CG__INIT(cg_import_stats)
/* Merge tuned configs into ctx's store. Each source is a file written by cg_config_export
 * (or one entry object, or an array of them), "-" for stdin, or a store directory (a cache
 * directory or its configs/). Every entry is validated; each one rejected or not taken
 * gets a CG_PROGRESS_MESSAGE (subject: "SOURCE: entry I" or the file; level WARN for a
 * rejection). All entries of a key, the store's and every source's, are merged in one
 * deterministic choice (docs/tuning.md), whatever the order of the sources. Nothing is
 * written when a source cannot be read (CG_EINVAL naming it). opts, stats may be NULL;
 * everything passed in stays the caller's (nothing is kept), *stats is filled. */
CG_API cg_status cg_config_import(cg_context *ctx, const char *const *sources, int nsources,
                                  const cg_import_options *opts, cg_import_stats *stats);
/* As cg_config_import, from a document in memory (json, len bytes); what names it in the
 * messages (NULL: "json"). */
CG_API cg_status cg_config_import_json(cg_context *ctx, const char *json, size_t len, const char *what,
                                       const cg_import_options *opts, cg_import_stats *stats);

/* ------------------------------------------------------------------ the caches
 * The cache directory holds chunkgen's own files only in its areas (the config store, the
 * kernel cache, kept sources of failed emulator compiles). Prune and clear remove only
 * files the library recognizes as its own by name and content (a file of another kind is
 * never opened blocking, a symlink never followed) and report the rest. Per-file details
 * are CG_PROGRESS_MESSAGE events: a bad entry (level WARN, task the area, subject the
 * path, text why), a file left because it is not chunkgen's (INFO, task the area or ""
 * for the cache directory itself, subject the path), a removal that failed (ERROR, subject
 * the path, text the reason). */
/* (An area is a member of cg_cache_report; new areas are appended there, and
 * cg_cache_area itself never grows.) */
typedef struct cg_cache_area {
    const char *name;        /* its subdirectory: "configs", "kernels", "emu-failed" */
    int64_t entries, bytes;  /* valid entries; bytes of every file the area holds */
    int64_t bad;             /* entries that fail their check (JSON, schema, checksum, key; kernel format) */
    int64_t temp_files;      /* leftovers of interrupted writes */
    int64_t removed, removed_bytes, failed, left; /* prune/clear: removed, could not remove, not ours */
} cg_cache_area;
typedef struct cg_cache_report {
    size_t size;             /* sizeof(cg_cache_report) of the caller's header, or 0 (growth rule) */
    int store_exists;        /* the config store's directory exists */
    int64_t complete, unfinished; /* config entries: finished tunes and interrupted ones */
    int64_t removed_version, removed_old; /* prune: entries of another chunkgen version, older than the limit */
    int64_t left_root;       /* clear with all: other files in the cache directory itself */
    cg_cache_area configs, kernels, emu_failed;
} cg_cache_report;
#define CG_CACHE_REPORT_INIT CG__INIT(cg_cache_report)
/* Each of these fills the caller's *report (may be NULL; its area names are static strings).
 * Count the config store's entries (complete, unfinished, bad, temp files, bytes). */
CG_API cg_status cg_cache_stats(cg_context *ctx, cg_cache_report *report);
/* Check every config entry and every kernel cache entry; a bad one is a message. */
CG_API cg_status cg_cache_verify(cg_context *ctx, cg_cache_report *report);
/* Remove bad entries (both stores), leftovers of interrupted writes older than 10 minutes,
 * config entries of other chunkgen versions, and (older_than_days > 0) entries older than that. */
CG_API cg_status cg_cache_prune(cg_context *ctx, double older_than_days, cg_cache_report *report);
/* Remove every config entry; all = 1: also the kernel cache and the kept emulator sources. */
CG_API cg_status cg_cache_clear(cg_context *ctx, int all, cg_cache_report *report);
/* fn(name, path, files, bytes, user) for each subdirectory of the cache directory but the
 * config store (files and bytes of its tree; nothing is opened). Nonzero from fn stops. */
typedef int (*cg_cache_dir_fn)(const char *name, const char *path, int64_t files, int64_t bytes, void *user);
CG_API cg_status cg_cache_dirs(cg_context *ctx, cg_cache_dir_fn fn, void *user);
/* ------------------------------------------------- ops by number: describe and run
 * Every op is one row of the library's op table; these calls expose that table, so that
 * a caller (a language binding, a command line) handles any op without naming one. The
 * strings they return are static (owned by the library, valid for the process). */

/* Run op on args, an args struct of op's type (cg_ssd_fwd_args for CG_OP_SSD_FWD ...):
 * the same as calling cg_<op>(ctx, args, exec). CG_EINVAL for an unknown op. args, exec
 * and the tensors' memory stay the caller's (read or written during the call only). */
CG_API cg_status cg_run(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec);

/* Number of ops: they are 0 .. cg_op_count() - 1. */
CG_API int cg_op_count(void);
/* Name of op ("ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"), static; NULL for an unknown op. */
CG_API const char *cg_op_name(cg_op op);
/* The op named name into *op (the caller's); CG_EINVAL for an unknown name (nothing is
 * written then). name is only read. */
CG_API cg_status cg_op_parse(const char *name, cg_op *op);

/* The symbols a shape is made of: a tensor's logical extents are symbols, e.g. q is
 * [B, T, G, dk]. Values only ever appended (new ops add symbols); at most
 * CG_SHAPE_MAX_SYMS, the capacity of every array indexed by a cg_sym. */
#define CG_SHAPE_MAX_SYMS 16
typedef enum cg_sym {
    CG_SYM_NONE = 0, /* no dimension (extent 1) */
    CG_SYM_B = 1,    /* batch (SSD and selective scan) */
    CG_SYM_T = 2,    /* SSD sequence length */
    CG_SYM_G = 3,    /* groups: SSD q/k heads; selective scan B/C groups */
    CG_SYM_H = 4,    /* SSD v heads */
    CG_SYM_DK = 5,   /* SSD head dimension of q and k ("dk") */
    CG_SYM_DV = 6,   /* SSD head dimension of v ("dv") */
    CG_SYM_L = 7,    /* selective-scan sequence length */
    CG_SYM_D = 8,    /* selective-scan channels */
    CG_SYM_N = 9,    /* selective-scan state size */
    CG_SYM_COUNT     /* this header's number of symbols (grows, never above CG_SHAPE_MAX_SYMS) */
} cg_sym;
/* Name of a symbol ("B", "T", "G", "H", "dk", "dv", "L", "D", "N"), static; "" for
 * CG_SYM_NONE or an unknown value. */
CG_API const char *cg_sym_name(cg_sym sym);
/* The symbol named name (case-sensitive: "dk", "D") into *sym (the caller's); CG_EINVAL
 * for an unknown name. */
CG_API cg_status cg_sym_parse(const char *name, cg_sym *sym);

/* Flags of a tensor (cg_tensor_info.flags). */
#define CG_TENSOR_LAYOUT 1     /* SSD per-token tensor: head-major layout swaps logical dims 1 and 2 */
#define CG_TENSOR_GROUPABLE 2  /* its G dimension is left out when the call is ungrouped (sscan B, C) */
#define CG_TENSOR_CONTIG 4     /* the innermost stride must be 1 */
#define CG_TENSOR_HALF 8       /* may be stored as the call's 16-bit dtype (CG_BF16 / CG_F16) */
#define CG_TENSOR_INDEX 16     /* integer index tensor (CG_I32 / CG_I64): cu_seqlens */
#define CG_TENSOR_PER_SEQ 32   /* a state: its first extent is the number of sequences with cu_seqlens */

/* The outputs and inputs of one op, and how they are laid out (cg_op_describe). */
#define CG_OP_MAX_SCALARS 8
typedef struct cg_op_info {
    size_t size;            /* sizeof(cg_op_info) of the caller's header, or 0 (see the growth rule) */
    cg_op op;
    const char *name;       /* "ssd_fwd" */
    const char *family;     /* "ssd", "sscan": the tuning key's op */
    int bwd;                /* 1 for a backward op */
    const char *args_type;  /* "cg_ssd_fwd_args" */
    size_t args_size;       /* sizeof of that struct in the library */
    int ntensors;           /* the float tensors are 0 .. ntensors-1, in the op table's order (the
                             * args struct's, inputs first); cu_seqlens, when has_varlen, is
                             * tensor ntensors */
    int nsyms;              /* the op's symbols, in cg_sym order */
    cg_sym syms[CG_SHAPE_MAX_SYMS];
    cg_sym seq;             /* the sequence symbol (T or L) */
    cg_sym divisible, divisor; /* divisible % divisor == 0 is required (H % G, D % G); NONE: no rule */
    int nkey;               /* the symbols of the tuning key (besides the sequence's bucket) */
    cg_sym key[CG_SHAPE_MAX_SYMS];
    int nscalars;           /* integer options of the args struct (cg_op_args_scalar) */
    const char *scalars[CG_OP_MAX_SCALARS]; /* their names: "delta_softplus" */
    int has_layout;         /* the args struct has a cg_layout (cg_op_args_layout) */
    int has_varlen;         /* the args struct has cu_seqlens (tensor ntensors) */
    int groupable;          /* the op has CG_TENSOR_GROUPABLE tensors (grouped or not: cg_shape.grouped) */
    int sym_from[CG_SHAPE_MAX_SYMS]; /* by cg_sym: the tensor whose extent gives the symbol's value in
                             * a call (the first required input that has it); -1 for symbols the
                             * op lacks. A call's other tensors are checked against these */
} cg_op_info;
/* Describe op into *info (the caller's; info->size set by the caller, or 0); its strings
 * are static (the library's). CG_EINVAL for an unknown op. ctx may be NULL (then no
 * message is kept). */
CG_API cg_status cg_op_describe(cg_context *ctx, cg_op op, cg_op_info *info);

/* One tensor of an op (cg_op_tensor_info). */
typedef struct cg_tensor_info {
    size_t size;            /* sizeof(cg_tensor_info) of the caller's header, or 0 (see the growth rule) */
    const char *name;       /* the member of the args struct: "log_alpha", "cu_seqlens" */
    const char *file;       /* `chunkgen run`'s .npy base name ("do" for dout; else the name) */
    int output;             /* 1: an output, 0: an input */
    int optional;           /* 1: may be absent (data NULL) */
    const char *requires;   /* an optional output allowed only with this input (dD: "D"); NULL */
    const char *grad_of;    /* a backward output: the input it is the gradient of (dq: "q"); NULL */
    int ndim;               /* logical rank: ext[0 .. ndim-1] are its symbols (G counted) */
    cg_sym ext[CG_MAX_DIMS];/* logical extents, token-major, grouped; CG_SYM_NONE past ndim */
    unsigned flags;         /* CG_TENSOR_* */
    double lo, hi;          /* inputs: the value range of generated test and tuning data */
    double tol_f32, tol_bf16, tol_f16; /* outputs: accuracy target, max |out - ref| / max |ref|,
                             * when stored in that dtype; 0 for inputs */
} cg_tensor_info;
/* Describe tensor i of op (0 <= i < ntensors, or ntensors for cu_seqlens when the op has
 * it) into *info (the caller's; its strings static). CG_EINVAL naming i for one out of
 * range. ctx may be NULL. */
CG_API cg_status cg_op_tensor_info(cg_context *ctx, cg_op op, int i, cg_tensor_info *info);

/* The symbols of tensor i's dimensions in the order a caller gives them (layout: SSD's
 * head-major swaps T and the heads; grouped 0: the selective scan's B and C without G;
 * ignored by ops without the notion) into syms; returns the rank, 0 for a bad op or i
 * (cu_seqlens: 1, with CG_SYM_NONE: its extent is the number of sequences + 1). syms is
 * the caller's array. */
CG_API int cg_op_tensor_dims(cg_op op, int i, cg_layout layout, int grouped, cg_sym syms[CG_MAX_DIMS]);

/* The dtype rules of docs/dtypes.md for a call of op: dt[i] is the storage dtype of
 * tensor i (table order, cg_op_info.ntensors entries; -1 absent; the outputs' entries may
 * be -1). Writes want[i] for every tensor: the dtype it must have (a given input: its
 * own; an output: the dtype to make it in; an absent input: CG_F32 or CG_F64, what it
 * would have to be). A mix the library refuses
 * is CG_EINVAL, cg_errmsg naming the tensor and the dtype expected. The one
 * implementation: the calls' validation applies the same. dt is read, want written:
 * both the caller's. */
CG_API cg_status cg_op_dtypes(cg_context *ctx, cg_op op, const int *dt, cg_dtype *want);

/* The cg_tensor of tensor i (as numbered by cg_op_tensor_info, cu_seqlens included) in
 * args, an args struct of op's type in this header's layout; NULL for a bad op or i.
 * The pointer is into args (owned by the caller). */
CG_API cg_tensor *cg_op_args_tensor(cg_op op, void *args, int i);
/* The int of scalar option k (cg_op_info.scalars[k], e.g. delta_softplus) in args; NULL
 * for a bad op or k. The pointer is into args (the caller's). */
CG_API int *cg_op_args_scalar(cg_op op, void *args, int k);
/* The cg_layout of args; NULL when op has none (has_layout 0). The pointer is into args
 * (the caller's). */
CG_API cg_layout *cg_op_args_layout(cg_op op, void *args);

/* ------------------------------------------------------------------- shapes
 * One value for everything a call's shape decides: which kernel, which tuned config,
 * which cached plan. Made from text (cg_shape_parse, the syntax of docs/shapes.md and
 * of every `chunkgen` command) or from a call's args (cg_shape_of); compared with
 * cg_shape_equal; written back with cg_shape_format; turned into each tensor's extents
 * with cg_shape_tensor. Values made by those calls are canonical: equal shapes have
 * equal members. Tensors are numbered as by cg_op_tensor_info. */
#define CG_SHAPE_TEXT_MAX 512 /* room for any canonical text, NUL included */
typedef struct cg_shape {
    size_t size;            /* sizeof(cg_shape) of the caller's header, or 0 (see the growth rule) */
    cg_op op;
    cg_layout layout;       /* ops with a layout (SSD); CG_LAYOUT_TOKEN_MAJOR for the others */
    int64_t dim[CG_SHAPE_MAX_SYMS]; /* extent of each symbol of the op, by cg_sym; 0 for the
                             * symbols the op lacks (and CG_SYM_NONE). Ungrouped sscan: G = 1 */
    cg_dtype dtype;         /* CG_F32, CG_F64, or the call's 16-bit storage dtype (CG_BF16, CG_F16) */
    uint64_t half;          /* bit i: tensor i is stored in dtype (16-bit calls; outputs follow their
                             * inputs as docs/dtypes.md says); 0 for F32 and F64 */
    uint64_t given;         /* bit i: optional tensor i is given (required tensors: no bit) */
    uint32_t scalars;       /* bit k: scalar option k is set (nonzero) */
    int grouped;            /* ops with groupable tensors: B/C carry the G dimension (1) or not (0) */
    int64_t nseq;           /* varlen: number of sequences packed along T (L) (cu_seqlens [nseq + 1]); 0: none */
    int64_t longest;        /* varlen: the longest sequence; 0 when not known (or not varlen) */
} cg_shape;

/* Parse text into *shape (shape->size set by the caller, or 0). Syntax (docs/shapes.md):
 *   OP:ITEM,ITEM,...  e.g. "ssd_fwd:B=2,T=512,G=2,H=8,dk=128,dv=128,dtype=bf16,layout=head,h0,hT"
 * ITEM: SYM=N (every symbol of the op; sscan's G only when B/C are grouped), dtype=f32|f64|
 * bf16|f16|bf16-NAME-NAME..., layout=token|head, varlen=N, longest=N, or the name of an
 * optional tensor given or of a scalar option set. On error CG_EINVAL and cg_errmsg names
 * the offending word and lists what was expected. text is only read; *shape is the
 * caller's (nothing in it points anywhere). */
CG_API cg_status cg_shape_parse(cg_context *ctx, const char *text, cg_shape *shape);
/* The canonical text of shape into buf (cap bytes; CG_SHAPE_TEXT_MAX is always enough): it
 * parses back to an equal shape. CG_EINVAL when shape is not a valid shape or cap is too
 * small. ctx may be NULL. buf is the caller's. */
CG_API cg_status cg_shape_format(cg_context *ctx, const cg_shape *shape, char *buf, size_t cap);
/* 1 when a and b are the same shape (every member above compared), else 0. The one
 * equality of shapes. Both are only read. */
CG_API int cg_shape_equal(const cg_shape *a, const cg_shape *b);
/* The shape of the call cg_run(ctx, op, args, ...) into *shape, args checked as
 * cg_validate checks them (outputs with NULL data are taken as wanted when required,
 * absent when optional). longest is read from host cu_seqlens offsets (0 for device ones).
 * args (and its tensors' memory, never read but host cu_seqlens) stay the caller's; so does
 * *shape. */
CG_API cg_status cg_shape_of(cg_context *ctx, cg_op op, const void *args, cg_shape *shape);
/* Tensor i of shape into *tensor: data NULL, its dtype, ndim and shape in the caller's
 * order (the layout's; ungrouped B/C without G; states per sequence when varlen), zero
 * strides. An absent optional tensor (and cu_seqlens when not varlen) gets ndim 0.
 * cu_seqlens gets CG_I32 [nseq + 1] (CG_I64 works as well). *tensor is the caller's; the
 * caller gives it data before a call. */
CG_API cg_status cg_shape_tensor(cg_context *ctx, const cg_shape *shape, int i, cg_tensor *tensor);

/* The floating-point operations of one call of shape, by the op's own model of its work
 * (the op table's; docs/bench.md), for GFLOP/s and fractions of a peak. Some ops' work
 * depends on a config parameter (SSD: the chunk): config (NULL or "": the model's
 * default) gives it as items KEY=N separated by commas or spaces ("chunk=64,threads=2";
 * other keys are ignored). *flops the count; used (NULL, or cap bytes) the parameter the
 * count took, "chunk=64", or "" for an op without one. CG_EINVAL naming the argument for
 * a shape that is not valid (cg_shape_format's check), a parameter that is not a
 * positive integer, a NULL flops or a used too small. ctx may be NULL. */
CG_API cg_status cg_op_flops(cg_context *ctx, const cg_shape *shape, const char *config, double *flops, char *used,
                             size_t cap);


/* ------------------------------------------------------------------- tuning
 * A tune enumerates a backend's parameter space for each shape (op, extents, dtype),
 * verifies every candidate against the float64 reference on a reduced problem, times it on
 * the full shape and stores the fastest under the shape's tuning key (docs/tuning.md).
 * Progress: the context's progress callback (a task per key: START, a STEP per candidate,
 * DONE with its result). An interrupted tune keeps what it measured; a rerun resumes. */
typedef struct cg_tune_options {
    size_t size;             /* sizeof(cg_tune_options) of the caller's header, or 0 (growth rule) */
    cg_backend backend;      /* CG_BACKEND_CPU, _CUDA, _EMULATE; _AUTO: cuda when a device is there, else cpu */
    int directions;          /* 0: each shape's own op; 1 forward, 2 backward, 3 both: the ops of its family */
    const char *family;      /* the built-in set (no shapes given): only this op family ("ssd", "sscan"); NULL all */
    double budget_s;         /* stop starting new work after this long (a key cut short is stored as
                              * truncated and resumed by the next tune); <= 0: none */
    int jobs;                /* compile workers for cuda/emulate; 0: every core */
    double min_time_s;       /* time each candidate at least this long; 0: the backend's default */
    int max_candidates;      /* only the first N configs of each space; 0: all */
    int force;               /* 1: retune keys that are tuned already */
    int64_t verify_T;        /* sequence length of the verification problem; 0: automatic */
    int shard, nshards;      /* nshards > 1: only the keys of shard `shard` (0-based; by a hash of the key's
                              * shape, so any count works); import the shards' stores together after */
} cg_tune_options;
#define CG_TUNE_OPTIONS_INIT CG__INIT(cg_tune_options)
typedef struct cg_tune_summary {
    size_t size;             /* sizeof(cg_tune_summary) of the caller's header, or 0 (growth rule) */
    cg_backend backend;      /* the backend tuned (CG_BACKEND_AUTO resolved) */
    int keys;                /* keys of the run (shape x direction) */
    int tuned, resumed;      /* keys tuned now, of which resumed from an interrupted tune */
    int cached;              /* tuned already (or finished by another process meanwhile) */
    int unsupported;         /* keys the backend cannot run (no kernel, dtype, varlen) */
    int failed;              /* keys whose tune failed (the first failure is the call's status) */
    int skipped_budget;      /* keys the budget left for a rerun */
    int other_shards;        /* keys of other shards */
    int candidates, rejected; /* configs measured, and rejected (compile, resources, launch, wrong, timeout) */
    double seconds;
} cg_tune_summary;
#define CG_TUNE_SUMMARY_INIT CG__INIT(cg_tune_summary)
/* Tune shapes[0 .. nshapes) on opts->backend into ctx's store (nshapes 0: the backend's
 * built-in set); opts may be NULL. A shape's layout, optional tensors and scalar options
 * do not matter (the tuner's problems have every tensor); a varlen shape (nseq > 0) needs
 * B = 1 and its longest sequence. CG_OK when every key was tuned, skipped or cached;
 * else the first failure's status and message (the others went to the progress callback).
 * shapes and opts stay the caller's (not kept); *summary (may be NULL) is filled. */
CG_API cg_status cg_tune(cg_context *ctx, const cg_shape *shapes, int nshapes, const cg_tune_options *opts,
                         cg_tune_summary *summary);

/* The config a call of this shape on backend would take from the store (no tune on a miss). */
typedef struct cg_tuned_config {
    size_t size;             /* sizeof(cg_tuned_config) of the caller's header, or 0 (growth rule) */
    char config[256];        /* "k=v,..."; "" when the backend's default config runs */
    const char *source;      /* "pinned-env" ($CHUNKGEN_CONFIG), "exact", "nearest-bucket" or "default"; static */
    char key[200];           /* the tuning key in one line, e.g. "cpu ssd fwd dk8 dv8 G1 H2 T<=64" */
    char path[4400];         /* the file of the exact key's entry (whether it exists or not) */
    char device[128];        /* the key's device: the GPU's name, or the CPU model and ISA ("... [avx2]") */
    int threads;             /* cpu, emulate: the key's thread count (ctx's threads); 0 for cuda */
    int cc;                  /* cuda, emulate: the key's compute capability x10 (80: sm_80); 0 on the CPU */
} cg_tuned_config;
/* Look up shape's config on backend (CG_BACKEND_CPU, _CUDA, _EMULATE) into *out. CG_ENODEV
 * (message) when the backend has no device here: nothing tuned applies then. */
CG_API cg_status cg_config_lookup(cg_context *ctx, cg_backend backend, const cg_shape *shape, cg_tuned_config *out);
/* The part of a scoped config text (the syntax of $CHUNKGEN_CONFIG and the CLI's --config:
 * "k=v,..." for every op, or "ssd_fwd:k=v;sscan:k=v" with parts scoped to an op or a
 * family) that applies to op, into out[0 .. cap): CG_OK when one applies (the first that
 * does), CG_ENOTFOUND when none does (out ""), CG_EINVAL for an unknown op or scope or a
 * part longer than cap (the reason in err[0 .. errcap)). Every part's scope is checked. */
CG_API cg_status cg_config_scope(const char *text, cg_op op, char *out, size_t cap, char *err, size_t errcap);
/* The backend's built-in shape set (the seeds' shapes; a smaller set on the CPU), forward
 * ops (tune them with directions 3 for both): into shapes[0 .. cap) (the stride is
 * shapes[0].size, 0: this header's sizeof), *n the set's size (which may exceed cap). */
CG_API cg_status cg_tune_builtin_shapes(cg_context *ctx, cg_backend backend, cg_shape *shapes, int cap, int *n);
/* The backend a tune with backend runs on, into *out: CG_BACKEND_AUTO resolved (cuda when
 * a device is here, else cpu); CG_EINVAL for one that cannot be tuned (ref). */
CG_API cg_status cg_tune_backend(cg_context *ctx, cg_backend backend, cg_backend *out);
/* ------------------------------------------- kernels: plans, configs, ahead of time
 * A kernel is asked about for a shape (cg_shape: the op, its extents, dtypes, optional
 * tensors and options) on a target arch: 0 is the emulator's device (sm_80 features,
 * generous limits), else sm_<arch> with that architecture's limits (75, 80, 86, 87, 89,
 * 90, 100, 103, 120) and a typical part's SM count. kernel is a name of cg_kernel_list
 * that serves shape->op (ssd_fwd for ssd_fwd; the CPU space ssd_cpu for ssd_fwd and
 * ssd_bwd), or NULL for the generated kernel of shape->op. A CPU space ignores arch: it
 * is resolved for ctx's threads and the CPU path's ISA variant. config: "k=v,k=v" pins
 * (NULL or "": none); keys not pinned come from the default for the shape. Configs are
 * handed out as that text. shape and config are caller-owned and only read. */

#define CG_KERNEL_MAX_LAUNCH 4
/* One launch of a plan. */
typedef struct cg_kernel_launch {
    char entry[64];              /* the extern "C" __global__ function */
    unsigned grid[3], block[3];
    int64_t smem;                /* dynamic shared memory, bytes */
} cg_kernel_launch;

/* A generated kernel instantiated for one shape, config and target (cg_kernel_plan_make). */
typedef struct cg_kernel_plan {
    size_t size;                 /* sizeof(cg_kernel_plan) of the caller's header, or 0 (see the growth rule) */
    char kernel[32];             /* "ssd_fwd" */
    char name[192];              /* e.g. ssd_fwd_dk48_dv40_c64_w4_ieee: names its kernel cache entry */
    char config[512];            /* the config, every key of the space */
    char *source;                /* the rendered, self-contained CUDA C++; owned by the plan (cg_kernel_plan_free) */
    int64_t workspace_bytes;     /* scratch the launches take */
    int nlaunch;
    cg_kernel_launch launch[CG_KERNEL_MAX_LAUNCH]; /* run in this order on one stream */
} cg_kernel_plan;
#define CG_KERNEL_PLAN_INIT CG__INIT(cg_kernel_plan)

/* Plan kernel for shape on arch with config into *out (caller-owned, .size set or 0):
 * the launches and the source. CG_EINVAL for a key or value outside the kernel's space,
 * CG_EUNSUPPORTED with the constraint's reason when the config does not fit the shape
 * or arch, and for a CPU space (nothing is rendered: see cg_kernel_config). Release
 * out->source with cg_kernel_plan_free. */
CG_API cg_status cg_kernel_plan_make(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch,
                                     const char *config, cg_kernel_plan *out);
/* Release what a plan owns (its source; the struct is the caller's). NULL is a no-op. */
CG_API void cg_kernel_plan_free(cg_kernel_plan *plan);

/* The config a call of shape would run with config's pins: the pins completed from the
 * default and checked as cg_kernel_plan_make checks them. *out is the caller's text
 * (cg_free). Works for the CPU spaces too. */
CG_API cg_status cg_kernel_config(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch,
                                  const char *config, char **out);

/* Every config the kernel's constraints accept for shape on arch: *configs the caller's
 * text (cg_free), one config per line, *n lines. */
CG_API cg_status cg_kernel_configs(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch,
                                   char **configs, int *n);

/* What cg_kernel_build did. */
typedef struct cg_kernel_build_info {
    size_t size;                 /* sizeof(cg_kernel_build_info) of the caller's header, or 0 (see the growth rule) */
    char name[192];              /* the kernel's name, which names its cache entry */
    char config[512];
    int arch;
    int source_lines;
    int cached;                  /* 1: the cache held it, nothing was compiled */
    double render_ms;            /* planning and rendering the source */
    double lookup_ms;            /* looking in the cache */
    double compile_ms;           /* NVRTC, wall time (0 when cached) */
    double compile_cpu_ms;       /* NVRTC, the calling thread's CPU time */
    double compile_process_cpu_ms; /* NVRTC, the process's CPU time (its split-compile threads too) */
    char *log;                   /* the compile log (ptxas resource usage), also on CG_ECOMPILE, or the
                                  * cached entry's; the caller's (cg_free); NULL when none */
} cg_kernel_build_info;
#define CG_KERNEL_BUILD_INFO_INIT CG__INIT(cg_kernel_build_info)

/* Compile kernel for shape with config to a CUBIN for sm_<arch> (NVRTC needed, no GPU)
 * into ctx's kernel cache, keyed exactly as the cuda backend looks it up, so that a
 * process on such a GPU loads it and compiles nothing. An entry the cache holds is kept
 * (cached = 1) unless force. nvrtc_threads: NVRTC's threads for this module (0: the
 * online cores; at least 2). *out caller-owned (.size set or 0), filled also on failure
 * as far as it got. CG_ENODEV without NVRTC; CG_ECOMPILE with the log; CG_EIO when the
 * cache cannot be written. */
CG_API cg_status cg_kernel_build(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch,
                                 const char *config, int force, int nvrtc_threads, cg_kernel_build_info *out);

#ifdef __cplusplus
}
/* C++: the CG_..._INIT value (every member zero, .size set), without
 * -Wmissing-field-initializers warnings. */
template <class T> inline T cg__init_cxx() {
    T t = T();
    t.size = sizeof(T);
    return t;
}
#endif
#endif /* CHUNKGEN_H */
