/* internal.h -- private interface shared by the runtime and its backends. */
#ifndef CG_INTERNAL_H
#define CG_INTERNAL_H

#include "chunkgen.h"
#include "half.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Programmer errors inside the library abort through this one macro (the message goes to
 * the log callback first). */
_Noreturn void cg__assert_fail(const char *file, int line, const char *expr);
#define CG_ASSERT(x)                                                                                                   \
    do {                                                                                                               \
        if (!(x)) {                                                                                                    \
            cg__assert_fail(__FILE__, __LINE__, #x);                                                                   \
        }                                                                                                              \
    } while (0)

#if defined(__GNUC__)
#define CG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CG_PRINTF(a, b)
#endif

/* ------------------------------------------------------------ thread pool */
typedef struct cg_pool cg_pool;
/* fn(arg, i, tid) for i in [0, n), tid in [0, threads). Deterministic results are the
 * caller's job: each i must write disjoint memory. threads <= 0: the pool's size. */
typedef void (*cg_task_fn)(void *arg, int64_t i, int tid);
cg_pool *cg__pool_create(int threads);
void cg__pool_free(cg_pool *pool);
int cg__pool_size(const cg_pool *pool);
void cg__pool_run(cg_pool *pool, int threads, int64_t n, cg_task_fn fn, void *arg);
/* Whether pool was made before a fork() of this process (its workers are not here; it
 * must not be run): cg__ctx_pool replaces such a pool, cg__pool_free only frees its memory. */
int cg__pool_stale(const cg_pool *pool);
int cg__online_cores(void);

/* ---------------------------------------------------------------- context */
/* The parts of the library that keep per-context state (freed in the reverse order). */
typedef enum cg_part_id {
    CG_PART_CPU = 0, /* the CPU path's kept scratch (runtime/cpu/ssd_cpu.c) */
    CG_PART_GEN,     /* the generator's Lua state (runtime/lua_gen.c) */
    CG_PART_CUDA,    /* NVRTC/driver handles, loaded modules (runtime/cuda/) */
    CG_PART_EMU,     /* SIMT emulator modules (runtime/emu/) */
    CG_PART_PLANS,   /* the launcher's (key -> plan, module) table (runtime/launch.c) */
    CG_PART_COUNT
} cg_part_id;
typedef struct cg_ctx_part {
    void *p;                              /* the part's state; NULL until it makes one */
    void (*free)(struct cg_context *ctx); /* frees p (and sets it NULL); set with p */
} cg_ctx_part;
#define CG_ERRMSG_CAP 2048
#define CG_DISPATCH_CAP 512

struct cg_context {
    char errmsg[CG_ERRMSG_CAP];
    char dispatch[CG_DISPATCH_CAP];
    int threads;      /* 0: all cores */
    int tune_on_miss; /* 1 on, 0 off, -1: $CHUNKGEN_TUNE_ON_MISS */
    char *cache_dir;  /* NULL: default */
    cg_pool *pool;    /* created lazily */
    /* Private state of the library's parts, each owned (created lazily, read and freed)
     * by its part alone: cg_context_free calls each part's own free function. */
    cg_ctx_part part[CG_PART_COUNT];
    const struct cg_config_source *cfgsrc; /* NULL: defaults only (see "config sources" below) */
    _Atomic uintptr_t owner;               /* thread inside a public call (cg__ctx_enter), 0: none */
    int owner_depth;                       /* nested public calls of the owner */
    cg_progress_fn progress;               /* cg_context_set_progress; NULL: events dropped */
    void *progress_user;
};
/* Owner check of every public call taking a context: enter marks ctx as used by this
 * thread (nested calls from the same thread are fine). A second thread gets CG_EINVAL,
 * and its cg_errmsg(ctx) -- a per-thread message, not written into ctx -- says the
 * context is in use by another thread. fn names the call in the message. */
cg_status cg__ctx_enter(cg_context *ctx, const char *fn);
void cg__ctx_leave(cg_context *ctx);
/* Most CPU threads a context may be set to (cg_context_set_threads). */
#define CG__MAX_THREADS 1024

/* Send a message to the log callback (log.c); the only way the library says anything. */
void cg__log(cg_log_level level, const char *fmt, ...) CG_PRINTF(2, 3);
void cg__logv(cg_log_level level, const char *fmt, va_list ap);
/* Send ev (its size set here) to ctx's progress callback, if any (log.c). NULL strings
 * become "". The library's only way to report progress. */
void cg__progress(cg_context *ctx, cg_progress ev);

/* Record a message on ctx and return status (printf-style). */
cg_status cg__err(cg_context *ctx, cg_status status, const char *fmt, ...) CG_PRINTF(3, 4);
void cg__set_dispatch(cg_context *ctx, const char *fmt, ...) CG_PRINTF(2, 3);
/* Backends append what they resolved (kernel name, effective params) to the dispatch line. */
void cg__dispatch_detail(cg_context *ctx, const char *fmt, ...) CG_PRINTF(2, 3);
/* The context's pool sized for `threads` (0: ctx default). NULL on failure. */
cg_pool *cg__ctx_pool(cg_context *ctx);
/* Resolved cache directory (never NULL). */
const char *cg__cache_dir(cg_context *ctx);

/* -------------------------------------------------------------------- ops */
/* cg_op (include/chunkgen.h); CG_OP_COUNT and the list every op-generic place is made
 * from: op_list.h. */
#include "op_list.h"

/* ---------------------------------------------------------- config pins
 * "k=v,k=v" with integer values or words; parsed once per call. */
#define CG_CFG_MAX 16
typedef struct cg_cfg {
    int n;
    struct {
        char key[32];
        char val[32];
    } kv[CG_CFG_MAX];
} cg_cfg;
cg_status cg__cfg_parse(cg_context *ctx, const char *text, cg_cfg *out);
/* c as "k=v,k=v" into buf (cut at cap): the one writer of a config's text. */
void cg__cfg_text(const cg_cfg *c, char *buf, size_t cap);
/* The part of a scoped config text ("k=v" for every op, or "ssd_fwd:k=v;sscan:k=v" with
 * parts scoped to an op or a family) that applies to op, into out: 1 when a part applies
 * (the first one that does), 0 when none, -1 for an unknown scope or an overlong part
 * (err says which). Every part's scope is checked. (runtime/cfg_scope.c) */
int cg__cfg_scope(const char *text, cg_op op, char *out, size_t cap, char *err, size_t errcap);
/* Integer value of key, or def when absent. */
int64_t cg__cfg_int(const cg_cfg *cfg, const char *key, int64_t def);
const char *cg__cfg_str(const cg_cfg *cfg, const char *key, const char *def);
/* Strict reading of user pins, for a path that takes exactly the keys `known` (n of them):
 * an unknown key is CG_EINVAL naming it and the known ones. */
cg_status cg__cfg_only(cg_context *ctx, const cg_cfg *cfg, const char *what, const char *const *known, int n);
/* Integer pin `key` in [lo, hi] into *val (left alone when absent); *set = 1 when present.
 * A value that is not an integer in range is CG_EINVAL naming the key. set may be NULL. */
cg_status cg__cfg_pin_int(cg_context *ctx, const cg_cfg *cfg, const char *key, int64_t lo, int64_t hi, const char *what,
                          int64_t *val, int *set);

/* ---------------------------------------------------------------- dtypes
 * Storage dtypes of tensors (docs/dtypes.md). A problem's `dtype` is the call's math class
 * (CG_F32 for any mix of F32/BF16/F16 tensors, CG_F64 for float64 calls); each view's dt
 * is how that tensor is stored. */
#define CG_DTM(dt) (1u << (unsigned)(dt))              /* a set of storage dtypes */
#define CG_DTM_HALF (CG_DTM(CG_BF16) | CG_DTM(CG_F16)) /* the 16-bit ones */
static inline int cg__dtype_known(cg_dtype dt) { return (unsigned)dt <= (unsigned)CG_F16; }
static inline int cg__dtype_half(cg_dtype dt) { return dt == CG_BF16 || dt == CG_F16; }
/* The integer index dtypes (CG_I32, CG_I64): cu_seqlens only (docs/varlen.md). */
static inline int cg__dtype_index(cg_dtype dt) { return dt == CG_I32 || dt == CG_I64; }
/* Bytes of one element (also its alignment); 4 for an unknown dtype. */
static inline size_t cg__dtype_size(cg_dtype dt) {
    return dt == CG_F64 || dt == CG_I64 ? 8 : cg__dtype_half(dt) ? 2 : 4;
}
/* "CG_F32", "CG_F64", "CG_BF16", "CG_F16"; "unknown dtype" otherwise. */
static inline const char *cg__dtype_name(cg_dtype dt) {
    static const char *const k[] = {"CG_F32", "CG_F64", "CG_BF16", "CG_F16"};
    return cg__dtype_known(dt) ? k[dt] : "unknown dtype";
}
/* "f32", "f64", "bf16", "f16" (the CLI's --dtype words, .npy kinds, tuning-key text); "" otherwise. */
static inline const char *cg__dtype_word(cg_dtype dt) { return cg__dtype_known(dt) ? cg_dtype_name(dt) : ""; }

/* x rounded to float32 with round-to-odd: narrowing that to bf16/f16 (8 or 11 bits, at
 * least 2 fewer than float32's 24) then rounds x once, as if directly (no double rounding). */
static inline float cg__f64_to_f32_odd(double x) {
    float f = (float)x;
    uint32_t u = cg__f32_bits(f);
    if ((double)f == x || (u & 1u) || f != f || f - f != 0.0f) return f; /* exact, odd, NaN or inf */
    /* f is even and inexact: its neighbour on x's side is odd */
    double ax = x < 0 ? -x : x, af = f < 0 ? -(double)f : (double)f;
    return cg__bits_f32(ax > af ? u + 1u : u - 1u);
}

/* ---------------------------------------------------------------- views
 * A validated tensor with its strides permuted to the op's logical order.
 * p == NULL: absent. Strides in elements; dt: the tensor's storage dtype. */
typedef struct cg_view {
    void *p;
    cg_dtype dt;
    int64_t s[4];
} cg_view;

/* Elements spanned by view v over logical extents n[4] (strides are >= 0). */
static inline int64_t cg__view_span(const cg_view *v, const int64_t n[4]) {
    int64_t last = 0;
    for (int d = 0; d < 4; d++) last += (n[d] - 1) * v->s[d];
    return last + 1;
}

#define CG_F32P(v) ((float *)(v).p)
#define CG_F64P(v) ((double *)(v).p)

/* Element (i0, i1, i2, i3) as double, any storage dtype (16-bit ones widened exactly by
 * half.h). For the reference and tests. */
static inline double cg__vload(const cg_view *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int64_t off = i0 * v->s[0] + i1 * v->s[1] + i2 * v->s[2] + i3 * v->s[3];
    switch (v->dt) {
    case CG_F64: return ((const double *)v->p)[off];
    case CG_BF16: return (double)cg__bf16_to_f32(((const uint16_t *)v->p)[off]);
    case CG_F16: return (double)cg__f16_to_f32(((const uint16_t *)v->p)[off]);
    default: return (double)((const float *)v->p)[off];
    }
}
/* Store x rounded once (to nearest even) to the view's storage dtype. */
static inline void cg__vstore(const cg_view *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double x) {
    int64_t off = i0 * v->s[0] + i1 * v->s[1] + i2 * v->s[2] + i3 * v->s[3];
    switch (v->dt) {
    case CG_F64: ((double *)v->p)[off] = x; break;
    case CG_BF16: ((uint16_t *)v->p)[off] = cg__f32_to_bf16(cg__f64_to_f32_odd(x)); break;
    case CG_F16: ((uint16_t *)v->p)[off] = cg__f32_to_f16(cg__f64_to_f32_odd(x)); break;
    default: ((float *)v->p)[off] = (float)x; break;
    }
}

/* The extent of symbol SYM (B, T, G, H, DK, DV, L, D, N, S: a cg_sym without its CG_SYM_)
 * of problem p (any cg_*_prob below), an lvalue: p->shape.dim[CG_SYM_SYM]. */
#define CG_DIM(p, SYM) ((p)->shape.dim[CG_SYM_##SYM])

/* SSD problem after validation. Logical orders:
 *   q, k, grad_q, grad_k     [b, t, g, i]   (i < dk)
 *   v, o, dout, grad_v       [b, t, h, j]   (j < dv)
 *   la, grad_la              [b, t, h, -]
 *   h0, hT, dhT, grad_h0     [b, h, i, j]
 * dk and dv are the head dimensions; grad_* are the gradients the public args call dq, dk,
 * dv, dlog_alpha, dh0 (docs/architecture.md, "Names").
 * dtype: the math class (CG_F32, or CG_F64 for the reference); each view's dt its storage
 * (q, k, v, o, dout and the grad_ of q, k, v may be 16-bit: the op table's CG_TD_HALF). */
typedef struct cg_ssd_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    cg_dtype dtype;
    cg_view q, k, v, la, h0;                          /* inputs */
    cg_view o, hT;                                    /* forward outputs */
    cg_view dout, dhT;                                /* backward inputs */
    cg_view grad_q, grad_k, grad_v, grad_la, grad_h0; /* backward outputs */
    int64_t nseq;                                     /* varlen (docs/varlen.md): N sequences packed along T; 0: none */
    cg_view cu;                                       /* cu_seqlens [N + 1] (dt CG_I32 / CG_I64), p NULL when absent */
} cg_ssd_prob;

/* Selective-scan problem after validation. Logical orders:
 *   x, delta, z, y, dy, dx, ddelta, dz  [b, l, d, -]
 *   A, dA                               [d, n, -, -]
 *   Bm, Cm, dB, dC                      [b, l, g, n]  (ungrouped: G = 1)
 *   Dv, dbias, dD, ddbias               [d, -, -, -]
 *   h0, hT, dhT, dh0                    [b, d, n, -] */
typedef struct cg_sscan_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    int grouped;    /* B/C were given as [B, L, G, N] */
    int softplus;
    cg_dtype dtype;
    cg_view x, delta, A, Bm, Cm, Dv, z, dbias, h0;       /* inputs */
    cg_view y, hT;                                       /* forward outputs */
    cg_view dy, dhT;                                     /* backward inputs */
    cg_view dx, ddelta, dA, dB, dC, dD, dz, ddbias, dh0; /* backward outputs */
    int64_t nseq;                                        /* varlen: N sequences packed along L; 0: none */
    cg_view cu;                                          /* cu_seqlens [N + 1], p NULL when absent */
} cg_sscan_prob;

/* Gated-delta-rule problem after validation. Logical orders:
 *   q, k, grad_q, grad_k                 [b, t, g, dk]
 *   v, o, dout, grad_v                   [b, t, h, dv]
 *   g, beta, grad_g, grad_beta           [b, t, h, -]
 *   h0, hT, dhT, grad_h0                 [b, h, dk, dv]   (float32) */
typedef struct cg_gdr_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    cg_dtype dtype;
    double scale;                                               /* resolved: never 0 */
    int l2norm;                                                 /* use_qk_l2norm */
    cg_view q, k, v, g, beta, h0;                               /* inputs */
    cg_view o, hT;                                              /* forward outputs */
    cg_view dout, dhT;                                          /* backward inputs */
    cg_view grad_q, grad_k, grad_v, grad_g, grad_beta, grad_h0; /* backward outputs */
    int64_t nseq;                                               /* varlen: N sequences packed along T; 0: none */
    cg_view cu;                                                 /* cu_seqlens [N + 1], p NULL when absent */
} cg_gdr_prob;

/* Decode-step problems (issue #36) after validation. Logical orders as the chunked ops'
 * (T / L the tokens of each entry); cache [slot, h, i, j] (SSD) or [slot, d, n, -]
 * (sscan); idx [b, -, -, -] and dst [b, t, -, -] are CG_I32 / CG_I64 (cg__idx_at).
 * Entries whose idx is -1 are padding. nseq is always 0 (no cu_seqlens). */
typedef struct cg_ssd_step_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    cg_dtype dtype;
    cg_view q, k, v, la, cache, idx, dst; /* inputs (cache also written) */
    cg_view o;                            /* output */
    int64_t nseq;
} cg_ssd_step_prob;
typedef struct cg_sscan_step_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    int grouped;
    int softplus;
    cg_dtype dtype;
    cg_view x, delta, A, Bm, Cm, Dv, z, dbias, cache, idx, dst; /* inputs (cache also written) */
    cg_view y;                                                  /* output */
    int64_t nseq;
} cg_sscan_step_prob;
typedef struct cg_gdr_step_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    cg_dtype dtype;
    double scale;                              /* resolved: never 0 */
    int l2norm;                                /* use_qk_l2norm */
    cg_view q, k, v, g, beta, cache, idx, dst; /* inputs (cache also written) */
    cg_view o;                                 /* output */
    int64_t nseq;
} cg_gdr_step_prob;
/* LRU problem after validation (the diagonal linear recurrence; docs/lru.md). Logical
 * orders: a, b, x, y, dy, grad_a, grad_b, grad_x [b, l, d, -]; h0, hT, dhT, grad_h0
 * [b, d, -, -] (float32). Head-major calls have the same logical order (strides differ). */
typedef struct cg_lru_prob {
    cg_shape shape; /* the call's op and extents by cg_sym (CG_DIM(p, SYM)), written by
                    * validation; cg__shape_of_prob completes it from the views */
    cg_dtype dtype;
    cg_view a, b, x, h0;                     /* inputs */
    cg_view y, hT;                           /* forward outputs */
    cg_view dy, dhT;                         /* backward inputs */
    cg_view grad_a, grad_b, grad_x, grad_h0; /* backward outputs */
    int64_t nseq;                            /* varlen: N sequences packed along L; 0: none */
    cg_view cu;                              /* cu_seqlens [N + 1], p NULL when absent */
} cg_lru_prob;
/* Element (i0, i1) of an index view (CG_I32 or CG_I64). */
static inline int64_t cg__idx_at(const cg_view *v, int64_t i0, int64_t i1) {
    const int64_t off = i0 * v->s[0] + i1 * v->s[1];
    return v->dt == CG_I64 ? ((const int64_t *)v->p)[off] : (int64_t)((const int32_t *)v->p)[off];
}
/* Validation: the one place that checks user arguments and builds problems. */
cg_status cg__ssd_fwd_prob(cg_context *ctx, const cg_ssd_fwd_args *a, cg_ssd_prob *p);
cg_status cg__ssd_bwd_prob(cg_context *ctx, const cg_ssd_bwd_args *a, cg_ssd_prob *p);
cg_status cg__sscan_fwd_prob(cg_context *ctx, const cg_sscan_fwd_args *a, cg_sscan_prob *p);
cg_status cg__sscan_bwd_prob(cg_context *ctx, const cg_sscan_bwd_args *a, cg_sscan_prob *p);

/* -------------------------------------------------------------- backends */

typedef struct cg_backend_vt {
    const char *name;
    /* 1 when this backend can run the problem with cfg, the config the call will run
     * (NULL or empty: the default). Generated backends ask the kernel's Lua constraints
     * and make (and keep) the plan of cfg, so the run that follows resolves nothing;
     * a cfg they refuse still gives 1 when the default runs (the run reports the
     * refusal). On 0, may leave a reason in ctx. */
    int (*supports)(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg);
    /* Ahead of a call (cg_prepare, cg_workspace_size): the workspace bytes the call takes
     * from cg_exec.workspace, and with load = 1 everything it would compile, load or
     * allocate. NULL: nothing to prepare, no workspace. */
    cg_status (*prepare)(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg, const cg_exec *ex, int load,
                         size_t *bytes);
    /* Run op on its validated problem prob (the op's problem struct, op_list.h) with cfg;
     * vt: this vtable (a generated backend finds its executor kx in it). Host backends
     * run each op through its entry point cg__<backend>_run_<op> (CG_HOST_OP_ENTRY);
     * generated backends through the op's generated kernels (gen_run, runtime/launch.c). */
    cg_status (*run)(cg_context *ctx, const struct cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                     const cg_exec *ex);
    /* The kernel executor of a generated-kernel backend (runtime/launch.c: "cuda",
     * "emulate"), which its run (gen_run, given vt) launches on; NULL for host backends. */
    const struct cg_kexec *kx;
    /* The 16-bit storage dtypes (CG_DTM mask) this backend reads and writes; 0: CG_F32 (and
     * CG_F64 for ref) only. cg__backend_run refuses a problem with a 16-bit tensor outside
     * it, so an entry point never sees a dtype it does not read. */
    unsigned half;
    /* 1: runs packed variable-length problems (cu_seqlens), one B = 1 sub-problem per
     * sequence (runtime/varlen.c); 0: cg__backend_run refuses them (CG_EUNSUPPORTED). */
    int varlen;
    /* The ops (bit 1 << cg_op) whose kernels take cu_seqlens themselves (the generated
     * kernels of every op, CG_OP_MASK_ALL, docs/varlen.md): such a call goes to the entry point whole, and its
     * cu_seqlens may be device memory (the kernels clamp every offset they read). */
    unsigned varlen_kernels;
} cg_backend_vt;

/* A problem of any op, and an args struct of any op (op_list.h): room for either. */
#define CG__OP_PROB_MEMBER(name, E, AT, PT) PT name;
#define CG__OP_ARGS_MEMBER(name, E, AT, PT) AT name;
typedef union cg_prob_any {
    CG_OP_LIST(CG__OP_PROB_MEMBER)
} cg_prob_any;
typedef union cg_args_any {
    CG_OP_LIST(CG__OP_ARGS_MEMBER)
} cg_args_any;
#undef CG__OP_PROB_MEMBER
#undef CG__OP_ARGS_MEMBER

/* A host backend's entry point for one op: cg_status cg__BE_run_NAME(ctx, prob, cfg, ex),
 * prob of the op's problem struct PT; the backend's run finds it by the op list
 * (host_backends.c). Written once, in the op's own file of that backend, by
 * CG_HOST_OP_ENTRY(BE, NAME, PT, FN): FN is the op's typed entry point. */
typedef cg_status (*cg_op_entry)(cg_context *ctx, const void *prob, const cg_cfg *cfg, const cg_exec *ex);
#define CG_HOST_OP_ENTRY(BE, NAME, PT, FN)                                                                             \
    cg_status cg__##BE##_run_##NAME(cg_context *ctx, const void *prob, const cg_cfg *cfg, const cg_exec *ex) {         \
        return FN(ctx, (const PT *)prob, cfg, ex);                                                                     \
    }
#define CG__HOST_OP_DECL(name, E, AT, PT)                                                                              \
    cg_status cg__cpu_run_##name(cg_context *ctx, const void *prob, const cg_cfg *cfg, const cg_exec *ex);             \
    cg_status cg__ref_run_##name(cg_context *ctx, const void *prob, const cg_cfg *cfg, const cg_exec *ex);
CG_OP_LIST(CG__HOST_OP_DECL)
#undef CG__HOST_OP_DECL

extern const cg_backend_vt cg__backend_cpu;
extern const cg_backend_vt cg__backend_ref;
/* Generated-kernel backends (runtime/launch.c). */
extern const cg_backend_vt cg__backend_cuda;
extern const cg_backend_vt cg__backend_emulate;

/* CG_OK when vt takes every tensor of prob in its storage dtype (vt->half); else
 * CG_EUNSUPPORTED naming the first 16-bit tensor vt does not take, its dtype and vt. */
cg_status cg__backend_dtypes(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob);
/* vt's entry for op (after cg__backend_dtypes). */
cg_status cg__backend_run(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                          const cg_exec *exec);

/* Run op on the host backend `host` (cpu, or ref for float64 calls) over host copies of
 * tensors that live in kx's kernel memory (runtime/fallback.c): the auto backend's path
 * for device pointers that no generated kernel can take. why: the reason, for the
 * one-time warning, which names the host backend. Synchronizes. */
struct cg_kexec;
cg_status cg__host_fallback(cg_context *ctx, const struct cg_kexec *kx, const cg_backend_vt *host, cg_op op,
                            const void *prob, const cg_cfg *cfg, const cg_exec *ex, const char *why);

/* CPU path entry points (runtime/cpu/). */
cg_status cg__ssd_cpu_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__ssd_cpu_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__sscan_cpu_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__sscan_cpu_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex);
/* The gated delta rule's cpu entry points (runtime/cpu/gdr_cpu.c). */
cg_status cg__gdr_cpu_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__gdr_cpu_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);
/* Its chunked path (the WY form on the SSD micro-kernels, per ISA; runtime/cpu/gdr_cpu_chunk*.c):
 * config keys chunk (default 64) and threads. */
cg_status cg__gdr_cpu_chunk_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__gdr_cpu_chunk_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);
/* The LRU's cpu path (runtime/cpu/lru_cpu.c) and float64 reference (runtime/ref/ref_lru.c). */
cg_status cg__lru_cpu_fwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__lru_cpu_bwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__lru_ref_fwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__lru_ref_bwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex);
/* Reference entry points (runtime/ref/): float64 sequential scans; F32 or F64 views. */
cg_status cg__ssd_ref_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__ssd_ref_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__sscan_ref_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__sscan_ref_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__gdr_ref_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__gdr_ref_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);

/* Decode steps: CPU path (runtime/cpu/step_cpu.c) and float64 reference (runtime/ref/ref_step.c). */
cg_status cg__ssd_step_cpu(cg_context *ctx, const cg_ssd_step_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__sscan_step_cpu(cg_context *ctx, const cg_sscan_step_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__ssd_step_ref(cg_context *ctx, const cg_ssd_step_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__sscan_step_ref(cg_context *ctx, const cg_sscan_step_prob *p, const cg_cfg *cfg, const cg_exec *ex);
/* The gated delta rule's step: CPU path (runtime/cpu/step_cpu.c, per ISA variant), reference (runtime/ref/ref_step.c). */
cg_status cg__gdr_step_cpu(cg_context *ctx, const cg_gdr_step_prob *p, const cg_cfg *cfg, const cg_exec *ex);
cg_status cg__gdr_step_ref(cg_context *ctx, const cg_gdr_step_prob *p, const cg_cfg *cfg, const cg_exec *ex);
/* ----------------------------------------------------- CPU path defaults */
typedef struct cg_ssd_cpu_params {
    int chunk;       /* tokens per chunk */
    int block_dv;    /* dv columns per task (state tile width) */
    int group_heads; /* forward: 1 when a task takes its group's heads in turn (heads=group), 0 one head (each) */
    int threads;     /* 0: context default */
} cg_ssd_cpu_params;

typedef struct cg_sscan_cpu_params {
    int segment; /* steps between checkpointed states in backward */
    int block_d; /* channels per task */
    int threads;
} cg_sscan_cpu_params;

/* The defaults are generator/cpu/ssd_cpu.lua's and sscan_cpu.lua's (runtime/cpu/ asks the
 * generator, cached per shape); bwd: the backward's. */
cg_status cg__ssd_cpu_params_default(cg_context *ctx, const cg_ssd_prob *p, int bwd, cg_ssd_cpu_params *out);
cg_status cg__sscan_cpu_params_default(cg_context *ctx, const cg_sscan_prob *p, int bwd, cg_sscan_cpu_params *out);

/* -------------------------------------------------------- config sources
 * Where a call's config came from. */
typedef enum cg_cfg_source {
    CG_SRC_PINNED = 0,    /* cg_exec.config */
    CG_SRC_PINNED_ENV,    /* $CHUNKGEN_CONFIG */
    CG_SRC_EXACT,         /* a tuned entry of the call's exact key */
    CG_SRC_NEAREST,       /* a tuned entry of the nearest seq bucket */
    CG_SRC_TUNED_ON_MISS, /* tuned by this call (tune on miss) */
    CG_SRC_DEFAULT        /* the backend's Lua default */
} cg_cfg_source;
/* "pinned", "pinned-env", "exact", "nearest-bucket", "tuned-on-miss", "default". */
const char *cg__cfg_source_name(cg_cfg_source s);

/* A provider of configs for calls without a pinned config. The dispatcher asks it; the
 * autotuner (autotune/source.c) implements it and installs it into every context that
 * cg_context_create makes, so the runtime never depends on the autotuner. lookup fills
 * *cfg (empty: the backend's default) and *src. */
typedef struct cg_config_source {
    const char *name;
    cg_status (*lookup)(cg_context *ctx, const char *backend, cg_op op, const void *prob, cg_cfg *cfg,
                        cg_cfg_source *src);
} cg_config_source;

/* The runtime part of cg_context_create: a context with no config source (defaults only). */
cg_status cg__context_new(cg_context **out);

/* src into dst (cap bytes) with single spaces and no control characters or the key
 * text's separators (; = |): for names that go into "k=v;" key text (runtime/cpu/cpu_model.c). */
void cg__clean_text(char *dst, size_t cap, const char *src);

/* Aligned scratch memory (64 bytes). */
void *cg__aligned_alloc(size_t bytes);
void cg__aligned_free(void *p);

#endif /* CG_INTERNAL_H */
