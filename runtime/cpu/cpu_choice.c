/* cpu_choice.c -- which instruction-set variant of the CPU path this process runs (from
 * cpuid, or CHUNKGEN_CPU_ISA), the device the CPU spaces see, and the per-shape default
 * configs (see cpu_isa.h). Below the variant table of cpu_isa.c: it names the variants
 * by number only, so the kernels that ask for a default config do not call back into it. */
#include "cpu_isa.h"

#include "gen.h"
#include "env.h"
#include "ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[CG_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *cg__cpu_isa_name(cg_cpu_isa isa) { return (unsigned)isa < CG_ISA_COUNT ? names[isa] : NULL; }

int cg__cpu_isa_parse(const char *name) {
    for (int i = 0; i < CG_ISA_COUNT; i++)
        if (name && strcmp(name, names[i]) == 0) return i;
    return -1;
}

int cg__cpu_isa_supported(cg_cpu_isa isa) {
    if ((unsigned)isa >= CG_ISA_COUNT) return 0;
#if defined(CG_CPU_ISA_X86) && defined(__GNUC__) /* CMakeLists.txt builds the x86 variants */
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
static int chosen; /* a cg_cpu_isa */

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
            cg__log(CG_LOG_WARN, "CHUNKGEN_CPU_ISA='%s' is not one of avx512, avx2, baseline; using %s", env,
                    names[best]);
        else if (!cg__cpu_isa_supported((cg_cpu_isa)want))
            cg__log(CG_LOG_WARN, "CHUNKGEN_CPU_ISA=%s: this CPU (or build) cannot run it; using %s", env, names[best]);
        else best = want;
    }
    __atomic_store_n(&chosen, best, __ATOMIC_RELEASE);
}

cg_cpu_isa cg__cpu_isa_chosen(void) {
    pthread_once(&once, choose);
    return (cg_cpu_isa)__atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
}

cg_status cg__cpu_isa_set(cg_cpu_isa isa) {
    pthread_once(&once, choose);
    if (!cg__cpu_isa_supported(isa)) return CG_EUNSUPPORTED;
    __atomic_store_n(&chosen, (int)isa, __ATOMIC_RELEASE);
    return CG_OK;
}

void cg__cpu_devinfo(cg_devinfo *dev, int threads) {
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "%s", cg__cpu_model());
    dev->sm_count = threads;
    snprintf(dev->isa, sizeof dev->isa, "%s", names[cg__cpu_isa_chosen()]);
}

/* ------------------------------------------------------------- default configs */
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
    const int isa = (int)cg__cpu_isa_chosen();
    const int threads = cg__pool_size(cg__ctx_pool(ctx));
    pthread_mutex_lock(&dflt_lock);
    for (int i = 0; i < DFLT_SLOTS; i++) {
        const dflt_entry *e = &dflt_tab[i];
        if (e->used && e->threads == threads && e->isa == isa && e->flags == flags && !strcmp(e->kernel, kernel) &&
            cg_shape_equal(&e->shape, shape)) {
            *out = e->cfg;
            pthread_mutex_unlock(&dflt_lock);
            return CG_OK;
        }
    }
    pthread_mutex_unlock(&dflt_lock);
    cg_devinfo dev;
    cg__cpu_devinfo(&dev, threads);
    cg_status st = cg__gen_resolve(ctx, kernel, shape, flags, &dev, NULL, out);
    if (st != CG_OK) return st;
    pthread_mutex_lock(&dflt_lock);
    dflt_entry *e = &dflt_tab[dflt_next++ % DFLT_SLOTS];
    memset(e, 0, sizeof *e);
    snprintf(e->kernel, sizeof e->kernel, "%s", kernel);
    e->shape = *shape, e->flags = flags, e->threads = threads, e->isa = isa, e->cfg = *out, e->used = 1;
    pthread_mutex_unlock(&dflt_lock);
    return CG_OK;
}

cg_status cg__cpu_default_pins(cg_context *ctx, const char *kernel, cg_op op, const void *prob, int flags,
                               const cg_cpu_pin *pins, int npins, cg_cfg *def) {
    cg_shape shape;
    cg__shape_of_prob(cg__op_desc(op), prob, &shape);
    cg_cfg cfg;
    cg_status st = cg__cpu_space_default(ctx, kernel, &shape, flags, &cfg);
    if (st != CG_OK) return st;
    char what[48];
    snprintf(what, sizeof what, "%s.lua default", kernel);
    for (int i = 0; i < npins; i++) {
        *pins[i].out = 0;
        if ((st = cg__cfg_pin_int(ctx, &cfg, pins[i].key, pins[i].lo, pins[i].hi, what, pins[i].out, NULL)) != CG_OK)
            return st;
        if (pins[i].required && !*pins[i].out)
            return cg__err(ctx, CG_EINTERNAL, "generator/cpu/%s.lua: default without %s", kernel, pins[i].key);
    }
    if (def) *def = cfg;
    return CG_OK;
}
