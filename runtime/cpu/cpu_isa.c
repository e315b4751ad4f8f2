/* cpu_isa.c -- the table of the CPU path's instruction-set variants (see cpu_isa.h) and
 * the CPU backend's entry points, which forward to the variant cpu_choice.c chose. */
#include "cpu_isa.h"

#define DECL_VARIANT(s)                                                                                                \
    cg_status cg__ssd_cpu_fwd_##s(cg_context *, const cg_ssd_prob *, const cg_cfg *, const cg_exec *);                 \
    cg_status cg__ssd_cpu_bwd_##s(cg_context *, const cg_ssd_prob *, const cg_cfg *, const cg_exec *);                 \
    cg_status cg__sscan_cpu_fwd_##s(cg_context *, const cg_sscan_prob *, const cg_cfg *, const cg_exec *);             \
    cg_status cg__sscan_cpu_bwd_##s(cg_context *, const cg_sscan_prob *, const cg_cfg *, const cg_exec *);             \
    void cg__ssd_mul_exp_##s(float *restrict, const float *restrict, int64_t);                                         \
    void cg__cpu_ld_row_##s(float *restrict, const void *restrict, cg_dtype, int64_t);                                 \
    void cg__cpu_st_row_##s(void *restrict, cg_dtype, const float *restrict, int64_t);                                 \
    cg_status cg__gdr_cpu_chunk_fwd_##s(cg_context *, const cg_gdr_prob *, const cg_cfg *, const cg_exec *);           \
    cg_status cg__gdr_cpu_chunk_bwd_##s(cg_context *, const cg_gdr_prob *, const cg_cfg *, const cg_exec *);           \
    cg_status cg__ssd_step_cpu_##s(cg_context *, const cg_ssd_step_prob *, const cg_cfg *, const cg_exec *);           \
    cg_status cg__sscan_step_cpu_##s(cg_context *, const cg_sscan_step_prob *, const cg_cfg *, const cg_exec *);       \
    cg_status cg__gdr_step_cpu_##s(cg_context *, const cg_gdr_step_prob *, const cg_cfg *, const cg_exec *);
/* a variant's row of the table below (clang-format would break its braces apart) */
// clang-format off
#define OPS(e, s)                                                                                          \
    {e, #s, cg__ssd_cpu_fwd_##s, cg__ssd_cpu_bwd_##s, cg__sscan_cpu_fwd_##s, cg__sscan_cpu_bwd_##s,          \
     cg__ssd_mul_exp_##s, cg__cpu_ld_row_##s, cg__cpu_st_row_##s, cg__gdr_cpu_chunk_fwd_##s,                 \
     cg__gdr_cpu_chunk_bwd_##s, cg__ssd_step_cpu_##s, cg__sscan_step_cpu_##s, cg__gdr_step_cpu_##s}
// clang-format on

DECL_VARIANT(baseline)
#ifdef CG_CPU_ISA_X86 /* CMakeLists.txt builds the x86 variants */
DECL_VARIANT(avx2)
DECL_VARIANT(avx512)
#endif

static const cg_cpu_isa_ops variants[CG_ISA_COUNT] = {
    OPS(CG_ISA_BASELINE, baseline),
#ifdef CG_CPU_ISA_X86
    OPS(CG_ISA_AVX2, avx2),
    OPS(CG_ISA_AVX512, avx512),
#endif
};

const cg_cpu_isa_ops *cg__cpu_isa_ops(void) { return &variants[cg__cpu_isa_chosen()]; }

/* ------------------------------------------------------------- dtypes
 * The CPU path computes in float32 (the problem's math class CG_F32) and reads or writes
 * each tensor in its own storage dtype: bf16 / fp16 where the op allows them (cpu_half.h),
 * float32 for states, log_alpha, A, D, delta_bias and their gradients. */
typedef struct view_rule {
    const char *name;
    const cg_view *v;
    int may16; /* bf16 / fp16 allowed */
} view_rule;

static cg_status check_views(cg_context *ctx, const char *what, cg_dtype math, const view_rule *r, int n) {
    if (math != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "%s: dtype: %s calls are not supported (expected CG_F32 math: CG_F32, "
                       "CG_BF16 or CG_F16 tensors)",
                       what, cg__dtype_name(math));
    for (int i = 0; i < n; i++) {
        const cg_dtype dt = r[i].v->dt;
        if (!r[i].v->p || dt == CG_F32 || (r[i].may16 && cg__dtype_half(dt))) continue;
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: %s: %s tensors are not supported (expected CG_F32%s)", what,
                       r[i].name, cg__dtype_name(dt), r[i].may16 ? ", CG_BF16 or CG_F16" : "");
    }
    return CG_OK;
}

/* the tensors' rules, aligned as tables (clang-format would give each rule a line) */
// clang-format off
static cg_status ssd_views(cg_context *ctx, const cg_ssd_prob *p, const char *what) {
    const view_rule r[] = {{"q", &p->q, 1},      {"k", &p->k, 1},       {"v", &p->v, 1},     {"o", &p->o, 1},
                           {"dout", &p->dout, 1}, {"dq", &p->grad_q, 1}, {"dk", &p->grad_k, 1}, {"dv", &p->grad_v, 1},
                           {"log_alpha", &p->la, 0}, {"h0", &p->h0, 0}, {"hT", &p->hT, 0}, {"dhT", &p->dhT, 0},
                           {"dlog_alpha", &p->grad_la, 0}, {"dh0", &p->grad_h0, 0}};
    return check_views(ctx, what, p->dtype, r, (int)(sizeof r / sizeof r[0]));
}

static cg_status sscan_views(cg_context *ctx, const cg_sscan_prob *p, const char *what) {
    const view_rule r[] = {{"x", &p->x, 1},     {"delta", &p->delta, 1}, {"B", &p->Bm, 1},    {"C", &p->Cm, 1},
                           {"z", &p->z, 1},     {"y", &p->y, 1},         {"dy", &p->dy, 1},   {"dx", &p->dx, 1},
                           {"ddelta", &p->ddelta, 1}, {"dB", &p->dB, 1}, {"dC", &p->dC, 1},   {"dz", &p->dz, 1},
                           {"A", &p->A, 0},     {"D", &p->Dv, 0},        {"delta_bias", &p->dbias, 0},
                           {"h0", &p->h0, 0},   {"hT", &p->hT, 0},       {"dhT", &p->dhT, 0}, {"dA", &p->dA, 0},
                           {"dD", &p->dD, 0},   {"ddelta_bias", &p->ddbias, 0}, {"dh0", &p->dh0, 0}};
    return check_views(ctx, what, p->dtype, r, (int)(sizeof r / sizeof r[0]));
}

/* The gated delta rule's chunked path: q, k, v, beta, g, o and their gradients in float32
 * / bf16 / fp16, the states and their gradients in float32. */
static cg_status gdr_views(cg_context *ctx, const cg_gdr_prob *p, const char *what) {
    const view_rule r[] = {{"q", &p->q, 1},      {"k", &p->k, 1},         {"v", &p->v, 1},       {"g", &p->g, 1},
                           {"beta", &p->beta, 1}, {"o", &p->o, 1},         {"dout", &p->dout, 1}, {"dq", &p->grad_q, 1},
                           {"dk", &p->grad_k, 1}, {"dv", &p->grad_v, 1},   {"dg", &p->grad_g, 1},
                           {"dbeta", &p->grad_beta, 1}, {"h0", &p->h0, 0}, {"hT", &p->hT, 0}, {"dhT", &p->dhT, 0},
                           {"dh0", &p->grad_h0, 0}};
    return check_views(ctx, what, p->dtype, r, (int)(sizeof r / sizeof r[0]));
}
// clang-format on

/* The CPU backend's entry points (internal.h): the op's dtype rule, then the variant. */
#define ENTRY(fn, prob, views, what, slot)                                                                             \
    cg_status fn(cg_context *ctx, const prob *p, const cg_cfg *cfg, const cg_exec *ex) {                               \
        cg_status st = views(ctx, p, what);                                                                            \
        return st ? st : cg__cpu_isa_ops()->slot(ctx, p, cfg, ex);                                                     \
    }
ENTRY(cg__ssd_cpu_fwd, cg_ssd_prob, ssd_views, "cpu ssd forward", ssd_fwd)
ENTRY(cg__ssd_cpu_bwd, cg_ssd_prob, ssd_views, "cpu ssd backward", ssd_bwd)
ENTRY(cg__sscan_cpu_fwd, cg_sscan_prob, sscan_views, "cpu sscan forward", sscan_fwd)
ENTRY(cg__sscan_cpu_bwd, cg_sscan_prob, sscan_views, "cpu sscan backward", sscan_bwd)
ENTRY(cg__gdr_cpu_chunk_fwd, cg_gdr_prob, gdr_views, "cpu gdr forward (chunked)", gdr_fwd)
ENTRY(cg__gdr_cpu_chunk_bwd, cg_gdr_prob, gdr_views, "cpu gdr backward (chunked)", gdr_bwd)
/* The decode steps (step_cpu.c checks their dtypes itself). */
#define STEP_ENTRY(fn, prob, slot)                                                                                     \
    cg_status fn(cg_context *ctx, const prob *p, const cg_cfg *cfg, const cg_exec *ex) {                               \
        return cg__cpu_isa_ops()->slot(ctx, p, cfg, ex);                                                               \
    }
STEP_ENTRY(cg__ssd_step_cpu, cg_ssd_step_prob, ssd_step)
STEP_ENTRY(cg__sscan_step_cpu, cg_sscan_step_prob, sscan_step)
STEP_ENTRY(cg__gdr_step_cpu, cg_gdr_step_prob, gdr_step)

/* The cpu backend's entry points for the ops whose kernels are built per variant
 * (host_backends.c); here, above the kernels, which call ssd_cpu.c / sscan_cpu_params.c. */
CG_HOST_OP_ENTRY(cpu, ssd_fwd, cg_ssd_prob, cg__ssd_cpu_fwd)
CG_HOST_OP_ENTRY(cpu, ssd_bwd, cg_ssd_prob, cg__ssd_cpu_bwd)
CG_HOST_OP_ENTRY(cpu, sscan_fwd, cg_sscan_prob, cg__sscan_cpu_fwd)
CG_HOST_OP_ENTRY(cpu, sscan_bwd, cg_sscan_prob, cg__sscan_cpu_bwd)
CG_HOST_OP_ENTRY(cpu, ssd_step, cg_ssd_step_prob, cg__ssd_step_cpu)
CG_HOST_OP_ENTRY(cpu, sscan_step, cg_sscan_step_prob, cg__sscan_step_cpu)
CG_HOST_OP_ENTRY(cpu, gdr_step, cg_gdr_step_prob, cg__gdr_step_cpu)
