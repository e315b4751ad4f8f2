/* test_gdr_step.c -- the gated delta rule's decode step (issue #36): cg_gdr_step over a
 * state cache, on the ref and cpu backends.
 *   - consistency: T calls of one token each from the cache equal the chunked forward
 *     (cg_gdr_fwd on the cpu, h0 = the slots' states, hT) over the same T tokens to 1e-5,
 *     with a padding entry (its outputs zero, no slot touched), on odd shapes (dk 48, dv 40,
 *     G 2, H 6), with and without the L2 norm, the default and a given scale; one call of T
 *     tokens equals the T calls; with dst_indices each token's state lands in its own slot;
 *   - a bfloat16 cache against the float64 reference;
 *   - bad input: a status, a message naming the argument, the cache bit-identical. */
#include "ops.h"
#include "step_testlib.h"

enum { GB = 4, GT = 5, GG = 2, GH = 6, GDK = 48, GDV = 40, GS = 9 };
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
    cg_tbuf h0 = cg_tbuf_new(CG_F32, 4, (int64_t[]){GB, GH, GDK, GDV}), hT = cg_tbuf_new(CG_F32, 4, h0.t.shape);
    cg_tbuf of = cg_tbuf_new(CG_F32, 4, o.t.shape);
    for (int b = 0; b < GB; b++)
        if (k_gslots[b] >= 0)
            memcpy((float *)h0.mem + b * GSTATE, (float *)d.cache0.mem + k_gslots[b] * GSTATE, GSTATE * sizeof(float));
    cg_gdr_fwd_args f = CG_GDR_FWD_ARGS_INIT;
    f.q = d.q.t, f.k = d.k.t, f.v = d.v.t, f.g = d.g.t, f.beta = d.beta.t, f.h0 = h0.t, f.o = of.t, f.hT = hT.t;
    f.scale = scale, f.use_qk_l2norm = l2;
    cg_exec fx = CG_EXEC_INIT;
    fx.backend = CG_BACKEND_CPU;
    CG_CHECK_OK(ctx, cg_gdr_fwd(ctx, &f, &fx));
    for (int b = 0; b < GB; b++) {
        if (k_gslots[b] < 0) {
            CG_CHECK(cg_step_rows_zero(&o, b), "%s: padding entry %d: outputs not zero", bn, b);
            continue;
        }
        double eo = cg_step_rows_err(&o, b, &of, b), eh = cg_step_rows_err(&cache, k_gslots[b], &hT, b);
        CG_CHECK(eo <= 1e-5 && eh <= 1e-5, "%s l2=%d: entry %d: o err %.3g, state err %.3g (want <= 1e-5)", bn, l2, b,
                 eo, eh);
    }
    for (int s = 0; s < GS; s++) { /* slots no entry names: bit-identical */
        int named = 0;
        for (int b = 0; b < GB; b++) named |= k_gslots[b] == s;
        if (!named)
            CG_CHECK(!memcmp((float *)cache.mem + s * GSTATE, (float *)d.cache0.mem + s * GSTATE, GSTATE * sizeof(float)),
                     "%s: slot %d changed", bn, s);
    }
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

/* A bfloat16 cache (and bf16 q, k, v, beta, o) on the cpu against the float64 reference. */
CG_TEST(step_gdr_bf16_cache) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {9};
    gdr_data d = gdr_data_new(&r, CG_BF16, 1, 0);
    cg_tbuf *half[] = {&d.q, &d.k, &d.v, &d.beta};
    for (int i = 0; i < 4; i++) {
        cg_tbuf x = cg_tbuf_new(CG_BF16, half[i]->t.ndim, half[i]->t.shape);
        cg_tbuf_copy(&x, half[i]);
        cg_tbuf_free(half[i]);
        *half[i] = x;
    }
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){GB}, k_gslots);
    cg_tbuf c[2], o[2];
    const cg_backend bes[2] = {CG_BACKEND_REF, CG_BACKEND_CPU};
    for (int i = 0; i < 2; i++) {
        c[i] = copy_of(&d.cache0);
        o[i] = cg_tbuf_new(CG_BF16, 4, (int64_t[]){GB, GT, GH, GDV});
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = bes[i];
        cg_gdr_step_args a = gdr_args(&d, 0, GT, &c[i], &idx, NULL, o[i].t);
        CG_CHECK_OK(ctx, cg_gdr_step(ctx, &a, &ex));
    }
    CG_CHECK(cg_rel_err(&o[1], &o[0]) <= 1e-2 && cg_rel_err(&c[1], &c[0]) <= 1e-2, "cpu bf16: o %.3g, cache %.3g",
             cg_rel_err(&o[1], &o[0]), cg_rel_err(&c[1], &c[0]));
    for (int i = 0; i < 2; i++) cg_tbuf_free(&c[i]), cg_tbuf_free(&o[i]);
    cg_tbuf_free(&idx);
    gdr_data_free(&d);
    cg_context_free(ctx);
}

/* Bad input: refused before anything is written. */
CG_TEST(step_gdr_bad_input) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {6};
    gdr_data d = gdr_data_new(&r, CG_F32, 0, 0);
    cg_tbuf cache = copy_of(&d.cache0), o = cg_tbuf_new(CG_F32, 4, (int64_t[]){GB, 1, GH, GDV});
    struct {
        const char *what;
        int64_t src[GB];
        int use_dst;
        int64_t dst[GB];
        const char *word;
    } k_bad[] = {
        {"index = S", {0, 1, GS, 2}, 0, {0}, "state_indices[2] = 9"},
        {"index < -1", {0, -2, 1, 2}, 0, {0}, "state_indices[1] = -2"},
        {"duplicate slot in place", {4, -1, 2, 4}, 0, {0}, "state_indices[3] = 4"},
        {"duplicate dst", {0, 1, 2, 3}, 1, {5, 6, 5, -1}, "dst_indices[2, 0] = 5"},
        {"slot read by one entry, written by another", {0, 1, 2, 3}, 1, {1, 6, 7, 8}, "state_indices[1] = 1"},
    };
    cg_exec ex = CG_EXEC_INIT;
    for (int be = 0; be < 2; be++) {
        ex.backend = be ? CG_BACKEND_REF : CG_BACKEND_CPU;
        for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
            cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){GB}, k_bad[i].src);
            cg_tbuf dst = cg_step_idx_buf(2, (int64_t[]){GB, 1}, k_bad[i].dst);
            cg_gdr_step_args a = gdr_args(&d, 0, 1, &cache, &idx, k_bad[i].use_dst ? &dst : NULL, o.t);
            CG_CHECK_REFUSED(ctx, cg_gdr_step(ctx, &a, &ex), CG_EINVAL, k_bad[i].word, k_bad[i].what);
            CG_CHECK(!memcmp(cache.mem, d.cache0.mem, cg_step_bytes(&cache)), "%s: the cache changed", k_bad[i].what);
            cg_tbuf_free(&idx), cg_tbuf_free(&dst);
        }
    }
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
    ex.backend = CG_BACKEND_EMULATE; /* no generated kernel yet: refused by name */
    CG_CHECK_REFUSED(ctx, cg_gdr_step(ctx, &a, &ex), CG_EUNSUPPORTED, "no kernel", "emulate");
    CG_CHECK(!memcmp(cache.mem, d.cache0.mem, cg_step_bytes(&cache)), "the cache changed");
    cg_tbuf_free(&idx), cg_tbuf_free(&cache), cg_tbuf_free(&o);
    gdr_data_free(&d);
    cg_context_free(ctx);
}
