/* gdr_cpu.c -- the gated delta rule's chunked CPU path (runtime/cpu/gdr_cpu_chunk*.c)
 * timed on issue #35's cells, forward and forward + backward, at the given thread
 * counts, with the FMA peak measured in the same run (tools/bench_probe.c, the probe of
 * `chunkgen bench`). A lab measurement: it calls the chunked entry points directly
 * (cg__gdr_cpu_chunk_fwd / _bwd: internal, hence tests/perf/, docs/bench.md), so it
 * times the kernel before the op's dispatch points at it. JSON rows in the seeds' schema
 * (docs/bench.md "The JSON"): impl chunkgen_cpu, op gdr, batch, groups (fla's H), heads
 * (fla's HV), seq, dk, dv, median_ms, gflops, frac_flops (of the measured FMA peak).
 *
 * FLOPs: MATH_GDN.md's dense count per chunk of C tokens and value head (2.5 and 3.2):
 *   forward   6 C K V + 6 C^2 K + 4 C^2 V + C^3 / 3
 *   backward  16 C K V + 18 C^2 K + 10 C^2 V + 4 C^3
 * (the GEMMs skip the triangles' zero halves, so the flops executed are fewer).
 *
 * Usage: cg_bench_gdr_cpu [--threads 1,2] [--min-time S] [--out FILE] [--quick] [--crossover]
 *                         [--config chunk=N] */
#include "bench_probe.h"
#include "cpu/gdr_cpu_chunk.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct gcell {
    const char *name;
    int64_t B, T, Hf, HV, dk, dv;
} gcell;

static const gcell k_cells[] = {
    {"qwen3next_h16_hv32_d128", 1, 4096, 16, 32, 128, 128},
    {"b4_h4_d128", 4, 2048, 4, 4, 128, 128},
    {"b2_h2_hv6_dk48_dv40", 2, 1000, 2, 6, 48, 40},
};
/* --crossover: short sequences (docs/bench.md: the chunked path beat the sequential float32
 * path, since removed, at every length, T = 1 included) */
static const gcell k_short[] = {
    {"short_t1", 1, 1, 4, 8, 128, 128},     {"short_t8", 1, 8, 4, 8, 128, 128},
    {"short_t32", 1, 32, 4, 8, 128, 128},   {"short_t64", 1, 64, 4, 8, 128, 128},
    {"short_t128", 1, 128, 4, 8, 128, 128}, {"short_t512", 1, 512, 4, 8, 128, 128},
};

typedef cg_status (*gdr_fn)(cg_context *, const cg_gdr_prob *, const cg_cfg *, const cg_exec *);
static const struct {
    const char *impl;
    gdr_fn fwd, bwd;
} k_impls[] = {
    {"chunkgen_cpu", cg__gdr_cpu_chunk_fwd, cg__gdr_cpu_chunk_bwd},
};

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *fill(int64_t n, uint64_t *s, float lo, float hi) {
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (float)((*s >> 40) * (1.0 / 16777216.0));
    }
    return x;
}

static double flops_of(const gcell *c, int64_t C, int bwd) {
    const double K = (double)c->dk, V = (double)c->dv;
    double f = 0;
    for (int64_t t0 = 0; t0 < c->T; t0 += C) {
        const double L = (double)(c->T - t0 < C ? c->T - t0 : C);
        f += 6 * L * K * V + 6 * L * L * K + 4 * L * L * V + L * L * L / 3;
        if (bwd) f += 16 * L * K * V + 18 * L * L * K + 10 * L * L * V + 4 * L * L * L;
    }
    return f * (double)(c->B * c->HV);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int threads[8] = {1, 2}, nth = 2, quick = 0, crossover = 0;
    double min_time = 2.0;
    const char *out = NULL, *config = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nth = 0;
            for (char *s = strtok(argv[++i], ","); s && nth < 8; s = strtok(NULL, ",")) threads[nth++] = atoi(s);
        } else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = 1, min_time = 0.5;
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--crossover")) crossover = 1;
        else {
            fprintf(stderr, "usage: %s [--threads 1,2] [--min-time S] [--out FILE] [--quick] [--crossover] [--config k=v,..]\n",
                    argv[0]);
            return 2;
        }
    }
    json_t *results = json_array(), *devs = json_object();
    cpu_info ci0;
    for (int ti = 0; ti < nth; ti++) {
        const int nt = threads[ti];
        cpu_info ci;
        bench_cpu_probe(&ci, nt, 1);
        if (ti == 0) ci0 = ci;
        char key[16];
        snprintf(key, sizeof key, "%d", nt);
        json_object_set_new(devs, key, json_pack("{s:f, s:f, s:f, s:f}", "fma_peak_gflops_nominal", ci.peak_nominal,
                                                 "fma_peak_gflops_measured", ci.peak_meas,
                                                 "fma_peak_gflops_measured_cpu", ci.peak_meas_cpu,
                                                 "mem_bw_gbs_measured", ci.bw_meas));
        fprintf(stderr, "threads %d: FMA peak measured %.1f GFLOP/s (per CPU-second x threads %.1f; nominal %.1f), %s, "
                "isa %s\n", nt, ci.peak_meas, ci.peak_meas_cpu, ci.peak_nominal, ci.model, ci.isa);
        cg_context *ctx;
        cg_cfg cfg; /* the chunked path's pins (chunk=, threads=) */
        if (cg_context_create(&ctx) != CG_OK || cg_context_set_threads(ctx, nt) != CG_OK ||
            cg__cfg_parse(ctx, config, &cfg) != CG_OK) {
            fprintf(stderr, "--config %s: %s\n", config, ctx ? cg_errmsg(ctx) : "no context");
            return 1;
        }
        const gcell *cells = crossover ? k_short : k_cells;
        const size_t ncells = crossover ? sizeof k_short / sizeof k_short[0] : sizeof k_cells / sizeof k_cells[0];
        for (size_t ci_ = 0; ci_ < ncells; ci_++) {
            const gcell *c = &cells[ci_];
            const int64_t T = quick ? c->T / 4 : c->T;
            gcell cc = *c;
            cc.T = T;
            uint64_t seed = 12345 + ci_;
            const int64_t nq = c->B * T * c->Hf * c->dk, nv = c->B * T * c->HV * c->dv, na = c->B * T * c->HV,
                          ns = c->B * c->HV * c->dk * c->dv;
            float *q = fill(nq, &seed, -1, 1), *k = fill(nq, &seed, -1, 1), *v = fill(nv, &seed, -1, 1);
            float *g = fill(na, &seed, -0.5f, -0.01f), *beta = fill(na, &seed, 0.0f, 1.0f), *h0 = fill(ns, &seed, -1, 1);
            float *dout = fill(nv, &seed, -1, 1), *o = calloc((size_t)nv, 4), *hT = calloc((size_t)ns, 4);
            float *dq = calloc((size_t)nq, 4), *dk = calloc((size_t)nq, 4), *dv = calloc((size_t)nv, 4);
            float *dg = calloc((size_t)na, 4), *db = calloc((size_t)na, 4), *dh0 = calloc((size_t)ns, 4);
            cg_gdr_prob p;
            memset(&p, 0, sizeof p);
            CG_DIM(&p, B) = c->B, CG_DIM(&p, T) = T, CG_DIM(&p, G) = c->Hf, CG_DIM(&p, H) = c->HV, CG_DIM(&p, DK) = c->dk, CG_DIM(&p, DV) = c->dv, p.dtype = CG_F32;
            p.scale = 1.0 / sqrt((double)c->dk), p.l2norm = 1;
#define V4(ptr, n, d) (cg_view){ptr, CG_F32, {T * (n) * (d), (n) * (d), (d), 1}}
#define V3(ptr) (cg_view){ptr, CG_F32, {T * c->HV, c->HV, 1, 0}}
#define VS(ptr) (cg_view){ptr, CG_F32, {c->HV * c->dk * c->dv, c->dk * c->dv, c->dv, 1}}
            p.q = V4(q, c->Hf, c->dk), p.k = V4(k, c->Hf, c->dk), p.v = V4(v, c->HV, c->dv), p.g = V3(g);
            p.beta = V3(beta), p.h0 = VS(h0), p.o = V4(o, c->HV, c->dv), p.hT = VS(hT), p.dout = V4(dout, c->HV, c->dv);
            p.grad_q = V4(dq, c->Hf, c->dk), p.grad_k = V4(dk, c->Hf, c->dk), p.grad_v = V4(dv, c->HV, c->dv);
            p.grad_g = V3(dg), p.grad_beta = V3(db), p.grad_h0 = VS(dh0);
            for (size_t im = 0; im < sizeof k_impls / sizeof k_impls[0]; im++)
            for (int mode = 0; mode < 2; mode++) {
                double samples[256], cpu[256];
                int ns_ = 0;
                double t_all = 0;
                for (int r = 0; r < 256 && (r < 3 || t_all < min_time); r++) { /* run 0: warm-up */
                    const double t0 = clock_s(CLOCK_MONOTONIC), u0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
                    const cg_cfg *pc = im == 0 ? &cfg : NULL;
                    cg_status st = k_impls[im].fwd(ctx, &p, pc, NULL);
                    if (st == CG_OK && mode) st = k_impls[im].bwd(ctx, &p, pc, NULL);
                    const double t = clock_s(CLOCK_MONOTONIC) - t0, u = clock_s(CLOCK_PROCESS_CPUTIME_ID) - u0;
                    if (st != CG_OK) {
                        fprintf(stderr, "%s: %s\n", c->name, cg_errmsg(ctx));
                        return 1;
                    }
                    if (r > 0) samples[ns_] = t, cpu[ns_++] = u, t_all += t;
                }
                qsort(cpu, (size_t)ns_, sizeof(double), cmp_d);
                qsort(samples, (size_t)ns_, sizeof(double), cmp_d);
                const double med = samples[ns_ / 2], fl = flops_of(&cc, 64, mode), gf = fl / med * 1e-9;
                const double cmed = cpu[ns_ / 2], gfc = fl / cmed * 1e-9 * nt; /* per CPU-second, times threads */
                json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:i}", "impl",
                                        k_impls[im].impl, "op", "gdr", "mode", mode ? "fwd_bwd" : "fwd", "config",
                                        c->name, "batch", (json_int_t)c->B, "groups", (json_int_t)c->Hf, "heads",
                                        (json_int_t)c->HV, "seq", (json_int_t)T, "dk", (json_int_t)c->dk, "dv",
                                        (json_int_t)c->dv, "layout", "token", "dtype", "f32", "threads", nt);
                json_object_update_new(
                    row, json_pack("{s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s}", "inner", 1, "samples", ns_,
                                   "median_ms", med * 1e3, "q1_ms", samples[ns_ / 4] * 1e3, "q3_ms",
                                   samples[3 * ns_ / 4] * 1e3, "flops", fl, "gflops", gf, "frac_flops",
                                   gf / ci.peak_meas, "frac_flops_nominal", gf / ci.peak_nominal, "dispatch",
                                   cg_last_dispatch(ctx)));
                json_object_update_new(row, json_pack("{s:f, s:f}", "cpu_ms", cmed * 1e3, "gflops_cpu", gfc));
                json_array_append_new(results, row);
                fprintf(stderr, "  %-16s %-24s %-7s %dt  %9.3f ms (cpu %9.3f)  %6.1f GFLOP/s (cpu-time %6.1f)  %5.1f%% / %5.1f%%\n",
                        k_impls[im].impl, c->name, mode ? "fwd_bwd" : "fwd", nt, med * 1e3, cmed * 1e3, gf, gfc, 100 * gf / ci.peak_meas,
                        100 * gfc / ci.peak_meas_cpu);
            }
            float *all[] = {q, k, v, g, beta, h0, dout, o, hT, dq, dk, dv, dg, db, dh0};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
        }
        cg_context_free(ctx);
        /* the peak again after the cells: on a shared machine the better of the two is the
         * core's (frac_flops_cpu: the rows' flops per CPU-second against it) */
        cpu_info ce;
        bench_cpu_probe(&ce, nt, 1);
        const double best = ce.peak_meas_cpu > ci.peak_meas_cpu ? ce.peak_meas_cpu : ci.peak_meas_cpu;
        json_object_set_new(json_object_get(devs, key), "fma_peak_gflops_measured_after", json_real(ce.peak_meas));
        json_object_set_new(json_object_get(devs, key), "fma_peak_gflops_measured_cpu_after",
                            json_real(ce.peak_meas_cpu));
        size_t ri;
        json_t *row;
        json_array_foreach(results, ri, row) {
            if (json_integer_value(json_object_get(row, "threads")) != nt) continue;
            json_object_set_new(row, "frac_flops_cpu",
                                json_real(json_real_value(json_object_get(row, "gflops_cpu")) / best));
        }
        fprintf(stderr, "threads %d: FMA peak measured after %.1f GFLOP/s (per CPU-second x threads: %.1f before, %.1f "
                "after)\n", nt, ce.peak_meas, ci.peak_meas_cpu, ce.peak_meas_cpu);
    }
    json_t *dev = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:f, s:o}", "backend", "cpu", "device_kind", "cpu", "cpu",
                            ci0.model, "cores", ci0.cores, "simd", ci0.simd, "cpu_isa", ci0.isa, "cpu_mhz", ci0.mhz,
                            "peaks_by_threads", devs);
    json_t *jcfg = json_pack("{s:s, s:s, s:s, s:f, s:b}", "pins", config, "flops",
                            "MATH_GDN.md dense count per chunk and value head: fwd 6CKV + 6C^2K + 4C^2V + C^3/3, "
                            "bwd 16CKV + 18C^2K + 10C^2V + 4C^3 (C = 64, whatever the chunk pin)",
                            "inputs",
                            "q, k, v, h0, dout ~ U(-1, 1), g ~ U(-0.5, -0.01), beta ~ U(0, 1); l2norm on, h0 given, "
                            "hT returned, dhT absent; fwd_bwd = one forward + one backward call",
                            "min_time_s", min_time, "quick", quick);
    json_t *top = json_pack("{s:o, s:o, s:o}", "device", dev, "config", jcfg, "results", results);
    if (out) {
        if (json_dump_file(top, out, JSON_INDENT(1)) != 0) return 1;
    } else {
        json_dumpf(top, stdout, JSON_INDENT(1));
    }
    json_decref(top);
    return 0;
}
