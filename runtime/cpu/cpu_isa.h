/* cpu_isa.h -- the instruction-set variants of the CPU path and their dispatch.
 *
 * The files that do the arithmetic (ssd_cpu_gemm.c, ssd_cpu_fwd.c, ssd_cpu_bwd.c,
 * sscan_cpu.c, cpu_half.c, gdr_cpu_chunk_{prep,fwd,bwd}.c, step_cpu.c) are compiled once per variant, each time with that variant's compiler
 * flags and CG_ISA defined to its name (avx512, avx2 or baseline; see CMakeLists.txt).
 * Included first in those files, this header renames their external symbols with the
 * variant as suffix (cg__ssd_cpu_fwd -> cg__ssd_cpu_fwd_avx2), so the three copies link
 * side by side. The rest of the library is built for baseline x86-64 and reaches them
 * through the table of cpu_isa.c, at the variant chosen once per process (cpu_choice.c)
 * from cpuid, or from CHUNKGEN_CPU_ISA=avx512|avx2|baseline. */
#ifndef CG_CPU_ISA_H
#define CG_CPU_ISA_H

#ifdef CG_ISA
#define CG_ISA_CAT2(a, b) a##_##b
#define CG_ISA_CAT(a, b) CG_ISA_CAT2(a, b)
#define cg__ssd_cpu_fwd CG_ISA_CAT(cg__ssd_cpu_fwd, CG_ISA)
#define cg__ssd_cpu_bwd CG_ISA_CAT(cg__ssd_cpu_bwd, CG_ISA)
#define cg__sscan_cpu_fwd CG_ISA_CAT(cg__sscan_cpu_fwd, CG_ISA)
#define cg__sscan_cpu_bwd CG_ISA_CAT(cg__sscan_cpu_bwd, CG_ISA)
#define cg__ssd_gemm CG_ISA_CAT(cg__ssd_gemm, CG_ISA)
#define cg__ssd_gemm_beta CG_ISA_CAT(cg__ssd_gemm_beta, CG_ISA)
#define cg__ssd_gemm_nc CG_ISA_CAT(cg__ssd_gemm_nc, CG_ISA)
#define cg__ssd_gemm_rs CG_ISA_CAT(cg__ssd_gemm_rs, CG_ISA)
#define cg__ssd_transpose CG_ISA_CAT(cg__ssd_transpose, CG_ISA)
#define cg__ssd_mul_exp CG_ISA_CAT(cg__ssd_mul_exp, CG_ISA)
#define cg__ssd_decay_mask CG_ISA_CAT(cg__ssd_decay_mask, CG_ISA)
#define cg__ssd_decay_mask_from CG_ISA_CAT(cg__ssd_decay_mask_from, CG_ISA)
#define cg__cpu_ld_row CG_ISA_CAT(cg__cpu_ld_row, CG_ISA)
#define cg__cpu_st_row CG_ISA_CAT(cg__cpu_st_row, CG_ISA)
#define cg__cpu_ld_rows CG_ISA_CAT(cg__cpu_ld_rows, CG_ISA)
#define cg__cpu_st_rows CG_ISA_CAT(cg__cpu_st_rows, CG_ISA)
/* the gated delta rule's chunked path (gdr_cpu_chunk_*.c) */
#define cg__gdr_cpu_chunk_fwd CG_ISA_CAT(cg__gdr_cpu_chunk_fwd, CG_ISA)
#define cg__gdr_cpu_chunk_bwd CG_ISA_CAT(cg__gdr_cpu_chunk_bwd, CG_ISA)
#define cg__gdr_prep_dims CG_ISA_CAT(cg__gdr_prep_dims, CG_ISA)
#define cg__gdr_prep_chunk CG_ISA_CAT(cg__gdr_prep_chunk, CG_ISA)
#define cg__gdr_prep_qk CG_ISA_CAT(cg__gdr_prep_qk, CG_ISA)
#define cg__gdr_prep_head CG_ISA_CAT(cg__gdr_prep_head, CG_ISA)
#define cg__gdr_prep_vn CG_ISA_CAT(cg__gdr_prep_vn, CG_ISA)
#define cg__gdr_load_qk CG_ISA_CAT(cg__gdr_load_qk, CG_ISA)
#define cg__gdr_prep_floats CG_ISA_CAT(cg__gdr_prep_floats, CG_ISA)
#define cg__gdr_prep_layout CG_ISA_CAT(cg__gdr_prep_layout, CG_ISA)
/* the decode steps (step_cpu.c) */
#define cg__ssd_step_cpu CG_ISA_CAT(cg__ssd_step_cpu, CG_ISA)
#define cg__sscan_step_cpu CG_ISA_CAT(cg__sscan_step_cpu, CG_ISA)
#define cg__gdr_step_cpu CG_ISA_CAT(cg__gdr_step_cpu, CG_ISA)
#endif

#include "internal.h"

typedef enum cg_cpu_isa {
    CG_ISA_BASELINE = 0, /* x86-64 (SSE2), or whatever the target's default is */
    CG_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C, 16 ymm registers */
    CG_ISA_AVX512 = 2,   /* AVX-512 F/DQ/BW/VL (+ F16C), 32 zmm registers */
    CG_ISA_COUNT
} cg_cpu_isa;

typedef cg_status (*cg_ssd_cpu_fn)(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex);
typedef cg_status (*cg_sscan_cpu_fn)(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex);
typedef cg_status (*cg_gdr_cpu_fn)(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex);
typedef cg_status (*cg_ssd_step_cpu_fn)(cg_context *ctx, const cg_ssd_step_prob *p, const cg_cfg *cfg,
                                        const cg_exec *ex);
typedef cg_status (*cg_sscan_step_cpu_fn)(cg_context *ctx, const cg_sscan_step_prob *p, const cg_cfg *cfg,
                                          const cg_exec *ex);
typedef cg_status (*cg_gdr_step_cpu_fn)(cg_context *ctx, const cg_gdr_step_prob *p, const cg_cfg *cfg,
                                        const cg_exec *ex);

/* One variant's entry points. (Its GEMM micro-tile, which the tuner's space needs, is
 * described in generator/cpu/ssd_cpu.lua, by the name.) */
typedef struct cg_cpu_isa_ops {
    cg_cpu_isa isa;
    const char *name; /* "avx512", "avx2", "baseline" */
    cg_ssd_cpu_fn ssd_fwd, ssd_bwd;
    cg_sscan_cpu_fn sscan_fwd, sscan_bwd;
    void (*ssd_mul_exp)(float *restrict P, const float *restrict X, int64_t n); /* ssd_cpu.h; for the tests */
    /* bf16 / fp16 rows (cpu_half.h); for the tests */
    void (*ld_row)(float *restrict dst, const void *restrict src, cg_dtype dt, int64_t n);
    void (*st_row)(void *restrict dst, cg_dtype dt, const float *restrict src, int64_t n);
    cg_gdr_cpu_fn gdr_fwd, gdr_bwd; /* the gated delta rule's chunked path */
    cg_ssd_step_cpu_fn ssd_step;    /* the decode steps (step_cpu.c) */
    cg_sscan_step_cpu_fn sscan_step;
    cg_gdr_step_cpu_fn gdr_step;
} cg_cpu_isa_ops;

/* The variant this process runs: chosen on first use from cpuid and CHUNKGEN_CPU_ISA
 * (a forced variant the CPU lacks, or an unknown name, is refused with a warning on
 * stderr and the best supported one is used instead). Thread-safe. */
const cg_cpu_isa_ops *cg__cpu_isa_ops(void);
/* That variant's number (cpu_choice.c; cg__cpu_isa_ops is cpu_isa.c's table at it). */
cg_cpu_isa cg__cpu_isa_chosen(void);
/* Whether this build has variant isa and this CPU (and OS) can run it. */
int cg__cpu_isa_supported(cg_cpu_isa isa);
/* The name of isa, or NULL when out of range; the variant of a name, or -1. */
const char *cg__cpu_isa_name(cg_cpu_isa isa);
int cg__cpu_isa_parse(const char *name);
/* Switch the process to variant isa (tests and benchmarks; not while calls run):
 * CG_EUNSUPPORTED when this CPU cannot run it, the choice then unchanged. */
cg_status cg__cpu_isa_set(cg_cpu_isa isa);

/* The device the CPU spaces (generator/cpu/) see: the CPU model, `threads` as sm_count
 * and the running variant's name as isa. */
struct cg_devinfo;
void cg__cpu_devinfo(struct cg_devinfo *dev, int threads);

/* THE default config of the CPU path: generator/cpu/<kernel>.lua's default() for a call
 * of shape (flags: CG_KS_BWD, CG_KS_SEQ_MAJOR, what Lua's shape adds: cg__shape_kflags)
 * on ctx's thread count and the running variant, through cg__gen_resolve with no pin,
 * kept per process (a Lua call costs tens of microseconds, a lookup a few nanoseconds). */
cg_status cg__cpu_space_default(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, cg_cfg *out);

/* One integer key of a CPU default: pinned into *out (0 first, so 0 when absent) within
 * [lo, hi]; required: CG_EINTERNAL when the default leaves it out (or gives 0). */
typedef struct cg_cpu_pin {
    const char *key;
    int64_t lo, hi;
    int64_t *out;
    int required;
} cg_cpu_pin;

/* cg__cpu_space_default for problem prob of op (its shape by cg__shape_of_prob), then
 * pins[0..npins) read from it ("<kernel>.lua default" in messages); def (may be NULL)
 * receives the whole config for keys that are not integers. */
cg_status cg__cpu_default_pins(cg_context *ctx, const char *kernel, cg_op op, const void *prob, int flags,
                               const cg_cpu_pin *pins, int npins, cg_cfg *def);

/* The CPU model name of this machine (/proc/cpuinfo; static, thread-safe; cpu_model.c). */
const char *cg__cpu_model(void);

#endif /* CG_CPU_ISA_H */
