/* sscan_cpu_bench.c -- times the CPU path of the selective scan (float32), forward and
 * forward+backward, at batch 4, state 16, seq 2048, dim 256 and 1024, B/C ungrouped,
 * z, D, delta_bias and softplus on. Layout bld: x, delta, z, dy [B, L, D] and B, C
 * [B, L, N] contiguous; layout bdl: [B, D, L] and [B, N, L] memory (mamba's
 * selective_scan_fn), given through strides.
 *
 * Build by hand against the built library, e.g.:
 *   gcc -O2 -std=c11 -Iinclude bench/sscan_cpu_bench.c build/libchunkgen.a \
 *       -llua5.4 -ljansson -lpthread -ldl -lm -o sscan_cpu_bench
 * Usage: sscan_cpu_bench [threads (0 = all cores)] [reps] [config|default] [bld|bdl]
 *   e.g. sscan_cpu_bench 2 5 "segment=64,block_d=32" bdl */
#define _POSIX_C_SOURCE 200809L
#include "chunkgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
/* CPU time of the whole process: on a loaded machine, with threads=1, it shows the
 * compute time that the wall clock hides. */
static double cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

static float *buf(int64_t n, unsigned *seed, float lo, float hi) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f;
    }
    return p;
}

static cg_tensor tens(float *p, int nd, int64_t a, int64_t b, int64_t c) {
    int64_t sh[3] = {a, b, c};
    return cg_tensor_contiguous(p, CG_F32, nd, sh);
}

/* [a, b, c] stored as [a, c, b] when transposed (bdl layout). */
static cg_tensor tens3(float *p, int64_t a, int64_t b, int64_t c, int transposed) {
    cg_tensor t = tens(p, 3, a, b, c);
    if (transposed) {
        t.stride[0] = b * c;
        t.stride[1] = 1;
        t.stride[2] = b;
    }
    return t;
}

#define CHECK(x)                                                                    \
    do {                                                                            \
        cg_status s_ = (x);                                                         \
        if (s_) { fprintf(stderr, "%s: %s\n", #x, cg_errmsg(ctx)); exit(1); }      \
    } while (0)

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    const char *config = argc > 3 && strcmp(argv[3], "default") != 0 ? argv[3] : NULL;
    const int bdl = argc > 4 && strcmp(argv[4], "bdl") == 0;
    cg_context *ctx;
    if (cg_context_create(&ctx)) return 1;
    CHECK(cg_context_set_threads(ctx, threads));
    const int64_t Bt = 4, L = 2048, N = 16;
    const int64_t dims[2] = {256, 1024};
    printf("selective scan, CPU path, threads=%d, config=%s, layout %s, batch %lld, seq %lld, state %lld (best of %d)\n",
           threads, config ? config : "default", bdl ? "bdl" : "bld", (long long)Bt, (long long)L, (long long)N, reps);
    for (int di = 0; di < 2; di++) {
        const int64_t D = dims[di], nx = Bt * L * D;
        unsigned seed = 1;
        float *x = buf(nx, &seed, -1, 1), *delta = buf(nx, &seed, -3, 0), *z = buf(nx, &seed, -2, 2);
        float *A = buf(D * N, &seed, -8, -0.5f), *Bm = buf(Bt * L * N, &seed, -1, 1);
        float *Cm = buf(Bt * L * N, &seed, -1, 1);
        float *Dv = buf(D, &seed, -1, 1), *bias = buf(D, &seed, -1, 0), *dy = buf(nx, &seed, -1, 1);
        float *y = buf(nx, &seed, 0, 0), *hT = buf(Bt * D * N, &seed, 0, 0);
        float *dx = buf(nx, &seed, 0, 0), *dd = buf(nx, &seed, 0, 0), *dz = buf(nx, &seed, 0, 0);
        float *dA = buf(D * N, &seed, 0, 0), *dB = buf(Bt * L * N, &seed, 0, 0);
        float *dC = buf(Bt * L * N, &seed, 0, 0);
        float *dD = buf(D, &seed, 0, 0), *dbias = buf(D, &seed, 0, 0);
#define BLD(p) tens3(p, Bt, L, D, bdl)
#define BLN(p) tens3(p, Bt, L, N, bdl)
        cg_sscan_fwd_args fa = {.x = BLD(x), .delta = BLD(delta), .A = tens(A, 2, D, N, 0), .B = BLN(Bm),
                                .C = BLN(Cm), .D = tens(Dv, 1, D, 0, 0), .z = BLD(z),
                                .delta_bias = tens(bias, 1, D, 0, 0), .delta_softplus = 1, .y = BLD(y),
                                .hT = tens(hT, 3, Bt, D, N)};
        cg_sscan_bwd_args ba = {.x = fa.x, .delta = fa.delta, .A = fa.A, .B = fa.B, .C = fa.C, .D = fa.D, .z = fa.z,
                                .delta_bias = fa.delta_bias, .delta_softplus = 1, .dy = BLD(dy), .dx = BLD(dx),
                                .ddelta = BLD(dd), .dA = tens(dA, 2, D, N, 0), .dB = BLN(dB), .dC = BLN(dC),
                                .dD = tens(dD, 1, D, 0, 0), .dz = BLD(dz), .ddelta_bias = tens(dbias, 1, D, 0, 0)};
        const cg_exec ex = {.backend = CG_BACKEND_CPU, .config = config};
        double best_f = 1e30, best_fb = 1e30, cpu_f = 1e30, cpu_fb = 1e30;
        CHECK(cg_sscan_fwd(ctx, &fa, &ex)); /* warm-up: pool, pages */
        for (int r = 0; r < reps; r++) {
            double t0 = now_ms(), c0 = cpu_ms();
            CHECK(cg_sscan_fwd(ctx, &fa, &ex));
            double t1 = now_ms(), c1 = cpu_ms();
            CHECK(cg_sscan_bwd(ctx, &ba, &ex));
            double t2 = now_ms(), c2 = cpu_ms();
            if (t1 - t0 < best_f) best_f = t1 - t0;
            if (t2 - t0 < best_fb) best_fb = t2 - t0;
            if (c1 - c0 < cpu_f) cpu_f = c1 - c0;
            if (c2 - c0 < cpu_fb) cpu_fb = c2 - c0;
        }
        /* exp count: B L D N forward; the backward recomputes twice. */
        printf("  dim %5lld: fwd %8.2f ms  fwd+bwd %8.2f ms  (cpu time: fwd %.2f ms, fwd+bwd %.2f ms; "
               "fwd %.2f ns per state update)\n",
               (long long)D, best_f, best_fb, cpu_f, cpu_fb, best_f * 1e6 / (double)(Bt * L * D * N));
        float *all[] = {x, delta, z, A, Bm, Cm, Dv, bias, dy, y, hT, dx, dd, dz, dA, dB, dC, dD, dbias};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
    cg_context_free(ctx);
    return 0;
}
