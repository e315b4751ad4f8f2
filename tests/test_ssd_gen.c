/* test_ssd_gen.c -- the generated SSD forward kernel under the SIMT emulator against the
 * float64 reference: every config its Lua constraints accept, on small odd shapes (T = 1,
 * T not a multiple of the chunk, dk/dv 7, 40, 48, 130, G < H, both layouts, strided
 * views, h0 present and absent). Each config runs at least once per test run; the
 * shapes rotate over the configs so the whole space stays within a few minutes.
 * The same checks run natively with CG_BACKEND_CUDA when a GPU is present. */
#include "ssd_testlib.h"

#include <string.h>

#define TOL_FP32 1e-5 /* ieee and 3xtf32 */
#define TOL_TF32 5e-3

typedef struct gshape {
    int64_t B, T, G, H, dk, dv;
    int layout;  /* order of the shapes */
    int swapped; /* memory order with the two middle dims swapped: strided views */
    int h0;      /* h0 given */
    int hT;      /* hT wanted */
} gshape;

/* Small odd shapes. Each config runs on one of these (rotating), chosen among those
 * whose constraints accept it; the last ones are the only shapes wide enough for
 * block_dv 64 with 8 warps, so keep them small in T. */
static const gshape k_shapes[] = {
    {1, 1, 1, 1, 7, 7, CG_LAYOUT_TOKEN_MAJOR, 0, 1, 1},
    {2, 37, 2, 4, 48, 40, CG_LAYOUT_HEAD_MAJOR, 0, 0, 1},
    {1, 21, 1, 2, 7, 20, CG_LAYOUT_TOKEN_MAJOR, 1, 1, 0},
    {1, 45, 2, 2, 40, 48, CG_LAYOUT_TOKEN_MAJOR, 0, 1, 1},
    {1, 19, 1, 1, 130, 33, CG_LAYOUT_HEAD_MAJOR, 1, 1, 1},
    {1, 70, 1, 1, 48, 72, CG_LAYOUT_HEAD_MAJOR, 0, 1, 0},
    {1, 29, 1, 3, 40, 130, CG_LAYOUT_TOKEN_MAJOR, 0, 0, 1},
};
#define NSHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

static ssdt_dims dims_of(const gshape *c) {
    ssdt_dims d = {c->B, c->T, c->G, c->H, c->dk, c->dv, c->layout, c->swapped};
    return d;
}

static cg_status run_fwd(cg_context *ctx, ssdt_set *s, const gshape *c, cg_backend be, const char *config) {
    return ssdt_run_fwd(ctx, s, c->layout, c->h0, c->hT, be, config);
}

/* A problem in F32 (for the kernel) and its F64 reference outputs. */
typedef struct gcase {
    gshape c;
    ssdt_set f, d; /* f32 inputs/outputs, f64 reference */
} gcase;

static void case_new(cg_context *ctx, gcase *g, const gshape *c, uint64_t seed) {
    g->c = *c;
    ssdt_pair_new(&g->f, &g->d, dims_of(c), CG_F64, SSDT_FWD, seed, -0.4, 0.0); /* decays from 0.67 to 1 */
    CG_CHECK_OK(ctx, run_fwd(ctx, &g->d, c, CG_BACKEND_REF, NULL));
}

static void case_free(gcase *g) {
    ssdt_set_free(&g->f);
    ssdt_set_free(&g->d);
}

/* Run one config on g with backend be and check o and hT. Returns 1 when it ran. */
static int check_config(cg_context *ctx, gcase *g, cg_backend be, const char *config, double tol) {
    /* poison the outputs so a kernel that skips an element fails */
    cg_tbuf_fill(&g->f.o, &(cg_rng){7}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.hT, &(cg_rng){8}, 1e3, 2e3);
    cg_status s = run_fwd(ctx, &g->f, &g->c, be, config);
    const gshape *c = &g->c;
    const char *cfg = config ? config : "(default)";
    if (s != CG_OK) {
        CG_CHECK(0, "config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld: %s: %s", cfg, (long long)c->B,
                 (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk, (long long)c->dv,
                 cg_status_str(s), cg_errmsg(ctx));
        return 0;
    }
    double eo = cg_rel_err(&g->f.o, &g->d.o), eh = c->hT ? cg_rel_err(&g->f.hT, &g->d.hT) : 0;
    CG_CHECK(eo <= tol && eh <= tol,
             "config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld layout=%d swapped=%d h0=%d hT=%d: rel err o %.3g hT %.3g (tol %g) [%s]",
             cfg, (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk,
             (long long)c->dv, c->layout, c->swapped, c->h0, c->hT, eo, eh, tol, cg_last_dispatch(ctx));
    return 1;
}

static int gshape_flags(const gshape *c) { return (c->h0 ? CG_KS_H0 : 0) | (c->hT ? CG_KS_HT : 0); }

/* The config-space loop of ssd_testlib.c over k_shapes: run_space(prec, be, stride).
 * Every config with precision `prec` accepted for any test shape, each run once on a
 * rotating choice among the shapes that accept it; with stride > 1 only every stride-th
 * config of the union (NVRTC compiles cost seconds each on the GPU machine). */
SSDT_RUN_SPACE(gcase, gshape, gshape_flags, "ssd_fwd", "ssd_gen")

CG_TEST(ssd_gen_emu_ieee) { run_space("ieee", CG_BACKEND_EMULATE, 1); }
CG_TEST(ssd_gen_emu_tf32) { run_space("tf32", CG_BACKEND_EMULATE, 1); }
CG_TEST(ssd_gen_emu_3xtf32) { run_space("3xtf32", CG_BACKEND_EMULATE, 1); }

/* The default config (fp32-accurate) on every shape, and the dispatch line names it. */
CG_TEST(ssd_gen_emu_default) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    for (int i = 0; i < NSHAPES; i++) {
        gcase g;
        case_new(ctx, &g, &k_shapes[i], 2000 + (uint64_t)i);
        if (check_config(ctx, &g, CG_BACKEND_EMULATE, NULL, TOL_FP32)) {
            const char *d = cg_last_dispatch(ctx);
            CG_CHECK(strstr(d, "kernel=ssd_fwd_") != NULL, "dispatch line without the kernel name: %s", d);
            CG_CHECK(strstr(d, "_tf32") == NULL || strstr(d, "_3xtf32") != NULL, "default is plain tf32: %s", d);
        }
        /* a second call hits the plan table and gives the same bits */
        cg_tbuf o1 = ssdt_mk(dims_of(&g.c), CG_F32, g.c.H, g.c.dv);
        cg_tbuf_copy(&o1, &g.f.o);
        CG_CHECK_OK(ctx, run_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL));
        CG_CHECK(cg_rel_err(&g.f.o, &o1) == 0, "second run differs (shape %d)", i);
        cg_tbuf_free(&o1);
        case_free(&g);
    }
    cg_context_free(ctx);
}

/* Pins outside the space or rejected by the constraints fail with a reason. */
CG_TEST(ssd_gen_emu_bad_config) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    gcase g;
    case_new(ctx, &g, &k_shapes[1], 3000);
    cg_status s = run_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=48");
    CG_CHECK(s == CG_EINVAL, "chunk=48 (outside the space): got %s: %s", cg_status_str(s), cg_errmsg(ctx));
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk") != NULL, "message does not name chunk: %s", cg_errmsg(ctx));
    s = run_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "strategy=3phase,stages=2");
    CG_CHECK(s == CG_EUNSUPPORTED, "3phase with stages=2: got %s: %s", cg_status_str(s), cg_errmsg(ctx));
    CG_CHECK(strstr(cg_errmsg(ctx), "stages") != NULL, "message does not name stages: %s", cg_errmsg(ctx));
    case_free(&g);
    cg_context_free(ctx);
}

/* Natively on a GPU (skipped without one): every 4th config of the device's space
 * (CHUNKGEN_TEST_ALL_CONFIGS=1: all of them). Host tensors: the launcher stages them. */
CG_TEST(ssd_gen_cuda_ieee) { run_space("ieee", CG_BACKEND_CUDA, ssdt_cuda_stride()); }
CG_TEST(ssd_gen_cuda_tf32) { run_space("tf32", CG_BACKEND_CUDA, ssdt_cuda_stride()); }
CG_TEST(ssd_gen_cuda_3xtf32) { run_space("3xtf32", CG_BACKEND_CUDA, ssdt_cuda_stride()); }
