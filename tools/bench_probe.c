/* bench_probe.c -- the machine's bounds for the roofline: the CPU's model, clock and SIMD
 * width, a measured FMA peak and triad bandwidth; the GPU's clocks and memory as the
 * library reports them (cg_device_query). */
#include "bench_probe.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static void cpu_model(cpu_info *ci) {
    snprintf(ci->model, sizeof ci->model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    int got_model = 0, got_mhz = 0;
    while (fgets(line, sizeof line, f) && !(got_model && got_mhz)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        if (!got_model && !strncmp(line, "model name", 10)) {
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(ci->model, sizeof ci->model, "%s", c);
            got_model = 1;
        } else if (!got_mhz && !strncmp(line, "cpu MHz", 7)) {
            ci->mhz = strtod(c + 1, NULL);
            got_mhz = 1;
        }
    }
    fclose(f);
}

#if defined(__x86_64__)
/* 12 independent FMA chains keep two FMA ports busy through a 4-cycle latency. */
#define FMA_CHAINS 12
/* One loop per ISA, the same code with that ISA's vector type and intrinsics: the sum of
 * the chains' lanes (kept alive so the loop is not optimised away). */
#define FMA_LOOP(name, isa, vec, lanes, set1, fmadd, add, storeu)                                                      \
    __attribute__((target(isa))) static float name(int64_t iters) {                                                    \
        vec acc[FMA_CHAINS];                                                                                           \
        const vec m = set1(0.999999f), c = set1(1e-6f);                                                                \
        for (int j = 0; j < FMA_CHAINS; j++) acc[j] = set1((float)j);                                                  \
        for (int64_t i = 0; i < iters; i++)                                                                            \
            for (int j = 0; j < FMA_CHAINS; j++) acc[j] = fmadd(acc[j], m, c);                                         \
        vec t = acc[0];                                                                                                \
        for (int j = 1; j < FMA_CHAINS; j++) t = add(t, acc[j]);                                                       \
        float out[lanes], s = 0;                                                                                       \
        storeu(out, t);                                                                                                \
        for (int j = 0; j < lanes; j++) s += out[j];                                                                   \
        return s;                                                                                                      \
    }
FMA_LOOP(fma_loop_512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps)
FMA_LOOP(fma_loop_256, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps)
#endif

typedef struct probe_arg {
    int lanes;
    int64_t iters;
    float sink;
    float *a, *b, *c;
    int64_t n, reps;
} probe_arg;

static void *fma_thread(void *p) {
    probe_arg *a = p;
#if defined(__x86_64__)
    a->sink = a->lanes == 16 ? fma_loop_512(a->iters) : fma_loop_256(a->iters);
#endif
    return NULL;
}

static void *triad_thread(void *p) {
    probe_arg *a = p;
    for (int64_t r = 0; r < a->reps; r++) {
        const float s = 1.0001f + (float)r * 1e-7f;
        for (int64_t i = 0; i < a->n; i++) a->a[i] = a->b[i] + s * a->c[i];
    }
    a->sink = a->a[a->n / 2];
    return NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Run fn on nt threads with args[i]; wall seconds. */
static double run_threads(int nt, void *(*fn)(void *), probe_arg *args) {
    pthread_t th[64];
    double t0 = now_s();
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[i], NULL, fn, &args[i]) == 0) started = i;
        else break;
    fn(&args[0]);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    return now_s() - t0;
}

void bench_cpu_probe(cpu_info *ci, int threads, int measure_peaks) {
    memset(ci, 0, sizeof *ci);
    cpu_model(ci);
    cg_context *ctx;
    cg_device_info d = CG_DEVICE_INFO_INIT;
    if (cg_context_create(&ctx) == CG_OK && cg_device_query(ctx, CG_BACKEND_CPU, &d) == CG_OK) {
        ci->cores = d.cpu_cores;
        snprintf(ci->isa, sizeof ci->isa, "%s", d.cpu_isa);
    }
    cg_context_free(ctx);
    if (ci->cores < 1) ci->cores = 1;
    ci->lanes = 4;
    ci->simd = "sse";
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) ci->lanes = 16, ci->simd = "avx512f";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ci->lanes = 8, ci->simd = "avx2+fma";
#endif
    ci->peak_nominal = threads * ci->mhz * 1e-3 * 2 * ci->lanes * 2;
    ci->peak_meas = ci->peak_meas_cpu = NAN;
    ci->bw_meas = NAN;
    if (!measure_peaks) return;
    int nt = threads < 64 ? threads : 64;
    probe_arg args[64];
#if defined(__x86_64__)
    if (ci->lanes >= 8) {
        /* Calibrate to about 0.3 s, then take the best of 3. */
        int64_t iters = 1 << 20;
        for (int i = 0; i < nt; i++) args[i] = (probe_arg){.lanes = ci->lanes, .iters = iters};
        double t = run_threads(nt, fma_thread, args);
        iters = (int64_t)((double)iters * 0.3 / (t > 1e-4 ? t : 1e-4));
        if (iters < 1000) iters = 1000;
        double best = 0, best_cpu = 0;
        for (int r = 0; r < 3; r++) {
            for (int i = 0; i < nt; i++) args[i] = (probe_arg){.lanes = ci->lanes, .iters = iters};
            const double u0 = cpu_s();
            t = run_threads(nt, fma_thread, args);
            const double u = cpu_s() - u0, fl = (double)nt * (double)iters * FMA_CHAINS * ci->lanes * 2;
            if (fl / t * 1e-9 > best) best = fl / t * 1e-9;
            if (u > 0 && fl / u * nt * 1e-9 > best_cpu) best_cpu = fl / u * nt * 1e-9;
        }
        ci->peak_meas = best;
        ci->peak_meas_cpu = best_cpu;
    }
#endif
    /* Triad over 3 x 64 MiB per thread in total: out of the caches of most machines. */
    int64_t per = ((int64_t)16 << 20) / nt;
    float *mem = malloc((size_t)(3 * per * nt) * sizeof(float));
    if (!mem) return;
    for (int64_t i = 0; i < 3 * per * nt; i++) mem[i] = (float)(i & 1023) * 1e-3f;
    double best = 0;
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < nt; i++)
            args[i] = (probe_arg){.a = mem + (3 * i) * per,
                                  .b = mem + (3 * i + 1) * per,
                                  .c = mem + (3 * i + 2) * per,
                                  .n = per,
                                  .reps = 2};
        double t = run_threads(nt, triad_thread, args);
        double gbs = 3.0 * 4.0 * (double)per * nt * 2 / t * 1e-9;
        if (r > 0 && gbs > best) best = gbs; /* the first pass faults the pages in */
    }
    free(mem);
    ci->bw_meas = best;
}

void bench_gpu_probe(cg_context *ctx, cg_backend backend, gpu_info *gi) {
    memset(gi, 0, sizeof *gi);
    gi->fp32_peak_gflops = gi->bw_peak_gbs = NAN;
    cg_device_info d = CG_DEVICE_INFO_INIT;
    if (cg_device_query(ctx, backend, &d) != CG_OK) {
        snprintf(gi->why, sizeof gi->why, "%s", cg_errmsg(ctx));
        return;
    }
    if (!d.gpu) {
        snprintf(gi->why, sizeof gi->why, "no CUDA device: %.230s", d.gpu_why);
        return;
    }
    gi->ok = 1;
    snprintf(gi->name, sizeof gi->name, "%s", d.gpu_name);
    gi->arch = d.gpu_arch;
    gi->sm_count = d.gpu_sm_count;
    /* Clocks, bus and memory from the driver (0 for the emulator's stand-in). */
    gi->clock_mhz = d.gpu_clock_mhz, gi->mem_clock_mhz = d.gpu_mem_clock_mhz, gi->bus_bits = d.gpu_bus_bits;
    gi->mem_gb = d.gpu_mem_gb, gi->driver = d.gpu_emulated ? 0 : d.driver_version;
    /* FP32 lanes per SM: 64 on sm_80 (A100) and sm_60/70, 128 on sm_86, sm_89, sm_90, sm_100+. */
    int lanes = (gi->arch == 80 || gi->arch < 75) ? 64 : 128;
    if (gi->clock_mhz > 0 && gi->sm_count > 0) gi->fp32_peak_gflops = gi->sm_count * lanes * 2.0 * gi->clock_mhz * 1e-3;
    if (gi->mem_clock_mhz > 0 && gi->bus_bits > 0)
        gi->bw_peak_gbs = 2.0 * gi->mem_clock_mhz * 1e6 * gi->bus_bits / 8 * 1e-9;
}
