/* test_ssd_bwd_gen.c -- the generated SSD backward kernels under the SIMT emulator
 * against the float64 reference: the configs the Lua constraints accept (the covering
 * sample of tests/sweep_sample.h in CI, every one under CHUNKGEN_TEST_SWEEP=full), on
 * small odd shapes (T = 1, T not a multiple of the chunk, dk/dv 7, 40, 48, G = 2 < H = 4,
 * both layouts, strided views, h0, dhT and dh0 present and absent), every gradient; the
 * shapes rotate over the configs. The same checks run natively with
 * CG_BACKEND_CUDA when a GPU is present. recompute > 1 (states stored every few
 * chunks only): the two long shapes span several super-chunks at every chunk length,
 * the last one partial, and a test pins recompute = 4 on one of them for every chunk
 * length, precision and heads mode; the plan's workspace shrinks with it. */
#include "ssd_testlib.h"

#include <string.h>

#define TOL_FP32 1e-4 /* ieee and 3xtf32, gradients */
#define TOL_TF32 5e-3

typedef struct bshape {
    ssdt_dims d; /* swapped: memory order with the two middle dims swapped (strided views) */
    int h0;      /* h0 given */
    int dhT;     /* dhT given */
    int dh0;     /* dh0 wanted */
} bshape;

/* Small odd shapes; each config runs on one of those whose constraints accept it.
 * Shapes 3 and on are long enough for chunk 64. The last two are the long ones for
 * recompute = 4 (super-chunks of 4 chunks): T = 300 has 19, 10, 5 chunks of 16, 32, 64
 * (super-chunks 4+4+4+4+3, 4+4+2, 4+1), T = 400 has 25, 13, 7 (..+1, 4+4+4+1, 4+3);
 * the kernels are compiled per (dk, dv, config), so length costs little. */
static const bshape k_shapes[] = {
    {{1, 1, 1, 1, 7, 7, CG_LAYOUT_TOKEN_MAJOR, 0}, 1, 1, 1},
    {{2, 37, 2, 4, 48, 40, CG_LAYOUT_HEAD_MAJOR, 0}, 0, 1, 1},
    {{1, 21, 1, 2, 7, 20, CG_LAYOUT_TOKEN_MAJOR, 1}, 1, 0, 1},
    {{1, 45, 2, 2, 40, 48, CG_LAYOUT_TOKEN_MAJOR, 0}, 1, 1, 0},
    {{1, 70, 1, 1, 48, 33, CG_LAYOUT_HEAD_MAJOR, 1}, 0, 0, 1},
    {{1, 300, 1, 2, 7, 33, CG_LAYOUT_TOKEN_MAJOR, 0}, 1, 1, 1},
    {{1, 400, 2, 4, 40, 20, CG_LAYOUT_HEAD_MAJOR, 1}, 1, 0, 1},
};
#define NSHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))
#define LONG_SHAPE (NSHAPES - 1) /* several super-chunks of 4 at every chunk length */

static cg_status run_bwd(cg_context *ctx, ssdt_set *s, const bshape *c, cg_backend be, const char *config) {
    return ssdt_run_bwd(ctx, s, c->d.layout, c->h0, c->dhT, c->dh0, be, config);
}

SSDT_CASES(bshape, run_bwd, SSDT_BWD)

/* Run one config on g with backend be and check every gradient. Returns 1 when it ran. */
static int check_config(cg_context *ctx, tcase *g, cg_backend be, const char *config, double tol) {
    ssdt_poison_outputs(&g->f, SSDT_BWD);
    const bshape *c = &g->c;
    if (!ssdt_ran(ctx, run_bwd(ctx, &g->f, c, be, config), config, c->d)) return 0;
    const double eq = cg_rel_err(&g->f.dq, &g->d.dq), ek = cg_rel_err(&g->f.dk, &g->d.dk);
    const double ev = cg_rel_err(&g->f.dv, &g->d.dv), ea = cg_rel_err(&g->f.dla, &g->d.dla);
    const double eh = c->dh0 ? cg_rel_err(&g->f.dh0, &g->d.dh0) : 0;
    char dims[200];
    CG_CHECK(eq <= tol && ek <= tol && ev <= tol && ea <= tol && eh <= tol,
             "config %s on %s layout=%d swapped=%d h0=%d dhT=%d dh0=%d: "
             "rel err dq %.3g dk %.3g dv %.3g dla %.3g dh0 %.3g (tol %g) [%s]",
             config ? config : "(default)", ssdt_dims_str(c->d, dims, sizeof dims), c->d.layout, c->d.swapped, c->h0,
             c->dhT, c->dh0, eq, ek, ev, ea, eh, tol, cg_last_dispatch(ctx));
    if (getenv("CHUNKGEN_TEST_VERBOSE"))
        fprintf(stderr, "  %s T=%lld dk=%lld dv=%lld: dq %.2g dk %.2g dv %.2g dla %.2g dh0 %.2g\n",
                config ? config : "(default)", (long long)c->d.T, (long long)c->d.dk, (long long)c->d.dv, eq, ek, ev,
                ea, eh);
    return 1;
}

static int bshape_flags(const bshape *c) { return (c->h0 ? CG_KS_H0 : 0) | (c->dhT ? CG_KS_DHT : 0); }

/* run_space(prec, be) and run_default() over k_shapes (ssd_testlib.h). */
SSDT_RUN_SPACE(bshape_flags, "ssd_bwd", "ssd_bwd_gen")

CG_TEST(ssd_bwd_gen_emu_ieee) { run_space("ieee", CG_BACKEND_EMULATE); }
CG_TEST(ssd_bwd_gen_emu_tf32) { run_space("tf32", CG_BACKEND_EMULATE); }
CG_TEST(ssd_bwd_gen_emu_3xtf32) { run_space("3xtf32", CG_BACKEND_EMULATE); }

/* The default config (fp32-accurate) on every shape; the dispatch line names the
 * kernel; a second call hits the plan table and gives the same bits (deterministic). */
CG_TEST(ssd_bwd_gen_emu_default) { run_default(); }

/* recompute = 4 on the long G < H shape, for every chunk length, precision and heads
 * mode (the rest from the default): the states carried through the chunks of each
 * super-chunk, several super-chunks, the last one partial, against the reference. */
static void run_recompute(cg_backend be) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    cg_devinfo dev;
    if (be == CG_BACKEND_CUDA && cg__kexec_cuda.device(ctx, &dev) != CG_OK) {
        cg_test_skip("no CUDA device");
        cg_context_free(ctx);
        return;
    }
    tcase g;
    const bshape *c = &k_shapes[LONG_SHAPE];
    case_new(ctx, &g, c, 4000);
    static const int chunks[] = {16, 32, 64};
    static const char *const precs[] = {"ieee", "tf32", "3xtf32"};
    static const char *const heads[] = {"loop", "split"};
    int ran = 0;
    for (int ic = 0; ic < 3; ic++) {
        const int64_t nchunks = (c->d.T + chunks[ic] - 1) / chunks[ic];
        CG_CHECK(nchunks > 4 && nchunks % 4 != 0, "T = %lld: want several super-chunks, the last partial",
                 (long long)c->d.T);
        for (int ip = 0; ip < 3; ip++)
            for (int ih = 0; ih < 2; ih++) {
                char cfg[128];
                snprintf(cfg, sizeof cfg, "chunk=%d,precision=%s,heads=%s,recompute=4", chunks[ic], precs[ip],
                         heads[ih]);
                ran += check_config(ctx, &g, be, cfg, ip == 1 ? TOL_TF32 : TOL_FP32);
                CG_CHECK(strstr(cg_last_dispatch(ctx), "_rc4") != NULL, "dispatch line without rc4: %s",
                         cg_last_dispatch(ctx));
            }
    }
    CG_CHECK(ran == 18, "%d of 18 recompute configs ran", ran);
    case_free(&g);
    cg_context_free(ctx);
}

CG_TEST(ssd_bwd_gen_emu_recompute) { run_recompute(CG_BACKEND_EMULATE); }
CG_TEST(ssd_bwd_gen_cuda_recompute) { run_recompute(CG_BACKEND_CUDA); }

/* The plan's workspace: recompute = 4 keeps a quarter of the chunk states of
 * recompute = 1 (the states dominate on a long T); and the default stores every chunk
 * boundary unless those states outweigh both STATES_FLOOR (ssd_bwd.lua) and q, k, v,
 * dout together, then it stores every 4th. */
static int64_t plan_ws(cg_context *ctx, const ssdt_dims *ks, const cg_devinfo *dev, const char *pin, char *cfg_out,
                       size_t len) {
    cg_shape s; /* h0 and dhT given */
    ssdt_shape(*ks, &s);
    cg_cfg c;
    memset(&c, 0, sizeof c);
    if (pin) CG_CHECK_OK(ctx, cg__cfg_parse(ctx, pin, &c));
    cg_plan plan;
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_bwd", &s, CG_KS_H0 | CG_KS_DHT, dev, pin ? &c : NULL, &plan));
    const int64_t ws = plan.workspace_bytes;
    if (cfg_out) snprintf(cfg_out, len, "chunk=%lld,recompute=%lld", (long long)cg__cfg_int(&plan.params, "chunk", 0),
                          (long long)cg__cfg_int(&plan.params, "recompute", 0));
    cg__plan_free(&plan);
    return ws;
}

CG_TEST(ssd_bwd_gen_recompute_workspace) {
    CG_TEST_CONTEXT(ctx);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    /* B*H = 24, T = 8192 (128 chunks of 64), dk = dv = 128: 2*24*128*128*128 floats of states */
    ssdt_dims ks = {.B = 4, .T = 8192, .G = 6, .H = 6, .dk = 128, .dv = 128};
    const char *base = "chunk=32,block_dv=32,warps=4,precision=3xtf32,heads=loop";
    char pin1[160], pin4[160];
    snprintf(pin1, sizeof pin1, "%s,recompute=1", base);
    snprintf(pin4, sizeof pin4, "%s,recompute=4", base);
    const int64_t w1 = plan_ws(ctx, &ks, &dev, pin1, NULL, 0), w4 = plan_ws(ctx, &ks, &dev, pin4, NULL, 0);
    const int64_t nchunks = (ks.T + 31) / 32;
    const int64_t states1 = 8 * ks.B * ks.H * nchunks * ks.dk * ks.dv; /* bytes: S and dS */
    CG_CHECK(w1 >= states1, "recompute=1: workspace %lld bytes, below its %lld bytes of states", (long long)w1,
             (long long)states1);
    CG_CHECK(w4 >= states1 / 4 && w4 < states1 / 4 + (w1 - states1) + 1,
             "recompute=4: workspace %lld bytes, want a quarter of the %lld bytes of states (+ %lld)",
             (long long)w4, (long long)states1, (long long)(w1 - states1));
    const double ratio = (double)w4 / (double)w1;
    CG_CHECK(ratio > 0.24 && ratio < 0.26, "recompute=4 / recompute=1 workspace %.4f, expected about 1/4", ratio);

    /* the default: recompute = 1 while the states fit the bound, else 4 */
    static const int64_t shapes[][6] = {
        /* B, T, G, H, dk, dv */
        {4, 8192, 6, 6, 128, 128}, {4, 8192, 1, 6, 128, 128}, {4, 8192, 6, 6, 64, 64},
        {1, 4096, 1, 8, 128, 128}, {2, 100, 1, 2, 48, 40},   {8, 16384, 8, 8, 64, 64},
    };
    int saw1 = 0, saw4 = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *d = shapes[i];
        ks.B = d[0], ks.T = d[1], ks.G = d[2], ks.H = d[3], ks.dk = d[4], ks.dv = d[5];
        char got[96];
        plan_ws(ctx, &ks, &dev, NULL, got, sizeof got);
        cg_cfg c;
        CG_CHECK_OK(ctx, cg__cfg_parse(ctx, got, &c));
        const int64_t chunk = cg__cfg_int(&c, "chunk", 0), rec = cg__cfg_int(&c, "recompute", 0);
        const int64_t states = 8 * ks.B * ks.H * ((ks.T + chunk - 1) / chunk) * ks.dk * ks.dv;
        const int64_t inputs = 8 * ks.B * ks.T * (ks.G * ks.dk + ks.H * ks.dv);
        const int64_t bound = inputs > ((int64_t)256 << 20) ? inputs : ((int64_t)256 << 20);
        const int64_t want = states > bound ? 4 : 1;
        CG_CHECK(rec == want, "default for B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld: %s, want recompute=%lld "
                 "(states %lld bytes, bound %lld)", (long long)ks.B, (long long)ks.T, (long long)ks.G,
                 (long long)ks.H, (long long)ks.dk, (long long)ks.dv, got, (long long)want, (long long)states,
                 (long long)bound);
        saw1 |= rec == 1;
        saw4 |= rec == 4;
    }
    CG_CHECK(saw1 && saw4, "the default shapes should see both recompute=1 and recompute=4");
    cg_context_free(ctx);
}

/* Pins outside the space or rejected by the constraints fail with a reason. */
CG_TEST(ssd_bwd_gen_emu_bad_config) {
    CG_TEST_CONTEXT(ctx);
    tcase g;
    case_new(ctx, &g, &k_shapes[0], 3000);
    CG_CHECK_REFUSED(ctx, run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=48"), CG_EINVAL, "chunk", "chunk=48 (outside the space)");
    /* T = 1: a 64-token chunk only multiplies zeros */
    CG_CHECK_REFUSED(ctx, run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=64,block_dv=16,warps=2,precision=ieee"),
                     CG_EUNSUPPORTED, "chunk", "chunk=64 on T=1");
    /* T = 1: one chunk, nothing to recompute */
    CG_CHECK_REFUSED(ctx, run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=16,recompute=4"),
                     CG_EUNSUPPORTED, "recompute", "recompute=4 on T=1");
    CG_CHECK_REFUSED(ctx, run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "recompute=2"), CG_EINVAL, NULL, "recompute=2 (outside the space)");
    case_free(&g);
    cg_context_free(ctx);
}

/* Natively on a GPU (skipped without one): the same selection of the device's space
 * (CHUNKGEN_TEST_SWEEP=full: all of it). Host tensors: the launcher stages them. */
CG_TEST(ssd_bwd_gen_cuda_ieee) { run_space("ieee", CG_BACKEND_CUDA); }
CG_TEST(ssd_bwd_gen_cuda_tf32) { run_space("tf32", CG_BACKEND_CUDA); }
CG_TEST(ssd_bwd_gen_cuda_3xtf32) { run_space("3xtf32", CG_BACKEND_CUDA); }
