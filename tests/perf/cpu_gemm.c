/* cpu_gemm.c -- the SSD CPU path's GEMMs: chunkgen's register-blocked micro-kernels
 * (runtime/cpu/ssd_cpu_gemm.c, the variant this CPU runs) against small-GEMM libraries
 * in the same run, at the operand shapes one chunk of the SSD forward and backward
 * multiplies (ssd_cpu_fwd.c, ssd_cpu_bwd.c), on one thread, operands hot in cache as
 * they are inside a chunk.
 *
 * The libraries: BLIS and OpenBLAS (serial builds, cblas_sgemm, each dlopen'ed with
 * RTLD_LOCAL so that their BLAS symbols do not clash) and libxsmm (linked in, JIT). A
 * library that is not there is reported as missing, not guessed. A library computes
 * the dense product; where the SSD needs only a triangle (the causal Q K^T, or an
 * operand that is triangular) chunkgen's structured mode skips the zero half, and a
 * row says so: `useful_gflops` counts only the work the SSD needs, for every
 * candidate alike, so the candidates' rates compare as times do.
 *
 * Every candidate's result is checked against a float64 product of the same operands
 * before it is timed (max relative error over the part the SSD reads); a candidate that
 * disagrees is reported with ok=false and no time.
 *
 * Timing: for each row the candidates take turns, ROUNDS times, each turn a batch of
 * calls of about 20 ms; the row keeps each candidate's fastest batch (us per call).
 *
 * Usage: cg_bench_cpu_gemm [--json FILE] [--rounds N]   (tests/perf/cpu_gemm.sh)
 * A lab measurement of the library's internals (the micro-kernels themselves), so it
 * lives with the tests, which may use internal headers (docs/bench.md). */
#include "chunkgen.h"
#include "cpu/cpu_isa.h"
#include "cpu/ssd_cpu.h"
#include "gen.h"

#include <dlfcn.h>
#include <libxsmm.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* chunkgen's GEMM, one symbol per ISA variant (cpu_isa.h renames them) */
typedef void (*cg_gemm_fn)(cg_ssd_gemm_mode, int64_t, int64_t, int64_t, const float *, int64_t, int64_t,
                           const float *, int64_t, float *, int64_t, int);
void cg__ssd_gemm_baseline(cg_ssd_gemm_mode, int64_t, int64_t, int64_t, const float *, int64_t, int64_t,
                           const float *, int64_t, float *, int64_t, int);
void cg__ssd_gemm_avx2(cg_ssd_gemm_mode, int64_t, int64_t, int64_t, const float *, int64_t, int64_t,
                       const float *, int64_t, float *, int64_t, int);
void cg__ssd_gemm_avx512(cg_ssd_gemm_mode, int64_t, int64_t, int64_t, const float *, int64_t, int64_t,
                         const float *, int64_t, float *, int64_t, int);

/* cblas_sgemm, reached through dlsym */
enum { CB_ROW = 101, CB_NT = 111, CB_T = 112 };
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);

typedef struct blaslib {
    const char *name, *path;
    void *h;
    cblas_sgemm_fn sgemm;
} blaslib;
static blaslib k_blas[] = {
    {"blis", "/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4", NULL, NULL},
    {"openblas", "/usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3", NULL, NULL},
};
enum { NBLAS = sizeof k_blas / sizeof k_blas[0] };

/* One GEMM of a chunk: C (m x n) (+)= A (m x K) B (K x n), row-major B and C.
 * at: A is read through a transposed view (stored K x m). tri: which part the SSD needs. */
typedef enum tri { T_DENSE, T_KLOWER, T_KUPPER, T_NLOWER } tri;
typedef struct gemm_case {
    const char *name, *what; /* where the SSD runs it */
    int64_t m, n, K;         /* K: the whole inner dimension */
    int at, acc;
    tri t;
    int64_t kx; /* T_KLOWER: the dense columns of A before the triangle (A = [X | L]) */
} gemm_case;

typedef struct preset {
    const char *name;
    int64_t B, G, H, dk, dv;
} preset;
static const preset k_presets[] = {
    {"g2h8_d128", 4, 2, 8, 128, 128}, {"g1h24_dk128_dv64", 2, 1, 24, 128, 64}, {"g2h4_dk48_dv40", 4, 2, 4, 48, 40}};
enum { NPRESETS = sizeof k_presets / sizeof k_presets[0] };

/* The CPU path's default forward chunk for the preset at T = 2048 on 1 thread and the
 * running variant: generator/cpu/ssd_cpu.lua's default(), as the library resolves it. */
static int64_t default_chunk(cg_context *ctx, const preset *ps) {
    char text[CG_SHAPE_TEXT_MAX];
    snprintf(text, sizeof text, "ssd_fwd:B=%lld,T=2048,G=%lld,H=%lld,dk=%lld,dv=%lld", (long long)ps->B,
             (long long)ps->G, (long long)ps->H, (long long)ps->dk, (long long)ps->dv);
    cg_shape shape = CG__INIT(cg_shape);
    cg_cfg def;
    if (cg_shape_parse(ctx, text, &shape) != CG_OK || cg__cpu_space_default(ctx, "ssd_cpu", &shape, 0, &def) != CG_OK) {
        fprintf(stderr, "cg_bench_cpu_gemm: no default config for %s: %s\n", ps->name, cg_errmsg(ctx));
        exit(1);
    }
    return cg__cfg_int(&def, "chunk", 0);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The operands of one case, laid out as the SSD path lays them out (row strides padded
 * with cg__ssd_ld, A's triangle zeroed where the SSD's mode does not read it, so that the
 * dense product of a library equals the structured one). */
typedef struct operands {
    int64_t lda, ldb, ldc;
    float *A, *B, *C, *C0;
    double *ref;
} operands;

static float *alloc_f(int64_t n) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    if (!p) {
        fprintf(stderr, "cg_bench_cpu_gemm: out of memory\n");
        exit(1);
    }
    return p;
}

/* A[r, k] as the case stores it */
static float *a_at(const gemm_case *g, const operands *o, int64_t r, int64_t k) {
    return g->at ? &o->A[k * o->lda + r] : &o->A[r * o->lda + k];
}
static int a_read(const gemm_case *g, int64_t r, int64_t k) {
    if (g->t == T_KLOWER) return k < g->kx || k - g->kx <= r;
    if (g->t == T_KUPPER) return k >= r;
    return 1;
}
static int c_read(const gemm_case *g, int64_t r, int64_t c) { return g->t != T_NLOWER || c <= r; }

static void make_operands(const gemm_case *g, operands *o) {
    const int64_t arows = g->at ? g->K : g->m, acols = g->at ? g->m : g->K;
    o->lda = cg__ssd_ld(acols), o->ldb = cg__ssd_ld(g->n), o->ldc = cg__ssd_ld(g->n);
    o->A = alloc_f(arows * o->lda), o->B = alloc_f(g->K * o->ldb);
    o->C = alloc_f(g->m * o->ldc), o->C0 = alloc_f(g->m * o->ldc);
    memset(o->A, 0, (size_t)(arows * o->lda) * 4);
    memset(o->B, 0, (size_t)(g->K * o->ldb) * 4);
    for (int64_t r = 0; r < g->m; r++)
        for (int64_t k = 0; k < g->K; k++) *a_at(g, o, r, k) = a_read(g, r, k) ? frand() : 0.0f;
    for (int64_t k = 0; k < g->K; k++)
        for (int64_t c = 0; c < g->n; c++) o->B[k * o->ldb + c] = frand();
    for (int64_t i = 0; i < g->m * o->ldc; i++) o->C0[i] = g->acc ? frand() : 0.0f;
    o->ref = malloc((size_t)(g->m * g->n) * sizeof(double));
    for (int64_t r = 0; r < g->m; r++)
        for (int64_t c = 0; c < g->n; c++) {
            double s = g->acc ? o->C0[r * o->ldc + c] : 0.0;
            for (int64_t k = 0; k < g->K; k++) s += (double)*a_at(g, o, r, k) * o->B[k * o->ldb + c];
            o->ref[r * g->n + c] = s;
        }
}

/* the work the SSD needs, in flops */
static double useful_flops(const gemm_case *g) {
    double f = 0;
    for (int64_t r = 0; r < g->m; r++)
        for (int64_t k = 0; k < g->K; k++)
            if (a_read(g, r, k)) f += 2.0 * (double)(g->t == T_NLOWER ? (r + 1 < g->n ? r + 1 : g->n) : g->n);
    return f;
}

/* ---- the candidates */
typedef enum cand_kind { K_CG_MODE, K_CG_DENSE, K_BLAS, K_XSMM } cand_kind;
typedef struct cand {
    const char *name;
    cand_kind kind;
    int lib;
} cand;

typedef struct runner {
    const gemm_case *g;
    operands *o;
    cg_gemm_fn cg;
    libxsmm_smmfunction xk;
} runner;

static void call(const runner *u, const cand *c) {
    const gemm_case *g = u->g;
    const operands *o = u->o;
    const int64_t ars = g->at ? 1 : o->lda, aks = g->at ? o->lda : 1;
    switch (c->kind) {
    case K_CG_MODE:
    case K_CG_DENSE: {
        cg_ssd_gemm_mode mode = CG_SSD_DENSE;
        int64_t K = g->K;
        if (c->kind == K_CG_MODE) {
            if (g->t == T_KLOWER) mode = CG_SSD_KLOWER, K = g->kx; /* the triangle's width is m */
            if (g->t == T_KUPPER) mode = CG_SSD_KUPPER;
            if (g->t == T_NLOWER) mode = CG_SSD_NLOWER;
        }
        u->cg(mode, g->m, cg__ssd_pad(g->n), K, o->A, ars, aks, o->B, o->ldb, o->C, o->ldc, g->acc);
        break;
    }
    case K_BLAS:
        k_blas[c->lib].sgemm(CB_ROW, g->at ? CB_T : CB_NT, CB_NT, (int)g->m, (int)g->n, (int)g->K, 1.0f, o->A,
                             (int)o->lda, o->B, (int)o->ldb, g->acc ? 1.0f : 0.0f, o->C, (int)o->ldc);
        break;
    case K_XSMM: /* column-major: C^T = B^T A^T */
        u->xk(o->B, o->A, o->C);
        break;
    }
}

static double check(const runner *u, const cand *c) {
    const gemm_case *g = u->g;
    operands *o = u->o;
    memcpy(o->C, o->C0, (size_t)(g->m * o->ldc) * 4);
    call(u, c);
    double err = 0, scale = 0;
    for (int64_t r = 0; r < g->m; r++)
        for (int64_t col = 0; col < g->n; col++)
            if (c_read(g, r, col)) {
                const double ref = o->ref[r * g->n + col];
                err = fmax(err, fabs(o->C[r * o->ldc + col] - ref));
                scale = fmax(scale, fabs(ref));
            }
    return err / (scale > 0 ? scale : 1);
}

int main(int argc, char **argv) {
    const char *json = NULL;
    int rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cg_bench_cpu_gemm [--json FILE] [--rounds N]\n");
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    const cg_cpu_isa_ops *isa = cg__cpu_isa_ops();
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK || cg_context_set_threads(ctx, 1) != CG_OK) {
        fprintf(stderr, "cg_bench_cpu_gemm: cannot create a chunkgen context\n");
        return 1;
    }
    cg_gemm_fn cgf = isa->isa == CG_ISA_AVX512 ? cg__ssd_gemm_avx512
                     : isa->isa == CG_ISA_AVX2 ? cg__ssd_gemm_avx2
                                               : cg__ssd_gemm_baseline;
    for (int l = 0; l < NBLAS; l++) {
        k_blas[l].h = dlopen(k_blas[l].path, RTLD_NOW | RTLD_LOCAL);
        if (k_blas[l].h) k_blas[l].sgemm = (cblas_sgemm_fn)dlsym(k_blas[l].h, "cblas_sgemm");
        if (!k_blas[l].sgemm)
            fprintf(stderr, "cg_bench_cpu_gemm: %s not measured: %s has no cblas_sgemm (%s)\n", k_blas[l].name,
                    k_blas[l].path, dlerror());
    }
    libxsmm_init();

    cand cands[8];
    int nc = 0;
    cands[nc++] = (cand){"chunkgen", K_CG_MODE, 0};
    cands[nc++] = (cand){"chunkgen_dense", K_CG_DENSE, 0};
    for (int l = 0; l < NBLAS; l++)
        if (k_blas[l].sgemm) cands[nc++] = (cand){k_blas[l].name, K_BLAS, l};
    cands[nc++] = (cand){"libxsmm", K_XSMM, 0};

    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) {
        fprintf(stderr, "cg_bench_cpu_gemm: cannot write %s\n", json);
        return 1;
    }
    if (jf) {
        fprintf(jf, "{\n  \"bench\": \"cpu_gemm\",\n  \"isa\": \"%s\",\n  \"threads\": 1,\n  \"rounds\": %d,\n", isa->name,
                rounds);
        fprintf(jf, "  \"libxsmm_version\": \"%s\",\n  \"rows\": [\n", LIBXSMM_VERSION);
    }
    printf("%-18s %-22s %-14s", "preset", "gemm", "m x n x K");
    for (int c = 0; c < nc; c++) printf(" %15s", cands[c].name);
    printf("   (useful GFLOP/s, 1 thread, %s)\n", isa->name);
    int first = 1;
    for (int p = 0; p < NPRESETS; p++) {
        const preset *ps = &k_presets[p];
        const int64_t L = default_chunk(ctx, ps);
        const gemm_case cases[] = {
            {"fwd_state", "S += (K diag w)^T V", ps->dk, ps->dv, L, 0, 1, T_DENSE, 0},
            {"fwd_out", "O = [e^A Q | P] [S; V]", L, ps->dv, ps->dk + L, 0, 0, T_KLOWER, ps->dk},
            {"fwd_qk", "P = Q K^T (causal)", L, L, ps->dk, 0, 0, T_NLOWER, 0},
            {"bwd_dstate", "dS += Q^T (e^A dO)", ps->dk, ps->dv, L, 1, 1, T_DENSE, 0},
            {"bwd_dk", "dK += dP^T Q (causal)", L, ps->dk, L, 1, 1, T_KUPPER, 0},
        };
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const gemm_case *g = &cases[ci];
            operands o;
            make_operands(g, &o);
            runner u = {g, &o, cgf, NULL};
            {
                const libxsmm_blasint M = (libxsmm_blasint)g->n, N = (libxsmm_blasint)g->m,
                                      K = (libxsmm_blasint)g->K;
                const libxsmm_blasint lda = (libxsmm_blasint)o.ldb, ldb = (libxsmm_blasint)o.lda,
                                      ldc = (libxsmm_blasint)o.ldc;
                const float alpha = 1.0f, beta = g->acc ? 1.0f : 0.0f;
                const int flags = g->at ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
                u.xk = libxsmm_smmdispatch(M, N, K, &lda, &ldb, &ldc, &alpha, &beta, &flags, NULL);
            }
            const double flops = useful_flops(g);
            double best[8], err[8];
            int ok[8];
            for (int c = 0; c < nc; c++) {
                ok[c] = !(cands[c].kind == K_XSMM && !u.xk);
                err[c] = ok[c] ? check(&u, &cands[c]) : NAN;
                if (ok[c] && !(err[c] < 1e-5)) ok[c] = 0;
                best[c] = INFINITY;
            }
            /* calls per batch: about 20 ms of the first candidate */
            int64_t reps = 1;
            for (;;) {
                const double t0 = now_s();
                for (int64_t r = 0; r < reps; r++) call(&u, &cands[0]);
                const double dt = now_s() - t0;
                if (dt > 0.02 || reps > (1 << 24)) break;
                reps *= 2;
            }
            for (int round = 0; round < rounds; round++)
                for (int c0 = 0; c0 < nc; c0++) {
                    const int c = (c0 + round) % nc; /* rotate who goes first */
                    if (!ok[c]) continue;
                    memcpy(o.C, o.C0, (size_t)(g->m * o.ldc) * 4);
                    const double t0 = now_s();
                    for (int64_t r = 0; r < reps; r++) call(&u, &cands[c]);
                    const double us = (now_s() - t0) / (double)reps * 1e6;
                    if (us < best[c]) best[c] = us;
                }
            char dims[40];
            snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)g->m, (long long)g->n, (long long)g->K);
            printf("%-18s %-22s %-14s", ps->name, g->name, dims);
            for (int c = 0; c < nc; c++) {
                if (ok[c]) printf(" %15.1f", flops / (best[c] * 1e-6) * 1e-9);
                else printf(" %15s", u.xk || cands[c].kind != K_XSMM ? "WRONG" : "n/a");
            }
            printf("\n");
            if (jf) {
                fprintf(jf, "%s    {\"preset\": \"%s\", \"gemm\": \"%s\", \"what\": \"%s\", \"m\": %lld, \"n\": %lld, "
                            "\"K\": %lld, \"chunk\": %lld, \"a_transposed\": %s, \"accumulate\": %s, "
                            "\"structure\": \"%s\", \"useful_flops\": %.0f, \"reps_per_batch\": %lld,\n"
                            "     \"candidates\": {",
                        first ? "" : ",\n", ps->name, g->name, g->what, (long long)g->m, (long long)g->n,
                        (long long)g->K, (long long)L, g->at ? "true" : "false", g->acc ? "true" : "false",
                        g->t == T_DENSE    ? "dense"
                        : g->t == T_KLOWER ? "A = [X | lower triangle]"
                        : g->t == T_KUPPER ? "A upper triangular"
                                           : "lower triangle of C",
                        flops, (long long)reps);
                first = 0;
                for (int c = 0; c < nc; c++) {
                    fprintf(jf, "%s\"%s\": ", c ? ", " : "", cands[c].name);
                    if (ok[c])
                        fprintf(jf, "{\"ok\": true, \"us\": %.3f, \"useful_gflops\": %.2f, \"rel_err\": %.2e}", best[c],
                                flops / (best[c] * 1e-6) * 1e-9, err[c]);
                    else if (cands[c].kind == K_XSMM && !u.xk)
                        fprintf(jf, "{\"ok\": false, \"why\": \"libxsmm_smmdispatch returned no kernel\"}");
                    else fprintf(jf, "{\"ok\": false, \"why\": \"result differs from float64\", \"rel_err\": %.2e}", err[c]);
                }
                fprintf(jf, "}}");
            }
            free(o.A), free(o.B), free(o.C), free(o.C0), free(o.ref);
        }
    }
    if (jf) {
        fprintf(jf, "\n  ]\n}\n");
        fclose(jf);
    }
    libxsmm_finalize();
    cg_context_free(ctx);
    return 0;
}
