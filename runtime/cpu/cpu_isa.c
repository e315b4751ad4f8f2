/* cpu_isa.c -- picks the CPU path's instruction-set variant once per process (see
 * cpu_isa.h) and forwards the CPU backend's entry points to it. */
#include "cpu_isa.h"

#include "gen.h"
#include "env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECL_VARIANT(s)                                                                                       \
    cg_status cg__ssd_cpu_fwd_##s(cg_context *, const cg_ssd_prob *, const cg_cfg *, const cg_exec *);      \
    cg_status cg__ssd_cpu_bwd_##s(cg_context *, const cg_ssd_prob *, const cg_cfg *, const cg_exec *);      \
    cg_status cg__sscan_cpu_fwd_##s(cg_context *, const cg_sscan_prob *, const cg_cfg *, const cg_exec *);  \
    cg_status cg__sscan_cpu_bwd_##s(cg_context *, const cg_sscan_prob *, const cg_cfg *, const cg_exec *);  \
    void cg__ssd_mul_exp_##s(float *restrict, const float *restrict, int64_t);                               \
    void cg__cpu_ld_row_##s(float *restrict, const void *restrict, cg_dtype, int64_t);                        \
    void cg__cpu_st_row_##s(void *restrict, cg_dtype, const float *restrict, int64_t);
#define OPS(e, s)                                                                                          \
    {e, #s, cg__ssd_cpu_fwd_##s, cg__ssd_cpu_bwd_##s, cg__sscan_cpu_fwd_##s, cg__sscan_cpu_bwd_##s,          \
     cg__ssd_mul_exp_##s, cg__cpu_ld_row_##s, cg__cpu_st_row_##s}

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

static const char *const names[CG_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *cg__cpu_isa_name(cg_cpu_isa isa) { return (unsigned)isa < CG_ISA_COUNT ? names[isa] : NULL; }

int cg__cpu_isa_parse(const char *name) {
    for (int i = 0; i < CG_ISA_COUNT; i++)
        if (name && strcmp(name, names[i]) == 0) return i;
    return -1;
}

int cg__cpu_isa_supported(cg_cpu_isa isa) {
    if ((unsigned)isa >= CG_ISA_COUNT || !variants[isa].name) return 0;
#if defined(CG_CPU_ISA_X86) && defined(__GNUC__)
    /* libgcc's cpuid checks include the OS's XSAVE support of the ymm / zmm state */
    __builtin_cpu_init();
    switch (isa) {
    /* F16C: the fp16 conversions (cpu_half.c); every AVX2 CPU made has it */
    case CG_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case CG_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    default: return 1;
    }
#else
    return isa == CG_ISA_BASELINE;
#endif
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const cg_cpu_isa_ops *chosen;

static void choose(void) {
    int best = CG_ISA_BASELINE;
    for (int i = CG_ISA_COUNT - 1; i > 0; i--)
        if (cg__cpu_isa_supported((cg_cpu_isa)i)) {
            best = i;
            break;
        }
    const char *env = cg__env(CG_ENV_CPU_ISA);
    if (env) {
        const int want = cg__cpu_isa_parse(env);
        if (want < 0)
            cg__log(CG_LOG_WARN, "CHUNKGEN_CPU_ISA='%s' is not one of avx512, avx2, baseline; using %s", env, names[best]);
        else if (!cg__cpu_isa_supported((cg_cpu_isa)want))
            cg__log(CG_LOG_WARN, "CHUNKGEN_CPU_ISA=%s: this CPU (or build) cannot run it; using %s", env, names[best]);
        else
            best = want;
    }
    __atomic_store_n(&chosen, &variants[best], __ATOMIC_RELEASE);
}

const cg_cpu_isa_ops *cg__cpu_isa_ops(void) {
    pthread_once(&once, choose);
    return __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
}

cg_status cg__cpu_isa_set(cg_cpu_isa isa) {
    pthread_once(&once, choose);
    if (!cg__cpu_isa_supported(isa)) return CG_EUNSUPPORTED;
    __atomic_store_n(&chosen, &variants[isa], __ATOMIC_RELEASE);
    return CG_OK;
}

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
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math: CG_F32, "
                       "CG_BF16 or CG_F16 tensors)", what, cg__dtype_name(math));
    for (int i = 0; i < n; i++) {
        const cg_dtype dt = r[i].v->dt;
        if (!r[i].v->p || dt == CG_F32 || (r[i].may16 && cg__dtype_half(dt))) continue;
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: %s: %s tensors are not supported (expected CG_F32%s)", what,
                       r[i].name, cg__dtype_name(dt), r[i].may16 ? ", CG_BF16 or CG_F16" : "");
    }
    return CG_OK;
}

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

/* The CPU backend's entry points (internal.h). */
cg_status cg__ssd_cpu_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    cg_status st = ssd_views(ctx, p, "cpu ssd forward");
    return st ? st : cg__cpu_isa_ops()->ssd_fwd(ctx, p, cfg, ex);
}
cg_status cg__ssd_cpu_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    cg_status st = ssd_views(ctx, p, "cpu ssd backward");
    return st ? st : cg__cpu_isa_ops()->ssd_bwd(ctx, p, cfg, ex);
}
cg_status cg__sscan_cpu_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    cg_status st = sscan_views(ctx, p, "cpu sscan forward");
    return st ? st : cg__cpu_isa_ops()->sscan_fwd(ctx, p, cfg, ex);
}
cg_status cg__sscan_cpu_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    cg_status st = sscan_views(ctx, p, "cpu sscan backward");
    return st ? st : cg__cpu_isa_ops()->sscan_bwd(ctx, p, cfg, ex);
}

typedef struct dflt_entry {
    char kernel[16];
    cg_shape shape;
    int flags, threads, isa, used;
    cg_cfg cfg;
} dflt_entry;

#define DFLT_SLOTS 64
static dflt_entry dflt_tab[DFLT_SLOTS];
static unsigned dflt_next;
static pthread_mutex_t dflt_lock = PTHREAD_MUTEX_INITIALIZER;

cg_status cg__cpu_space_default(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, cg_cfg *out) {
    const cg_cpu_isa_ops *isa = cg__cpu_isa_ops();
    const int threads = cg__pool_size(cg__ctx_pool(ctx));
    pthread_mutex_lock(&dflt_lock);
    for (int i = 0; i < DFLT_SLOTS; i++) {
        const dflt_entry *e = &dflt_tab[i];
        if (e->used && e->threads == threads && e->isa == (int)isa->isa && e->flags == flags &&
            !strcmp(e->kernel, kernel) && cg_shape_equal(&e->shape, shape)) {
            *out = e->cfg;
            pthread_mutex_unlock(&dflt_lock);
            return CG_OK;
        }
    }
    pthread_mutex_unlock(&dflt_lock);
    cg_devinfo dev;
    cg__cpu_devinfo(&dev, threads);
    cg_kshape ks;
    cg__kshape_of(shape, flags, &ks);
    cg_status st = cg__gen_resolve(ctx, kernel, &ks, &dev, NULL, out);
    if (st != CG_OK) return st;
    pthread_mutex_lock(&dflt_lock);
    dflt_entry *e = &dflt_tab[dflt_next++ % DFLT_SLOTS];
    memset(e, 0, sizeof *e);
    snprintf(e->kernel, sizeof e->kernel, "%s", kernel);
    e->shape = *shape, e->flags = flags, e->threads = threads, e->isa = (int)isa->isa, e->cfg = *out, e->used = 1;
    pthread_mutex_unlock(&dflt_lock);
    return CG_OK;
}

void cg__cpu_devinfo(cg_devinfo *dev, int threads) {
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "%s", cg__cpu_model());
    dev->sm_count = threads;
    snprintf(dev->isa, sizeof dev->isa, "%s", cg__cpu_isa_ops()->name);
}
