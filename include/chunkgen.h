/*
 * chunkgen.h -- the one public header of chunkgen (the header to include: it includes
 * chunkgen_kernels.h and chunkgen_tune.h, the kernel/device and the tuning/store calls,
 * at its end).
 *
 * chunkgen computes two chunked linear recurrences, forward and backward:
 *   - SSD (Mamba-2 style gated linear attention, grouped q/k, scalar decay per head)
 *   - selective scan (Mamba-1 S6)
 * on a CPU path (any shape), a float64 reference, and generated CUDA kernels; and their
 * decode steps over a cache of states (cg_ssd_step, cg_sscan_step, cg_gdr_step: serving).
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
#define CG__INIT(type)                                                                                                 \
    { .size = sizeof(type) }
#endif

/* MAJOR*10000 + MINOR*100 + PATCH, e.g. 100 for 0.1.0; compare with cg_version_number(). */
#define CG_VERSION_NUMBER (CG_VERSION_MAJOR * 10000 + CG_VERSION_MINOR * 100 + CG_VERSION_PATCH)

/* (name, value, description): the one table of status codes. */
#define CG_STATUS_MAP(X)                                                                                               \
    X(OK, 0, "ok")                                                                                                     \
    X(EINVAL, -1, "invalid argument")                                                                                  \
    X(ENOMEM, -2, "out of memory")                                                                                     \
    X(EUNSUPPORTED, -3, "not supported by the chosen backend")                                                         \
    X(ENODEV, -4, "no CUDA driver or device")                                                                          \
    X(ECOMPILE, -5, "kernel compilation failed")                                                                       \
    X(ELAUNCH, -6, "kernel launch or execution failed")                                                                \
    X(EIO, -7, "input/output error")                                                                                   \
    X(ELUA, -8, "error in a Lua script")                                                                               \
    X(ENOTFOUND, -9, "not found")                                                                                      \
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
    CG_I32 = 4,  /* int32 index tensor: cu_seqlens (docs/varlen.md), a decode step's slot indices */
    CG_I64 = 5   /* int64 index tensor: likewise */
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
    CG_BACKEND_CPU = 1,     /* the generic multithreaded CPU path */
    CG_BACKEND_CUDA = 2,    /* generated CUDA kernels (needs a driver and a GPU) */
    CG_BACKEND_EMULATE = 3, /* generated CUDA kernels run on the CPU by the SIMT emulator */
    CG_BACKEND_REF = 4      /* float64 sequential scan, the ground truth; slow */
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
    void *data; /* NULL: absent (allowed for optional tensors only) */
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
typedef enum cg_log_level { CG_LOG_ERROR = 0, CG_LOG_WARN = 1, CG_LOG_INFO = 2 } cg_log_level;
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
    size_t size; /* sizeof(cg_exec) of the caller's header, or 0 (see the growth rule) */
    cg_backend backend;
    const char *config; /* NULL: tuned or default config; else pinned, e.g. "chunk=64,threads=2" */
    void *stream;       /* CUstream for the cuda backend; NULL: the default stream */
    void *workspace;    /* optional caller-owned scratch (device memory for cuda) */
    size_t workspace_bytes;
    int verbose; /* send the dispatch line to the log callback (CG_LOG_INFO) */
} cg_exec;
#define CG_EXEC_INIT CG__INIT(cg_exec)

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
    cg_tensor dq, dk, dv, dlog_alpha, dh0;       /* outputs; dh0 optional. dq, dk sum over the group's heads */
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
    cg_tensor y, hT; /* hT optional */
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

/* ------------------------------------------------------- gated delta rule
 * fla's gated delta rule (chunk_gated_delta_rule; docs/gdr.md). Per value head h, with
 * q/k head g = h / (H / G) and a float32 state S of dk x dv (h0 or 0 before token 0):
 *   S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
 *   o_t = S_t^T (scale q_t).
 * With use_qk_l2norm, q_t and k_t are first divided by sqrt(sum x^2 + 1e-6) over dk (the
 * gradient flows through it). scale 0 means dk^-1/2; otherwise finite and > 0.
 * fla's names: G is fla's H (q/k heads), H is fla's HV (value heads), dk = K, dv = V.
 * Shapes, in the order of `layout` (token-major shown; head-major swaps T and heads):
 *   q, k [B, T, G, dk]; v, o, dout [B, T, H, dv]; g, beta [B, T, H];
 *   h0, hT, dhT, dh0 [B, H, dk, dv] (float32; same in both layouts).
 * q, k, v, beta (and o, dout and the gradients of q, k, v, beta) may be one 16-bit dtype;
 * g and the states stay float32. The innermost dimension must have stride 1. */
typedef struct cg_gdr_fwd_args {
    size_t size; /* sizeof(cg_gdr_fwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_layout layout;
    cg_tensor q, k, v, g, beta, h0; /* inputs; h0 optional */
    double scale;                   /* 0: dk^-1/2 */
    int use_qk_l2norm;              /* 1: L2-normalise q and k over dk inside the op */
    cg_tensor o, hT;                /* outputs; hT optional */
    /* optional: packed variable-length batch (docs/varlen.md). CG_I32 or CG_I64 [N + 1],
     * non-decreasing, first 0, last = T; needs B = 1. With it the states (h0, hT) are per
     * sequence: [N, H, dk, dv]. */
    cg_tensor cu_seqlens;
} cg_gdr_fwd_args;
#define CG_GDR_FWD_ARGS_INIT CG__INIT(cg_gdr_fwd_args)

typedef struct cg_gdr_bwd_args {
    size_t size; /* sizeof(cg_gdr_bwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_layout layout;
    cg_tensor q, k, v, g, beta, h0, dout, dhT; /* inputs; h0, dhT optional */
    double scale;                              /* as the forward's */
    int use_qk_l2norm;
    /* outputs; dh0 optional. dq, dk sum over the group's value heads */
    cg_tensor dq, dk, dv, dg, dbeta, dh0;
    /* optional: packed variable-length batch, as the forward's (h0, dhT, dh0 per sequence). */
    cg_tensor cu_seqlens;
} cg_gdr_bwd_args;
#define CG_GDR_BWD_ARGS_INIT CG__INIT(cg_gdr_bwd_args)

/* Gated-delta-rule forward. */
CG_API cg_status cg_gdr_fwd(cg_context *ctx, const cg_gdr_fwd_args *args, const cg_exec *exec);
/* Gated-delta-rule backward (recomputes the states; stores nothing per token). */
CG_API cg_status cg_gdr_bwd(cg_context *ctx, const cg_gdr_bwd_args *args, const cg_exec *exec);

/* ------------------------------------------------------------ decode steps
 * Serving: T tokens (usually 1) per batch entry of the recurrence above, from and into a
 * cache of states that the call updates in place. Entry b reads the state of slot
 * src = state_indices[b] (CG_I32 or CG_I64 [B]); src = -1 marks a padding entry: its
 * outputs are zero and no state is read or written. Without dst_indices the state after
 * the entry's last token is written back to slot src; with dst_indices ([B, T]) the state
 * after token t is written to slot dst_indices[b, t] when that is not -1, and slot src is
 * left alone unless it is one of those (prefix caching, speculative decoding's one state
 * per accepted prefix). Refused before anything is written (CG_EINVAL, the message naming
 * the argument): an index < -1 or >= S, two writes to one slot, a slot written by one
 * entry and read by another (the result would depend on the order), a cache of the wrong
 * shape or dtype. The cache may be CG_F32 or the call's 16-bit dtype (math in float32;
 * rounded once per token written). Host index tensors are read by the checks; T steps
 * equal the chunked forward over the same T tokens from h0 = the slot's state.
 *
 * SSD step (per (b, h), the state S [dk, dv] of cache[src, h]):
 *   S = exp(log_alpha_t) S + k_t^T v_t,   o_t = q_t S
 *   q, k [B, T, G, dk]; v, o [B, T, H, dv]; log_alpha [B, T, H]; cache [S, H, dk, dv]. */
typedef struct cg_ssd_step_args {
    size_t size;                  /* sizeof(cg_ssd_step_args) of the caller's header, or 0 (see the growth rule) */
    cg_tensor q, k, v, log_alpha; /* inputs, token-major */
    cg_tensor cache;              /* [S, H, dk, dv], read and written in place */
    cg_tensor state_indices;      /* [B] CG_I32 / CG_I64: the slot entry b reads; -1 padding */
    cg_tensor dst_indices;        /* optional [B, T]: the slot the state after token t goes to; -1 none */
    cg_tensor o;                  /* output */
} cg_ssd_step_args;
#define CG_SSD_STEP_ARGS_INIT CG__INIT(cg_ssd_step_args)

/* Selective-scan step (mamba's selective_state_update; per (b, d), the state h [N] of
 * cache[src, d]), as cg_sscan_fwd over the T tokens:
 *   x, delta, z, y [B, T, D] (T is the symbol L); A [D, N]; B, C [B, T, N] or [B, T, G, N];
 *   D, delta_bias [D]; cache [S, D, N]; state_indices [B]; dst_indices [B, T]. */
typedef struct cg_sscan_step_args {
    size_t size; /* sizeof(cg_sscan_step_args) of the caller's header, or 0 (see the growth rule) */
    cg_tensor x, delta, A, B, C, D, z, delta_bias; /* D, z, delta_bias optional */
    int delta_softplus;
    cg_tensor cache;         /* [S, D, N], read and written in place */
    cg_tensor state_indices; /* [B] CG_I32 / CG_I64; -1 padding */
    cg_tensor dst_indices;   /* optional [B, L] */
    cg_tensor y;             /* output */
} cg_sscan_step_args;
#define CG_SSCAN_STEP_ARGS_INIT CG__INIT(cg_sscan_step_args)

/* SSD decode step over a state cache (updated in place). */
CG_API cg_status cg_ssd_step(cg_context *ctx, const cg_ssd_step_args *args, const cg_exec *exec);
/* Selective-scan decode step over a state cache (updated in place). */
CG_API cg_status cg_sscan_step(cg_context *ctx, const cg_sscan_step_args *args, const cg_exec *exec);

/* Gated-delta-rule step (fla's fused_recurrent_gated_delta_rule over a cache, vLLM's GDN
 * decode; per (b, value head h), q/k head h / (H / G), the state S [dk, dv] of
 * cache[src, h]), as cg_gdr_fwd over the T tokens (scale, use_qk_l2norm as there):
 *   S = exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S += k_t u^T;  o_t = S^T (scale q_t)
 *   q, k [B, T, G, dk]; v, o [B, T, H, dv]; g, beta [B, T, H]; cache [S, H, dk, dv]. */
typedef struct cg_gdr_step_args {
    size_t size;                /* sizeof(cg_gdr_step_args) of the caller's header, or 0 (see the growth rule) */
    cg_tensor q, k, v, g, beta; /* inputs, token-major */
    double scale;               /* 0: dk^-1/2 */
    int use_qk_l2norm;          /* 1: L2-normalise q and k over dk */
    cg_tensor cache;            /* [S, H, dk, dv], read and written in place */
    cg_tensor state_indices;    /* [B] CG_I32 / CG_I64: the slot entry b reads; -1 padding */
    cg_tensor dst_indices;      /* optional [B, T]: the slot the state after token t goes to; -1 none */
    cg_tensor o;                /* output */
} cg_gdr_step_args;
#define CG_GDR_STEP_ARGS_INIT CG__INIT(cg_gdr_step_args)
/* Gated-delta-rule decode step over a state cache (updated in place). */
CG_API cg_status cg_gdr_step(cg_context *ctx, const cg_gdr_step_args *args, const cg_exec *exec);

/* ------------------------------------------------- diagonal linear recurrence (LRU)
 * The diagonal linear recurrence of RG-LRU / Griffin (docs/lru.md). Per (b, channel d),
 * with a float32 state h (h0 or 0 before token 0):
 *   h_t = a_t h_{t-1} + b_t x_t,   y_t = h_t.
 * a is usually in (0, 1]; any real value is accepted. The symbols are the selective
 * scan's: B, L (tokens), D (channels). Shapes, in the order of `layout` (token-major
 * shown; head-major, CG_LAYOUT_HEAD_MAJOR, gives [B, D, L]):
 *   a, b, x, y, dy and their gradients [B, L, D]; h0, hT, dhT, dh0 [B, D] (float32).
 * a, b, x, y, dy (and da, db, dx) may be one 16-bit dtype (math in float32); CG_F64 for
 * every tensor runs the float64 reference. Any strides. */
typedef struct cg_lru_fwd_args {
    size_t size; /* sizeof(cg_lru_fwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_layout layout;
    cg_tensor a, b, x, h0; /* inputs; h0 optional */
    cg_tensor y, hT;       /* outputs; hT optional */
    /* optional: packed variable-length batch (docs/varlen.md). CG_I32 or CG_I64 [N + 1],
     * non-decreasing, first 0, last = L; needs B = 1. With it the states are per sequence:
     * [N, D]. */
    cg_tensor cu_seqlens;
} cg_lru_fwd_args;
#define CG_LRU_FWD_ARGS_INIT CG__INIT(cg_lru_fwd_args)

typedef struct cg_lru_bwd_args {
    size_t size; /* sizeof(cg_lru_bwd_args) of the caller's header, or 0 (see the growth rule) */
    cg_layout layout;
    cg_tensor a, b, x, h0, dy, dhT; /* inputs; h0, dhT optional */
    cg_tensor da, db, dx, dh0;      /* outputs; dh0 optional */
    cg_tensor cu_seqlens;           /* optional, as the forward's */
} cg_lru_bwd_args;
#define CG_LRU_BWD_ARGS_INIT CG__INIT(cg_lru_bwd_args)

/* LRU forward. */
CG_API cg_status cg_lru_fwd(cg_context *ctx, const cg_lru_fwd_args *args, const cg_exec *exec);
/* LRU backward: g_t = dy_t + a_{t+1} g_{t+1} (g after the last token: dhT or 0);
 * da_t = g_t h_{t-1}, db_t = g_t x_t, dx_t = g_t b_t, dh0 = a_0 g_0 (recomputes h). */
CG_API cg_status cg_lru_bwd(cg_context *ctx, const cg_lru_bwd_args *args, const cg_exec *exec);

/* ------------------------------------------------ ahead of time: prepare, workspace
 * The ops by number, for the calls that take any op's args struct. */
typedef enum cg_op {
    CG_OP_SSD_FWD = 0,   /* args: cg_ssd_fwd_args */
    CG_OP_SSD_BWD = 1,   /* args: cg_ssd_bwd_args */
    CG_OP_SSCAN_FWD = 2, /* args: cg_sscan_fwd_args */
    CG_OP_SSCAN_BWD = 3, /* args: cg_sscan_bwd_args */
    CG_OP_GDR_FWD = 4,   /* args: cg_gdr_fwd_args */
    CG_OP_GDR_BWD = 5,   /* args: cg_gdr_bwd_args */
    /* decode steps (issue #36) */
    CG_OP_SSD_STEP = 6,   /* args: cg_ssd_step_args */
    CG_OP_SSCAN_STEP = 7, /* args: cg_sscan_step_args */
    CG_OP_GDR_STEP = 8,   /* args: cg_gdr_step_args */
    /* diagonal linear recurrence (issue #38 item 7) */
    CG_OP_LRU_FWD = 9, /* args: cg_lru_fwd_args */
    CG_OP_LRU_BWD = 10 /* args: cg_lru_bwd_args */
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
    size_t size; /* sizeof(cg_progress) of the library that sends it */
    cg_progress_kind kind;
    cg_log_level level;  /* CG_LOG_INFO, or WARN (rejected, skipped, bad) / ERROR (failed) */
    const char *task;    /* what the event is about, e.g. "cpu ssd fwd T=2048"; "" when none */
    const char *subject; /* a file, an entry or a shape's name; "" when none */
    const char *text;    /* the message or the result; "" when none */
    int index, count;    /* the task's place in its run, 1-based, and the run's tasks; 0 when none */
    int64_t done, total; /* CG_PROGRESS_START/STEP: steps done and in all */
} cg_progress;
typedef void (*cg_progress_fn)(const cg_progress *event, void *user);
/* Send ctx's progress events to fn(event, user); NULL (the default) drops them. The
 * caller owns user. */
CG_API cg_status cg_context_set_progress(cg_context *ctx, cg_progress_fn fn, void *user);
/* The resolved cache directory of ctx (cg_context_set_cache_dir, else the environment,
 * see the top of this file); owned by the library, valid until the next call on this thread. */
CG_API const char *cg_context_cache_dir(cg_context *ctx);

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
/* Name of op ("ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd", "ssd_step", "sscan_step", "gdr_step"), static; NULL for
 * an unknown op. */
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
    CG_SYM_S = 10,   /* decode steps: the slots of a state cache ("S") */
    CG_SYM_COUNT     /* this header's number of symbols (grows, never above CG_SHAPE_MAX_SYMS) */
} cg_sym;
/* Name of a symbol ("B", "T", "G", "H", "dk", "dv", "L", "D", "N"), static; "" for
 * CG_SYM_NONE or an unknown value. */
CG_API const char *cg_sym_name(cg_sym sym);
/* The symbol named name (case-sensitive: "dk", "D") into *sym (the caller's); CG_EINVAL
 * for an unknown name. */
CG_API cg_status cg_sym_parse(const char *name, cg_sym *sym);

/* Flags of a tensor (cg_tensor_info.flags). */
#define CG_TENSOR_LAYOUT 1    /* SSD per-token tensor: head-major layout swaps logical dims 1 and 2 */
#define CG_TENSOR_GROUPABLE 2 /* its G dimension is left out when the call is ungrouped (sscan B, C) */
#define CG_TENSOR_CONTIG 4    /* the innermost stride must be 1 */
#define CG_TENSOR_HALF 8      /* may be stored as the call's 16-bit dtype (CG_BF16 / CG_F16) */
#define CG_TENSOR_INDEX 16    /* integer index tensor (CG_I32 / CG_I64): cu_seqlens, a decode step's slot indices */
#define CG_TENSOR_PER_SEQ 32  /* a state: its first extent is the number of sequences with cu_seqlens */
#define CG_TENSOR_INPLACE 64  /* an input the call also writes, in place: a decode step's state cache */

/* The outputs and inputs of one op, and how they are laid out (cg_op_describe). */
#define CG_OP_MAX_SCALARS 8
typedef struct cg_op_info {
    size_t size; /* sizeof(cg_op_info) of the caller's header, or 0 (see the growth rule) */
    cg_op op;
    const char *name;      /* "ssd_fwd" */
    const char *family;    /* "ssd", "sscan": the tuning key's op */
    int bwd;               /* 1 for a backward op */
    const char *args_type; /* "cg_ssd_fwd_args" */
    size_t args_size;      /* sizeof of that struct in the library */
    int ntensors;          /* the float tensors are 0 .. ntensors-1, in the op table's order (the
                             * args struct's, inputs first); cu_seqlens, when has_varlen, is
                             * tensor ntensors */
    int nsyms;             /* the op's symbols, in cg_sym order */
    cg_sym syms[CG_SHAPE_MAX_SYMS];
    cg_sym seq;                /* the sequence symbol (T or L) */
    cg_sym divisible, divisor; /* divisible % divisor == 0 is required (H % G, D % G); NONE: no rule */
    int nkey;                  /* the symbols of the tuning key (besides the sequence's bucket) */
    cg_sym key[CG_SHAPE_MAX_SYMS];
    int nscalars;                           /* integer options of the args struct (cg_op_args_scalar) */
    const char *scalars[CG_OP_MAX_SCALARS]; /* their names: "delta_softplus" */
    int has_layout;                         /* the args struct has a cg_layout (cg_op_args_layout) */
    int has_varlen;                         /* the args struct has cu_seqlens (tensor ntensors) */
    int groupable;                   /* the op has CG_TENSOR_GROUPABLE tensors (grouped or not: cg_shape.grouped) */
    int sym_from[CG_SHAPE_MAX_SYMS]; /* by cg_sym: the tensor whose extent gives the symbol's value in
                             * a call (the first required input that has it); -1 for symbols the
                             * op lacks. A call's other tensors are checked against these */
    /* appended (growth rule): the real (double) arguments of the args struct
     * (cg_op_args_real), e.g. gdr's "scale"; no part of a shape or a tuning key */
    int nreals;
    const char *reals[CG_OP_MAX_SCALARS];
} cg_op_info;
/* Describe op into *info (the caller's; info->size set by the caller, or 0); its strings
 * are static (the library's). CG_EINVAL for an unknown op. ctx may be NULL (then no
 * message is kept). */
CG_API cg_status cg_op_describe(cg_context *ctx, cg_op op, cg_op_info *info);

/* One tensor of an op (cg_op_tensor_info). */
typedef struct cg_tensor_info {
    size_t size;                       /* sizeof(cg_tensor_info) of the caller's header, or 0 (see the growth rule) */
    const char *name;                  /* the member of the args struct: "log_alpha", "cu_seqlens" */
    const char *file;                  /* `chunkgen run`'s .npy base name ("do" for dout; else the name) */
    int output;                        /* 1: an output, 0: an input */
    int optional;                      /* 1: may be absent (data NULL) */
    const char *requires;              /* an optional output allowed only with this input (dD: "D"); NULL */
    const char *grad_of;               /* a backward output: the input it is the gradient of (dq: "q"); NULL */
    int ndim;                          /* logical rank: ext[0 .. ndim-1] are its symbols (G counted) */
    cg_sym ext[CG_MAX_DIMS];           /* logical extents, token-major, grouped; CG_SYM_NONE past ndim */
    unsigned flags;                    /* CG_TENSOR_* */
    double lo, hi;                     /* inputs: the value range of generated test and tuning data */
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
/* The double of real argument k (cg_op_info.reals[k], e.g. scale) in args; NULL for a bad
 * op or k. The pointer is into args (the caller's). */
CG_API double *cg_op_args_real(cg_op op, void *args, int k);
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
    size_t size; /* sizeof(cg_shape) of the caller's header, or 0 (see the growth rule) */
    cg_op op;
    cg_layout layout;               /* ops with a layout (SSD); CG_LAYOUT_TOKEN_MAJOR for the others */
    int64_t dim[CG_SHAPE_MAX_SYMS]; /* extent of each symbol of the op, by cg_sym; 0 for the
                             * symbols the op lacks (and CG_SYM_NONE). Ungrouped sscan: G = 1 */
    cg_dtype dtype;                 /* CG_F32, CG_F64, or the call's 16-bit storage dtype (CG_BF16, CG_F16) */
    uint64_t half;                  /* bit i: tensor i is stored in dtype (16-bit calls; outputs follow their
                             * inputs as docs/dtypes.md says); 0 for F32 and F64 */
    uint64_t given;                 /* bit i: optional tensor i is given (required tensors: no bit) */
    uint32_t scalars;               /* bit k: scalar option k is set (nonzero) */
    int grouped;                    /* ops with groupable tensors: B/C carry the G dimension (1) or not (0) */
    int64_t nseq;    /* varlen: number of sequences packed along T (L) (cu_seqlens [nseq + 1]); 0: none */
    int64_t longest; /* varlen: the longest sequence; 0 when not known (or not varlen) */
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

/* The rest of the public API, by concern (each needs everything above). */
#include "chunkgen_kernels.h"
#include "chunkgen_tune.h"

#endif /* CHUNKGEN_H */
