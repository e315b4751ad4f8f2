/* test_ssd_gen.c -- the generated SSD forward kernel under the SIMT emulator against the
 * float64 reference: the configs its Lua constraints accept (the covering sample of
 * tests/sweep_sample.h in CI, every one under CHUNKGEN_TEST_SWEEP=full), on small odd
 * shapes (T = 1, T not a multiple of the chunk, dk/dv 7, 40, 48, 130, G < H, both layouts,
 * strided views, h0 present and absent); the shapes rotate over the configs.
 * The same checks run natively with CG_BACKEND_CUDA when a GPU is present. */
#include "ssd_testlib.h"

#include <string.h>

#define TOL_FP32 1e-5 /* ieee and 3xtf32 */
#define TOL_TF32 5e-3

typedef struct gshape {
    ssdt_dims d; /* swapped: memory order with the two middle dims swapped (strided views) */
    int h0;      /* h0 given */
    int hT;      /* hT wanted */
} gshape;

/* Small odd shapes. Each config runs on one of these (rotating), chosen among those
 * whose constraints accept it; the last ones are the only shapes wide enough for
 * block_dv 64 with 8 warps, so keep them small in T. */
static const gshape k_shapes[] = {
    {{1, 1, 1, 1, 7, 7, CG_LAYOUT_TOKEN_MAJOR, 0}, 1, 1},
    {{2, 37, 2, 4, 48, 40, CG_LAYOUT_HEAD_MAJOR, 0}, 0, 1},
    {{1, 21, 1, 2, 7, 20, CG_LAYOUT_TOKEN_MAJOR, 1}, 1, 0},
    {{1, 45, 2, 2, 40, 48, CG_LAYOUT_TOKEN_MAJOR, 0}, 1, 1},
    {{1, 19, 1, 1, 130, 33, CG_LAYOUT_HEAD_MAJOR, 1}, 1, 1},
    {{1, 70, 1, 1, 48, 72, CG_LAYOUT_HEAD_MAJOR, 0}, 1, 0},
    {{1, 29, 1, 3, 40, 130, CG_LAYOUT_TOKEN_MAJOR, 0}, 0, 1},
};
#define NSHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

static cg_status run_fwd(cg_context *ctx, ssdt_set *s, const gshape *c, cg_backend be, const char *config) {
    return ssdt_run_fwd(ctx, s, c->d.layout, c->h0, c->hT, be, config);
}

SSDT_CASES(gshape, run_fwd, SSDT_FWD)

/* Run one config on g with backend be and check o and hT. Returns 1 when it ran. */
static int check_config(cg_context *ctx, tcase *g, cg_backend be, const char *config, double tol) {
    ssdt_poison_outputs(&g->f, SSDT_FWD);
    const gshape *c = &g->c;
    if (!ssdt_ran(ctx, run_fwd(ctx, &g->f, c, be, config), config, c->d)) return 0;
    double eo = cg_rel_err(&g->f.o, &g->d.o), eh = c->hT ? cg_rel_err(&g->f.hT, &g->d.hT) : 0;
    char dims[200];
    CG_CHECK(eo <= tol && eh <= tol,
             "config %s on %s layout=%d swapped=%d h0=%d hT=%d: rel err o %.3g hT %.3g (tol %g) [%s]",
             config ? config : "(default)", ssdt_dims_str(c->d, dims, sizeof dims), c->d.layout, c->d.swapped, c->h0,
             c->hT, eo, eh, tol, cg_last_dispatch(ctx));
    return 1;
}

static int gshape_flags(const gshape *c) { return (c->h0 ? CG_KS_H0 : 0) | (c->hT ? CG_KS_HT : 0); }

/* run_space(prec, be) and run_default() over k_shapes (ssd_testlib.h). */
SSDT_RUN_SPACE(gshape_flags, "ssd_fwd", "ssd_gen")

CG_TEST(ssd_gen_emu_ieee) { run_space("ieee", CG_BACKEND_EMULATE); }
CG_TEST(ssd_gen_emu_tf32) { run_space("tf32", CG_BACKEND_EMULATE); }
CG_TEST(ssd_gen_emu_3xtf32) { run_space("3xtf32", CG_BACKEND_EMULATE); }

/* The default config (fp32-accurate) on every shape, and the dispatch line names it;
 * a second call gives the same bits. */
CG_TEST(ssd_gen_emu_default) { run_default(); }

/* Pins outside the space or rejected by the constraints fail with a reason. */
CG_TEST(ssd_gen_emu_bad_config) {
    CG_TEST_CONTEXT(ctx);
    tcase g;
    case_new(ctx, &g, &k_shapes[1], 3000);
    CG_CHECK_REFUSED(ctx, run_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=48"), CG_EINVAL, "chunk", "chunk=48 (outside the space)");
    CG_CHECK_REFUSED(ctx, run_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "strategy=3phase,stages=2"),
                     CG_EUNSUPPORTED, "stages", "3phase with stages=2");
    case_free(&g);
    cg_context_free(ctx);
}

/* Natively on a GPU (skipped without one): the same selection of the device's space
 * (CHUNKGEN_TEST_SWEEP=full: all of it). Host tensors: the launcher stages them. */
CG_TEST(ssd_gen_cuda_ieee) { run_space("ieee", CG_BACKEND_CUDA); }
CG_TEST(ssd_gen_cuda_tf32) { run_space("tf32", CG_BACKEND_CUDA); }
CG_TEST(ssd_gen_cuda_3xtf32) { run_space("3xtf32", CG_BACKEND_CUDA); }
