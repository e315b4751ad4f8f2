/* cpu_isa.c -- picks the CPU path's instruction-set variant once per process (see
 * cpu_isa.h) and forwards the CPU backend's entry points to it. */
#include "cpu_isa.h"

#include "../../autotune/autotune.h" /* cg__tune_cpu_model */
#include "gen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECL_VARIANT(s)                                                                                       \
    cg_status cg__ssd_cpu_fwd_##s(cg_context *, const cg_ssd_prob *, const cg_cfg *, const cg_exec *);      \
    cg_status cg__ssd_cpu_bwd_##s(cg_context *, const cg_ssd_prob *, const cg_cfg *, const cg_exec *);      \
    cg_status cg__sscan_cpu_fwd_##s(cg_context *, const cg_sscan_prob *, const cg_cfg *, const cg_exec *);  \
    cg_status cg__sscan_cpu_bwd_##s(cg_context *, const cg_sscan_prob *, const cg_cfg *, const cg_exec *);
#define OPS(e, s) \
    {e, #s, cg__ssd_cpu_fwd_##s, cg__ssd_cpu_bwd_##s, cg__sscan_cpu_fwd_##s, cg__sscan_cpu_bwd_##s}

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
    case CG_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CG_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
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
    const char *env = getenv("CHUNKGEN_CPU_ISA");
    if (env && *env) {
        const int want = cg__cpu_isa_parse(env);
        if (want < 0)
            fprintf(stderr, "chunkgen: CHUNKGEN_CPU_ISA='%s' is not one of avx512, avx2, baseline; using %s\n", env,
                    names[best]);
        else if (!cg__cpu_isa_supported((cg_cpu_isa)want))
            fprintf(stderr, "chunkgen: CHUNKGEN_CPU_ISA=%s: this CPU (or build) cannot run it; using %s\n", env,
                    names[best]);
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

/* The CPU backend's entry points (internal.h). */
void cg__sscan_cpu_params_default_baseline(const cg_sscan_prob *p, cg_sscan_cpu_params *out);
void cg__sscan_cpu_params_default(const cg_sscan_prob *p, cg_sscan_cpu_params *out) {
    cg__sscan_cpu_params_default_baseline(p, out);
}
cg_status cg__ssd_cpu_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__cpu_isa_ops()->ssd_fwd(ctx, p, cfg, ex);
}
cg_status cg__ssd_cpu_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__cpu_isa_ops()->ssd_bwd(ctx, p, cfg, ex);
}
cg_status cg__sscan_cpu_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__cpu_isa_ops()->sscan_fwd(ctx, p, cfg, ex);
}
cg_status cg__sscan_cpu_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__cpu_isa_ops()->sscan_bwd(ctx, p, cfg, ex);
}

void cg__cpu_devinfo(cg_devinfo *dev, int threads) {
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "%s", cg__tune_cpu_model());
    dev->sm_count = threads;
    snprintf(dev->isa, sizeof dev->isa, "%s", cg__cpu_isa_ops()->name);
}
