/* jit_stats.c -- process-wide counters of the JIT path (gen.h, cg__jit_stats). */
#include "gen.h"

#include <stdatomic.h>
#include <time.h>

/* [what] counts events, [what + 1] their nanoseconds */
static atomic_llong g_stat[CG_JIT_NSTATS];

int64_t cg__jit_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cg__jit_count(cg_jit_stat what, int64_t ns) {
    atomic_fetch_add(&g_stat[what], 1);
    atomic_fetch_add(&g_stat[what + 1], ns);
}

void cg__jit_stats(cg_jit_stats *out) {
    out->compiles = atomic_load(&g_stat[CG_JIT_COMPILE]);
    out->compile_ns = atomic_load(&g_stat[CG_JIT_COMPILE + 1]);
    out->disk_hits = atomic_load(&g_stat[CG_JIT_DISK_HIT]);
    out->disk_ns = atomic_load(&g_stat[CG_JIT_DISK_HIT + 1]);
    out->loads = atomic_load(&g_stat[CG_JIT_LOAD]);
    out->load_ns = atomic_load(&g_stat[CG_JIT_LOAD + 1]);
    out->renders = atomic_load(&g_stat[CG_JIT_RENDER]);
    out->render_ns = atomic_load(&g_stat[CG_JIT_RENDER + 1]);
    out->bundle_hits = atomic_load(&g_stat[CG_JIT_BUNDLE_HIT]);
    out->bundle_ns = atomic_load(&g_stat[CG_JIT_BUNDLE_HIT + 1]);
}
