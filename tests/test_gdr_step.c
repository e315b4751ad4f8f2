/* test_gdr_step.c -- the gated delta rule's decode step (issue #36): cg_gdr_step over a
 * state cache, on the ref, cpu and emulate backends (emulate: the generated kernel,
 * generator/kernels/gdr_step.lua, templates/gdr_step.cu, under the SIMT emulator).
 *   - consistency: T calls of one token each from the cache equal the chunked forward
 *     (cg_gdr_fwd on the cpu, h0 = the slots' states, hT) over the same T tokens to 1e-5,
 *     with a padding entry (its outputs zero, no slot touched), on odd shapes (dk 48, dv 40,
 *     G 2, H 6), with and without the L2 norm, the default and a given scale; one call of T
 *     tokens equals the T calls; with dst_indices each token's state lands in its own slot;
 *   - a bfloat16 cache against the float64 reference;
 *   - bad input: a status, a message naming the argument, the cache bit-identical;
 *   - the generated kernel's space: each config (a sample; every one under label sweep
 *     with CHUNKGEN_TEST_SWEEP=full) on odd shapes, float32 / bf16 / f16 inputs and caches,
 *     padding entries and dst_indices, against the float64 reference. */
#include "cuda_testlib.h"
#include "gen.h"
#include "nvrtc_testlib.h"
#include "ops.h"
#include "step_testlib.h"
#include "sweep_sample.h"

enum { GB = CG_STEP_BAD_B, GT = 5, GG = 2, GH = 6, GDK = 48, GDV = 40, GS = CG_STEP_BAD_S };
static const int64_t k_gslots[GB] = {3, -1, 0, 7}; /* entry 1 is padding */
#define GSTATE ((size_t)GH * GDK * GDV)

typedef struct gdr_data {
    cg_tbuf q, k, v, g, beta, cache0;
    double scale;
    int l2;
} gdr_data;

/* k within [-0.15, 0.15] without the norm keeps the recurrence contractive (ops.c). */
static gdr_data gdr_data_new(cg_rng *r, cg_dtype cache_dt, int l2, double scale) {
    gdr_data d;
    const double kr = l2 ? 1 : 0.15;
    d.q = cg_step_rand(r, CG_F32, 4, (int64_t[]){GB, GT, GG, GDK}, -1, 1);
    d.k = cg_step_rand(r, CG_F32, 4, (int64_t[]){GB, GT, GG, GDK}, -kr, kr);
    d.v = cg_step_rand(r, CG_F32, 4, (int64_t[]){GB, GT, GH, GDV}, -1, 1);
    d.g = cg_step_rand(r, CG_F32, 3, (int64_t[]){GB, GT, GH}, -0.3, 0);
    d.beta = cg_step_rand(r, CG_F32, 3, (int64_t[]){GB, GT, GH}, 0, 1);
    d.cache0 = cg_step_rand(r, cache_dt, 4, (int64_t[]){GS, GH, GDK, GDV}, -1, 1);
    d.scale = scale, d.l2 = l2;
    return d;
}
static void gdr_data_free(gdr_data *d) {
    cg_tbuf *all[] = {&d->q, &d->k, &d->v, &d->g, &d->beta, &d->cache0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

/* Tokens t0 .. t0+n-1 of d into one step call. */
static cg_gdr_step_args gdr_args(const gdr_data *d, int64_t t0, int64_t n, cg_tbuf *cache, cg_tbuf *idx,
                                 cg_tbuf *dst, cg_tensor o) {
    cg_gdr_step_args a = CG_GDR_STEP_ARGS_INIT;
    a.q = cg_step_token(&d->q, t0), a.k = cg_step_token(&d->k, t0), a.v = cg_step_token(&d->v, t0);
    a.g = cg_step_token(&d->g, t0), a.beta = cg_step_token(&d->beta, t0);
    a.q.shape[1] = a.k.shape[1] = a.v.shape[1] = a.g.shape[1] = a.beta.shape[1] = n;
    a.scale = d->scale, a.use_qk_l2norm = d->l2;
    a.cache = cache->t;
    a.state_indices = idx->t;
    if (dst) a.dst_indices = dst->t;
    a.o = o;
    return a;
}

static cg_tbuf copy_of(const cg_tbuf *x) {
    cg_tbuf c = cg_tbuf_new(x->t.dtype, x->t.ndim, x->t.shape);
    memcpy(c.mem, x->mem, cg_step_bytes(x));
    return c;
}

static void gdr_consistency(cg_backend be, int l2, double scale) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {3600 + l2};
    gdr_data d = gdr_data_new(&r, CG_F32, l2, scale);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    const char *bn = cg_backend_name(be);
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){GB}, k_gslots);
    cg_tbuf cache = copy_of(&d.cache0), o = cg_tbuf_new(CG_F32, 4, (int64_t[]){GB, GT, GH, GDV});
    cg_tbuf_fill(&o, &r, NAN, NAN); /* an element not written fails */
    cg_tbuf prefix[GT];             /* the cache after each token */
    for (int64_t t = 0; t < GT; t++) {
        cg_gdr_step_args a = gdr_args(&d, t, 1, &cache, &idx, NULL, cg_step_token(&o, t));
        CG_CHECK_OK(ctx, cg_gdr_step(ctx, &a, &ex));
        prefix[t] = copy_of(&cache);
    }
    /* the chunked forward from h0 = the slots' states (zero for the padding entry) */
    cg_tbuf h0 = cg_step_gather(&d.cache0, GB, k_gslots), hT = cg_tbuf_new(CG_F32, 4, h0.t.shape);
    cg_tbuf of = cg_tbuf_new(CG_F32, 4, o.t.shape);
    cg_gdr_fwd_args f = CG_GDR_FWD_ARGS_INIT;
    f.q = d.q.t, f.k = d.k.t, f.v = d.v.t, f.g = d.g.t, f.beta = d.beta.t, f.h0 = h0.t, f.o = of.t, f.hT = hT.t;
    f.scale = scale, f.use_qk_l2norm = l2;
    cg_exec fx = CG_EXEC_INIT;
    fx.backend = CG_BACKEND_CPU;
    CG_CHECK_OK(ctx, cg_gdr_fwd(ctx, &f, &fx));
    char what[64];
    snprintf(what, sizeof what, "%s l2=%d", bn, l2);
    cg_step_check_slots(what, GB, k_gslots, &o, &of, &cache, &hT, &d.cache0, 1e-5);
    /* one call of T tokens: the same outputs and final states */
    cg_tbuf cache2 = copy_of(&d.cache0), o2 = cg_tbuf_new(CG_F32, 4, o.t.shape);
    cg_gdr_step_args a2 = gdr_args(&d, 0, GT, &cache2, &idx, NULL, o2.t);
    CG_CHECK_OK(ctx, cg_gdr_step(ctx, &a2, &ex));
    CG_CHECK(cg_rel_err(&o2, &o) <= 1e-6 && cg_rel_err(&cache2, &cache) <= 1e-6, "%s: T tokens in one call: o %.3g, cache %.3g",
             bn, cg_rel_err(&o2, &o), cg_rel_err(&cache2, &cache));
    /* dst_indices [B, T]: entry b's state after token t in its own slot; the slots read
     * (0, 3, 7) hold the states the entries start from above (3, 0, 7) */
    const int64_t dv[GB * GT] = {1, 2, 4, 5, 6, 0, 0, 0, 0, 0, -1, 8, -1, 3, -1, 7, -1, -1, -1, -1};
    const int64_t src[GB] = {0, -1, 3, 7}, from[GB] = {3, -1, 0, 7};
    cg_tbuf dst = cg_step_idx_buf(2, (int64_t[]){GB, GT}, dv), isrc = cg_step_idx_buf(1, (int64_t[]){GB}, src);
    cg_tbuf cache3 = copy_of(&d.cache0), o3 = cg_tbuf_new(CG_F32, 4, o.t.shape);
    for (int b = 0; b < GB; b++)
        if (src[b] >= 0)
            memcpy((float *)cache3.mem + src[b] * GSTATE, (float *)d.cache0.mem + from[b] * GSTATE, GSTATE * sizeof(float));
    cg_gdr_step_args a3 = gdr_args(&d, 0, GT, &cache3, &isrc, &dst, o3.t);
    CG_CHECK_OK(ctx, cg_gdr_step(ctx, &a3, &ex));
    CG_CHECK(cg_rel_err(&o3, &o) <= 1e-6, "%s: dst_indices: o %.3g", bn, cg_rel_err(&o3, &o));
    for (int b = 0; b < GB; b++)
        for (int t = 0; t < GT; t++) {
            const int64_t y = dv[b * GT + t];
            if (src[b] < 0 || y < 0) continue;
            double e = cg_step_rows_err(&cache3, y, &prefix[t], from[b]);
            CG_CHECK(e <= 1e-6, "%s: dst_indices[%d, %d] = %lld: state err %.3g", bn, b, t, (long long)y, e);
        }
    for (int t = 0; t < GT; t++) cg_tbuf_free(&prefix[t]);
    cg_tbuf *all[] = {&idx, &cache, &o, &h0, &hT, &of, &cache2, &o2, &dst, &isrc, &cache3, &o3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
    gdr_data_free(&d);
    cg_context_free(ctx);
}

CG_TEST(step_gdr_consistency_cpu) { gdr_consistency(CG_BACKEND_CPU, 0, 0); }
CG_TEST(step_gdr_consistency_cpu_l2norm) { gdr_consistency(CG_BACKEND_CPU, 1, 0.3); }
CG_TEST(step_gdr_consistency_ref) { gdr_consistency(CG_BACKEND_REF, 0, 0.3); }
CG_TEST(step_gdr_consistency_ref_l2norm) { gdr_consistency(CG_BACKEND_REF, 1, 0); }
/* the generated kernel (templates/gdr_step.cu) under the SIMT emulator */
CG_TEST(step_gdr_consistency_emulate) { gdr_consistency(CG_BACKEND_EMULATE, 0, 0.3); }
CG_TEST(step_gdr_consistency_emulate_l2norm) { gdr_consistency(CG_BACKEND_EMULATE, 1, 0); }

/* The first n tokens of d (cg_step_check_bf16, cg_step_check_bad_indices). */
CG_STEP_CALL(gdr_call, cg_gdr_step_args, gdr_args, cg_gdr_step, o->t)

/* A bfloat16 cache (and bf16 q, k, v, beta, o) on the cpu and emulate against the float64
 * reference. */
CG_TEST(step_gdr_bf16_cache) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {9};
    gdr_data d = gdr_data_new(&r, CG_BF16, 1, 0);
    cg_step_check_bf16(ctx, gdr_call, &d, GT, &d.cache0, GB, k_gslots, (cg_tbuf *const[]){&d.q, &d.k, &d.v, &d.beta},
                       4, 4, (int64_t[]){GB, GT, GH, GDV}, "gdr bf16");
    gdr_data_free(&d);
    cg_context_free(ctx);
}

/* Bad input: refused before anything is written. */
CG_TEST(step_gdr_bad_input) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {6};
    gdr_data d = gdr_data_new(&r, CG_F32, 0, 0);
    cg_tbuf cache = copy_of(&d.cache0), o = cg_tbuf_new(CG_F32, 4, (int64_t[]){GB, 1, GH, GDV});
    cg_step_check_bad_indices(ctx, gdr_call, &d, &cache, &d.cache0, &o);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = CG_BACKEND_EMULATE; /* refused before the kernel runs, as on the other backends */
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){GB}, k_gslots);
    cg_gdr_step_args a = gdr_args(&d, 0, 1, &cache, &idx, NULL, o.t), bad = a;
    bad.cache.shape[3] = GDV + 1;
    CG_CHECK_REFUSED(ctx, cg_gdr_step(ctx, &bad, &ex), CG_EINVAL, "cache: shape", "cache of the wrong shape");
    bad = a;
    bad.cache.dtype = CG_F64;
    CG_CHECK_REFUSED(ctx, cg_gdr_step(ctx, &bad, &ex), CG_EINVAL, "cache: dtype", "a float64 cache in a float32 call");
    bad = a;
    bad.scale = -1;
    CG_CHECK_REFUSED(ctx, cg_gdr_step(ctx, &bad, &ex), CG_EINVAL, "scale", "a negative scale");
    bad = a;
    bad.g.shape[2] = GH - 1;
    CG_CHECK_REFUSED(ctx, cg_gdr_step(ctx, &bad, &ex), CG_EINVAL, "g: shape", "g of the wrong shape");
    CG_CHECK(!memcmp(cache.mem, d.cache0.mem, cg_step_bytes(&cache)), "the cache changed");
    cg_tbuf_free(&idx), cg_tbuf_free(&cache), cg_tbuf_free(&o);
    gdr_data_free(&d);
    cg_context_free(ctx);
}

/* ----------------------------------------------- the generated kernel's space */

/* Odd shapes that together accept every config of gdr_step.lua's space: the first every
 * one (dv 300 > block_dv 256 x 2 / 2, dk 20: dk x cols <= 64), the second cols 2 at the
 * register limit (dk x cols = 128) with dst_indices [B, T], the third one column at the
 * limit (dk 136). */
typedef struct gcase {
    int64_t B, T, G, H, dk, dv, S;
    int l2;
    double scale;
    int64_t src[4], dst[8]; /* dst [B, T] when dst[0] != -2 */
} gcase;
static const gcase k_gcases[] = {
    {3, 3, 1, 2, 20, 300, 5, 1, 0, {4, -1, 0}, {-2}},
    {4, 2, 2, 4, 64, 40, 9, 0, 0.2, {2, 5, -1, 0}, {3, -1, 6, 5, -1, -1, 7, 8}},
    {2, 2, 1, 1, 136, 24, 3, 1, 0, {-1, 1}, {-2}},
};
#define NGCASES (int)(sizeof k_gcases / sizeof k_gcases[0])

/* The generator's shape of case c (float32); returns its shape flags. */
static int gcase_shape(const gcase *c, cg_shape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->size = sizeof *ks, ks->op = CG_OP_GDR_STEP;
    ks->dim[CG_SYM_B] = c->B, ks->dim[CG_SYM_T] = c->T, ks->dim[CG_SYM_G] = c->G, ks->dim[CG_SYM_H] = c->H;
    ks->dim[CG_SYM_DK] = c->dk, ks->dim[CG_SYM_DV] = c->dv, ks->dim[CG_SYM_S] = c->S;
    return c->l2 ? CG_KS_L2NORM : 0;
}

/* Case c in dtype variant v (0: float32; 1: bf16 inputs, output and cache; 2: f16 inputs
 * and output, a float32 cache) through config cfg on be against the float64 reference:
 * o and the cache within 1e-5 (16-bit: 1e-2), a padding entry's o zero. 1 when it ran
 * with cfg. */
static int gcase_check(cg_context *ctx, const gcase *c, int v, cg_backend be, const char *cfg) {
    static const cg_dtype in_dt[3] = {CG_F32, CG_BF16, CG_F16}, cache_dt[3] = {CG_F32, CG_BF16, CG_F32};
    cg_rng r = {4100 + (uint64_t)c->dk + (uint64_t)v};
    const int64_t qs[4] = {c->B, c->T, c->G, c->dk}, vs[4] = {c->B, c->T, c->H, c->dv}, gs[3] = {c->B, c->T, c->H};
    const double kr = c->l2 ? 1 : 0.15;
    cg_tbuf q = cg_step_rand(&r, in_dt[v], 4, qs, -1, 1), k = cg_step_rand(&r, in_dt[v], 4, qs, -kr, kr);
    cg_tbuf vv = cg_step_rand(&r, in_dt[v], 4, vs, -1, 1), g = cg_step_rand(&r, CG_F32, 3, gs, -0.3, 0);
    cg_tbuf beta = cg_step_rand(&r, in_dt[v], 3, gs, 0, 1);
    cg_tbuf cache0 = cg_step_rand(&r, cache_dt[v], 4, (int64_t[]){c->S, c->H, c->dk, c->dv}, -1, 1);
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){c->B}, c->src), dst = cg_step_idx_buf(2, (int64_t[]){c->B, c->T}, c->dst);
    cg_tbuf cache[2], o[2];
    int ran = 0;
    for (int i = 0; i < 2; i++) { /* 0: the reference, 1: be with cfg */
        cache[i] = copy_of(&cache0);
        o[i] = cg_tbuf_new(in_dt[v], 4, vs);
        cg_tbuf_fill(&o[i], &r, NAN, NAN);
        cg_gdr_step_args a = CG_GDR_STEP_ARGS_INIT;
        a.q = q.t, a.k = k.t, a.v = vv.t, a.g = g.t, a.beta = beta.t, a.cache = cache[i].t, a.o = o[i].t;
        a.state_indices = idx.t;
        if (c->dst[0] != -2) a.dst_indices = dst.t;
        a.scale = c->scale, a.use_qk_l2norm = c->l2;
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = i ? be : CG_BACKEND_REF;
        ex.config = i ? cfg : NULL;
        CG_CHECK_OK(ctx, cg_gdr_step(ctx, &a, &ex));
        char want[300];
        snprintf(want, sizeof want, "config=%s ", cfg);
        if (i) {
            ran = strstr(cg_last_dispatch(ctx), want) != NULL;
            CG_CHECK(ran, "dk %lld: config %s did not run: %s", (long long)c->dk, cfg, cg_last_dispatch(ctx));
        }
    }
    const double tol = v ? 1e-2 : 1e-5, eo = cg_rel_err(&o[1], &o[0]), ec = cg_rel_err(&cache[1], &cache[0]);
    CG_CHECK(eo <= tol && ec <= tol, "%s dk %lld dv %lld l2 %d %s: o err %.3g, cache err %.3g (want <= %.0e)",
             cg_backend_name(be), (long long)c->dk, (long long)c->dv, c->l2, cfg, eo, ec, tol);
    for (int b = 0; b < c->B; b++)
        if (c->src[b] < 0) CG_CHECK(cg_step_rows_zero(&o[1], b), "%s: padding entry %d: outputs not zero", cfg, b);
    cg_tbuf *all[] = {&q, &k, &vv, &g, &beta, &cache0, &idx, &dst, &cache[0], &cache[1], &o[0], &o[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
    return ran;
}

/* Per case, the configs of gdr_step it accepts that the selection keeps (sweep_sample.h:
 * st; every one under CHUNKGEN_TEST_SWEEP=full), float32, bf16 and f16 in turn. */
static void gdr_space(cg_backend be, cg_sweep_strength st) {
    cg_devinfo dev;
    cg_context *ctx = cg_test_device_context(be, &dev);
    if (!ctx) return;
    int ran = 0, want = 0;
    for (int i = 0; i < NGCASES; i++) {
        cg_shape ks;
        const int ksf = gcase_shape(&k_gcases[i], &ks);
        cg_cfg *space = NULL;
        int n = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "gdr_step", &ks, ksf, &dev, &space, &n));
        CG_CHECK(n > 0 && (i || n == 8), "gdr_step: case %d accepts %d configs (the first: all 8)", i, n);
        cg_sweep_sel sel;
        cg_sweep_select_array(space, n, st, &sel);
        for (int q = 0; q < n; q++)
            if (cg_sweep_keeps(&sel, q)) {
                char text[256];
                cg__cfg_text(&space[q], text, sizeof text);
                ran += gcase_check(ctx, &k_gcases[i], want++ % 3, be, text);
            }
        char what[96];
        fprintf(stderr, "gdr_step dk %lld dv %lld: configs checked on %s: %s\n", (long long)k_gcases[i].dk,
                (long long)k_gcases[i].dv, cg_backend_name(be), cg_sweep_describe(&sel, what, sizeof what));
        cg_sweep_sel_free(&sel);
        free(space);
    }
    CG_CHECK(ran == want && want > 0, "gdr_step: %d of %d configs ran", ran, want);
    cg_context_free(ctx);
}

/* Every value of every key (the default run); every pair under label sweep. */
CG_TEST(step_gdr_emu_sample) { gdr_space(CG_BACKEND_EMULATE, CG_SWEEP_VALUES); }
CG_TEST(step_gdr_emu_space) { gdr_space(CG_BACKEND_EMULATE, CG_SWEEP_PAIRS); }
CG_TEST(step_gdr_cuda_space) { gdr_space(CG_BACKEND_CUDA, CG_SWEEP_PAIRS); }

/* Every config of each case's space through NVRTC and ptxas for sm_arch, float32 and bf16
 * (q, k, v, beta, o and the cache), use_qk_l2norm as each case has it: no spills at the
 * limits (dk x cols = 128 with two columns, dk 136 with one); each kernel's registers on
 * stderr. Named *_space: label sweep. */
static void gdr_nvrtc(int arch) {
    cg_test_nvrtc nv;
    if (!cg_test_nvrtc_begin(&nv, arch)) return;
    for (int i = 0; i < NGCASES; i++)
        for (int h = 0; h < 2; h++) {
            cg_shape ks;
            const int ksf = gcase_shape(&k_gcases[i], &ks);
            if (h) cg_test_shape_half(&ks, CG_BF16, "q k v beta cache o");
            cg_cfg *space = NULL;
            int n = 0;
            CG_CHECK_OK(nv.ctx, cg__gen_space(nv.ctx, "gdr_step", &ks, ksf, &nv.dev, &space, &n));
            for (int q = 0; q < n; q++) {
                cg_plan p;
                if (!cg_test_nvrtc_plan(&nv, "gdr_step", &ks, ksf, &space[q], &p)) continue;
                char name[192];
                snprintf(name, sizeof name, "%s", p.name);
                const int before = nv.maxreg;
                nv.maxreg = 0; /* this kernel's registers */
                cg_test_nvrtc_nospill(&nv, &p);
                fprintf(stderr, "  sm_%d %s: %d registers\n", arch, name, nv.maxreg);
                if (before > nv.maxreg) nv.maxreg = before;
            }
            free(space);
        }
    cg_test_nvrtc_end(&nv, "gdr_step", "");
}
CG_TEST(step_gdr_nvrtc_sm80_space) { gdr_nvrtc(80); }
CG_TEST(step_gdr_nvrtc_sm90_space) { gdr_nvrtc(90); }
