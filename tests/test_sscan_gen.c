/* test_sscan_gen.c -- the generated selective-scan kernels (sscan_fwd, sscan_bwd) under the
 * SIMT emulator against the float64 reference: every config the Lua constraints accept
 * for some test shape runs at least once (the shapes rotate over the configs), forward
 * (y, hT) and every gradient. Shapes are small and odd: L = 1, L not a multiple of the
 * chunk or segment, odd D, N in {1, 4, 7, 16, 33, 256}, grouped and ungrouped B/C (one
 * group per channel too), the optional inputs on and off, and mamba's [B, D, L] memory
 * order (strided views). The same checks run natively with CG_BACKEND_CUDA when a GPU
 * is present (skipped otherwise). Also: the backward's workspace bound (issue 6: it may
 * grow as B*D*N*L/segment, not with L*D*N), checked on plans for an sm_90 device. */
#include "cg_test.h"

#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"
#include "cuda/kcache.h"
#include "emu/emu.h"
#include "gen.h"
#include "sscan_params.h"
#include "nvrtc_testlib.h"
#include "ptxas_log.h"
#include "test_dtype_lib.h"
#include "sscan_testlib.h"
#include "sweep_sample.h"

#define FWD_TOL 1e-5
#define GRAD_TOL 1e-4
#define HALF_TOL_BF16 1e-2 /* docs/dtypes.md */
#define HALF_TOL_F16 2e-3


/* Together these accept every config of both spaces (checked against a wide sweep of
 * shapes with `chunkgen gen sscan_fwd|sscan_bwd --configs`): N = 256 needs the narrowest
 * block, the par strategy and segment 256 need a long L, dim_block 64 needs D > 32. */
static const sst_case k_cases[] = {
    {2, 1, 5, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, NULL},
    {1, 37, 19, 16, 0, 1, 1, 1, 1, 1, 1, 1, 1, NULL},
    {2, 29, 12, 33, 3, 1, 0, 0, 0, 1, 0, 1, 0, NULL},
    {1, 23, 40, 7, 2, 0, 1, 1, 1, 0, 1, 0, 0, NULL},
    {1, 9, 3, 256, 0, 0, 1, 0, 0, 1, 1, 1, 0, NULL},
    {1, 300, 6, 1, 6, 1, 0, 0, 1, 0, 1, 1, 1, NULL},
    {1, 150, 33, 4, 3, 1, 1, 1, 1, 1, 1, 1, 0, NULL},
    {2, 70, 65, 16, 5, 0, 1, 1, 0, 1, 0, 1, 1, NULL},
    /* chunk 16 with the par strategy and segment 256 with narrow blocks need a long L and
     * enough channels for blocks of 16 to 64 */
    {1, 600, 40, 7, 2, 1, 1, 0, 1, 0, 1, 1, 0, NULL},
};
#define NCASES ((int)(sizeof k_cases / sizeof k_cases[0]))



/* The tensors that may be 16-bit (the op table's CG_TD_HALF ones). */
static int sg_half(int i) {
    switch (i) {
    case T_X: case T_DELTA: case T_B: case T_C: case T_Z: case T_DY: case T_Y:
    case T_DX: case T_DDELTA: case T_DB: case T_DC: case T_DZ: return 1;
    default: return 0;
    }
}

/* The set in dt; with dt CG_BF16 or CG_F16 the 16-bit-capable tensors only, the others
 * in CG_F32. */
static void sg_alloc(sst_set *s, const sst_case *c, cg_dtype dt) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < T_COUNT; i++) {
        int64_t sh[4];
        int perm[4], permuted;
        const int nd = sst_dims(c, i, sh, perm, &permuted);
        const cg_dtype ti = dt == CG_F64 || sg_half(i) ? dt : CG_F32;
        s->on[i] = sst_on(c, i);
        s->t[i] = cg_tbuf_new_perm(ti, nd, sh, permuted && dt != CG_F64 ? perm : NULL);
    }
}


static cg_status sg_fwd(cg_context *ctx, sst_set *s, const sst_case *c, cg_backend be, const char *config) {
    cg_sscan_fwd_args a = sst_fwd_args(s, c);
    const cg_exec ex = {.backend = be, .config = config};
    return cg_sscan_fwd(ctx, &a, &ex);
}

static cg_status sg_bwd(cg_context *ctx, sst_set *s, const sst_case *c, cg_backend be, const char *config) {
    cg_sscan_bwd_args a = sst_bwd_args(s, c);
    const cg_exec ex = {.backend = be, .config = config};
    return cg_sscan_bwd(ctx, &a, &ex);
}

static void describe(const sst_case *c, char *buf, size_t n) {
    snprintf(buf, n, "B=%lld L=%lld D=%lld N=%lld G=%lld z=%d D=%d bias=%d softplus=%d h0=%d dhT=%d outs=%d strided=%d",
             (long long)c->B, (long long)c->L, (long long)c->D, (long long)c->N, (long long)c->G, c->z, c->Dv,
             c->bias, c->softplus, c->h0, c->dhT, c->outs, c->strided);
}

/* A problem for the kernels (F32, or its 16-bit-capable tensors in BF16 / F16) and its
 * F64 reference results on the same (rounded) inputs. */
typedef struct sg_prob {
    sst_case c;
    cg_dtype dt;
    sst_set f, d;
} sg_prob;

static void prob_new_dt(cg_context *ctx, sg_prob *g, const sst_case *c, uint64_t seed, cg_dtype dt) {
    g->c = *c;
    g->dt = dt;
    sg_alloc(&g->d, c, CG_F64);
    sg_alloc(&g->f, c, dt);
    cg_rng r = {seed};
    cg_tbuf *d = g->d.t;
    cg_tbuf_fill(&d[T_X], &r, -1, 1);
    if (c->softplus) cg_tbuf_fill(&d[T_DELTA], &r, -2.5, 1);
    else cg_tbuf_fill(&d[T_DELTA], &r, 0.01, 0.5);
    cg_tbuf_fill(&d[T_A], &r, -1.5, -0.05);
    cg_tbuf_fill(&d[T_B], &r, -1, 1);
    cg_tbuf_fill(&d[T_C], &r, -1, 1);
    cg_tbuf_fill(&d[T_D], &r, -1, 1);
    cg_tbuf_fill(&d[T_Z], &r, -2, 2);
    if (c->softplus) cg_tbuf_fill(&d[T_BIAS], &r, -0.5, 0.5);
    else cg_tbuf_fill(&d[T_BIAS], &r, 0, 0.1);
    cg_tbuf_fill(&d[T_H0], &r, -1, 1);
    cg_tbuf_fill(&d[T_DY], &r, -1, 1);
    cg_tbuf_fill(&d[T_DHT], &r, -1, 1);
    /* the reference sees the float32 values the kernels see */
    for (int i = 0; i <= T_DHT; i++) {
        cg_tbuf_copy(&g->f.t[i], &d[i]);
        cg_tbuf_copy(&d[i], &g->f.t[i]);
    }
    CG_CHECK_OK(ctx, sg_fwd(ctx, &g->d, c, CG_BACKEND_REF, NULL));
    CG_CHECK_OK(ctx, sg_bwd(ctx, &g->d, c, CG_BACKEND_REF, NULL));
}

static void prob_new(cg_context *ctx, sg_prob *g, const sst_case *c, uint64_t seed) {
    prob_new_dt(ctx, g, c, seed, CG_F32);
}

static void prob_free(sg_prob *g) {
    sst_free(&g->f);
    sst_free(&g->d);
}

/* Runs op (0 forward, 1 backward) of g with be and config; checks every output it
 * writes against the reference. Returns 1 when it ran. */
static int check_op(cg_context *ctx, sg_prob *g, int bwd, cg_backend be, const char *config) {
    const int lo = bwd ? T_DX : T_Y, hi = bwd ? T_COUNT : T_DX;
    /* poison the outputs so an element a kernel skips fails */
    for (int i = lo; i < hi; i++) cg_tbuf_fill(&g->f.t[i], &(cg_rng){(uint64_t)(77 + i)}, 1e3, 2e3);
    char what[256];
    describe(&g->c, what, sizeof what);
    cg_status s = bwd ? sg_bwd(ctx, &g->f, &g->c, be, config) : sg_fwd(ctx, &g->f, &g->c, be, config);
    if (s != CG_OK) {
        CG_CHECK(0, "%s config %s on %s: %s: %s", bwd ? "sscan_bwd" : "sscan_fwd", config ? config : "default", what,
                 cg_status_str(s), cg_errmsg(ctx));
        return 0;
    }
    for (int i = lo; i < hi; i++) {
        if (!g->f.on[i]) continue;
        /* a 16-bit output: rounded once from float32 math (issue #15's targets) */
        const cg_dtype dt = g->f.t[i].t.dtype;
        const double tol = dt == CG_BF16 ? HALF_TOL_BF16 : dt == CG_F16 ? HALF_TOL_F16 : bwd ? GRAD_TOL : FWD_TOL;
        const double err = cg_rel_err(&g->f.t[i], &g->d.t[i]);
        CG_CHECK(err <= tol, "%s: rel err %.3g > %.0e, config %s on %s [%s]", sst_names[i], err, tol,
                 config ? config : "default", what, cg_last_dispatch(ctx));
    }
    return 1;
}

/* The generator's shape of case c in direction bwd (float32); returns its shape flags. */
static int shape_of(const sst_case *c, int bwd, cg_shape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->size = sizeof *ks, ks->op = bwd ? CG_OP_SSCAN_BWD : CG_OP_SSCAN_FWD;
    ks->dim[CG_SYM_B] = c->B, ks->dim[CG_SYM_L] = c->L, ks->dim[CG_SYM_D] = c->D, ks->dim[CG_SYM_N] = c->N;
    ks->dim[CG_SYM_G] = c->G ? c->G : 1;
    int flags = (c->h0 ? CG_KS_H0 : 0) | (c->softplus ? CG_KS_SOFTPLUS : 0) | (c->Dv ? CG_KS_HAS_D : 0) |
                (c->z ? CG_KS_HAS_Z : 0) | (c->bias ? CG_KS_HAS_BIAS : 0) | (c->G ? CG_KS_GROUPED : 0);
    if (!bwd && c->outs) flags |= CG_KS_HT;
    if (bwd && c->dhT) flags |= CG_KS_DHT;
    return flags;
}

static void half_dtypes(const sst_case *c, int bwd, cg_dtype dt, cg_shape *ks);

/* The configs of kernel (sscan_fwd or sscan_bwd) accepted for some case that the sweep's
 * selection keeps (sweep_sample.h), each run once on a rotating choice among the cases
 * that accept it. half (0: float32): the configs in 16-bit storage, bf16 and f16 taking
 * turns over the kept ones, the
 * defaults of every case in both (sscan_gen_emu_default16). */
static void run_space_dt(int bwd, cg_backend be, int half) {
    const char *kernel = bwd ? "sscan_bwd" : "sscan_fwd";
    cg_devinfo dev;
    cg_context *ctx = cg_test_device_context(be, &dev);
    if (!ctx) return;
    cg_cfg *space[NCASES];
    int nspace[NCASES];
    for (int i = 0; i < NCASES; i++) {
        cg_shape ks;
        const int ksf = shape_of(&k_cases[i], bwd, &ks);
        if (half) half_dtypes(&k_cases[i], bwd, CG_BF16, &ks); /* the same space for f16 */
        space[i] = NULL;
        nspace[i] = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, kernel, &ks, ksf, &dev, &space[i], &nspace[i]));
        CG_CHECK(nspace[i] > 0, "%s: no config accepted for case %d", kernel, i);
    }
    /* the union of the spaces, each on a rotating choice among the cases that accept it */
    const cg_cfg **cfgs;
    int *pick_of;
    const int total = cg_sweep_union(space, nspace, NCASES, NULL, &cfgs, &pick_of);
    /* the configs cg_sweep_select keeps (sweep_sample.h; every one under
     * CHUNKGEN_TEST_SWEEP=full): pairs, or each value for 16-bit storage, a variant of the
     * float32 space (the same precisions), where bf16 and f16 take turns over the kept ones */
    cg_sweep_sel sel;
    cg_sweep_select(cfgs, total, half ? CG_SWEEP_VALUES : CG_SWEEP_PAIRS, &sel);
    /* under the emulator, compile the modules in parallel first (the loads then hit the
     * disk cache; a plan that differs from the dispatched one only costs time) */
    if (be == CG_BACKEND_EMULATE && total) {
        cg_plan *plans = calloc((size_t)total, sizeof *plans);
        int nplan = 0, k = 0;
        for (int q = 0; plans && q < total; q++) {
            if (!cg_sweep_keeps(&sel, q)) continue;
            cg_shape ks;
            const int ksf = shape_of(&k_cases[pick_of[q]], bwd, &ks);
            if (half) half_dtypes(&k_cases[pick_of[q]], bwd, k % 2 ? CG_F16 : CG_BF16, &ks);
            k++;
            if (cg__gen_plan(ctx, kernel, &ks, ksf, &dev, cfgs[q], &plans[nplan]) == CG_OK) nplan++;
        }
        if (nplan) CG_CHECK_OK(ctx, cg__emu_prebuild(ctx, plans, nplan));
        for (int q = 0; q < nplan; q++) cg__plan_free(&plans[q]);
        free(plans);
    }
    sg_prob probs[2][NCASES];
    int made[2][NCASES] = {{0}};
    int ran = 0, want = 0;
    for (int q = 0; q < total; q++) {
        if (!cg_sweep_keeps(&sel, q)) continue;
        const int pick = pick_of[q], h = half && want % 2;
        want++;
        if (!made[h][pick]) {
            prob_new_dt(ctx, &probs[h][pick], &k_cases[pick], 100 + (uint64_t)pick,
                        !half ? CG_F32 : h ? CG_F16 : CG_BF16);
            made[h][pick] = 1;
        }
        char text[512];
        cg__cfg_text(cfgs[q], text, sizeof text);
        ran += check_op(ctx, &probs[h][pick], bwd, be, text);
    }
    free(cfgs);
    free(pick_of);
    CG_CHECK(total > 0, "%s: empty space", kernel);
    CG_CHECK(ran == want && want > 0, "%s: %d of %d configs ran", kernel, ran, want);
    char what[96];
    fprintf(stderr, "sscan_gen: %s configs checked on %s: %s%s\n", kernel, cg_backend_name(be),
            cg_sweep_describe(&sel, what, sizeof what), half ? " (16-bit storage, bf16 and f16 in turn)" : "");
    cg_sweep_sel_free(&sel);
    for (int i = 0; i < NCASES; i++) {
        for (int h = 0; h < 2; h++)
            if (made[h][i]) prob_free(&probs[h][i]);
        free(space[i]);
    }
    cg_context_free(ctx);
}

static void run_space(int bwd, cg_backend be) { run_space_dt(bwd, be, 0); }

CG_TEST(sscan_gen_emu_fwd_space) { run_space(0, CG_BACKEND_EMULATE); }
CG_TEST(sscan_gen_emu_bwd_space) { run_space(1, CG_BACKEND_EMULATE); }
CG_TEST(sscan_gen_emu_fwd_space16) { run_space_dt(0, CG_BACKEND_EMULATE, 1); }
CG_TEST(sscan_gen_emu_bwd_space16) { run_space_dt(1, CG_BACKEND_EMULATE, 1); }

/* The default configs on every case, forward and backward; the dispatch line names the
 * kernel; a second call finds the plan and gives the same bits (deterministic). */
CG_TEST(sscan_gen_emu_default) {
    CG_TEST_CONTEXT(ctx);
    for (int i = 0; i < NCASES; i++) {
        sg_prob g;
        prob_new(ctx, &g, &k_cases[i], 200 + (uint64_t)i);
        for (int bwd = 0; bwd < 2; bwd++) {
            if (!check_op(ctx, &g, bwd, CG_BACKEND_EMULATE, NULL)) continue;
            const char *d = cg_last_dispatch(ctx);
            CG_CHECK(strstr(d, bwd ? "kernel=sscan_bwd_n" : "kernel=sscan_fwd_n") != NULL,
                     "dispatch line without the kernel name: %s", d);
            const int lo = bwd ? T_DX : T_Y, hi = bwd ? T_COUNT : T_DX;
            cg_tbuf keep[T_COUNT];
            for (int t = lo; t < hi; t++) {
                int64_t sh[4];
                int perm[4], permuted;
                const int nd = sst_dims(&g.c, t, sh, perm, &permuted);
                keep[t] = cg_tbuf_new(CG_F32, nd, sh);
                cg_tbuf_copy(&keep[t], &g.f.t[t]);
            }
            CG_CHECK_OK(ctx, bwd ? sg_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL)
                                 : sg_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL));
            for (int t = lo; t < hi; t++) {
                if (g.f.on[t])
                    CG_CHECK(cg_rel_err(&g.f.t[t], &keep[t]) == 0, "case %d: %s differs on a second run", i,
                             sst_names[t]);
                cg_tbuf_free(&keep[t]);
            }
        }
        prob_free(&g);
    }
    cg_context_free(ctx);
}

/* 16-bit storage, the default configs of every case in bf16 and in f16, forward and
 * backward, against the reference on the same rounded inputs; the kernel is the one
 * generated for the dtype (named so); a second call gives the same bits. */
CG_TEST(sscan_gen_emu_default16) {
    CG_TEST_CONTEXT(ctx);
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < NCASES; i++) {
            sg_prob g;
            prob_new_dt(ctx, &g, &k_cases[i], 400 + (uint64_t)i, h ? CG_F16 : CG_BF16);
            for (int bwd = 0; bwd < 2; bwd++) {
                if (!check_op(ctx, &g, bwd, CG_BACKEND_EMULATE, NULL)) continue;
                const char *d = cg_last_dispatch(ctx);
                CG_CHECK(strstr(d, bwd ? "kernel=sscan_bwd_n" : "kernel=sscan_fwd_n") &&
                             strstr(d, !g.c.z ? "_dt" : h ? "_f16" : "_bf16"),
                         "dispatch line without the 16-bit kernel: %s", d);
                const int lo = bwd ? T_DX : T_Y, hi = bwd ? T_COUNT : T_DX;
                const char *first = NULL;
                cg_tbuf keep[T_COUNT];
                for (int t = lo; t < hi; t++) {
                    int64_t sh[4];
                    int perm[4], permuted;
                    keep[t] = cg_tbuf_new(CG_F64, sst_dims(&g.c, t, sh, perm, &permuted), sh);
                    cg_tbuf_copy(&keep[t], &g.f.t[t]);
                }
                CG_CHECK_OK(ctx, bwd ? sg_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL)
                                     : sg_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL));
                for (int t = lo; t < hi; t++) {
                    if (g.f.on[t] && !first && cg_rel_err(&g.f.t[t], &keep[t]) != 0) first = sst_names[t];
                    cg_tbuf_free(&keep[t]);
                }
                CG_CHECK(!first, "case %d %s: %s differs on a second run", i, h ? "f16" : "bf16", first);
            }
            prob_free(&g);
        }
    cg_context_free(ctx);
}

/* Pins outside the space, or rejected by the constraints, fail with a reason. */
CG_TEST(sscan_gen_emu_bad_config) {
    CG_TEST_CONTEXT(ctx);
    sg_prob g;
    prob_new(ctx, &g, &k_cases[4], 300); /* N = 256 */
    CG_CHECK_REFUSED(ctx, sg_fwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=5"), CG_EINVAL, "chunk", "chunk=5 (outside the space)");
    CG_CHECK_REFUSED(ctx, sg_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=4,dim_block=32,warps=1,segment=32"),
                     CG_EUNSUPPORTED, "states per lane", "N=256 on one lane per channel");
    CG_CHECK_REFUSED(ctx, sg_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=2"),
                     CG_EINVAL, NULL, "chunk=2 is outside the backward's space");
    CG_CHECK_REFUSED(ctx, sg_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=4,dim_block=8,warps=4,segment=32,strategy=par"),
                     CG_EUNSUPPORTED, "single segment", "par on one segment (L = 9)");
    prob_free(&g);
    cg_context_free(ctx);
}

/* ------------------------------------------------------- backward workspace */

/* The bytes the backward may take for ks under config cf with a grads grid of ctas CTAs:
 * per (b, d, segment) the checkpointed state, the state gradient and the dA partial
 * (N floats each, N padded to the lanes of a channel) plus 3 floats (dD and
 * ddelta_bias partials, sum of dt); per (b, l, g) the split dB/dC partials (at most
 * CG_SSCAN_SPLIT_MAX splits of N floats each); per grads CTA one segment of states; 16
 * bytes of rounding per region. Nothing may grow with L * D * N. */
typedef struct bdims {
    int64_t B, L, D, N, G;
} bdims;
static int64_t bwd_ws_bound(const bdims *ks, const cg_cfg *cf, int64_t ctas) {
    const int64_t bd = cg__cfg_int(cf, "dim_block", 0), nt = 32 * cg__cfg_int(cf, "warps", 0);
    const int64_t seg = cg__cfg_int(cf, "segment", 0), tpc = nt / bd;
    const int64_t npad = (ks->N + tpc - 1) / tpc * tpc, nblk = (ks->D + bd - 1) / bd;
    const int64_t nseg = (ks->L + seg - 1) / seg;
    return 4 * ((3 * npad + 3) * ks->B * nblk * bd * nseg + 2 * CG_SSCAN_SPLIT_MAX * ks->B * ks->L * ks->G * ks->N +
                ctas * (seg + 1) * npad * bd) +
           16 * 9;
}

/* The shape of sscan_bwd with extents ks, z, D and delta_bias given, softplus. */
static void bwd_shape(const bdims *ks, cg_shape *s) {
    memset(s, 0, sizeof *s);
    s->size = sizeof *s, s->op = CG_OP_SSCAN_BWD;
    s->dim[CG_SYM_B] = ks->B, s->dim[CG_SYM_L] = ks->L, s->dim[CG_SYM_D] = ks->D, s->dim[CG_SYM_N] = ks->N;
    s->dim[CG_SYM_G] = ks->G;
}
#define BWD_FLAGS (CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS)

/* The plan of sscan_bwd for ks pinned to cfg (text) on dev: workspace bytes and grads grid. */
static int bwd_plan_ws(cg_context *ctx, const bdims *ks, const cg_devinfo *dev, const cg_cfg *pin,
                       int64_t *ws, int64_t *ctas) {
    cg_plan p;
    cg_shape sh;
    bwd_shape(ks, &sh);
    cg_status s = cg__gen_plan(ctx, "sscan_bwd", &sh, BWD_FLAGS, dev, pin, &p);
    CG_CHECK(s == CG_OK, "sscan_bwd plan: %s", cg_errmsg(ctx));
    if (s != CG_OK) return 0;
    *ws = p.workspace_bytes;
    *ctas = 0;
    for (int l = 0; l < p.nlaunch; l++)
        if (!strcmp(p.launch[l].entry, "cg_sscan_bwd_grads")) *ctas = p.launch[l].grid[0];
    CG_CHECK(*ctas > 0, "%s: no grads launch", p.name);
    cg__plan_free(&p);
    return 1;
}

/* issue 6: "Memory grows as B*D*N*L/segment, not with L*D*N". For mamba-like ungrouped
 * shapes on an sm_90 device (plans only, no GPU): every config of the space stays under
 * bwd_ws_bound() with a grads grid of at most 8 warps per SM; from D = 64 to D = 1024 the
 * workspace grows by at most the per-(b, d, segment) terms (not by L / dim_block per
 * channel, which the per-block dB/dC partials did), and from L = 4096 to 8192 by at
 * most the per-segment and per-token terms. */
CG_TEST(sscan_gen_bwd_workspace_bound) {
    CG_TEST_CONTEXT(ctx);
    cg_devinfo dev;
    CG_CHECK(cg__devinfo_arch(90, &dev), "sm_90 is known");
    const bdims base = {.B = 2, .L = 4096, .D = 1024, .N = 16, .G = 1};
    cg_shape bs;
    bwd_shape(&base, &bs);
    cg_cfg *space = NULL;
    int nspace = 0;
    CG_CHECK_OK(ctx, cg__gen_space(ctx, "sscan_bwd", &bs, BWD_FLAGS, &dev, &space, &nspace));
    CG_CHECK(nspace > 20, "%d configs", nspace);
    int checked = 0;
    for (int i = 0; i < nspace; i++) {
        const cg_cfg *cf = &space[i];
        char text[256];
        cg__cfg_text(cf, text, sizeof text);
        int64_t ws[2], ctas[2];
        bdims ks = base;
        if (!bwd_plan_ws(ctx, &ks, &dev, cf, &ws[1], &ctas[1])) continue;
        const int64_t warps = cg__cfg_int(cf, "warps", 0), seg = cg__cfg_int(cf, "segment", 0);
        CG_CHECK(ctas[1] * warps <= 8 * dev.sm_count, "%s: grads grid %lld x %lld warps on %d SMs", text,
                 (long long)ctas[1], (long long)warps, dev.sm_count);
        CG_CHECK(ws[1] <= bwd_ws_bound(&ks, cf, ctas[1]), "%s: D = %lld: workspace %lld > bound %lld", text,
                 (long long)ks.D, (long long)ws[1], (long long)bwd_ws_bound(&ks, cf, ctas[1]));
        /* D 1024 -> 64 */
        ks.D = 64;
        if (!bwd_plan_ws(ctx, &ks, &dev, cf, &ws[0], &ctas[0])) continue;
        const int64_t bd = cg__cfg_int(cf, "dim_block", 0), tpc = 32 * warps / bd;
        const int64_t npad = (ks.N + tpc - 1) / tpc * tpc, nseg = (ks.L + seg - 1) / seg;
        /* more channels may bring more splits (up to CG_SSCAN_SPLIT_MAX) and a larger grads
         * grid (up to its cap): both bounded independently of D */
        const int64_t grow_d = 4 * ((3 * npad + 3) * ks.B * nseg * (1024 - 64) +
                                    2 * CG_SSCAN_SPLIT_MAX * ks.B * ks.L * ks.G * ks.N +
                                    (ctas[1] > ctas[0] ? ctas[1] - ctas[0] : 0) * (seg + 1) * npad * bd);
        CG_CHECK(ws[1] - ws[0] <= grow_d + 16 * 9, "%s: D 64 -> 1024 grows the workspace by %lld bytes > %lld", text,
                 (long long)(ws[1] - ws[0]), (long long)grow_d);
        /* L 4096 -> 8192 at D = 1024 */
        ks.D = 1024, ks.L = 8192;
        if (!bwd_plan_ws(ctx, &ks, &dev, cf, &ws[0], &ctas[0])) continue;
        const int64_t grow_l = 4 * ((3 * npad + 3) * ks.B * 1024 * (8192 - 4096) / seg +
                                    2 * CG_SSCAN_SPLIT_MAX * ks.B * (8192 - 4096) * ks.G * ks.N) +
                               4 * (ctas[0] > ctas[1] ? ctas[0] - ctas[1] : 0) * (seg + 1) * npad * bd;
        CG_CHECK(ws[0] <= bwd_ws_bound(&ks, cf, ctas[0]), "%s: L = 8192: workspace %lld > bound %lld", text,
                 (long long)ws[0], (long long)bwd_ws_bound(&ks, cf, ctas[0]));
        CG_CHECK(ws[0] - ws[1] <= grow_l + 16 * 9, "%s: L 4096 -> 8192 grows the workspace by %lld bytes > %lld",
                 text, (long long)(ws[0] - ws[1]), (long long)grow_l);
        checked++;
    }
    CG_CHECK(checked == nspace, "%d of %d configs checked", checked, nspace);
    free(space);
    cg_context_free(ctx);
}

/* ------------------------------------------------------------ 16-bit tensors */

/* Case c's shape (shape_of) with its 16-bit-capable tensors (those the case gives) in dt:
 * x, delta, B, C, z, then y or dy, dx, ddelta, dB, dC, dz. */
static void half_dtypes(const sst_case *c, int bwd, cg_dtype dt, cg_shape *ks) {
    cg_test_shape_half(ks, dt, bwd ? (c->z ? "x delta B C z dy dx ddelta dB dC dz" : "x delta B C dy dx ddelta dB dC")
                                   : (c->z ? "x delta B C z y" : "x delta B C y"));
}

/* The union of kernel's spaces over the cases for dt (configs in order of first
 * appearance, each with the case that first accepts it). */
static int half_union(cg_context *ctx, const char *kernel, int bwd, cg_dtype dt, const cg_devinfo *dev,
                      cg_cfg **out, int **case_of) {
    int cap = 0, n = 0;
    cg_cfg *space[NCASES];
    int nspace[NCASES];
    for (int i = 0; i < NCASES; i++) {
        cg_shape ks;
        const int ksf = shape_of(&k_cases[i], bwd, &ks);
        half_dtypes(&k_cases[i], bwd, dt, &ks);
        space[i] = NULL, nspace[i] = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, kernel, &ks, ksf, dev, &space[i], &nspace[i]));
        cap += nspace[i];
    }
    *out = calloc((size_t)cap + 1, sizeof **out);
    *case_of = calloc((size_t)cap + 1, sizeof **case_of);
    for (int i = 0; i < NCASES; i++)
        for (int j = 0; j < nspace[i]; j++)
            if (!cg_sweep_cfg_in(*out, n, &space[i][j])) {
                (*case_of)[n] = i;
                (*out)[n++] = space[i][j];
            }
    for (int i = 0; i < NCASES; i++) free(space[i]);
    return n;
}

/* The selected configs of both spaces (as the f32 sweeps: accepted for some case; the
 * covering sample of sweep_sample.h, every one under CHUNKGEN_TEST_SWEEP=full) rendered
 * with 16-bit tensors and compiled by NVRTC for arch: ptxas reports no spills. bf16 and
 * f16 take turns over the configs (their kernels differ in one conversion instruction per
 * loaded element: cvt.f32.f16 against a shift, and cvt.rn.{bf16,f16}), and the defaults
 * of every case compile in both. */
static void half_nvrtc(int arch) {
    /* the configs cg_sweep_select keeps (sweep_sample.h): the covering sample, the same in
     * the release and sanitizer runs (the second hits the kernel cache of
     * CHUNKGEN_TEST_KCACHE, which scripts/test.sh shares between them) */
    cg_test_nvrtc nv;
    if (!cg_test_nvrtc_begin(&nv, arch)) return;
    for (int bwd = 0; bwd < 2; bwd++) {
        const char *kernel = bwd ? "sscan_bwd" : "sscan_fwd";
        cg_cfg *cfgs[2];
        int *case_of[2], n[2];
        for (int h = 0; h < 2; h++)
            n[h] = half_union(nv.ctx, kernel, bwd, h ? CG_F16 : CG_BF16, &nv.dev, &cfgs[h], &case_of[h]);
        CG_CHECK(n[0] == n[1] && n[0] > 0, "%s: %d bf16 and %d f16 configs", kernel, n[0], n[1]);
        cg_sweep_sel sel;
        cg_sweep_select_array(cfgs[0], n[0], CG_SWEEP_VALUES, &sel); /* a variant: sweep_sample.h */
        for (int q = 0, k = 0; q < n[0] + 2 * NCASES; q++) {
            const int dflt = q >= n[0];
            if (!dflt && !cg_sweep_keeps(&sel, q)) continue;
            const int h = dflt ? (q - n[0]) % 2 : k++ % 2;
            const int ci = dflt ? (q - n[0]) / 2 : case_of[h][q];
            cg_shape ks;
            const int ksf = shape_of(&k_cases[ci], bwd, &ks);
            half_dtypes(&k_cases[ci], bwd, h ? CG_F16 : CG_BF16, &ks);
            cg_plan p;
            if (!cg_test_nvrtc_plan(&nv, kernel, &ks, ksf, dflt ? NULL : &cfgs[h][q], &p)) continue;
            CG_CHECK(strstr(p.source, h ? "#define CG_T_X cg_f16\n" : "#define CG_T_X cg_bf16\n") &&
                         (strstr(p.name, h ? "_f16" : "_bf16") || strstr(p.name, h ? "_dthh" : "_dtbb")),
                     "%s: 16-bit defines and name", p.name);
            cg_test_nvrtc_nospill(&nv, &p);
        }
        cg_sweep_sel_free(&sel);
        for (int h = 0; h < 2; h++) {
            free(cfgs[h]);
            free(case_of[h]);
        }
    }
    cg_test_nvrtc_end(&nv, "16-bit sscan", "");
}

/* The 16-bit signature is the kernel's: a tensor outside a kernel's `half` list and SSD's
 * float32-only log_alpha as 16-bit are refused by name; f32 and bf16 plans of one config
 * differ in name and source. (An unknown dtype word cannot reach Lua: shape.dtypes is made
 * from a cg_shape's dtype, cg__shape_dtypes.) */
CG_TEST(sscan_gen_half_refusals) {
    CG_TEST_CONTEXT(ctx);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_shape ks, f32;
    const int ksf = shape_of(&k_cases[1], 0, &ks);
    f32 = ks;
    cg_plan a, b;
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "sscan_fwd", &ks, ksf, &dev, NULL, &a));
    half_dtypes(&k_cases[1], 0, CG_BF16, &ks);
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "sscan_fwd", &ks, ksf, &dev, NULL, &b));
    CG_CHECK(strcmp(a.name, b.name) && strstr(b.name, "_bf16") && !strstr(a.source, "CG_T_X cg_") &&
                 strstr(b.source, "#define CG_T_Y cg_bf16\n"), "f32 %s vs bf16 %s", a.name, b.name);
    cg__plan_free(&a);
    cg__plan_free(&b);
    ks = f32;
    cg_test_shape_half(&ks, CG_BF16, "x A");
    CG_CHECK_REFUSED(ctx, cg__gen_plan(ctx, "sscan_fwd", &ks, ksf, &dev, NULL, &a), CG_EUNSUPPORTED, "A as float32 only",
                     "A is float32 in every kernel");
    /* SSD's 16-bit kernels (tests/test_ssd16_gen.c) take q, k, v, o, not log_alpha */
    cg_shape ss = {.size = sizeof ss};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "ssd_fwd:B=1,T=9,G=1,H=1,dk=16,dv=16", &ss));
    cg_test_shape_half(&ss, CG_BF16, "q log_alpha");
    CG_CHECK_REFUSED(ctx, cg__gen_plan(ctx, "ssd_fwd", &ss, 0, &dev, NULL, &a), CG_EUNSUPPORTED,
                     "log_alpha as float32 only", "log_alpha is float32 in every SSD kernel");
    cg_context_free(ctx);
}

CG_TEST(sscan_gen_nvrtc_half_sm80) { half_nvrtc(80); }
CG_TEST(sscan_gen_nvrtc_half_sm90) { half_nvrtc(90); }

/* Natively on a GPU (skipped without one): the same configs as under the emulator. */
CG_TEST(sscan_gen_cuda_fwd_space) { run_space(0, CG_BACKEND_CUDA); }
CG_TEST(sscan_gen_cuda_bwd_space) { run_space(1, CG_BACKEND_CUDA); }
