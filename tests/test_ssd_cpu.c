/* test_ssd_cpu.c -- the SSD CPU path against the float64 reference, forward and every
 * gradient, over odd shapes, both layouts, optional tensors, chunk sizes, dv blocks and
 * thread counts; determinism across thread counts; config pins; the vectorized exp. */
#include "ssd_testlib.h"

#include "cpu/ssd_cpu.h"

#define FWD_TOL 1e-5
#define GRAD_TOL 1e-4

typedef struct ssd_cfg {
    int64_t B, T, G, H, dk, dv;
    int layout;         /* CG_LAYOUT_TOKEN_MAJOR or CG_LAYOUT_HEAD_MAJOR: the order of the shapes */
    int swapped;        /* memory order with the two middle dims swapped (strided views) */
    int h0, dhT, dh0;   /* optional tensors present */
    double la_lo, la_hi;
    const char *config; /* pins for the cpu path, or NULL */
    uint64_t seed;
} ssd_cfg;

/* One dtype's set of tensors (all of them: forward and backward). */
typedef ssdt_set ssd_set;

static ssdt_dims dims_of(const ssd_cfg *c) {
    ssdt_dims d = {c->B, c->T, c->G, c->H, c->dk, c->dv, c->layout, c->swapped};
    return d;
}

static void set_alloc(ssd_set *s, const ssd_cfg *c, cg_dtype dt) {
    ssdt_set_alloc(s, dims_of(c), dt, SSDT_FWD | SSDT_BWD);
}

static cg_status run_fwd(cg_context *ctx, ssd_set *s, const ssd_cfg *c, cg_backend be, const char *config) {
    return ssdt_run_fwd(ctx, s, c->layout, c->h0, 1, be, config);
}

static cg_status run_bwd(cg_context *ctx, ssd_set *s, const ssd_cfg *c, cg_backend be, const char *config) {
    return ssdt_run_bwd(ctx, s, c->layout, c->h0, c->dhT, c->dh0, be, config);
}

static void fill_inputs(ssd_set *f, const ssd_cfg *c) {
    cg_rng r = {c->seed};
    ssdt_fill_inputs(f, &r, c->la_lo, c->la_hi, SSDT_FWD | SSDT_BWD);
}

/* The float32 inputs, copied exactly into float64 for the reference. */
static void copy_inputs(ssd_set *d, const ssd_set *s) { ssdt_copy_inputs(d, s, SSDT_FWD | SSDT_BWD); }

static void describe(const ssd_cfg *c, char *buf, size_t n) {
    snprintf(buf, n, "B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld layout=%s%s h0=%d dhT=%d dh0=%d la=[%g,%g] config=%s",
             (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk,
             (long long)c->dv, c->layout == CG_LAYOUT_HEAD_MAJOR ? "bhtd" : "bthd", c->swapped ? "(swapped)" : "",
             c->h0, c->dhT, c->dh0, c->la_lo, c->la_hi, c->config ? c->config : "(default)");
}

static void check_err(const char *what, const cg_tbuf *got, const cg_tbuf *ref, double tol, const char *desc) {
    double e = cg_rel_err(got, ref);
    if (getenv("SSD_VERBOSE")) fprintf(stderr, "    %-12s %.3g\n", what, e);
    CG_CHECK(e <= tol, "%s rel err %.3g > %.0e [%s]", what, e, tol, desc);
}

/* Forward and backward of the cpu path against the reference. */
static void check_case(const ssd_cfg *c) {
    char desc[400];
    describe(c, desc, sizeof desc);
    CG_TEST_CONTEXT(ctx);
    ssd_set f, d;
    set_alloc(&f, c, CG_F32);
    set_alloc(&d, c, CG_F64);
    fill_inputs(&f, c);
    copy_inputs(&d, &f);

    CG_CHECK_OK(ctx, run_fwd(ctx, &d, c, CG_BACKEND_REF, NULL));
    CG_CHECK_OK(ctx, run_bwd(ctx, &d, c, CG_BACKEND_REF, NULL));
    /* every ISA variant of the CPU path this machine runs (cpu_isa.h) */
    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        char desc1[440];
        snprintf(desc1, sizeof desc1, "%s isa=%s", desc, cg__cpu_isa_name((cg_cpu_isa)isa));
        cg_tbuf *outs[] = {&f.o, &f.hT, &f.dq, &f.dk, &f.dv, &f.dla, &f.dh0}; /* no stale results of another variant */
        for (unsigned u = 0; u < sizeof outs / sizeof outs[0]; u++)
            if (outs[u]->mem) memset(outs[u]->mem, 0, (size_t)outs[u]->count * sizeof(float));
        CG_CHECK_OK(ctx, run_fwd(ctx, &f, c, CG_BACKEND_CPU, c->config));
        check_err("o", &f.o, &d.o, FWD_TOL, desc1);
        check_err("hT", &f.hT, &d.hT, FWD_TOL, desc1);

        /* the backward's two schedules: fused per (b, g), and chunk-parallel */
        for (int split = 0; split < 2; split++) {
            char config[200], desc2[480];
            snprintf(config, sizeof config, "%s%sbwd_split=%d", c->config ? c->config : "", c->config ? "," : "",
                     split);
            snprintf(desc2, sizeof desc2, "%s bwd_split=%d", desc1, split);
            memset(f.dq.mem, 0, (size_t)f.dq.count * sizeof(float)); /* no stale results from the last run */
            memset(f.dla.mem, 0, (size_t)f.dla.count * sizeof(float));
            CG_CHECK_OK(ctx, run_bwd(ctx, &f, c, CG_BACKEND_CPU, config));
            check_err("dq", &f.dq, &d.dq, GRAD_TOL, desc2);
            check_err("dk", &f.dk, &d.dk, GRAD_TOL, desc2);
            check_err("dv", &f.dv, &d.dv, GRAD_TOL, desc2);
            check_err("dlog_alpha", &f.dla, &d.dla, GRAD_TOL, desc2);
            if (c->dh0) check_err("dh0", &f.dh0, &d.dh0, GRAD_TOL, desc2);
        }
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");

    ssdt_set_free(&f);
    ssdt_set_free(&d);
    cg_context_free(ctx);
}

static ssd_cfg base_cfg(void) {
    ssd_cfg c;
    memset(&c, 0, sizeof c);
    c.B = 2; c.T = 37; c.G = 1; c.H = 2; c.dk = 40; c.dv = 48;
    c.layout = CG_LAYOUT_TOKEN_MAJOR;
    c.h0 = c.dhT = c.dh0 = 1;
    c.la_lo = -0.5; c.la_hi = 0.0;
    c.seed = 1;
    return c;
}

CG_TEST(ssd_cpu_t1) {
    ssd_cfg c = base_cfg();
    c.T = 1; c.dk = 7; c.dv = 40;
    check_case(&c);
    c.h0 = c.dhT = c.dh0 = 0;
    c.seed = 2;
    check_case(&c);
}

CG_TEST(ssd_cpu_t_not_multiple_of_chunk) {
    static const int64_t Ts[] = {2, 15, 17, 37, 100};
    for (unsigned i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        ssd_cfg c = base_cfg();
        c.T = Ts[i]; c.dk = 48; c.dv = 40; c.config = "chunk=16";
        c.seed = 10 + i;
        check_case(&c);
    }
}

CG_TEST(ssd_cpu_odd_dims) {
    static const int64_t dims[][2] = {{7, 200}, {40, 7}, {48, 96}, {96, 48}, {130, 130}, {200, 40}, {7, 7}, {1, 1}};
    for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        ssd_cfg c = base_cfg();
        c.B = 1; c.T = 21; c.dk = dims[i][0]; c.dv = dims[i][1]; c.config = "chunk=8";
        c.seed = 20 + i;
        check_case(&c);
    }
}

CG_TEST(ssd_cpu_large_tiles) {
    /* several row blocks, column panels and a partial 16-column vector at the default chunk */
    ssd_cfg c = base_cfg();
    c.B = 1; c.H = 1; c.T = 150; c.dk = 130; c.dv = 200;
    check_case(&c);
}

CG_TEST(ssd_cpu_groups) {
    ssd_cfg c = base_cfg();
    c.G = 2; c.H = 6; c.T = 50; c.dk = 40; c.dv = 48; c.config = "chunk=16";
    check_case(&c);
    c.layout = CG_LAYOUT_HEAD_MAJOR;
    c.seed = 3;
    check_case(&c);
    c.G = 3; c.H = 3; c.dk = 7; c.dv = 130; c.seed = 4;
    check_case(&c);
}

CG_TEST(ssd_cpu_layouts) {
    for (int layout = 0; layout < 2; layout++)
        for (int swapped = 0; swapped < 2; swapped++) {
            ssd_cfg c = base_cfg();
            c.G = 2; c.H = 4; c.T = 45; c.dk = 48; c.dv = 40; c.config = "chunk=16";
            c.layout = layout; c.swapped = swapped;
            c.seed = 30 + (uint64_t)(2 * layout + swapped);
            check_case(&c);
        }
}

CG_TEST(ssd_cpu_optional_tensors) {
    for (int m = 0; m < 8; m++) {
        ssd_cfg c = base_cfg();
        c.G = 2; c.H = 4; c.T = 29; c.dk = 40; c.dv = 7; c.config = "chunk=8";
        c.h0 = m & 1; c.dhT = (m >> 1) & 1; c.dh0 = (m >> 2) & 1;
        c.seed = 40 + (uint64_t)m;
        check_case(&c);
    }
}

CG_TEST(ssd_cpu_chunk_sizes) {
    static const char *cfgs[] = {"chunk=1", "chunk=5", "chunk=16", "chunk=33", "chunk=64", "chunk=200"};
    for (unsigned i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ssd_cfg c = base_cfg();
        c.T = 45; c.dk = 48; c.dv = 40; c.G = 1; c.H = 3; c.config = cfgs[i];
        c.seed = 50 + i;
        check_case(&c);
    }
}

CG_TEST(ssd_cpu_block_dv_threads) {
    static const char *cfgs[] = {"block_dv=1", "block_dv=7,threads=2", "block_dv=16,chunk=8",
                                 "block_dv=33,threads=1", "threads=2,chunk=12", "block_dv=100"};
    for (unsigned i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ssd_cfg c = base_cfg();
        c.T = 40; c.dk = 40; c.dv = 40; c.G = 1; c.H = 2; c.config = cfgs[i];
        c.seed = 60 + i;
        check_case(&c);
    }
    /* one (b, h): the default splits dv across threads */
    ssd_cfg c = base_cfg();
    c.B = 1; c.H = 1; c.T = 40; c.dk = 48; c.dv = 96; c.seed = 70;
    check_case(&c);
}

CG_TEST(ssd_cpu_strong_and_weak_decay) {
    ssd_cfg c = base_cfg();
    c.T = 150; c.dk = 40; c.dv = 48; c.H = 2;
    c.la_lo = -6.0; c.la_hi = 0.0; /* in-chunk decays reach e^-380: the masks underflow to 0 */
    check_case(&c);
    c.la_lo = -0.02; c.la_hi = 0.01; c.T = 90; c.seed = 5; /* almost no decay, some growth */
    check_case(&c);
}

/* Run fwd and bwd with `config`, copy the outputs into out[0..6]. */
static void run_outputs(cg_context *ctx, ssd_set *f, const ssd_cfg *c, const char *config, cg_tbuf *out) {
    CG_CHECK_OK(ctx, run_fwd(ctx, f, c, CG_BACKEND_CPU, config));
    CG_CHECK_OK(ctx, run_bwd(ctx, f, c, CG_BACKEND_CPU, config));
    const cg_tbuf *src[7] = {&f->o, &f->hT, &f->dq, &f->dk, &f->dv, &f->dla, &f->dh0};
    for (int i = 0; i < 7; i++) {
        out[i] = cg_tbuf_new(CG_F32, src[i]->t.ndim, src[i]->t.shape);
        cg_tbuf_copy(&out[i], src[i]);
    }
}

CG_TEST(ssd_cpu_deterministic_threads) {
    static const char *names[7] = {"o", "hT", "dq", "dk", "dv", "dlog_alpha", "dh0"};
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 3)); /* a pool of 3 even on a smaller machine */
    ssd_cfg c = base_cfg();
    c.B = 2; c.G = 2; c.H = 4; c.T = 70; c.dk = 40; c.dv = 48;
    ssd_set f;
    set_alloc(&f, &c, CG_F32);
    fill_inputs(&f, &c);
    static const char *cfgs[5] = {"threads=1,chunk=16", "threads=2,chunk=16", "threads=3,chunk=16",
                                  "threads=2,chunk=16,bwd_split=1", "threads=3,chunk=16,bwd_split=1"};
    cg_tbuf out[5][7];
    for (int r = 0; r < 5; r++) run_outputs(ctx, &f, &c, cfgs[r], out[r]);
    for (int r = 1; r < 5; r++)
        for (int i = 0; i < 7; i++)
            CG_CHECK(memcmp(out[0][i].mem, out[r][i].mem, (size_t)out[0][i].count * sizeof(float)) == 0,
                     "%s differs between %s and %s", names[i], cfgs[0], cfgs[r]);
    for (int r = 0; r < 5; r++)
        for (int i = 0; i < 7; i++) cg_tbuf_free(&out[r][i]);
    ssdt_set_free(&f);
    cg_context_free(ctx);
}

CG_TEST(ssd_cpu_config_errors) {
    static const char *bad[][2] = {{"chunk=0", "chunk"},       {"chunk=abc", "chunk"}, {"block_dv=0", "block_dv"},
                                   {"threads=-1", "threads"},  {"chunk=99999", "chunk"}, {"blockdv=4", "blockdv"},
                                   {"bwd_split=2", "bwd_split"}};
    CG_TEST_CONTEXT(ctx);
    ssd_cfg c = base_cfg();
    c.T = 5; c.dk = 7; c.dv = 7;
    ssd_set f;
    set_alloc(&f, &c, CG_F32);
    fill_inputs(&f, &c);
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cg_status st = run_fwd(ctx, &f, &c, CG_BACKEND_CPU, bad[i][0]);
        CG_CHECK(st == CG_EINVAL, "fwd with %s: status %s", bad[i][0], cg_status_str(st));
        CG_CHECK(strstr(cg_errmsg(ctx), bad[i][1]) != NULL, "fwd message \"%s\" lacks \"%s\"", cg_errmsg(ctx), bad[i][1]);
        st = run_bwd(ctx, &f, &c, CG_BACKEND_CPU, bad[i][0]);
        CG_CHECK(st == CG_EINVAL, "bwd with %s: status %s", bad[i][0], cg_status_str(st));
        CG_CHECK(strstr(cg_errmsg(ctx), bad[i][1]) != NULL, "bwd message \"%s\" lacks \"%s\"", cg_errmsg(ctx), bad[i][1]);
    }
    ssdt_set_free(&f);
    cg_context_free(ctx);
}

/* The non-finite tests' problem: 40 tokens in chunks of 16, two heads; a context, and
 * float32 (filled) and float64 sets; NULL when no context could be made. */
static cg_context *nonfinite_setup(ssd_cfg *c, int64_t dk, ssd_set *f, ssd_set *d) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return NULL;
    *c = base_cfg();
    c->B = 1; c->H = 2; c->T = 40; c->dk = dk; c->dv = 40; c->config = "chunk=16";
    set_alloc(f, c, CG_F32);
    set_alloc(d, c, CG_F64);
    fill_inputs(f, c);
    return ctx;
}

CG_TEST(ssd_cpu_nonfinite) {
    ssd_cfg c;
    ssd_set f, d;
    cg_context *ctx = nonfinite_setup(&c, 7, &f, &d);
    if (!ctx) return;
    /* log_alpha = -inf: the decay is exactly 0 and everything stays finite, as in the reference */
    int64_t ia[3] = {0, 20, 1};
    cg_tbuf_set(&f.la, ia, -INFINITY);
    copy_inputs(&d, &f);
    CG_CHECK_OK(ctx, run_fwd(ctx, &d, &c, CG_BACKEND_REF, NULL));
    CG_CHECK_OK(ctx, run_fwd(ctx, &f, &c, CG_BACKEND_CPU, c.config));
    check_err("o (log_alpha=-inf)", &f.o, &d.o, FWD_TOL, "");
    check_err("hT (log_alpha=-inf)", &f.hT, &d.hT, FWD_TOL, "");
    CG_CHECK_OK(ctx, run_bwd(ctx, &d, &c, CG_BACKEND_REF, NULL));
    CG_CHECK_OK(ctx, run_bwd(ctx, &f, &c, CG_BACKEND_CPU, c.config));
    check_err("dq (log_alpha=-inf)", &f.dq, &d.dq, GRAD_TOL, "");
    check_err("dk (log_alpha=-inf)", &f.dk, &d.dk, GRAD_TOL, "");
    check_err("dv (log_alpha=-inf)", &f.dv, &d.dv, GRAD_TOL, "");
    check_err("dlog_alpha (log_alpha=-inf)", &f.dla, &d.dla, GRAD_TOL, "");
    check_err("dh0 (log_alpha=-inf)", &f.dh0, &d.dh0, GRAD_TOL, "");
    /* a NaN in q at token 25 shows up in that token's output; tokens of earlier chunks stay finite */
    int64_t iq[4] = {0, 25, 0, 3};
    cg_tbuf_set(&f.q, iq, NAN);
    CG_CHECK_OK(ctx, run_fwd(ctx, &f, &c, CG_BACKEND_CPU, c.config));
    CG_CHECK_OK(ctx, run_bwd(ctx, &f, &c, CG_BACKEND_CPU, c.config));
    int64_t io[4] = {0, 25, 0, 0}, early[4] = {0, 3, 1, 5};
    CG_CHECK(isnan(cg_tbuf_get(&f.o, io)), "o at the NaN token is %g", cg_tbuf_get(&f.o, io));
    CG_CHECK(isfinite(cg_tbuf_get(&f.o, early)), "o of an earlier chunk is %g", cg_tbuf_get(&f.o, early));
    int64_t idv[4] = {0, 5, 0, 0};
    CG_CHECK(isnan(cg_tbuf_get(&f.dv, idv)), "dv before the NaN q token is %g", cg_tbuf_get(&f.dv, idv));
    ssdt_set_free(&f);
    ssdt_set_free(&d);
    cg_context_free(ctx);
}

/* An inf or NaN in v at the last token of a chunk reaches that token's output and the
 * later ones, never an earlier token of the same chunk (the masked-out part of the
 * intra-chunk attention is not multiplied), in every ISA variant; the tokens before it
 * match the reference. */
CG_TEST(ssd_cpu_nonfinite_v_is_causal) {
    ssd_cfg c;
    ssd_set f, d;
    cg_context *ctx = nonfinite_setup(&c, 40, &f, &d);
    if (!ctx) return;
    const int64_t bad_t[2] = {31, 15}; /* per head: the last token of chunk 1, of chunk 0 */
    int64_t i0[4] = {0, bad_t[0], 0, 5}, i1[4] = {0, bad_t[1], 1, 3};
    cg_tbuf_set(&f.v, i0, NAN);
    cg_tbuf_set(&f.v, i1, INFINITY);
    copy_inputs(&d, &f);
    CG_CHECK_OK(ctx, run_fwd(ctx, &d, &c, CG_BACKEND_REF, NULL));
    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        const char *name = cg__cpu_isa_name((cg_cpu_isa)isa);
        memset(f.o.mem, 0, (size_t)f.o.count * sizeof(float));
        CG_CHECK_OK(ctx, run_fwd(ctx, &f, &c, CG_BACKEND_CPU, c.config));
        for (int64_t h = 0; h < c.H; h++) {
            double err = 0, scale = 0;
            int nonfinite = 0;
            for (int64_t t = 0; t < bad_t[h]; t++)
                for (int64_t j = 0; j < c.dv; j++) {
                    int64_t io[4] = {0, t, h, j};
                    const double got = cg_tbuf_get(&f.o, io), want = cg_tbuf_get(&d.o, io);
                    if (!isfinite(got)) nonfinite++;
                    else err = fmax(err, fabs(got - want)), scale = fmax(scale, fabs(want));
                }
            CG_CHECK(nonfinite == 0, "isa %s head %lld: %d outputs before the bad token %lld are not finite", name,
                     (long long)h, nonfinite, (long long)bad_t[h]);
            CG_CHECK(err <= FWD_TOL * scale, "isa %s head %lld: rel err %.3g before the bad token", name,
                     (long long)h, err / scale);
            int64_t io[4] = {0, bad_t[h], h, h ? 3 : 5};
            CG_CHECK(!isfinite(cg_tbuf_get(&f.o, io)), "isa %s head %lld: o at the bad token is %g", name,
                     (long long)h, cg_tbuf_get(&f.o, io));
        }
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    ssdt_set_free(&f);
    ssdt_set_free(&d);
    cg_context_free(ctx);
}

CG_TEST(ssd_cpu_exp) {
    double worst = 0;
    for (int i = 0; i <= 400000; i++) {
        float x = (float)(-87.0 + 175.0 * i / 400000.0);
        double want = exp((double)x), got = cg__ssd_exp(x);
        double e = fabs(got - want) / want;
        if (e > worst) worst = e;
    }
    CG_CHECK(worst < 3e-7, "cg__ssd_exp max rel err %.3g", worst);
    CG_CHECK(cg__ssd_exp(0.0f) == 1.0f, "exp(0) = %.9g", cg__ssd_exp(0.0f));
    CG_CHECK(cg__ssd_exp(-INFINITY) == 0.0f, "exp(-inf) = %g", cg__ssd_exp(-INFINITY));
    CG_CHECK(cg__ssd_exp(-200.0f) == 0.0f, "exp(-200) = %g", cg__ssd_exp(-200.0f));
    CG_CHECK(isinf(cg__ssd_exp(100.0f)), "exp(100) = %g", cg__ssd_exp(100.0f));
    CG_CHECK(isinf(cg__ssd_exp(INFINITY)), "exp(inf) = %g", cg__ssd_exp(INFINITY));
    CG_CHECK(isnan(cg__ssd_exp(NAN)), "exp(nan) = %g", cg__ssd_exp(NAN));
    float dn = cg__ssd_exp(-95.0f); /* a denormal */
    CG_CHECK(fabs(dn - exp(-95.0)) <= 1e-44, "exp(-95) = %g, want %g", dn, exp(-95.0));
    /* the vector form of every variant (the decay masks) gives the scalar form's values
     * within rounding, special values and a ragged tail included */
    enum { N = 4099 };
    static float X[N], P[N];
    const float special[] = {-INFINITY, INFINITY, NAN, -200.0f, -95.0f, 100.0f, 0.0f, -104.5f, 89.5f};
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (!cg__cpu_isa_supported((cg_cpu_isa)isa)) continue;
        const int nsp = (int)(sizeof special / sizeof special[0]);
        for (int i = 0; i < N; i++) X[i] = i < nsp ? special[i] : (float)(-110.0 + 205.0 * i / N), P[i] = 1.5f;
        const cg_cpu_isa saved = cg__cpu_isa_ops()->isa;
        CG_CHECK(cg__cpu_isa_set((cg_cpu_isa)isa) == CG_OK, "set %s", cg__cpu_isa_name((cg_cpu_isa)isa));
        cg__cpu_isa_ops()->ssd_mul_exp(P, X, N);
        CG_CHECK(cg__cpu_isa_set(saved) == CG_OK, "restore the ISA variant");
        int bad = 0;
        for (int i = 0; i < N; i++) {
            const float want = 1.5f * cg__ssd_exp(X[i]);
            /* FMA contraction differs between the variants: a few ulp (absolute in denormals) */
            const int same = P[i] == want || (isnan(P[i]) && isnan(want)) ||
                             (isfinite(want) && fabsf(P[i] - want) <= 5e-7f * fabsf(want) + 1e-44f);
            if (!same) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s: 1.5 * exp(%g) = %.9g, the scalar form %.9g\n",
                            cg__cpu_isa_name((cg_cpu_isa)isa), X[i], P[i], want);
            }
        }
        CG_CHECK(bad == 0, "%s: %d of %d vector exps differ from the scalar form", cg__cpu_isa_name((cg_cpu_isa)isa),
                 bad, N);
    }
}

CG_TEST(ssd_cpu_isa_dispatch) {
    /* the variant table: names round-trip, baseline always runs, the chosen one is supported */
    for (int isa = 0; isa < CG_ISA_COUNT; isa++)
        CG_CHECK(cg__cpu_isa_parse(cg__cpu_isa_name((cg_cpu_isa)isa)) == isa, "name of variant %d", isa);
    CG_CHECK(cg__cpu_isa_parse("avx1024") == -1 && cg__cpu_isa_parse(NULL) == -1, "unknown names");
    CG_CHECK(cg__cpu_isa_name(CG_ISA_COUNT) == NULL, "name out of range");
    CG_CHECK(cg__cpu_isa_supported(CG_ISA_BASELINE), "baseline runs everywhere");
    CG_CHECK(!cg__cpu_isa_supported(CG_ISA_COUNT), "no variant past the table");
    const cg_cpu_isa_ops *ops = cg__cpu_isa_ops();
    CG_CHECK(ops && cg__cpu_isa_supported(ops->isa) && strcmp(ops->name, cg__cpu_isa_name(ops->isa)) == 0,
             "the chosen variant runs here");
    /* without CHUNKGEN_CPU_ISA the best variant this CPU runs is chosen */
    const char *env = getenv("CHUNKGEN_CPU_ISA");
    if (!env || !*env)
        for (int isa = ops->isa + 1; isa < CG_ISA_COUNT; isa++)
            CG_CHECK(!cg__cpu_isa_supported((cg_cpu_isa)isa), "%s runs here but %s was chosen",
                     cg__cpu_isa_name((cg_cpu_isa)isa), ops->name);
    /* a variant this CPU lacks is refused and the choice stays */
    for (int isa = 0; isa < CG_ISA_COUNT; isa++)
        if (!cg__cpu_isa_supported((cg_cpu_isa)isa)) {
            CG_CHECK(cg__cpu_isa_set((cg_cpu_isa)isa) == CG_EUNSUPPORTED, "set %s", cg__cpu_isa_name((cg_cpu_isa)isa));
            CG_CHECK(cg__cpu_isa_ops() == ops, "the choice is unchanged");
        }
    CG_CHECK(cg__cpu_isa_set(CG_ISA_COUNT) == CG_EUNSUPPORTED && cg__cpu_isa_ops() == ops, "out of range");
}

CG_TEST(ssd_cpu_default_from_lua) {
    /* An unpinned call runs generator/cpu/ssd_cpu.lua's default for the running variant
     * (the tuner's starting point), in both directions. */
    CG_TEST_CONTEXT(ctx);
    ssd_cfg c = base_cfg();
    c.B = 1; c.H = 1; c.T = 300; c.dk = 40; c.dv = 48; c.h0 = c.dhT = c.dh0 = 0;
    ssd_set f;
    set_alloc(&f, &c, CG_F32);
    fill_inputs(&f, &c);
    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        for (int bwd = 0; bwd < 2; bwd++) {
            const cg_shape ks = {.size = sizeof ks,
                                 .dim = {[CG_SYM_B] = c.B, [CG_SYM_T] = c.T, [CG_SYM_G] = c.G, [CG_SYM_H] = c.H,
                                         [CG_SYM_DK] = c.dk, [CG_SYM_DV] = c.dv}};
            const int ksf = bwd ? CG_KS_BWD : 0;
            cg_devinfo dev;
            cg__cpu_devinfo(&dev, cg__pool_size(cg__ctx_pool(ctx)));
            CG_CHECK(!strcmp(dev.isa, cg__cpu_isa_name((cg_cpu_isa)isa)), "the space sees the variant");
            cg_cfg def;
            CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "ssd_cpu", &ks, ksf, &dev, NULL, &def));
            CG_CHECK_OK(ctx, bwd ? run_bwd(ctx, &f, &c, CG_BACKEND_CPU, NULL) : run_fwd(ctx, &f, &c, CG_BACKEND_CPU, NULL));
            char want[64];
            snprintf(want, sizeof want, "chunk=%s ", cg__cfg_str(&def, "chunk", "?"));
            const char *got = cg_last_dispatch(ctx);
            CG_CHECK(got && strstr(got, want) && strstr(got, "(default)"), "isa %s %s: ran '%s', Lua default %s",
                     cg__cpu_isa_name((cg_cpu_isa)isa), bwd ? "bwd" : "fwd", got ? got : "(null)", want);
        }
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    ssdt_set_free(&f);
    cg_context_free(ctx);
}

CG_TEST(ssd_cpu_heads_group_each) {
    /* The forward's task choice (config key heads, generator/cpu/ssd_cpu.lua): a task per
     * group taking its heads in turn, or one per head; both against the reference, with
     * dv blocks, a partial last chunk and several threads; and the choice that ran is the
     * one asked for (pinned) or the Lua default's (unpinned). */
    static const char *cfgs[] = {"heads=group", "heads=each", "heads=group,block_dv=16,chunk=16",
                                 "heads=each,block_dv=16,chunk=16", "heads=group,threads=2", "heads=each,threads=2"};
    for (unsigned i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ssd_cfg c = base_cfg();
        c.B = 2; c.G = 2; c.H = 6; c.T = 45; c.dk = 24; c.dv = 40; c.config = cfgs[i];
        c.seed = 90 + i;
        check_case(&c);
    }
    CG_TEST_CONTEXT(ctx);
    ssd_cfg c = base_cfg();
    c.B = 1; c.G = 2; c.H = 6; c.T = 45; c.dk = 24; c.dv = 40;
    ssd_set f;
    set_alloc(&f, &c, CG_F32);
    fill_inputs(&f, &c);
    for (unsigned i = 0; i < 2; i++) {
        CG_CHECK_OK(ctx, run_fwd(ctx, &f, &c, CG_BACKEND_CPU, cfgs[i]));
        const char *got = cg_last_dispatch(ctx);
        CG_CHECK(got && strstr(got, cfgs[i]) && strstr(got, "(pinned)"), "%s: ran '%s'", cfgs[i], got ? got : "(null)");
    }
    const cg_shape ks = {.size = sizeof ks,
                         .dim = {[CG_SYM_B] = c.B, [CG_SYM_T] = c.T, [CG_SYM_G] = c.G, [CG_SYM_H] = c.H,
                                 [CG_SYM_DK] = c.dk, [CG_SYM_DV] = c.dv}};
    cg_devinfo dev;
    cg__cpu_devinfo(&dev, cg__pool_size(cg__ctx_pool(ctx)));
    cg_cfg def;
    CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "ssd_cpu", &ks, 0, &dev, NULL, &def));
    char want[64];
    snprintf(want, sizeof want, "heads=%s ", cg__cfg_str(&def, "heads", "?"));
    CG_CHECK_OK(ctx, run_fwd(ctx, &f, &c, CG_BACKEND_CPU, NULL));
    const char *got = cg_last_dispatch(ctx);
    CG_CHECK(got && strstr(got, want) && strstr(got, "(default)"), "ran '%s', Lua default %s", got ? got : "(null)", want);
    /* a word that is neither: refused, naming the key and the two values */
    CG_CHECK(run_fwd(ctx, &f, &c, CG_BACKEND_CPU, "heads=some") == CG_EINVAL &&
                 strstr(cg_errmsg(ctx), "heads") && strstr(cg_errmsg(ctx), "group or each"),
             "heads=some: '%s'", cg_errmsg(ctx));
    ssdt_set_free(&f);
    cg_context_free(ctx);
}
