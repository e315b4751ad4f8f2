/* ssd_cpu_bench.c -- times the SSD CPU path on the seed shapes (not built by CMake).
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/ssd_cpu_bench.c build/libchunkgen.a \
 *       -llua5.4 -ljansson -lpthread -ldl -lm -o ssd_cpu_bench
 *   ./ssd_cpu_bench [T=2048] [threads=0] [config] [reps=5] [shape names]
 * Prints the best of `reps` timed runs (BENCH_MEDIAN=1: the median) after one warm-up.
 *
 * GFLOP/s count the chunked algorithm's matrix products per (b, h, chunk of L tokens):
 *   forward   2 L^2 dk + 2 L^2 dv + 4 L dk dv           (Q K^T, P V, Q S, state update)
 *   backward  6 L^2 dk + 4 L^2 dv + 10 L dk dv          (P, dP, dQ, dK, dV, dS and the
 *                                                         recomputed states)
 * as dense L x L products ("dense"), and with the causal half of each L x L product
 * ("causal", L (L + 1) / 2 instead of L^2), which is what the code executes.
 * "per cpu-second" divides by the process CPU time instead of the wall time: on a shared
 * machine it shows the speed of each thread while it ran. */
#include "chunkgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clk(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double now(void) { return clk(CLOCK_MONOTONIC); }
static double cpu(void) { return clk(CLOCK_PROCESS_CPUTIME_ID); }

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *rnd(int64_t n, float lo, float hi, unsigned *seed) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) abort();
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f;
    }
    return p;
}

typedef struct shape { const char *name; int64_t B, G, H, dk, dv; } shape;

static void flops(const shape *s, int64_t T, int64_t C, int causal, double *fwd, double *bwd) {
    *fwd = *bwd = 0;
    for (int64_t t0 = 0; t0 < T; t0 += C) {
        double L = (double)(T - t0 < C ? T - t0 : C);
        double LL = causal ? L * (L + 1) / 2 : L * L, dk = (double)s->dk, dv = (double)s->dv;
        *fwd += 2 * LL * dk + 2 * LL * dv + 4 * L * dk * dv;
        *bwd += 6 * LL * dk + 4 * LL * dv + 10 * L * dk * dv;
    }
    *fwd *= (double)(s->B * s->H);
    *bwd *= (double)(s->B * s->H);
}

int main(int argc, char **argv) {
    int64_t T = argc > 1 ? atoll(argv[1]) : 2048;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    const char *config = argc > 3 && argv[3][0] ? argv[3] : NULL;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    static const shape shapes[] = {{"g1h1_d128", 4, 1, 1, 128, 128},
                                   {"g2h8_d128", 4, 2, 8, 128, 128},
                                   {"g1h24_dk128_dv64", 2, 1, 24, 128, 64},
                                   {"g2h4_dk48_dv40", 4, 2, 4, 48, 40}};
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return 1;
    if (threads > 0) cg_context_set_threads(ctx, threads);
    cg_exec ex = {CG_BACKEND_CPU, config, NULL, NULL, 0, 0};
    for (unsigned si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        if (argc > 5 && !strstr(argv[5], s->name)) continue;
        unsigned seed = 7;
        int64_t nq = s->B * T * s->G * s->dk, nv = s->B * T * s->H * s->dv, nl = s->B * T * s->H;
        float *q = rnd(nq, -1, 1, &seed), *k = rnd(nq, -1, 1, &seed), *v = rnd(nv, -1, 1, &seed);
        float *la = rnd(nl, -0.3f, 0, &seed), *dout = rnd(nv, -1, 1, &seed);
        float *o = malloc((size_t)nv * 4), *dq = malloc((size_t)nq * 4), *dk = malloc((size_t)nq * 4);
        float *dv = malloc((size_t)nv * 4), *dla = malloc((size_t)nl * 4);
        int64_t sq[4] = {s->B, T, s->G, s->dk}, sv[4] = {s->B, T, s->H, s->dv}, sl[3] = {s->B, T, s->H};
        cg_ssd_fwd_args fa;
        memset(&fa, 0, sizeof fa);
        fa.q = cg_tensor_contiguous(q, CG_F32, 4, sq);
        fa.k = cg_tensor_contiguous(k, CG_F32, 4, sq);
        fa.v = cg_tensor_contiguous(v, CG_F32, 4, sv);
        fa.log_alpha = cg_tensor_contiguous(la, CG_F32, 3, sl);
        fa.o = cg_tensor_contiguous(o, CG_F32, 4, sv);
        cg_ssd_bwd_args ba;
        memset(&ba, 0, sizeof ba);
        ba.q = fa.q; ba.k = fa.k; ba.v = fa.v; ba.log_alpha = fa.log_alpha;
        ba.dout = cg_tensor_contiguous(dout, CG_F32, 4, sv);
        ba.dq = cg_tensor_contiguous(dq, CG_F32, 4, sq);
        ba.dk = cg_tensor_contiguous(dk, CG_F32, 4, sq);
        ba.dv = cg_tensor_contiguous(dv, CG_F32, 4, sv);
        ba.dlog_alpha = cg_tensor_contiguous(dla, CG_F32, 3, sl);
        double tf[64], tb[64], cf[64], cb[64];
        if (reps > 64) reps = 64;
        for (int r = -1; r < reps; r++) {
            double t0 = now(), c0 = cpu();
            if (cg_ssd_fwd(ctx, &fa, &ex) != CG_OK) { fprintf(stderr, "fwd: %s\n", cg_errmsg(ctx)); return 1; }
            double t1 = now(), c1 = cpu();
            if (cg_ssd_bwd(ctx, &ba, &ex) != CG_OK) { fprintf(stderr, "bwd: %s\n", cg_errmsg(ctx)); return 1; }
            double t2 = now(), c2 = cpu();
            if (r >= 0) tf[r] = t1 - t0, tb[r] = t2 - t0, cf[r] = c1 - c0, cb[r] = c2 - c0;
        }
        qsort(tf, (size_t)reps, sizeof(double), cmpd);
        qsort(tb, (size_t)reps, sizeof(double), cmpd);
        qsort(cf, (size_t)reps, sizeof(double), cmpd);
        qsort(cb, (size_t)reps, sizeof(double), cmpd);
        /* best of the runs: the machine is shared, and the best run is the least disturbed */
        double mf = getenv("BENCH_MEDIAN") ? tf[reps / 2] : tf[0], mb = getenv("BENCH_MEDIAN") ? tb[reps / 2] : tb[0];
        /* flops at the chunk the dispatch line reports */
        int64_t C = 64;
        const char *d = strstr(cg_last_dispatch(ctx), "chunk=");
        if (d) C = atoll(d + 6);
        double ffd, fbd, ffc, fbc;
        flops(s, T, C, 0, &ffd, &fbd);
        flops(s, T, C, 1, &ffc, &fbc);
        printf("%-18s T=%-5lld fwd %8.2f ms %6.1f GFLOP/s dense %6.1f causal | fwd+bwd %8.2f ms %6.1f dense %6.1f causal"
               " | per cpu-second: fwd %6.1f fwd+bwd %6.1f dense  [%s]\n",
               s->name, (long long)T, mf * 1e3, ffd / mf * 1e-9, ffc / mf * 1e-9, mb * 1e3, (ffd + fbd) / mb * 1e-9,
               (ffc + fbc) / mb * 1e-9, ffd / cf[0] * 1e-9, (ffd + fbd) / cb[0] * 1e-9, cg_last_dispatch(ctx));
        free(q); free(k); free(v); free(la); free(dout); free(o); free(dq); free(dk); free(dv); free(dla);
    }
    cg_context_free(ctx);
    return 0;
}
