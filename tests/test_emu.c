/* test_emu.c -- the SIMT emulator (runtime/emu/, emulator/cg_emu.h) and the device
 * helpers (templates/cg_device.cuh): the kernels in tests/emu_kernels/ run through
 * the `emulate` kexec and are checked against scalar C computations. */
#include "cg_test.h"
#include "gen.h"
#include "emu/emu.h"
#include "test_emu_lib.h"

#include <float.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ basic.cu */
typedef struct emu_basic_params {
    const float *x;
    float *out;
    int *cnt;
    long long n;
} emu_basic_params;

static const char *const k_basic[] = {"emu_block_sum", "emu_dyn_reverse", "emu_indices", "emu_atomics"};

static void emu_block_reduce_body(cg_context *ctx, void *mod) {
    const long long n = 1000; /* 8 blocks of 16 x 8 threads, the last ones partial */
    const unsigned grid[3] = {4, 2, 1}, block[3] = {16, 8, 1};
    float *x = malloc(1024 * sizeof *x), out[8];
    int cnt[8];
    cg_rng r = {11};
    for (int i = 0; i < 1024; i++) x[i] = (float)cg_rng_uniform(&r, -1, 1);
    emu_basic_params p = {x, out, cnt, n};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_block_sum", grid, block, 0, &p, sizeof p));
    for (int b = 0; b < 8; b++) {
        float s[128];
        int c = 0;
        for (int t = 0; t < 128; t++) {
            long long i = b * 128 + t;
            s[t] = i < n ? x[i] : 0.f;
            c += i < n && x[i] > 0.f;
        }
        for (int h = 64; h > 0; h /= 2)
            for (int t = 0; t < h; t++) s[t] += s[t + h];
        CG_CHECK(out[b] == s[0], "block %d: sum %.9g, expected %.9g", b, out[b], s[0]);
        CG_CHECK(cnt[b] == c, "block %d: __syncthreads_count %d, expected %d", b, cnt[b], c);
    }
    free(x);
}
CG_TEST(emu_block_reduce) { emu_with_module("basic.cu", k_basic, 4, emu_block_reduce_body); }

static void emu_dyn_smem_body(cg_context *ctx, void *mod) {
    const int nt = 96, nb = 5; /* 3 warps; 65 KiB of dynamic shared memory */
    const unsigned grid[3] = {nb, 1, 1}, block[3] = {nt, 1, 1};
    float *x = malloc(nt * nb * sizeof *x), *out = malloc(nt * nb * sizeof *out);
    for (int i = 0; i < nt * nb; i++) x[i] = (float)(i * 3 % 101) - 50.f;
    emu_basic_params p = {x, out, NULL, nt * nb};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_dyn_reverse", grid, block, (16384 + nt) * 4, &p, sizeof p));
    int bad = 0;
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < nt; t++) bad += out[b * nt + t] != x[b * nt + nt - 1 - t];
    CG_CHECK(bad == 0, "%d reversed elements wrong", bad);
    /* too much shared memory is refused */
    cg_status st = emu_launch(ctx, mod, "emu_dyn_reverse", grid, block, 1 << 30, &p, sizeof p);
    CG_CHECK(st == CG_EINVAL, "1 GiB of shared memory: %s", cg_status_str(st));
    st = emu_launch(ctx, mod, "emu_dyn_reverse", grid, block, 0, &p, sizeof p - 8);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "params_size"), "wrong params size: %s", cg_errmsg(ctx));
    free(x);
    free(out);
}
CG_TEST(emu_dyn_smem) { emu_with_module("basic.cu", k_basic, 4, emu_dyn_smem_body); }

static void emu_grid_indices_body(cg_context *ctx, void *mod) {
    const unsigned grid[3] = {3, 2, 2}, block[3] = {5, 3, 2}; /* 30 threads: a partial warp */
    const int nthr = 12 * 30;
    int *rec = malloc((size_t)nthr * 12 * sizeof *rec);
    for (int i = 0; i < nthr * 12; i++) rec[i] = -1;
    emu_basic_params p = {NULL, NULL, rec, 0};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_indices", grid, block, 0, &p, sizeof p));
    int bad = 0;
    for (int bz = 0; bz < 2; bz++)
        for (int by = 0; by < 2; by++)
            for (int bx = 0; bx < 3; bx++)
                for (int tz = 0; tz < 2; tz++)
                    for (int ty = 0; ty < 3; ty++)
                        for (int tx = 0; tx < 5; tx++) {
                            int g = ((bz * 2 + by) * 3 + bx) * 30 + (tz * 3 + ty) * 5 + tx;
                            const int want[12] = {tx, ty, tz, bx, by, bz, 5, 3, 2, 3, 2, 2};
                            bad += memcmp(rec + g * 12, want, sizeof want) != 0;
                        }
    CG_CHECK(bad == 0, "%d threads saw wrong index variables", bad);
    free(rec);
}
CG_TEST(emu_grid_indices) { emu_with_module("basic.cu", k_basic, 4, emu_grid_indices_body); }

static void emu_atomics_body(cg_context *ctx, void *mod) {
    const long long n = 777;
    const unsigned grid[3] = {13, 1, 1}, block[3] = {64, 1, 1};
    int cnt[5] = {0, INT_MIN, INT_MAX, 0, 0};
    float acc = 0.f;
    emu_basic_params p = {NULL, &acc, cnt, n};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_atomics", grid, block, 0, &p, sizeof p));
    int mx = INT_MIN, mn = INT_MAX;
    for (long long i = 0; i < n; i++) {
        int v = (int)(i * 7 % 1000);
        if (v > mx) mx = v;
        if (v - 500 < mn) mn = v - 500;
    }
    CG_CHECK(cnt[0] == n, "atomicAdd count %d, expected %lld", cnt[0], n);
    CG_CHECK(cnt[1] == mx && cnt[2] == mn, "atomicMax %d (want %d), atomicMin %d (want %d)", cnt[1], mx, cnt[2], mn);
    CG_CHECK(cnt[4] == 1 && cnt[3] >= 1 && cnt[3] <= n, "atomicCAS: %d winners, value %d", cnt[4], cnt[3]);
    CG_CHECK(acc == 0.5f * (float)n, "float atomicAdd %.9g, expected %.9g", acc, 0.5 * n);
}
CG_TEST(emu_atomics) { emu_with_module("basic.cu", k_basic, 4, emu_atomics_body); }

/* ------------------------------------------------------------------- warp.cu */
typedef struct emu_warp_params {
    const int *x;
    int *out;
    float *fout;
} emu_warp_params;
#define EMU_WARP_K 16

/* CUDA's documented semantics, written independently of the emulator's PTX form. */
static int ref_shfl(const int *v, int lane, int kind, int b, int width) {
    const int seg = lane / width * width;
    int src = lane;
    switch (kind) {
    case 0: src = seg + ((b % width) + width) % width; break;               /* idx */
    case 1: src = (lane % width) >= b ? lane - b : lane; break;            /* up */
    case 2: src = (lane % width) + b < width ? lane + b : lane; break;     /* down */
    case 3: src = (lane ^ b) < seg + width ? lane ^ b : lane; break;       /* xor */
    }
    return v[src];
}

static void emu_warp_collectives_body(cg_context *ctx, void *mod) {
    const int nb = 2, nt = 64, N = nb * nt;
    const unsigned grid[3] = {nb, 1, 1}, block[3] = {nt, 1, 1};
    int *x = malloc(N * sizeof *x), *out = malloc((size_t)N * EMU_WARP_K * sizeof *out);
    float *fout = malloc(N * sizeof *fout);
    cg_rng r = {5};
    for (int i = 0; i < N; i++) x[i] = (int)(cg_rng_next(&r) % 16);
    x[32] = 3; /* warp 1 has no 7 at all, warp 2 several */
    for (int i = 32; i < 64; i++) if (x[i] == 7) x[i] = 8;
    x[70] = 7;
    emu_warp_params p = {x, out, fout};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_warp", grid, block, 0, &p, sizeof p));
    int bad = 0;
    for (int w = 0; w < N / 32; w++) {
        const int *v = x + w * 32;
        unsigned ballot = 0, sum = 0;
        int any7 = 0;
        for (int l = 0; l < 32; l++) {
            ballot |= (unsigned)(v[l] & 1) << l;
            sum += (unsigned)v[l];
            any7 |= v[l] == 7;
        }
        float f[32];
        for (int l = 0; l < 32; l++) f[l] = (float)v[l] * 0.25f;
        for (int m = 16; m > 0; m >>= 1) {
            float g[32];
            for (int l = 0; l < 32; l++) g[l] = f[l] + f[l ^ m];
            memcpy(f, g, sizeof f);
        }
        for (int l = 0; l < 32; l++) {
            const int *o = out + (size_t)(w * 32 + l) * EMU_WARP_K;
            const int want[EMU_WARP_K] = {
                ref_shfl(v, l, 3, 5, 32), ref_shfl(v, l, 2, 3, 32), ref_shfl(v, l, 1, 2, 32),
                ref_shfl(v, l, 0, l * 7 % 32, 32), ref_shfl(v, l, 3, 1, 8), ref_shfl(v, l, 2, 3, 16),
                ref_shfl(v, l, 1, 2, 8), ref_shfl(v, l, 0, 3, 8), (int)ballot, any7, 1, (int)sum,
                l < 16 ? v[l ^ 4] : ref_shfl(v, l, 2, 2, 16), v[l ^ 12], -1, v[(l + 40) % 32]};
            for (int k = 0; k < EMU_WARP_K; k++) {
                if (o[k] != want[k]) {
                    if (bad < 5) fprintf(stderr, "  warp %d lane %d item %d: %d, expected %d\n", w, l, k, o[k], want[k]);
                    bad++;
                }
            }
            if (fout[w * 32 + l] != f[l]) bad++;
        }
    }
    CG_CHECK(bad == 0, "%d warp collective results wrong", bad);
    free(x);
    free(out);
    free(fout);
}
CG_TEST(emu_warp_collectives) {
    static const char *const ent[] = {"emu_warp"};
    emu_with_module("warp.cu", ent, 1, emu_warp_collectives_body);
}

/* -------------------------------------------------------------------- mma.cu */
typedef struct emu_mma_params {
    const float *A, *B, *C;
    float *D, *D3;
    const float *cvt_in;
    unsigned *cvt_out;
    int ncvt;
    const float *src;
    float *dst;
    int misalign;
} emu_mma_params;

static const char *const k_mma[] = {"emu_mma", "emu_cvt", "emu_cp_async"};

static double round_half_away(double x) { return x < 0 ? -floor(-x + 0.5) : floor(x + 0.5); }

/* tf32 by arithmetic (not bit tricks): 11 significant bits, ties away from zero;
 * below FLT_MIN, multiples of 2^-136. */
static float ref_tf32(float x) {
    if (isnan(x) || isinf(x) || x == 0.f) return x;
    double d = x;
    if (fabs(d) < FLT_MIN) return (float)(round_half_away(d * 0x1p136) * 0x1p-136);
    int e;
    double m = frexp(d, &e); /* |m| in [0.5, 1) */
    return (float)ldexp(round_half_away(m * 2048.0), e - 11);
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void emu_mma_tf32_body(cg_context *ctx, void *mod) {
    const int tiles = 4; /* 2 blocks of 2 warps, one 16x8 tile with K = 16 per warp */
    const unsigned grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};
    float *A = malloc(tiles * 256 * sizeof *A), *B = malloc(tiles * 128 * sizeof *B);
    float *C = malloc(tiles * 128 * sizeof *C), *D = malloc(tiles * 128 * sizeof *D);
    float *D3 = malloc(tiles * 128 * sizeof *D3);
    cg_rng r = {77};
    for (int i = 0; i < tiles * 256; i++) A[i] = (float)cg_rng_uniform(&r, -1, 1);
    for (int i = 0; i < tiles * 128; i++) B[i] = (float)cg_rng_uniform(&r, -1, 1);
    for (int i = 0; i < tiles * 128; i++) C[i] = (float)cg_rng_uniform(&r, -1, 1);
    emu_mma_params p;
    memset(&p, 0, sizeof p);
    p.A = A, p.B = B, p.C = C, p.D = D, p.D3 = D3;
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_mma", grid, block, 0, &p, sizeof p));
    int bad = 0;
    double err3 = 0, errt = 0, mref = 0;
    for (int t = 0; t < tiles; t++)
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 8; n++) {
                float acc = C[t * 128 + m * 8 + n];
                double exact = acc;
                for (int k = 0; k < 16; k++) {
                    float a = A[t * 256 + m * 16 + k], b = B[t * 128 + k * 8 + n];
                    acc += ref_tf32(a) * ref_tf32(b);
                    exact += (double)a * b;
                }
                float d = D[t * 128 + m * 8 + n];
                if (f2u(d) != f2u(acc)) {
                    if (bad < 4) fprintf(stderr, "  tile %d (%d,%d): %.9g, expected %.9g\n", t, m, n, d, acc);
                    bad++;
                }
                err3 = fmax(err3, fabs(D3[t * 128 + m * 8 + n] - exact));
                errt = fmax(errt, fabs(d - exact));
                mref = fmax(mref, fabs(exact));
            }
    CG_CHECK(bad == 0, "%d tf32 mma results differ from the scalar tf32 product", bad);
    CG_CHECK(err3 / mref <= 2e-6, "3xtf32 rel err %.3g > 2e-6", err3 / mref);
    CG_CHECK(errt / mref > 1e-5 && errt > 20 * err3, "tf32 rel err %.3g vs 3xtf32 %.3g: not tf32 precision",
             errt / mref, err3 / mref);
    free(A); free(B); free(C); free(D); free(D3);
}
CG_TEST(emu_mma_tf32) { emu_with_module("mma.cu", k_mma, 3, emu_mma_tf32_body); }

static void emu_cvt_tf32_body(cg_context *ctx, void *mod) {
    enum { N = 64 };
    float in[N];
    unsigned out[N];
    const uint32_t special[] = {
        0x3F801000u, /* 1 + half a tf32 ulp: a tie, away from zero */
        0xBF801000u, 0x3F803000u, 0x3F800FFFu, 0x3F801001u, 0x3F7FF000u, /* tie that carries */
        0x7F7FF000u, /* rounds past FLT_MAX to infinity */
        0x00001000u, 0x80003000u, 0x00000FFFu, /* subnormals */
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u};
    const int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < ns; i++) in[i] = u2f(special[i]);
    cg_rng r = {3};
    for (int i = ns; i < N; i++) in[i] = (float)cg_rng_uniform(&r, -1e3, 1e3);
    emu_mma_params p;
    memset(&p, 0, sizeof p);
    p.cvt_in = in, p.cvt_out = out, p.ncvt = N;
    const unsigned grid[3] = {2, 1, 1}, block[3] = {32, 1, 1};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_cvt", grid, block, 0, &p, sizeof p));
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = ref_tf32(in[i]);
        int ok = isnan(want) ? isnan(u2f(out[i])) : out[i] == f2u(want);
        ok &= (out[i] & 0x1FFFu) == 0 || isnan(want);
        if (!ok) {
            fprintf(stderr, "  cvt.rna.tf32 of 0x%08x: 0x%08x, expected 0x%08x\n", f2u(in[i]), out[i], f2u(want));
            bad++;
        }
    }
    CG_CHECK(bad == 0, "%d tf32 conversions wrong", bad);
}
CG_TEST(emu_cvt_tf32) { emu_with_module("mma.cu", k_mma, 3, emu_cvt_tf32_body); }

static void emu_cp_async_body(cg_context *ctx, void *mod) {
    float *src = NULL, dst[320];
    CG_CHECK_OK(ctx, cg__kexec_emu.alloc(ctx, 272 * sizeof(float), (void **)&src));
    for (int i = 0; i < 272; i++) src[i] = (float)i + 0.5f;
    emu_mma_params p;
    memset(&p, 0, sizeof p);
    p.src = src, p.dst = dst;
    const unsigned grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_cp_async", grid, block, 0, &p, sizeof p));
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += dst[i] != src[i];
    for (int t = 0; t < 16; t++) {
        int nb = t > 4 ? 16 : t * 4; /* zfill: the first nb bytes copied, the rest 0 */
        for (int k = 0; k < 4; k++) bad += dst[256 + t * 4 + k] != (k * 4 < nb ? src[t * 4 + k] : 0.f);
    }
    CG_CHECK(bad == 0, "%d staged values wrong", bad);
    p.misalign = 1;
    cg_status st = emu_launch(ctx, mod, "emu_cp_async", grid, block, 0, &p, sizeof p);
    CG_CHECK(st == CG_ELAUNCH && strstr(cg_errmsg(ctx), "misaligned"), "misaligned cp.async: %s: %s",
             cg_status_str(st), cg_errmsg(ctx));
    cg__kexec_emu.free(ctx, src);
}
CG_TEST(emu_cp_async) { emu_with_module("mma.cu", k_mma, 3, emu_cp_async_body); }

/* ----------------------------------------------------------------- errors.cu */
CG_TEST(emu_bad_kernels) {
    cg_context *ctx = emu_ctx();
    if (!ctx) return;
    static const char *const ent[] = {"emu_div_exit", "emu_div_lines", "emu_deadlock", "emu_trap"};
    static const char *const want[] = {"divergent barrier", "divergent barrier", "deadlock", "__trap"};
    void *mod = emu_module(ctx, "errors.cu", ent, 4);
    if (mod) {
        float out[128];
        struct { float *out; } p = {out};
        const unsigned grid[3] = {3, 1, 1}, block[3] = {64, 1, 1};
        for (int i = 0; i < 4; i++) {
            cg_status st = emu_launch(ctx, mod, ent[i], grid, block, 0, &p, sizeof p);
            CG_CHECK(st == CG_ELAUNCH && strstr(cg_errmsg(ctx), want[i]), "%s: %s: %s", ent[i], cg_status_str(st),
                     cg_errmsg(ctx));
        }
    }
    /* the workers run good kernels again after abandoned blocks */
    void *good = emu_module(ctx, "basic.cu", k_basic, 4);
    if (good) {
        float x[256], out[2];
        int cnt[2];
        for (int i = 0; i < 256; i++) x[i] = 1.f;
        emu_basic_params p = {x, out, cnt, 256};
        const unsigned grid[3] = {2, 1, 1}, block[3] = {128, 1, 1};
        CG_CHECK_OK(ctx, emu_launch(ctx, good, "emu_block_sum", grid, block, 0, &p, sizeof p));
        CG_CHECK(out[0] == 128.f && out[1] == 128.f && cnt[0] == 128, "after errors: %g %g %d", out[0], out[1], cnt[0]);
    }
    cg_context_free(ctx);
}

/* ------------------------------------------------------------------- race.cu */
CG_TEST(emu_racecheck) {
    /* read when the context's emulator state is made (its first module load) */
    setenv("CHUNKGEN_EMU_RACECHECK", "1", 1);
    cg_context *ctx = emu_ctx();
    if (!ctx) {
        unsetenv("CHUNKGEN_EMU_RACECHECK");
        return;
    }
    static const char *const ent[] = {"emu_race_free", "emu_race_raw", "emu_race_ww", "emu_race_war"};
    static const char *const want[] = {NULL, "dynamic shared memory", "static __shared__", "write"};
    void *mod = emu_module(ctx, "race.cu", ent, 4);
    unsetenv("CHUNKGEN_EMU_RACECHECK");
    if (mod) {
        float x[96], out[96];
        for (int i = 0; i < 96; i++) x[i] = (float)i;
        struct { const float *x; float *out; } p = {x, out};
        const unsigned grid[3] = {2, 1, 1}, block[3] = {96, 1, 1};
        for (int i = 0; i < 4; i++) {
            cg_status st = emu_launch(ctx, mod, ent[i], grid, block, 128 * 4, &p, sizeof p);
            if (!want[i])
                CG_CHECK(st == CG_OK, "%s: %s", ent[i], cg_errmsg(ctx));
            else
                CG_CHECK(st == CG_ELAUNCH && strstr(cg_errmsg(ctx), "race") && strstr(cg_errmsg(ctx), want[i]),
                         "%s: %s: %s", ent[i], cg_status_str(st), cg_errmsg(ctx));
        }
        /* the race-free kernel's result */
        float s[96], v[96];
        for (int t = 0; t < 96; t++) v[t] = x[(t + 1) % 96];
        memcpy(s, v, sizeof s);
        for (int h = 16; h > 0; h >>= 1) {
            float o[32];
            for (int t = 0; t < 32; t++) o[t] = s[t + h];
            for (int t = 0; t < 32; t++) s[t] += o[t];
        }
        cg_status st = emu_launch(ctx, mod, "emu_race_free", grid, block, 128 * 4, &p, sizeof p);
        int bad = st != CG_OK;
        for (int t = 0; t < 96; t++) bad += out[t] != s[t] + s[0];
        CG_CHECK(bad == 0, "race-free kernel: %d wrong", bad);
    }
    cg_context_free(ctx);
}

/* --------------------------------------------------------- loader and cache */
CG_TEST(emu_rewrite_extern_shared) {
    char why[256];
    const char *src = "extern __shared__ __align__(16) unsigned char raw[]; // ns scope\n"
                      "__global__ void k() {\n"
                      "  /* extern __shared__ float no[]; */ const char *s = \"extern __shared__ int n[];\";\n"
                      "  extern __shared__ float smem[];\n"
                      "  extern\n __shared__ float4 v [ ] ;\n"
                      "}\n";
    char *out = cg__emu_rewrite_source(src, why, sizeof why);
    CG_CHECK(out != NULL, "rewrite: %s", why);
    if (!out) return;
    CG_CHECK(strstr(out, "#define raw (reinterpret_cast<unsigned char *>(::cg_emu::dyn_smem()))"), "%s", out);
    CG_CHECK(strstr(out, "float *smem = reinterpret_cast<float *>(::cg_emu::dyn_smem());"), "%s", out);
    CG_CHECK(strstr(out, "float4 *v = reinterpret_cast<float4 *>(::cg_emu::dyn_smem());"), "%s", out);
    CG_CHECK(strstr(out, "/* extern __shared__ float no[]; */") && strstr(out, "\"extern __shared__ int n[];\""),
             "comments and strings must stay: %s", out);
    /* the lines after each rewrite keep their numbers: after `#line 1`, the closing
     * brace (line 7) is 6 lines down */
    const char *l1 = strstr(out, "#line 1\n"), *close = strstr(out, "\n}\n");
    int lines = 0;
    for (const char *q = l1 ? l1 + 8 : close; close && q <= close; q++) lines += *q == '\n';
    CG_CHECK(l1 && lines == 6, "line numbers after the rewrites: %d lines to the brace: %s", lines, out);
    free(out);
    char *bad = cg__emu_rewrite_source("void f() { extern __shared__ float a[4]; }", why, sizeof why);
    CG_CHECK(bad == NULL && strstr(why, "size"), "sized extern __shared__ must be refused: %s", why);
    free(bad);
}

static void emu_tiny_plan(cg_plan *plan, const char *body) {
    memset(plan, 0, sizeof *plan);
    snprintf(plan->kernel, sizeof plan->kernel, "emu_test");
    snprintf(plan->name, sizeof plan->name, "emu_test_tiny");
    plan->source = strdup(body);
    plan->nlaunch = 1;
    snprintf(plan->launch[0].entry, sizeof plan->launch[0].entry, "emu_tiny");
}

/* emu_ctx with its cache in dir, made by mkdtemp from its template (the test removes it). */
static cg_context *emu_ctx_cache(char *dir) {
    cg_context *ctx = emu_ctx();
    if (!ctx) return NULL;
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    cg_context_set_cache_dir(ctx, dir);
    return ctx;
}

CG_TEST(emu_disk_cache) {
    char dir[] = "/tmp/cg-emu-cache-XXXXXX";
    cg_context *ctx = emu_ctx_cache(dir);
    if (!ctx) return;
    cg_plan plan;
    char body[256];
    snprintf(body, sizeof body, "struct P { int *o; };\nextern \"C\" __global__ void emu_tiny(P p) { p.o[threadIdx.x] = %d; }\n",
             (int)getpid());
    emu_tiny_plan(&plan, body);
    void *m1 = NULL, *m2 = NULL, *m3 = NULL;
    CG_CHECK_OK(ctx, cg__kexec_emu.load(ctx, &plan, &m1));
    CG_CHECK_OK(ctx, cg__kexec_emu.load(ctx, &plan, &m2));
    CG_CHECK(m1 && m1 == m2, "the second load must come from the context");
    char cmd[512], path[600];
    snprintf(cmd, sizeof cmd, "ls %s/kernels/emu_emu_test_tiny-*.cgk 2>/dev/null", dir);
    FILE *ls = popen(cmd, "r");
    path[0] = '\0';
    if (ls) {
        if (!fgets(path, sizeof path, ls)) path[0] = '\0';
        pclose(ls);
    }
    path[strcspn(path, "\n")] = '\0';
    CG_CHECK(path[0], "no cache entry in %s/kernels", dir);
    cg_context_free(ctx); /* unloads the module */
    ctx = NULL;
    /* a fresh context finds it on disk; a corrupt entry is rebuilt */
    cg_context *c2 = emu_ctx();
    if (c2 && path[0]) {
        cg_context_set_cache_dir(c2, dir);
        struct stat st0, st1;
        stat(path, &st0);
        CG_CHECK_OK(c2, cg__kexec_emu.load(c2, &plan, &m3));
        stat(path, &st1);
        CG_CHECK(st0.st_ino == st1.st_ino, "a cached module was rebuilt");
        cg_context_free(c2);
        c2 = emu_ctx();
        cg_context_set_cache_dir(c2, dir);
        char bad[700];
        snprintf(bad, sizeof bad, "%s.bad", path);
        FILE *f = fopen(bad, "wb"), *g = fopen(path, "rb");
        char buf[4096];
        size_t nr = g ? fread(buf, 1, sizeof buf, g) : 0;
        if (f) { fwrite(buf, 1, nr / 2, f); fclose(f); } /* truncated */
        if (g) fclose(g);
        CG_CHECK(rename(bad, path) == 0, "rename");
        void *m4 = NULL;
        CG_CHECK_OK(c2, cg__kexec_emu.load(c2, &plan, &m4));
        int o[4] = {0};
        struct { int *o; } p = {o};
        const unsigned grid[3] = {1, 1, 1}, block[3] = {4, 1, 1};
        if (m4) CG_CHECK_OK(c2, emu_launch(c2, m4, "emu_tiny", grid, block, 0, &p, sizeof p));
        CG_CHECK(o[3] == (int)getpid(), "rebuilt module result %d", o[3]);
        stat(path, &st1);
        CG_CHECK(st1.st_size > 1000, "the corrupt entry was not replaced");
    }
    cg_context_free(c2);
    free(plan.source);
    cg_context_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CG_CHECK(system(cmd) == 0, "rm");
}

CG_TEST(emu_compile_error) {
    char dir[] = "/tmp/cg-emu-cache-XXXXXX";
    cg_context *ctx = emu_ctx_cache(dir);
    if (!ctx) return;
    cg_plan plan;
    emu_tiny_plan(&plan, "struct P { int *o; };\nextern \"C\" __global__ void emu_tiny(P p) { p.o[0] = undeclared_name; }\n");
    void *m = NULL;
    cg_status st = cg__kexec_emu.load(ctx, &plan, &m);
    CG_CHECK(st == CG_ECOMPILE && strstr(cg_errmsg(ctx), "undeclared_name") && strstr(cg_errmsg(ctx), "emu_test_tiny.cu:2"),
             "%s: %s", cg_status_str(st), cg_errmsg(ctx));
    free(plan.source);
    emu_tiny_plan(&plan, "struct P { int *o; };\nextern \"C\" __global__ void emu_tiny(P p) {}\n");
    snprintf(plan.launch[0].entry, sizeof plan.launch[0].entry, "bad name");
    st = cg__kexec_emu.load(ctx, &plan, &m);
    CG_CHECK(st == CG_EINVAL, "an entry that is not an identifier: %s", cg_status_str(st));
    free(plan.source);
    cg_context_free(ctx);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CG_CHECK(system(cmd) == 0, "rm");
}

CG_TEST(emu_no_compiler) {
    const char *old = getenv("CXX");
    char *saved = old ? strdup(old) : NULL;
    setenv("CXX", "/nonexistent/chunkgen-no-such-compiler", 1);
    cg_context *ctx = NULL;
    cg_context_create(&ctx);
    cg_devinfo dev;
    cg_status st = cg__kexec_emu.device(ctx, &dev);
    CG_CHECK(st == CG_EUNSUPPORTED && strstr(cg_errmsg(ctx), "CXX"), "%s: %s", cg_status_str(st), cg_errmsg(ctx));
    cg_context_free(ctx);
    if (saved) setenv("CXX", saved, 1);
    else unsetenv("CXX");
    free(saved);
}

static int emu_count_files(const char *dir, const char *suffix, const char *prefix) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -a %s 2>/dev/null", dir);
    FILE *ls = popen(cmd, "r");
    int n = 0;
    char line[600];
    while (ls && fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = '\0';
        size_t l = strlen(line), ls_ = strlen(suffix);
        if (l >= ls_ && strcmp(line + l - ls_, suffix) == 0 && strncmp(line, prefix, strlen(prefix)) == 0) n++;
    }
    if (ls) pclose(ls);
    return n;
}

/* Eight processes compile the same module into one empty cache directory at once. */
CG_TEST(emu_cache_concurrent) {
    cg_context *probe = emu_ctx();
    if (!probe) return;
    cg_context_free(probe);
    char dir[] = "/tmp/cg-emu-cache-XXXXXX", sub[64];
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(sub, sizeof sub, "%s/kernels", dir);
    char body[256];
    snprintf(body, sizeof body, "struct P { int *o; };\nextern \"C\" __global__ void emu_tiny(P p) { p.o[threadIdx.x] = %d + 1; }\n",
             (int)getpid());
    fflush(NULL);
    pid_t kids[8];
    for (int k = 0; k < 8; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            cg_context *c = NULL;
            cg_context_create(&c);
            cg_context_set_threads(c, 1);
            cg_context_set_cache_dir(c, dir);
            cg_plan plan;
            emu_tiny_plan(&plan, body);
            void *m = NULL;
            int o[2] = {0, 0};
            struct { int *o; } p = {o};
            const unsigned grid[3] = {1, 1, 1}, block[3] = {2, 1, 1};
            int ok = cg__kexec_emu.load(c, &plan, &m) == CG_OK &&
                     emu_launch(c, m, "emu_tiny", grid, block, 0, &p, sizeof p) == CG_OK && o[1] == (int)getppid() + 1;
            if (!ok) fprintf(stderr, "  child %d: %s\n", k, cg_errmsg(c));
            _exit(ok ? 0 : 1);
        }
    }
    int good = 0;
    for (int k = 0; k < 8; k++) {
        int st = 0;
        if (kids[k] > 0 && waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0) good++;
    }
    CG_CHECK(good == 8, "%d of 8 processes loaded and ran the module", good);
    CG_CHECK(emu_count_files(sub, ".cgk", "emu_") == 1, "%d entries in %s, expected 1", emu_count_files(sub, ".cgk", "emu_"), sub);
    CG_CHECK(emu_count_files(sub, "", ".") == 2, "temporary files left in %s", sub); /* . and .. */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CG_CHECK(system(cmd) == 0, "rm");
}

/* cg__emu_prebuild fills the disk cache (in parallel); the loads then find it. */
CG_TEST(emu_prebuild) {
    cg_context *ctx = emu_ctx();
    if (!ctx) return;
    char dir[] = "/tmp/cg-emu-cache-XXXXXX", sub[64];
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(sub, sizeof sub, "%s/kernels", dir);
    cg_context_set_cache_dir(ctx, dir);
    cg_plan plans[3];
    for (int i = 0; i < 3; i++) {
        char body[256];
        snprintf(body, sizeof body, "struct P { int *o; };\nextern \"C\" __global__ void emu_tiny(P p) { p.o[0] = %d; }\n", 100 + i);
        emu_tiny_plan(&plans[i], body);
    }
    CG_CHECK_OK(ctx, cg__emu_prebuild(ctx, plans, 3));
    CG_CHECK(emu_count_files(sub, ".cgk", "emu_") == 3, "%d entries after prebuild", emu_count_files(sub, ".cgk", "emu_"));
    char before[1024], after[1024], cmd[128];
    snprintf(cmd, sizeof cmd, "ls -i %s", sub);
    FILE *ls = popen(cmd, "r");
    size_t nb = ls ? fread(before, 1, sizeof before - 1, ls) : 0;
    before[nb] = '\0';
    if (ls) pclose(ls);
    for (int i = 0; i < 3; i++) {
        void *m = NULL;
        int o = 0;
        struct { int *o; } p = {&o};
        const unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
        CG_CHECK_OK(ctx, cg__kexec_emu.load(ctx, &plans[i], &m));
        if (m) CG_CHECK_OK(ctx, emu_launch(ctx, m, "emu_tiny", grid, block, 0, &p, sizeof p));
        CG_CHECK(o == 100 + i, "plan %d ran %d", i, o);
        free(plans[i].source);
    }
    ls = popen(cmd, "r");
    size_t na = ls ? fread(after, 1, sizeof after - 1, ls) : 0;
    after[na] = '\0';
    if (ls) pclose(ls);
    CG_CHECK(nb > 0 && strcmp(before, after) == 0, "the loads compiled again:\n%s---\n%s", before, after);
    cg_context_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CG_CHECK(system(cmd) == 0, "rm");
}
