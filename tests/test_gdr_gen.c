/* test_gdr_gen.c -- the gated delta rule's generated kernels (generator/kernels/gdr_*.lua,
 * templates/gdr_*.cu) run by the SIMT emulator against the float64 reference on small odd
 * shapes: T = 1, T not a multiple of any chunk, dk / dv not powers of two, grouped heads,
 * both layouts, a varlen batch with a 1-token sequence, h0 / hT on and off, the L2 norm on
 * and off, beta near 2; every config of the space (each precision: ieee, 3xtf32, mma16) on
 * a rotating case (gdr_gen_emu_space, label sweep), the default config (3xtf32 / mma16) on
 * every case in float32, bfloat16 and float16 and ieee pinned (gdr_gen_emu_default); the
 * default precision and its refusals (gdr_gen_precision). NVRTC compiles every config for sm_80 and sm_90 in
 * test_gen_nvrtc.c (the all-configs sweep covers every kernel of generator/kernels/, in
 * float32 without varlen); gdr_gen_nvrtc_half_smN the variants it does not render: the
 * sampled configs varlen with the L2 norm, in bf16 and f16 in turn, and in float32
 * (label sweep). */
#include "gdr_testlib.h"
#include "nvrtc_testlib.h"
#include "sweep_sample.h"

#include <math.h>
#include <string.h>

static const gdr_case k_gg[] = {
    GDR_CASE_T1,
    GDR_CASE_T37_HEAD,
    {"t37_h3_dk7_dv5_bare", 1, 37, 1, 3, 7, 5, 0, 0, 0, 0, 0, 0, 0, 0.3, 0, {0}},
    {"beta_near2_t70", 1, 70, 2, 2, 16, 12, 0, 1, 1, 1.9, 1.999, 0, 0, 0, 0, {0}},
    GDR_CASE_VARLEN,
    {"varlen_head_bare", 1, 80, 1, 2, 9, 6, 1, 0, 0, 0, 0, 0, 0, 0, 3, {0, 40, 40, 80}},
};
#define NGG (int)(sizeof k_gg / sizeof k_gg[0])

/* Case c of op in storage dtype half under the emulator (config cfg) against the
 * reference on the same rounded inputs. Returns 1 when it ran, 0 when the config is
 * refused for this case (CG_EUNSUPPORTED; only with a pinned config). */
static int gg_check(cg_context *ctx, const gdr_case *c, cg_op op, cg_dtype half, const char *cfg) {
    const uint64_t seed = 500 + (uint64_t)(c - k_gg) * 11 + (uint64_t)op;
    dtt_prob p, r;
    cg_tbuf cu;
    gdr_case_new(&p, &cu, op, c, half, CG_F32, seed, 0x51);
    cg_tbuf_free(&cu);
    gdr_case_new(&r, &cu, op, c, CG_F64, CG_F64, seed, 0x51);
    dtt_copy_inputs(&r, &p);
    const char *dn = cg_dtype_name(half);
    cg_status st = gdr_case_run(ctx, &p, &cu, c, CG_BACKEND_EMULATE, cfg);
    int ran = st != CG_EUNSUPPORTED || !cfg;
    if (ran) {
        CG_CHECK(st == CG_OK, "%s %s %s [%s]: emulate: %s", p.d->name, c->name, dn, cfg ? cfg : "default",
                 cg_errmsg(ctx));
        st = gdr_case_run(ctx, &r, &cu, c, CG_BACKEND_REF, NULL);
        CG_CHECK(st == CG_OK, "%s %s: ref: %s", p.d->name, c->name, cg_errmsg(ctx));
        char what[192];
        snprintf(what, sizeof what, "%s %s %s [%s]", p.d->name, c->name, dn, cfg ? cfg : "default");
        if (st == CG_OK) {
            dtt_check_outputs(&p, &r, what);
            gdr_check_fla_rms(&p, &r, what); /* fla's own tolerances, 16-bit inputs */
        }
    }
    dtt_free(&p), dtt_free(&r);
    cg_tbuf_free(&cu);
    return ran;
}

static cg_context *emu_ctx(void) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    return ctx;
}

/* Every config of op's kernel space (chunk x block_dv x warps x precision: ieee and 3xtf32
 * in float32, mma16 in bf16 and f16 in turn) once, on a rotating case that accepts it; each
 * config must run on some case. */
static void run_space(cg_op op) {
    static const int chunks[] = {16, 32, 64}, bvs[] = {16, 32, 64}, warps[] = {1, 2, 4, 8};
    static const char *const precs[] = {"ieee", "3xtf32", "mma16"};
    cg_context *ctx = emu_ctx();
    int q = 0, ran = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int w = 0; w < 4; w++)
                for (int pr = 0; pr < 3; pr++, q++) {
                    char cfg[96];
                    snprintf(cfg, sizeof cfg, "chunk=%d,block_dv=%d,warps=%d,precision=%s", chunks[a], bvs[b], warps[w],
                             precs[pr]);
                    const cg_dtype dt = pr < 2 ? CG_F32 : q % 2 ? CG_BF16 : CG_F16;
                    int ok = 0;
                    for (int k = 0; k < NGG && !ok; k++) ok = gg_check(ctx, &k_gg[(q + k) % NGG], op, dt, cfg);
                    CG_CHECK(ok, "%s: config %s refused for every case", cg__op_desc(op)->name, cfg);
                    ran += ok;
                }
    fprintf(stderr, "gdr_gen: %d configs of %s checked under the emulator\n", ran, cg__op_desc(op)->name);
    cg_context_free(ctx);
}

/* The default config on every case, float32 (3xtf32 on the emulator's sm_80), then bf16
 * and f16 on two of them (mma16); the float32 FMA path (precision=ieee) on the grouped
 * head-major case in float32 and bf16, and 3xtf32 with the smallest tiles on the varlen
 * case (16 x 16 tiles over 4 warps: warps with no tile, a dv tile past dv). */
static void run_default(cg_op op) {
    cg_context *ctx = emu_ctx();
    for (int k = 0; k < NGG; k++) gg_check(ctx, &k_gg[k], op, CG_F32, NULL);
    gg_check(ctx, &k_gg[1], op, CG_BF16, NULL);
    gg_check(ctx, &k_gg[4], op, CG_F16, NULL);
    CG_CHECK(gg_check(ctx, &k_gg[1], op, CG_F32, "precision=ieee"), "precision=ieee refused");
    CG_CHECK(gg_check(ctx, &k_gg[1], op, CG_BF16, "precision=ieee"), "precision=ieee refused (bf16)");
    CG_CHECK(gg_check(ctx, &k_gg[4], op, CG_F32, "chunk=16,block_dv=16,warps=4,precision=3xtf32"),
             "3xtf32 16x16 refused");
    cg_context_free(ctx);
}

CG_TEST(gdr_gen_emu_default) { run_default(CG_OP_GDR_FWD); }
CG_TEST(gdr_gen_emu_bwd_default) { run_default(CG_OP_GDR_BWD); }
CG_TEST(gdr_gen_emu_fwd_space) { run_space(CG_OP_GDR_FWD); }
CG_TEST(gdr_gen_emu_bwd_space) { run_space(CG_OP_GDR_BWD); }

/* Both kernels' default precision: 3xtf32 for float32 q, k on sm_80+, mma16 for 16-bit ones,
 * ieee below sm_80; 3xtf32 with 16-bit q, k and mma16 with float32 ones are refused. */
static const char *resolved_precision(cg_context *ctx, const char *kernel, const cg_shape *ks, const cg_devinfo *dev,
                                      const char *pin, cg_status *st) {
    static cg_cfg got;
    cg_cfg pc;
    memset(&got, 0, sizeof got);
    if (pin && cg__cfg_parse(ctx, pin, &pc) != CG_OK) return "?";
    *st = cg__gen_resolve(ctx, kernel, ks, 0, dev, pin ? &pc : NULL, &got);
    for (int i = 0; i < got.n; i++)
        if (!strcmp(got.kv[i].key, "precision")) return got.kv[i].val;
    return "";
}
CG_TEST(gdr_gen_precision) {
    cg_context *ctx = emu_ctx();
    for (int o = 0; o < 2; o++) {
        const char *kn = o ? "gdr_bwd" : "gdr_fwd";
        cg_devinfo dev;
        cg__devinfo_emulated(&dev);
        cg_shape ks = {.size = sizeof ks, .op = o ? CG_OP_GDR_BWD : CG_OP_GDR_FWD,
                       .dim = {[CG_SYM_B] = 2, [CG_SYM_T] = 37, [CG_SYM_G] = 2, [CG_SYM_H] = 6, [CG_SYM_DK] = 48,
                               [CG_SYM_DV] = 40}};
        cg_status st = CG_OK;
        const char *pr = resolved_precision(ctx, kn, &ks, &dev, NULL, &st);
        CG_CHECK(st == CG_OK && !strcmp(pr, "3xtf32"), "%s float32 default: %s (%s)", kn, pr, cg_errmsg(ctx));
        resolved_precision(ctx, kn, &ks, &dev, "precision=mma16", &st);
        CG_CHECK(st == CG_EUNSUPPORTED && strstr(cg_errmsg(ctx), "16-bit q, k"), "%s mma16 for float32: %s", kn,
                 cg_errmsg(ctx));
        cg_test_shape_half(&ks, CG_BF16, "q k v beta");
        pr = resolved_precision(ctx, kn, &ks, &dev, NULL, &st);
        CG_CHECK(st == CG_OK && !strcmp(pr, "mma16"), "%s bf16 default: %s (%s)", kn, pr, cg_errmsg(ctx));
        resolved_precision(ctx, kn, &ks, &dev, "precision=3xtf32", &st);
        CG_CHECK(st == CG_EUNSUPPORTED && strstr(cg_errmsg(ctx), "float32 q, k"), "%s 3xtf32 for bf16: %s", kn,
                 cg_errmsg(ctx));
        pr = resolved_precision(ctx, kn, &ks, &dev, "precision=ieee", &st);
        CG_CHECK(st == CG_OK && !strcmp(pr, "ieee"), "%s ieee pinned: %s (%s)", kn, pr, cg_errmsg(ctx));
        dev.arch = 75;
        pr = resolved_precision(ctx, kn, &ks, &dev, NULL, &st);
        CG_CHECK(st == CG_OK && !strcmp(pr, "ieee"), "%s sm_75 default: %s (%s)", kn, pr, cg_errmsg(ctx));
    }
    cg_context_free(ctx);
}

/* A config outside the space is refused by name; one the constraints refuse says why. */
CG_TEST(gdr_gen_refusals) {
    cg_context *ctx = emu_ctx();
    dtt_prob p;
    cg_tbuf cu;
    gdr_case_new(&p, &cu, CG_OP_GDR_FWD, &k_gg[2], CG_F32, CG_F32, 3, 0x51);
    CG_CHECK_REFUSED(ctx, gdr_case_run(ctx, &p, &cu, &k_gg[2], CG_BACKEND_EMULATE, "chunk=8"), CG_EINVAL, "chunk",
                     "chunk=8 (outside the space)");
    CG_CHECK_REFUSED(ctx, gdr_case_run(ctx, &p, &cu, &k_gg[2], CG_BACKEND_EMULATE, "chunk=16,block_dv=64,warps=1"),
                     CG_EUNSUPPORTED, "covers dv", "block_dv 64 for dv = 5");
    dtt_free(&p);
    cg_tbuf_free(&cu);
    cg_context_free(ctx);
}

/* bf16 and f16 in turn (*k counts the plans) for the tensors named. */
typedef struct gdr_turn {
    int *k;
    const char *names;
} gdr_turn;
static void gdr_half_turn(cg_shape *s, void *arg) {
    const gdr_turn *t = arg;
    cg_test_shape_half(s, ++*t->k % 2 ? CG_F16 : CG_BF16, t->names);
}
static const char *const gdr_defines[] = {"#define CG_VARLEN 1\n", "#define CG_L2NORM 1\n", NULL};

/* The sweep's sample of the configs of both kernels (every one under
 * CHUNKGEN_TEST_SWEEP=full), varlen with the L2 norm, through NVRTC for sm_arch: no spills.
 * bf16 and f16 in turn (the 16-bit space: ieee and mma16), then the float32 one (ieee and
 * 3xtf32; test_gen_nvrtc.c compiles it without varlen). */
static void nvrtc_variants(int arch) {
    cg_test_nvrtc nv;
    if (!cg_test_nvrtc_begin(&nv, arch)) return;
    static const char *const kernels[] = {"gdr_fwd", "gdr_bwd"};
    int k = 0;
    for (int o = 0; o < 4; o++) {
        const int bwd = o % 2, half = o < 2;
        const cg_shape k0 = {.size = sizeof k0, .op = bwd ? CG_OP_GDR_BWD : CG_OP_GDR_FWD, .nseq = 3,
                             .dim = {[CG_SYM_B] = 1, [CG_SYM_T] = 4096, [CG_SYM_G] = 4, [CG_SYM_H] = 8,
                                     [CG_SYM_DK] = 128, [CG_SYM_DV] = 128}};
        const int ksf = CG_KS_L2NORM | CG_KS_H0 | (bwd ? CG_KS_DHT : CG_KS_HT);
        cg_shape ks = k0;
        if (half) cg_test_shape_half(&ks, CG_BF16, "q k"); /* the space of any 16-bit call */
        gdr_turn turn = {&k, bwd ? "q k v beta dout dq dk dv dbeta" : "q k v beta o"};
        cg_test_nvrtc_sample(&nv, kernels[bwd], &ks, ksf, half ? gdr_half_turn : NULL, &turn, gdr_defines);
    }
    cg_test_nvrtc_end(&nv, "gdr varlen l2norm (16-bit, float32)", "");
}
CG_TEST(gdr_gen_nvrtc_half_sm80) { nvrtc_variants(80); }
CG_TEST(gdr_gen_nvrtc_half_sm90) { nvrtc_variants(90); }
