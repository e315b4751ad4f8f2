/* gen.h -- the C side of the kernel generator.
 *
 * Lua decides and renders (parameter spaces, constraints, defaults, launch
 * geometry, source text); C compiles, loads, launches, measures and caches.
 * This header is the whole C/Lua boundary. */
#ifndef CG_GEN_H
#define CG_GEN_H

#include "internal.h"

/* The text of Lua's shape.dtypes (cg__shape_dtypes) fits this. */
#define CG_KS_DTYPES_CAP 256

/* The generator takes a call's shape (cg_shape, chunkgen.h) and builds Lua's `shape` table
 * from it (runtime/lua_gen.c, push_shape): each symbol's extent under its cg_sym_name
 * (shape.B, shape.dk, ...; 0 for the symbols the op lacks), nseq, the flag of each CG_KS_*
 * below under its name (cg__shape_kflags), and dtypes (cg__shape_dtypes). The shape flags: */
#define CG_KS_H0 1  /* h0 given */
#define CG_KS_HT 2  /* hT wanted */
#define CG_KS_DHT 4 /* dhT given */
#define CG_KS_SOFTPLUS 8
#define CG_KS_HAS_D 16
#define CG_KS_HAS_Z 32
#define CG_KS_HAS_BIAS 64
#define CG_KS_GROUPED 128
#define CG_KS_BWD 256       /* the backward is meant (CPU spaces cover both directions) */
#define CG_KS_SEQ_MAJOR 512 /* sscan: x/delta/z sequence-contiguous in memory ([B, D, L], mamba's) */
#define CG_KS_L2NORM 1024   /* gdr: use_qk_l2norm (q and k L2-normalised inside the op) */
/* The shape flags, in bit order, with the one name of each: the field of Lua's shape
 * table and the `chunkgen gen --flags` word (the table is in runtime/ops.c; which tensor
 * or scalar of an op sets a flag is the op table's kflag column). */
typedef struct cg_kflag_desc {
    int flag;
    const char *name; /* "h0", "has_D", ... */
    const char *note; /* what it means, for `--help` (NULL: the name says it) */
} cg_kflag_desc;
extern const cg_kflag_desc cg__kflags[];
extern const int cg__nkflags;
/* The flag named name, or 0. */
int cg__kflag_parse(const char *name);

/* The shape flags of s: grouped, and through the op table's kflag column the flag of each
 * optional tensor given and scalar option set; | extra, what is no part of a call's shape
 * (CG_KS_BWD, CG_KS_SEQ_MAJOR: the CPU spaces). Lua's flags, made in this one place
 * (runtime/kshape.c, below the dispatcher); a call's shape is compared with cg_shape_equal. */
int cg__shape_kflags(const cg_shape *s, int extra);
/* Lua's shape.dtypes of s: the storage dtypes of s's tensors that are not float32 (#15), ""
 * when all are: "name=dtype" words in the op table's order, one space apart, dtype "bf16" or
 * "f16" (e.g. "x=bf16 delta=bf16 y=bf16"). A kernel is generated per signature
 * (generator/core.lua refuses a kernel whose description lists no such tensors: its `half`
 * field). buf holds CG_KS_DTYPES_CAP bytes. */
void cg__shape_dtypes(const cg_shape *s, char buf[CG_KS_DTYPES_CAP]);
/* The shape of a validated problem of op d (struct cg_op_desc, ops.h): layout token-major
 * and longest 0 (no kernel depends on them; cg_shape_of sets both). */
struct cg_op_desc;
void cg__shape_of_prob(const struct cg_op_desc *d, const void *prob, cg_shape *s);
/* A shape's canonical 16-bit mask (cg_shape.half): its inputs' bits and each present
 * output that follows a 16-bit input (the dtype rules, cg__op_dtypes; a mix they refuse:
 * its status and message). */
cg_status cg__shape_half_mask(cg_context *ctx, const struct cg_op_desc *d, const cg_shape *s, uint64_t *mask);
/* Whether tensor i of d is present in s: required, or optional and given. */
int cg__shape_present(const struct cg_op_desc *d, const cg_shape *s, int i);
/* The storage dtype of each input of d in s (outputs and absent tensors -1). */
void cg__shape_input_dtypes(const struct cg_op_desc *d, const cg_shape *s, int dt[]);
/* What the kernel will run on. For the emulator, arch is the architecture whose
 * instructions are emulated (80) and emulated = 1. */
typedef struct cg_devinfo {
    char name[128];
    int arch; /* 80, 86, 89, 90 ... */
    int sm_count;
    int64_t smem_per_block; /* opt-in maximum, bytes */
    int regs_per_block;
    int emulated;
    char isa[16]; /* CPU spaces: the CPU path's ISA variant (runtime/cpu/cpu_isa.h) */
} cg_devinfo;

#define CG_PLAN_MAX_LAUNCH 4
typedef struct cg_launch {
    char entry[64]; /* extern "C" __global__ function in the module */
    unsigned grid[3];
    unsigned block[3];
    int64_t smem; /* dynamic shared memory bytes */
} cg_launch;

/* A named region of a plan's workspace, at offset bytes from its start (16-aligned). */
#define CG_PLAN_MAX_REGIONS 12
typedef struct cg_region {
    char name[32];
    int64_t bytes, offset;
} cg_region;

/* One argument of the kernels, a member of the params struct every entry takes, in
 * order (generator/core.lua, "launch"): a tensor of the op (by its op-table name), a
 * workspace region, a shape symbol or an integer. The launcher packs them; it does not
 * know what they mean. */
#define CG_PLAN_MAX_ARGS 64
typedef enum cg_karg_kind {
    CG_KARG_TENSOR,
    CG_KARG_WS,
    CG_KARG_SYM,
    CG_KARG_INT,
    CG_KARG_CU,
    CG_KARG_REAL
} cg_karg_kind;
/* CG_KARG_REAL: a real scalar of the op (cg_real_desc, by name: gdr's "scale"), its
 * validated value in the problem, packed as a double (one 8-byte slot). */
/* CG_KARG_CU: the op's cu_seqlens (docs/varlen.md) as three slots, cg_kcu of
 * templates/cg_kernel_params.h: pointer (NULL when absent), stride, 1 when int64. */
typedef struct cg_karg {
    cg_karg_kind kind;
    char name[32]; /* tensor, region or symbol name ("" for an integer) */
    int64_t value; /* the integer */
} cg_karg;

/* One kernel instantiated for one shape and one config: every launch fact, from Lua. */
typedef struct cg_plan {
    char kernel[32]; /* e.g. "ssd_fwd" */
    char op[32];     /* the op of runtime/ops.c whose tensors the args name */
    char name[192];  /* CUTLASS-style, e.g. ssd_fwd_dk48_dv40_c64_w4_ieee */
    cg_cfg params;   /* the resolved config (every parameter of the space) */
    char *source;    /* rendered, self-contained CUDA C++ (malloc'd) */
    int nlaunch;
    cg_launch launch[CG_PLAN_MAX_LAUNCH]; /* run in this order on one stream */
    int nregion;
    cg_region region[CG_PLAN_MAX_REGIONS]; /* the workspace, in order */
    int64_t workspace_bytes;               /* end of the last region: scratch the launches need */
    int narg;
    cg_karg arg[CG_PLAN_MAX_ARGS];
} cg_plan;

/* Instantiate `kernel` for shape on dev with the pinned params (NULL or empty: the
 * Lua default; missing keys filled from the default). flags: the shape flags the call's
 * shape lacks (cg__shape_kflags' extra: CG_KS_BWD, CG_KS_SEQ_MAJOR; 0 for a call). Fails with CG_EUNSUPPORTED and
 * the constraint's reason when the params are not valid for shape/dev. */
cg_status cg__gen_plan(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, const cg_devinfo *dev,
                       const cg_cfg *pin, cg_plan *out);
void cg__plan_free(cg_plan *plan);

/* Every config of kernel's space that its constraints accept for shape/dev.
 * *out is malloc'd (free it); *n its length. */
cg_status cg__gen_space(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, const cg_devinfo *dev,
                        cg_cfg **out, int *n);

/* The config cg__gen_plan would use (pin completed from the default, checked by the
 * constraints; same errors), without launch geometry or rendering. Also works for the
 * CPU spaces (generator/cpu/), which cg__gen_plan refuses with CG_EUNSUPPORTED. */
cg_status cg__gen_resolve(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, const cg_devinfo *dev,
                          const cg_cfg *pin, cg_cfg *out);

/* Calls into the generator's Lua on ctx so far: every plan() or resolve() (a "resolve":
 * completing and checking a config), and every space(). */
typedef struct cg_gen_stats {
    int64_t resolves, spaces;
} cg_gen_stats;
void cg__gen_stats(cg_context *ctx, cg_gen_stats *out);

/* Process-wide counters of the JIT path, for `chunkgen info`/`--verbose`, benchmarks
 * and tests ("a process that starts from an imported bundle compiles nothing"): NVRTC
 * compiles, CUBINs found in the disk cache, modules loaded into the driver, sources
 * rendered; each with the time it took. */
typedef enum cg_jit_stat {
    CG_JIT_COMPILE = 0,
    CG_JIT_DISK_HIT = 2,
    CG_JIT_LOAD = 4,
    CG_JIT_RENDER = 6,
    CG_JIT_BUNDLE_HIT = 8,
    CG_JIT_NSTATS = 10
} cg_jit_stat;
typedef struct cg_jit_stats {
    int64_t compiles, compile_ns, disk_hits, disk_ns, loads, load_ns, renders, render_ns;
    int64_t bundle_hits, bundle_ns; /* disk hits that `chunkgen import` wrote (their log says so) */
} cg_jit_stats;
/* The first line of the log of a kernel cache entry that `chunkgen import` wrote. */
#define CG_BUNDLE_LOG_TAG "chunkgen-import: from bundle "
void cg__jit_stats(cg_jit_stats *out);
void cg__jit_count(cg_jit_stat what, int64_t ns); /* one event of `what`, taking ns */
int64_t cg__jit_now_ns(void);

/* Names of the kernels that exist, NULL-terminated static list owned by the generator. */
cg_status cg__gen_kernels(cg_context *ctx, const char ***names, int *n);

/* Human-readable description of a kernel's space (for `chunkgen gen --list`); *text malloc'd. */
cg_status cg__gen_describe(cg_context *ctx, const char *kernel, char **text);
/* The op (or family, for a CPU space) kernel serves, into op[0 .. cap), and *cpu = 1 when it
 * is a CPU space (backend "cpu" in its description), 0 for a generated kernel. */
cg_status cg__gen_kernel_info(cg_context *ctx, const char *kernel, char *op, size_t cap, int *cpu);

/* An embedded generator/template file by relative path (or the CHUNKGEN_LUA_PATH copy);
 * *text malloc'd and NUL-terminated, *len its length. */
cg_status cg__gen_read_file(cg_context *ctx, const char *rel, char **text, size_t *len);

/* The emulated device (sm_80 features, generous limits). */
void cg__devinfo_emulated(cg_devinfo *dev);

/* A way to run generated kernels: the CUDA driver (runtime/cuda/) or the SIMT
 * emulator (runtime/emu/). Every __global__ entry takes exactly one argument, a
 * params struct by value (templates/cg_kernel_params.h), passed here by pointer. */
typedef struct cg_kexec {
    const char *name; /* "cuda" or "emulate" */
    /* Device the kernels will run on (ENODEV when none). */
    cg_status (*device)(cg_context *ctx, cg_devinfo *out);
    /* Compile (or fetch from the caches) and load plan's module; *module is owned by ctx. */
    cg_status (*load)(cg_context *ctx, const cg_plan *plan, void **module);
    /* Launch one entry of a loaded module, asynchronously on stream where that applies. */
    cg_status (*launch)(cg_context *ctx, void *module, const cg_launch *launch, const void *params, size_t params_size,
                        void *stream);
    /* Memory the kernels can address (device memory, or host memory for emulate). */
    cg_status (*alloc)(cg_context *ctx, size_t bytes, void **out);
    void (*free)(cg_context *ctx, void *ptr);
    /* Copy between host and kernel memory (dir: 0 host->dev, 1 dev->host). */
    cg_status (*copy)(cg_context *ctx, void *dst, const void *src, size_t bytes, int dir, void *stream);
    cg_status (*sync)(cg_context *ctx, void *stream);
    /* 1 when ptr is kernel-addressable memory (a device pointer for cuda). */
    int (*owns_ptr)(cg_context *ctx, const void *ptr);
    /* 1 when stream is being captured into a CUDA graph: nothing may then compile, load,
     * allocate or synchronize (the launcher refuses with CG_EUNSUPPORTED). NULL: never. */
    int (*capturing)(cg_context *ctx, void *stream);
    /* Device-side timing of the work enqueued on stream between the two calls (cuda: a
     * pair of CUDA events owned by ctx and reused; emulate: the monotonic host clock).
     * timer_start gives a token (at most CG_KEXEC_TIMERS outstanding per ctx);
     * timer_stop waits for the stream to reach its mark, writes the elapsed
     * milliseconds and releases the token (also on failure). */
    cg_status (*timer_start)(cg_context *ctx, void *stream, void **token);
    cg_status (*timer_stop)(cg_context *ctx, void *stream, void *token, double *ms);
    /* Enqueue on stream a write of a ctx-owned buffer larger than the device's L2 cache,
     * so that the next timed launch starts cold (a no-op for emulate). */
    cg_status (*flush_l2)(cg_context *ctx, void *stream);
} cg_kexec;
#define CG_KEXEC_TIMERS 4

extern const cg_kexec cg__kexec_cuda;
extern const cg_kexec cg__kexec_emu;

/* Modules the launcher (runtime/launch.c) has loaded in ctx: compiled, or fetched from the
 * caches. For tests of cg_prepare. */
int64_t cg__launch_loads(cg_context *ctx);

#endif /* CG_GEN_H */
