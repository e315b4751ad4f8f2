/* test_ssd_bwd_gen.c -- the generated SSD backward kernels under the SIMT emulator
 * against the float64 reference: every config the Lua constraints accept, on small odd
 * shapes (T = 1, T not a multiple of the chunk, dk/dv 7, 40, 48, G = 2 < H = 4, both
 * layouts, strided views, h0, dhT and dh0 present and absent), every gradient. Each
 * config runs at least once per test run; the shapes rotate over the configs so the
 * whole space stays within a few minutes. The same checks run natively with
 * CG_BACKEND_CUDA when a GPU is present. */
#include "ssd_testlib.h"

#include <string.h>

#define TOL_FP32 1e-4 /* ieee and 3xtf32, gradients */
#define TOL_TF32 5e-3

typedef struct bshape {
    int64_t B, T, G, H, dk, dv;
    int layout;  /* order of the shapes */
    int swapped; /* memory order with the two middle dims swapped: strided views */
    int h0;      /* h0 given */
    int dhT;     /* dhT given */
    int dh0;     /* dh0 wanted */
} bshape;

/* Small odd shapes; each config runs on one of those whose constraints accept it.
 * The last two are the only ones long enough for chunk 64. */
static const bshape k_shapes[] = {
    {1, 1, 1, 1, 7, 7, CG_LAYOUT_TOKEN_MAJOR, 0, 1, 1, 1},
    {2, 37, 2, 4, 48, 40, CG_LAYOUT_HEAD_MAJOR, 0, 0, 1, 1},
    {1, 21, 1, 2, 7, 20, CG_LAYOUT_TOKEN_MAJOR, 1, 1, 0, 1},
    {1, 45, 2, 2, 40, 48, CG_LAYOUT_TOKEN_MAJOR, 0, 1, 1, 0},
    {1, 70, 1, 1, 48, 33, CG_LAYOUT_HEAD_MAJOR, 1, 0, 0, 1},
};
#define NSHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

static ssdt_dims dims_of(const bshape *c) {
    ssdt_dims d = {c->B, c->T, c->G, c->H, c->dk, c->dv, c->layout, c->swapped};
    return d;
}

static cg_status run_bwd(cg_context *ctx, ssdt_set *s, const bshape *c, cg_backend be, const char *config) {
    return ssdt_run_bwd(ctx, s, c->layout, c->h0, c->dhT, c->dh0, be, config);
}

/* A problem in F32 (for the kernels) and its F64 reference gradients. */
typedef struct bcase {
    bshape c;
    ssdt_set f, d; /* f32 inputs/outputs, f64 reference */
} bcase;

static void case_new(cg_context *ctx, bcase *g, const bshape *c, uint64_t seed) {
    g->c = *c;
    ssdt_set_alloc(&g->f, dims_of(c), CG_F32, SSDT_BWD);
    ssdt_set_alloc(&g->d, dims_of(c), CG_F64, SSDT_BWD);
    cg_rng r = {seed};
    ssdt_fill_inputs(&g->f, &r, -0.4, 0.0, SSDT_BWD); /* decays from 0.67 to 1 */
    ssdt_copy_inputs(&g->d, &g->f, SSDT_BWD);
    CG_CHECK_OK(ctx, run_bwd(ctx, &g->d, c, CG_BACKEND_REF, NULL));
}

static void case_free(bcase *g) {
    ssdt_set_free(&g->f);
    ssdt_set_free(&g->d);
}

/* Run one config on g with backend be and check every gradient. Returns 1 when it ran. */
static int check_config(cg_context *ctx, bcase *g, cg_backend be, const char *config, double tol) {
    /* poison the outputs so a kernel that skips an element fails */
    cg_tbuf_fill(&g->f.dq, &(cg_rng){7}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dk, &(cg_rng){8}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dv, &(cg_rng){9}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dla, &(cg_rng){10}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dh0, &(cg_rng){11}, 1e3, 2e3);
    cg_status s = run_bwd(ctx, &g->f, &g->c, be, config);
    const bshape *c = &g->c;
    if (s != CG_OK) {
        CG_CHECK(0, "config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld: %s: %s", config ? config : "(default)",
                 (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk,
                 (long long)c->dv, cg_status_str(s), cg_errmsg(ctx));
        return 0;
    }
    const double eq = cg_rel_err(&g->f.dq, &g->d.dq), ek = cg_rel_err(&g->f.dk, &g->d.dk);
    const double ev = cg_rel_err(&g->f.dv, &g->d.dv), ea = cg_rel_err(&g->f.dla, &g->d.dla);
    const double eh = c->dh0 ? cg_rel_err(&g->f.dh0, &g->d.dh0) : 0;
    CG_CHECK(eq <= tol && ek <= tol && ev <= tol && ea <= tol && eh <= tol,
             "config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld layout=%d swapped=%d h0=%d dhT=%d dh0=%d: "
             "rel err dq %.3g dk %.3g dv %.3g dla %.3g dh0 %.3g (tol %g) [%s]",
             config ? config : "(default)", (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H,
             (long long)c->dk, (long long)c->dv, c->layout, c->swapped, c->h0, c->dhT, c->dh0, eq, ek, ev, ea, eh,
             tol, cg_last_dispatch(ctx));
    if (getenv("CHUNKGEN_TEST_VERBOSE"))
        fprintf(stderr, "  %s T=%lld dk=%lld dv=%lld: dq %.2g dk %.2g dv %.2g dla %.2g dh0 %.2g\n",
                config ? config : "(default)", (long long)c->T, (long long)c->dk, (long long)c->dv, eq, ek, ev, ea,
                eh);
    return 1;
}

/* The config-space loop of ssd_testlib.c over k_shapes. */
static bcase g_cases[NSHAPES];

static void sp_kshape(void *u, int i, cg_kshape *ks) {
    (void)u;
    const bshape *c = &k_shapes[i];
    ssdt_kshape(dims_of(c), (c->h0 ? CG_KS_H0 : 0) | (c->dhT ? CG_KS_DHT : 0), ks);
}
static void sp_make(void *u, cg_context *ctx, int i) {
    case_new(ctx, &((bcase *)u)[i], &k_shapes[i], 1000 + (uint64_t)i);
}
static void sp_drop(void *u, int i) { case_free(&((bcase *)u)[i]); }
static int sp_check(void *u, cg_context *ctx, int i, cg_backend be, const char *config, double tol) {
    return check_config(ctx, &((bcase *)u)[i], be, config, tol);
}

/* Every config with precision `prec` accepted for any test shape, each run once on a
 * rotating choice among the shapes that accept it; with stride > 1 only every stride-th
 * config of the union. */
static void run_space(const char *prec, cg_backend be, int stride) {
    const ssdt_space sp = {"ssd_bwd", "ssd_bwd_gen", NSHAPES, g_cases, sp_kshape, sp_make, sp_drop, sp_check};
    ssdt_run_space(&sp, prec, be, stride, TOL_FP32, TOL_TF32);
}

CG_TEST(ssd_bwd_gen_emu_ieee) { run_space("ieee", CG_BACKEND_EMULATE, 1); }
CG_TEST(ssd_bwd_gen_emu_tf32) { run_space("tf32", CG_BACKEND_EMULATE, 1); }
CG_TEST(ssd_bwd_gen_emu_3xtf32) { run_space("3xtf32", CG_BACKEND_EMULATE, 1); }

/* The default config (fp32-accurate) on every shape; the dispatch line names the
 * kernel; a second call hits the plan table and gives the same bits (deterministic). */
CG_TEST(ssd_bwd_gen_emu_default) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    for (int i = 0; i < NSHAPES; i++) {
        bcase g;
        case_new(ctx, &g, &k_shapes[i], 2000 + (uint64_t)i);
        if (check_config(ctx, &g, CG_BACKEND_EMULATE, NULL, TOL_FP32)) {
            const char *d = cg_last_dispatch(ctx);
            CG_CHECK(strstr(d, "kernel=ssd_bwd_") != NULL, "dispatch line without the kernel name: %s", d);
            CG_CHECK(strstr(d, "_tf32") == NULL || strstr(d, "_3xtf32") != NULL, "default is plain tf32: %s", d);
        }
        const ssdt_dims dd = dims_of(&g.c);
        cg_tbuf dq1 = ssdt_mk(dd, CG_F32, g.c.G, g.c.dk), dla1 = ssdt_mk(dd, CG_F32, g.c.H, 0);
        cg_tbuf_copy(&dq1, &g.f.dq);
        cg_tbuf_copy(&dla1, &g.f.dla);
        CG_CHECK_OK(ctx, run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL));
        CG_CHECK(cg_rel_err(&g.f.dq, &dq1) == 0 && cg_rel_err(&g.f.dla, &dla1) == 0, "second run differs (shape %d)",
                 i);
        cg_tbuf_free(&dq1);
        cg_tbuf_free(&dla1);
        case_free(&g);
    }
    cg_context_free(ctx);
}

/* Pins outside the space or rejected by the constraints fail with a reason. */
CG_TEST(ssd_bwd_gen_emu_bad_config) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    bcase g;
    case_new(ctx, &g, &k_shapes[0], 3000);
    cg_status s = run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=48");
    CG_CHECK(s == CG_EINVAL, "chunk=48 (outside the space): got %s: %s", cg_status_str(s), cg_errmsg(ctx));
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk") != NULL, "message does not name chunk: %s", cg_errmsg(ctx));
    /* T = 1: a 64-token chunk only multiplies zeros */
    s = run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=64,block_dv=16,warps=2,precision=ieee");
    CG_CHECK(s == CG_EUNSUPPORTED, "chunk=64 on T=1: got %s: %s", cg_status_str(s), cg_errmsg(ctx));
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk") != NULL, "message does not name chunk: %s", cg_errmsg(ctx));
    case_free(&g);
    cg_context_free(ctx);
}

/* Natively on a GPU (skipped without one): every 4th config of the device's space
 * (CHUNKGEN_TEST_ALL_CONFIGS=1: all of them). Host tensors: the launcher stages them. */
CG_TEST(ssd_bwd_gen_cuda_ieee) { run_space("ieee", CG_BACKEND_CUDA, ssdt_cuda_stride()); }
CG_TEST(ssd_bwd_gen_cuda_tf32) { run_space("tf32", CG_BACKEND_CUDA, ssdt_cuda_stride()); }
CG_TEST(ssd_bwd_gen_cuda_3xtf32) { run_space("3xtf32", CG_BACKEND_CUDA, ssdt_cuda_stride()); }
