/*
 * chunkgen_kernels.h -- part of chunkgen's public API: the generated kernels, their plans and configs, the compiled-kernel cache, device memory and the machine (for tools: the CLI, benchmarks).
 * chunkgen.h includes this file (include that, not this); the conventions and the growth rule at
 * the top of chunkgen.h hold here too.
 */
#ifndef CHUNKGEN_KERNELS_H
#define CHUNKGEN_KERNELS_H

#ifndef CHUNKGEN_H
#error "include <chunkgen.h>, which includes chunkgen_kernels.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

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
    size_t size;         /* sizeof(cg_device_info) of the caller's header, or 0 (see the growth rule) */
    char cpu_model[128]; /* e.g. "AMD EPYC 7B13" */
    int cpu_cores;       /* online cores */
    char cpu_isa[16];    /* the CPU path's variant this process runs: "avx512", "avx2" or "baseline" */
    char cpu_isas[64];   /* every variant this build and CPU can run, best first: "avx2,baseline" */
    int gpu;             /* 1: the gpu_ fields describe a device; 0: none, gpu_why says why */
    char gpu_why[256];
    char gpu_name[128];
    int gpu_arch; /* 80, 86, 90, ... */
    int gpu_sm_count;
    int64_t gpu_smem_per_block; /* opt-in maximum of shared memory per block, bytes */
    int gpu_regs_per_block;
    int gpu_emulated; /* 1: the SIMT emulator's stand-in device (CG_BACKEND_EMULATE) */
    double gpu_clock_mhz, gpu_mem_clock_mhz, gpu_bus_bits, gpu_mem_gb; /* from the driver; 0 unknown */
    int driver_version;   /* CUDA driver, cuDriverGetVersion's 1000*major + 10*minor; 0: none */
    char driver_why[256]; /* no driver: why (what was tried) */
    int nvrtc_version;    /* NVRTC, 1000*major + 10*minor; 0: none, nvrtc_why says why */
    char nvrtc_why[256];
    char nvrtc_id[1024]; /* the NVRTC build as the kernel cache keys name it */
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
    size_t size;    /* sizeof(cg_kcache_entry) of the caller's header, or 0 (see the growth rule) */
    char file[256]; /* the entry's file name in the directory */
    int64_t bytes;  /* the file's size */
    int usable;     /* 1: intact and built by this chunkgen version; else why says why not */
    char why[256];
    char kind[16];  /* "cubin", "emulate", ... (from its key; "" when unusable) */
    int arch;       /* a cubin's target, e.g. 90; 0 otherwise */
    char name[192]; /* the kernel's name, e.g. ssd_fwd_dk48_dv40_c64_w4_ieee */
    int bundled;    /* 1: written by cg_kcache_import (from a bundle) */
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
    char entry[64]; /* the extern "C" __global__ function */
    unsigned grid[3], block[3];
    int64_t smem; /* dynamic shared memory, bytes */
} cg_kernel_launch;

/* A generated kernel instantiated for one shape, config and target (cg_kernel_plan_make). */
typedef struct cg_kernel_plan {
    size_t size;             /* sizeof(cg_kernel_plan) of the caller's header, or 0 (see the growth rule) */
    char kernel[32];         /* "ssd_fwd" */
    char name[192];          /* e.g. ssd_fwd_dk48_dv40_c64_w4_ieee: names its kernel cache entry */
    char config[512];        /* the config, every key of the space */
    char *source;            /* the rendered, self-contained CUDA C++; owned by the plan (cg_kernel_plan_free) */
    int64_t workspace_bytes; /* scratch the launches take */
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
CG_API cg_status cg_kernel_configs(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch, char **configs,
                                   int *n);

/* What cg_kernel_build did. */
typedef struct cg_kernel_build_info {
    size_t size;    /* sizeof(cg_kernel_build_info) of the caller's header, or 0 (see the growth rule) */
    char name[192]; /* the kernel's name, which names its cache entry */
    char config[512];
    int arch;
    int source_lines;
    int cached;                    /* 1: the cache held it, nothing was compiled */
    double render_ms;              /* planning and rendering the source */
    double lookup_ms;              /* looking in the cache */
    double compile_ms;             /* NVRTC, wall time (0 when cached) */
    double compile_cpu_ms;         /* NVRTC, the calling thread's CPU time */
    double compile_process_cpu_ms; /* NVRTC, the process's CPU time (its split-compile threads too) */
    char *log;                     /* the compile log (ptxas resource usage), also on CG_ECOMPILE, or the
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
#endif
#endif /* CHUNKGEN_KERNELS_H */
