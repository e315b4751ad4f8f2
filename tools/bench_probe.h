/* bench_probe.h -- the machine's bounds for the roofline of `chunkgen bench`
 * (tools/bench_probe.c), through the public API only (cg_device_query). */
#ifndef CG_BENCH_PROBE_H
#define CG_BENCH_PROBE_H

#include "chunkgen.h"

typedef struct cpu_info {
    char model[128];
    double mhz; /* nominal clock from /proc/cpuinfo */
    int cores;  /* online */
    int lanes;  /* fp32 lanes of the widest FMA the CPU has (16 AVX-512, 8 AVX2) */
    const char *simd;
    char isa[16];         /* the CPU path's variant this process runs (cg_device_info.cpu_isa) */
    double peak_nominal;  /* GFLOP/s: threads * GHz * 2 FMA units * lanes * 2 */
    double peak_meas;     /* GFLOP/s of an FMA loop on `threads` threads */
    double peak_meas_cpu; /* the same loop's GFLOP/s per CPU-second of the process, times threads:
                           * the cores' rate while they ran it (robust to a shared machine) */
    double bw_meas;       /* GB/s of a triad a = b + s c on `threads` threads */
} cpu_info;

typedef struct gpu_info {
    int ok;
    char why[256];
    char name[128];
    int arch, sm_count, driver;
    double clock_mhz, mem_clock_mhz, bus_bits, mem_gb;
    double fp32_peak_gflops; /* sm_count * fp32 lanes/SM * 2 * clock */
    double bw_peak_gbs;      /* 2 * mem clock * bus width / 8 */
} gpu_info;

void bench_cpu_probe(cpu_info *ci, int threads, int measure_peaks);
/* The GPU the cuda impls run on: backend CG_BACKEND_CUDA, or CG_BACKEND_EMULATE for the
 * emulator's stand-in (CHUNKGEN_BENCH_FAKE_CUDA=emulate, tools/bench_measure.c). */
void bench_gpu_probe(cg_context *ctx, cg_backend backend, gpu_info *gi);

#endif
