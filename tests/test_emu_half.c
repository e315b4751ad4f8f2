/* test_emu_half.c -- the 16-bit device helpers of templates/cg_device.cuh under the
 * emulator (tests/emu_kernels/mma16.cu): bf16/fp16 rounding and 16-byte loads/stores
 * against runtime/half.h, mma m16n8k16 (bf16, fp16) with fragments built by hand from
 * the PTX ISA table and every lane's D registers checked, ldmatrix x1/x2/x4 (.trans)
 * per lane and register; and the same kernel file through NVRTC for sm_80 and sm_90. */
#include "cg_test.h"
#include "gen.h"
#include "half.h"
#include "emu/emu.h"
#include "cuda/cg_cuda.h"
#include "ptxas_log.h"
#include "test_emu_lib.h"

#include <float.h>

typedef struct emu_h16_params {
    const uint16_t *A, *B;
    const float *C;
    float *D;
    int f16;
    const float *cvt_in;
    uint16_t *cvt_bf16, *cvt_f16;
    float *wide;
    uint16_t *st8;
    int ncvt;
    const uint16_t *S;
    uint32_t *L;
    int misalign;
} emu_h16_params;

static const char *const k_h16[] = {"emu_mma16", "emu_cvt16", "emu_ldmatrix"};

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint16_t to16(float x, int f16) { return f16 ? cg__f32_to_f16(x) : cg__f32_to_bf16(x); }
static float from16(uint16_t h, int f16) { return f16 ? cg__f16_to_f32(h) : cg__bf16_to_f32(h); }

/* ------------------------------------------------------------------ mma m16n8k16 */
static void emu_mma_m16n8k16_body(cg_context *ctx, void *mod) {
    enum { tiles = 4 }; /* 2 blocks of 2 warps, one 16x8x16 tile per warp */
    const unsigned grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};
    static uint16_t A[tiles * 256], B[tiles * 128];
    static float Af[tiles * 256], Bf[tiles * 128], C[tiles * 128], D[tiles * 128];
    for (int f16 = 0; f16 < 2; f16++) {
        cg_rng r = {91 + (uint64_t)f16};
        /* tile 3: values whose sum depends on the order (large and small terms) */
        for (int i = 0; i < tiles * 256; i++) {
            float x = (float)cg_rng_uniform(&r, -2, 2);
            if (i >= 3 * 256 && i % 5 == 0) x *= 512.f;
            A[i] = to16(x, f16);
            Af[i] = from16(A[i], f16);
        }
        for (int i = 0; i < tiles * 128; i++) {
            B[i] = to16((float)cg_rng_uniform(&r, -2, 2), f16);
            Bf[i] = from16(B[i], f16);
            C[i] = (float)cg_rng_uniform(&r, -1, 1);
        }
        emu_h16_params p;
        memset(&p, 0, sizeof p);
        p.A = A, p.B = B, p.C = C, p.D = D, p.f16 = f16;
        CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_mma16", grid, block, 0, &p, sizeof p));
        int bad = 0;
        double err = 0, mref = 0;
        for (int t = 0; t < tiles; t++)
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++) {
                    /* PTX ISA: d_i at row g (+8 for i >= 2), column 2t + (i & 1) */
                    const int m = lane / 4 + (i >= 2 ? 8 : 0), n = 2 * (lane % 4) + (i % 2);
                    float acc = C[t * 128 + m * 8 + n];
                    double exact = acc;
                    for (int k = 0; k < 16; k++) {
                        const float a = Af[t * 256 + m * 16 + k], b = Bf[t * 128 + k * 8 + n];
                        acc += a * b; /* the product is exact in fp32 */
                        exact += (double)a * b;
                    }
                    const float d = D[(t * 32 + lane) * 4 + i];
                    if (bits(d) != bits(acc)) {
                        if (bad < 4)
                            fprintf(stderr, "  %s tile %d lane %d d[%d] (%d,%d): %.9g, expected %.9g\n",
                                    f16 ? "f16" : "bf16", t, lane, i, m, n, d, acc);
                        bad++;
                    }
                    err = fmax(err, fabs(d - exact));
                    mref = fmax(mref, fabs(exact));
                }
        CG_CHECK(bad == 0, "%s: %d of %d D registers differ from the fp32 sum of exact products",
                 f16 ? "f16" : "bf16", bad, tiles * 128);
        CG_CHECK(err / mref <= 1e-6, "%s: rel err %.3g vs the exact sum: not fp32 accumulation", f16 ? "f16" : "bf16",
                 err / mref);
    }
}
CG_TEST(emu_mma_m16n8k16) { emu_with_module("mma16.cu", k_h16, 3, emu_mma_m16n8k16_body); }

/* ------------------------------------------------------ conversions, load8/store8 */
static void emu_half_convert_body(cg_context *ctx, void *mod) {
    enum { n = 4096 };
    float *in = aligned_alloc(64, n * sizeof *in), *wide = aligned_alloc(64, 2 * n * sizeof *wide);
    uint16_t *hb = aligned_alloc(64, n * 2), *hf = aligned_alloc(64, n * 2), *st = aligned_alloc(64, 2 * n * 2);
    /* edge cases: signed zeros, infinities, NaN, the largest finite values and the
     * rounding boundaries of each format, ties both ways, fp16 subnormals; then
     * random bit patterns over the whole range */
    static const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                    0xffc00001u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu,
                                    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu, 0x477fe000u,
                                    0x477ff000u, 0x477fefffu, 0x38800000u, 0x387fffffu, 0x33800000u,
                                    0x33000000u, 0x33000001u, 0x34000000u, 0x00000001u, 0x80800000u,
                                    0x3f801000u, 0x3f803000u, 0x3f800fffu, 0xc7800000u, 0x38000000u};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    cg_rng r = {5};
    for (int i = 0; i < n; i++) {
        uint32_t u = i < ne ? edge[i] : (uint32_t)(cg_rng_next(&r) >> 32);
        if (i >= ne && i % 3 == 0) u = (u & 0x83ffffffu) | 0x38000000u; /* near fp16's range */
        memcpy(&in[i], &u, 4);
    }
    emu_h16_params p;
    memset(&p, 0, sizeof p);
    p.cvt_in = in, p.cvt_bf16 = hb, p.cvt_f16 = hf, p.wide = wide, p.st8 = st, p.ncvt = n;
    const unsigned grid[3] = {n / 8 / 128, 1, 1}, block[3] = {128, 1, 1};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_cvt16", grid, block, 0, &p, sizeof p));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const int nan = isnan(in[i]);
        for (int f16 = 0; f16 < 2; f16++) {
            const uint16_t want = to16(in[i], f16), got = f16 ? hf[i] : hb[i], got8 = st[f16 * n + i];
            const int ok = nan ? isnan(from16(got, f16)) && isnan(from16(got8, f16)) : got == want && got8 == want;
            const float w = from16(got, f16), wg = wide[f16 * n + i];
            const int wok = nan ? isnan(wg) : bits(w) == bits(wg);
            if (!ok || !wok) {
                if (bad < 6)
                    fprintf(stderr, "  %s %08x: round %04x, store8 %04x, expected %04x; widened %08x, expected %08x\n",
                            f16 ? "f16" : "bf16", bits(in[i]), got, got8, want, bits(wg), bits(w));
                bad++;
            }
        }
    }
    CG_CHECK(bad == 0, "%d conversions differ from runtime/half.h", bad);
    free(in); free(wide); free(hb); free(hf); free(st);
}
CG_TEST(emu_half_convert) { emu_with_module("mma16.cu", k_h16, 3, emu_half_convert_body); }

/* ------------------------------------------------------------------------ ldmatrix */
static void emu_ldmatrix_body(cg_context *ctx, void *mod) {
    static uint16_t S[256];
    static uint32_t L[6 * 128];
    for (int i = 0; i < 256; i++) S[i] = (uint16_t)(0x1000 + i * 7); /* S[row][col] distinct */
    emu_h16_params p;
    memset(&p, 0, sizeof p);
    p.S = S, p.L = L;
    memset(L, 0xee, sizeof L);
    const unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    CG_CHECK_OK(ctx, emu_launch(ctx, mod, "emu_ldmatrix", grid, block, 0, &p, sizeof p));
    static const int nmat[6] = {1, 2, 4, 1, 2, 4};
    int bad = 0;
    for (int v = 0; v < 6; v++) {
        const int trans = v >= 3;
        for (int lane = 0; lane < 32; lane++)
            for (int m = 0; m < nmat[v]; m++) {
                /* PTX ISA: lane 8m + j gives row j of matrix m; the kernel's lane l
                 * points at row (5l + 3) % 32 of S. The lane's register m holds
                 * [lane/4][2(lane%4)] and the next column (.trans: the next row, and
                 * row/column swapped). */
                const int g = lane / 4, t2 = 2 * (lane % 4);
                uint32_t want = 0;
                for (int h = 0; h < 2; h++) {
                    const int row = trans ? t2 + h : g, col = trans ? g : t2 + h;
                    const int srow = ((8 * m + row) * 5 + 3) % 32;
                    want |= (uint32_t)S[srow * 8 + col] << (16 * h);
                }
                const uint32_t got = L[v * 128 + lane * 4 + m];
                if (got != want) {
                    if (bad < 6)
                        fprintf(stderr, "  ldmatrix x%d%s lane %d r[%d]: %08x, expected %08x\n", nmat[v],
                                trans ? ".trans" : "", lane, m, got, want);
                    bad++;
                }
            }
    }
    CG_CHECK(bad == 0, "%d ldmatrix registers wrong", bad);
    p.misalign = 1;
    cg_status st = emu_launch(ctx, mod, "emu_ldmatrix", grid, block, 0, &p, sizeof p);
    CG_CHECK(st == CG_ELAUNCH && strstr(cg_errmsg(ctx), "16-byte aligned") && strstr(cg_errmsg(ctx), "lane 3"),
             "misaligned ldmatrix row: %s: %s", cg_status_str(st), cg_errmsg(ctx));
    /* mma and ldmatrix need full warps */
    const unsigned half_warp[3] = {16, 1, 1};
    p.misalign = 0;
    st = emu_launch(ctx, mod, "emu_ldmatrix", grid, half_warp, 0, &p, sizeof p);
    CG_CHECK(st == CG_ELAUNCH && strstr(cg_errmsg(ctx), "full warps"), "16 threads: %s: %s", cg_status_str(st),
             cg_errmsg(ctx));
}
CG_TEST(emu_ldmatrix) { emu_with_module("mma16.cu", k_h16, 3, emu_ldmatrix_body); }

/* ----------------------------------------------------- the same through NVRTC */
CG_TEST(emu_half_nvrtc) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    char *dev = emu_slurp("templates/cg_device.cuh"), *k = emu_slurp("tests/emu_kernels/mma16.cu");
    CG_CHECK(dev && k, "cannot read the sources");
    cg_context *ctx = NULL;
    if (dev && k && cg_context_create(&ctx) == CG_OK) {
        size_t n = strlen(dev) + strlen(k) + 2;
        char *src = malloc(n);
        snprintf(src, n, "%s\n%s", dev, k);
        static const int arch[2] = {80, 90};
        for (int a = 0; a < 2; a++) {
            void *bin = NULL;
            size_t len = 0;
            char *log = NULL;
            cg_status st = cg__nvrtc_compile(ctx, "mma16", src, arch[a], &bin, &len, &log);
            CG_CHECK(st == CG_OK, "sm_%d: %s", arch[a], cg_errmsg(ctx));
            if (st == CG_OK) {
                cg_ptxas_info info;
                cg__ptxas_parse(log, &info);
                CG_CHECK(info.found && info.spill_stores == 0 && info.spill_loads == 0 && info.stack == 0,
                         "sm_%d: spills %lld/%lld, stack %lld: %s", arch[a], (long long)info.spill_stores,
                         (long long)info.spill_loads, (long long)info.stack, log ? log : "");
            }
            free(bin);
            free(log);
        }
        free(src);
        cg_context_free(ctx);
    }
    free(dev);
    free(k);
}
