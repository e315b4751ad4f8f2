/* test_sscan_cpu.c -- the CPU path of the selective scan (float32) against the float64
 * reference, forward and every gradient, through the public API. Shapes are small and
 * odd: L = 1, L not a multiple of the segment, D and N odd (N in 1, 7, 16, 33, 256),
 * grouped and ungrouped B/C, optional inputs on and off, the [B, D, L] memory layout of
 * mamba for x/delta/z/dy (and [B, G, N, L] for B/C), several segments and blocks. */
#include "cg_test.h"
#include "cpu/cpu_isa.h"
#include "cpu_half_testlib.h"
#include "gen.h"
#include "sscan_testlib.h"

#define FWD_TOL 1e-5
#define GRAD_TOL 1e-4

/* The CPU tests always request hT and dh0. */
static int ss_present(const sst_case *c, int i) { return i == T_HT || i == T_DH0 || sst_on(c, i); }

static void ss_alloc(sst_set *s, const sst_case *c, cg_dtype dt, int strided_ok) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < T_COUNT; i++) {
        int64_t sh[4];
        int perm[4], use_perm;
        int nd = sst_dims(c, i, sh, perm, &use_perm);
        s->on[i] = ss_present(c, i);
        s->t[i] = cg_tbuf_new_perm(dt, nd, sh, use_perm && strided_ok ? perm : NULL);
    }
}

static void ss_fill(sst_set *s, const sst_case *c, uint64_t seed) {
    cg_rng r = {seed};
    cg_tbuf_fill(&s->t[T_X], &r, -1, 1);
    if (c->softplus) cg_tbuf_fill(&s->t[T_DELTA], &r, -2.5, 1);
    else cg_tbuf_fill(&s->t[T_DELTA], &r, 0.01, 0.5);
    cg_tbuf_fill(&s->t[T_A], &r, -1.5, -0.05);
    cg_tbuf_fill(&s->t[T_B], &r, -1, 1);
    cg_tbuf_fill(&s->t[T_C], &r, -1, 1);
    cg_tbuf_fill(&s->t[T_D], &r, -1, 1);
    cg_tbuf_fill(&s->t[T_Z], &r, -2, 2);
    if (c->softplus) cg_tbuf_fill(&s->t[T_BIAS], &r, -0.5, 0.5);
    else cg_tbuf_fill(&s->t[T_BIAS], &r, 0, 0.1);
    cg_tbuf_fill(&s->t[T_H0], &r, -1, 1);
    cg_tbuf_fill(&s->t[T_DY], &r, -1, 1);
    cg_tbuf_fill(&s->t[T_DHT], &r, -1, 1);
}



static cg_status ss_fwd(cg_context *ctx, sst_set *s, const sst_case *c, const cg_exec *ex) {
    cg_sscan_fwd_args a = sst_fwd_args(s, c);
    return cg_sscan_fwd(ctx, &a, ex);
}


static cg_status ss_bwd(cg_context *ctx, sst_set *s, const sst_case *c, const cg_exec *ex) {
    cg_sscan_bwd_args a = sst_bwd_args(s, c);
    return cg_sscan_bwd(ctx, &a, ex);
}

static void ss_describe(const sst_case *c, char *buf, size_t n) {
    snprintf(buf, n, "B=%lld L=%lld D=%lld N=%lld G=%lld z=%d D=%d bias=%d softplus=%d h0=%d dhT=%d strided=%d "
             "config=%s",
             (long long)c->B, (long long)c->L, (long long)c->D, (long long)c->N, (long long)c->G, c->z, c->Dv,
             c->bias, c->softplus, c->h0, c->dhT, c->strided, c->config ? c->config : "default");
}

/* Runs the case on the CPU (float32) and the reference (float64), checks every output. */
static void ss_check_case(const sst_case *c, uint64_t seed) {
    char what[256];
    ss_describe(c, what, sizeof what);
    CG_TEST_CONTEXT(ctx);
    sst_set ref, cpu;
    ss_alloc(&ref, c, CG_F64, 0);
    ss_alloc(&cpu, c, CG_F32, 1);
    ss_fill(&ref, c, seed);
    for (int i = 0; i <= T_DHT; i++) cg_tbuf_copy(&cpu.t[i], &ref.t[i]);

    const cg_exec ref_ex = {.backend = CG_BACKEND_REF};
    const cg_exec cpu_ex = {.backend = CG_BACKEND_CPU, .config = c->config};
    CG_CHECK_OK(ctx, ss_fwd(ctx, &ref, c, &ref_ex));
    CG_CHECK_OK(ctx, ss_bwd(ctx, &ref, c, &ref_ex));
    /* every ISA variant of the CPU path this machine runs (cpu_isa.h) */
    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        for (int i = T_Y; i < T_COUNT; i++) /* no stale results of another variant */
            if (cpu.on[i] && cpu.t[i].mem) memset(cpu.t[i].mem, 0, (size_t)cpu.t[i].count * sizeof(float));
        CG_CHECK_OK(ctx, ss_fwd(ctx, &cpu, c, &cpu_ex));
        CG_CHECK_OK(ctx, ss_bwd(ctx, &cpu, c, &cpu_ex));
        for (int i = T_Y; i < T_COUNT; i++) {
            if (!ref.on[i]) continue;
            double tol = i <= T_HT ? FWD_TOL : GRAD_TOL;
            double err = cg_rel_err(&cpu.t[i], &ref.t[i]);
            CG_CHECK(err <= tol, "%s: rel err %.3g > %.0e (%s isa=%s)", sst_names[i], err, tol, what,
                     cg__cpu_isa_name((cg_cpu_isa)isa));
        }
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    sst_free(&ref);
    sst_free(&cpu);
    cg_context_free(ctx);
}

CG_TEST(sscan_cpu_l1) {
    sst_case c = {.B = 2, .L = 1, .D = 5, .N = 7};
    ss_check_case(&c, 1);
    sst_case c2 = {.B = 1, .L = 1, .D = 9, .N = 16, .G = 3, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1,
                  .dhT = 1, .config = "segment=4,block_d=2"};
    ss_check_case(&c2, 2);
}

CG_TEST(sscan_cpu_ungrouped_all_options) {
    /* L = 37 is not a multiple of the segment; block_d = 8 gives several blocks per group. */
    sst_case c = {.B = 2, .L = 37, .D = 19, .N = 16, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1, .dhT = 1,
                 .config = "segment=8,block_d=8"};
    ss_check_case(&c, 3);
}

CG_TEST(sscan_cpu_ungrouped_plain) {
    sst_case c = {.B = 3, .L = 45, .D = 21, .N = 7, .config = "segment=10"};
    ss_check_case(&c, 4);
}

CG_TEST(sscan_cpu_grouped) {
    /* 3 groups of 4 channels, 2 blocks per group, N = 33. */
    sst_case c = {.B = 2, .L = 29, .D = 12, .N = 33, .G = 3, .z = 1, .h0 = 1, .config = "segment=5,block_d=3"};
    ss_check_case(&c, 5);
    sst_case c2 = {.B = 1, .L = 23, .D = 40, .N = 7, .G = 2, .Dv = 1, .bias = 1, .softplus = 1, .dhT = 1,
                  .config = "segment=6,block_d=16"};
    ss_check_case(&c2, 6);
}

CG_TEST(sscan_cpu_group_per_channel) {
    sst_case c = {.B = 2, .L = 13, .D = 6, .N = 5, .G = 6, .z = 1, .Dv = 1, .h0 = 1, .dhT = 1,
                 .config = "segment=4"};
    ss_check_case(&c, 7);
}

CG_TEST(sscan_cpu_strided_layout) {
    /* mamba's memory: x, delta, z, dy [B, D, L]; B, C [B, N, L] and [B, G, N, L]. */
    sst_case c = {.B = 2, .L = 50, .D = 33, .N = 1, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1, .dhT = 1,
                 .strided = 1, .config = "segment=16,block_d=20"};
    ss_check_case(&c, 8);
    sst_case c2 = {.B = 1, .L = 64, .D = 40, .N = 7, .G = 2, .z = 1, .softplus = 1, .dhT = 1, .strided = 1,
                  .config = "segment=64,block_d=16"};
    ss_check_case(&c2, 9);
}

CG_TEST(sscan_cpu_segment_sizes) {
    static const char *const cfgs[] = {"segment=1", "segment=2", "segment=3", "segment=7,block_d=1",
                                       "segment=31", "segment=32", "segment=1000,block_d=64"};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        sst_case c = {.B = 1, .L = 31, .D = 17, .N = 16, .G = 1, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1,
                     .dhT = 1, .config = cfgs[i]};
        ss_check_case(&c, 10 + i);
    }
}

CG_TEST(sscan_cpu_long_sequence) {
    /* Decays as slow as exp(-0.0005) over 2000 steps: errors of the fast exp must not
     * pile up in the long products of decays. */
    sst_case c = {.B = 1, .L = 2000, .D = 20, .N = 8, .Dv = 1, .h0 = 1, .dhT = 1, .config = "segment=64"};
    ss_check_case(&c, 22);
}

CG_TEST(sscan_cpu_large_n) {
    sst_case c = {.B = 1, .L = 9, .D = 3, .N = 256, .Dv = 1, .h0 = 1, .dhT = 1, .config = "segment=4"};
    ss_check_case(&c, 20);
}

CG_TEST(sscan_cpu_default_config) {
    /* Default segment and block, more channels than one block, a longer sequence. */
    sst_case c = {.B = 2, .L = 200, .D = 70, .N = 16, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1, .dhT = 1};
    ss_check_case(&c, 21);
    /* sequence-major memory picks other defaults (longer tiles, smaller blocks) */
    sst_case c2 = {.B = 2, .L = 300, .D = 70, .N = 16, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1, .dhT = 1,
                  .strided = 1};
    ss_check_case(&c2, 23);
}

/* Every output byte of a run with threads=1 equals that of threads=2. */
CG_TEST(sscan_cpu_deterministic_threads) {
    sst_case c = {.B = 3, .L = 70, .D = 37, .N = 9, .G = 1, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1,
                 .dhT = 1, .strided = 1};
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 2));
    sst_set s[2];
    static const char *const cfgs[2] = {"threads=1,segment=8,block_d=5", "threads=2,segment=8,block_d=5"};
    for (int r = 0; r < 2; r++) {
        ss_alloc(&s[r], &c, CG_F32, 1);
        ss_fill(&s[r], &c, 30);
        const cg_exec ex = {.backend = CG_BACKEND_CPU, .config = cfgs[r]};
        CG_CHECK_OK(ctx, ss_fwd(ctx, &s[r], &c, &ex));
        CG_CHECK_OK(ctx, ss_bwd(ctx, &s[r], &c, &ex));
    }
    for (int i = T_Y; i < T_COUNT; i++) {
        size_t bytes = (size_t)s[0].t[i].count * sizeof(float);
        CG_CHECK(memcmp(s[0].t[i].mem, s[1].t[i].mem, bytes) == 0, "%s differs between threads=1 and threads=2",
                 sst_names[i]);
    }
    sst_free(&s[0]);
    sst_free(&s[1]);
    cg_context_free(ctx);
}

/* NaN in x and Inf in delta reach the outputs of their channel; nothing crashes, other
 * batches stay finite. */
CG_TEST(sscan_cpu_nan_inf) {
    sst_case c = {.B = 2, .L = 12, .D = 20, .N = 7, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1, .dhT = 1,
                 .config = "segment=5,block_d=16"};
    CG_TEST_CONTEXT(ctx);
    sst_set s;
    ss_alloc(&s, &c, CG_F32, 1);
    ss_fill(&s, &c, 40);
    int64_t ix[3] = {0, 3, 2}, id[3] = {0, 6, 17};
    cg_tbuf_set(&s.t[T_X], ix, NAN);
    cg_tbuf_set(&s.t[T_DELTA], id, INFINITY);
    const cg_exec ex = {.backend = CG_BACKEND_CPU, .config = c.config};
    CG_CHECK_OK(ctx, ss_fwd(ctx, &s, &c, &ex));
    CG_CHECK_OK(ctx, ss_bwd(ctx, &s, &c, &ex));
    int64_t iy[3] = {0, 3, 2};
    CG_CHECK(isnan(cg_tbuf_get(&s.t[T_Y], iy)), "y at the NaN of x is not NaN");
    int64_t iy2[3] = {0, 6, 17};
    double yinf = cg_tbuf_get(&s.t[T_Y], iy2);
    CG_CHECK(!isfinite(yinf), "y at the Inf of delta is finite (%g)", yinf);
    int nonfinite = 0;
    for (int64_t t = 0; t < c.L; t++)
        for (int64_t d = 0; d < c.D; d++) {
            int64_t i1[3] = {1, t, d};
            nonfinite += !isfinite(cg_tbuf_get(&s.t[T_Y], i1)) || !isfinite(cg_tbuf_get(&s.t[T_DX], i1));
        }
    CG_CHECK(nonfinite == 0, "%d non-finite values in batch 1, which has none in its inputs", nonfinite);
    sst_free(&s);
    cg_context_free(ctx);
}

CG_TEST(sscan_cpu_bad_config) {
    sst_case c = {.B = 1, .L = 4, .D = 3, .N = 2};
    CG_TEST_CONTEXT(ctx);
    sst_set s;
    ss_alloc(&s, &c, CG_F32, 0);
    ss_fill(&s, &c, 50);
    static const char *const bad[] = {"segment=0", "block_d=0", "threads=-1", "segment=-5", "segment=abc",
                                      "block_d=8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const cg_exec ex = {.backend = CG_BACKEND_CPU, .config = bad[i]};
        cg_status st = ss_bwd(ctx, &s, &c, &ex);
        CG_CHECK(st == CG_EINVAL, "config %s: got %s, expected CG_EINVAL", bad[i], cg_status_str(st));
        CG_CHECK(strstr(cg_errmsg(ctx), bad[i]) != NULL, "config %s: message '%s' does not name it", bad[i],
                 cg_errmsg(ctx));
        st = ss_fwd(ctx, &s, &c, &ex);
        CG_CHECK(st == CG_EINVAL, "forward, config %s: got %s, expected CG_EINVAL", bad[i], cg_status_str(st));
    }
    const cg_exec typo = {.backend = CG_BACKEND_CPU, .config = "segmnet=32"};
    cg_status st = ss_fwd(ctx, &s, &c, &typo);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "segmnet") && strstr(cg_errmsg(ctx), "segment"),
             "unknown key: got %s, message '%s'", cg_status_str(st), cg_errmsg(ctx));
    sst_free(&s);
    cg_context_free(ctx);
}

CG_TEST(sscan_cpu_default_from_lua) {
    /* An unpinned call runs generator/cpu/sscan_cpu.lua's default for the running variant,
     * the layout (shape.seq_major) and the direction. */
    CG_TEST_CONTEXT(ctx);
    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    int distinct = 0;
    char first[64] = "";
    for (int strided = 0; strided < 2; strided++) {
        sst_case c = {.B = 1, .L = 300, .D = 600, .N = 16, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1,
                     .dhT = 1, .strided = strided};
        sst_set s;
        ss_alloc(&s, &c, CG_F32, 1);
        ss_fill(&s, &c, 31);
        for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
            if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
            for (int bwd = 0; bwd < 2; bwd++) {
                const cg_shape ks = {.size = sizeof ks,
                                     .dim = {[CG_SYM_B] = c.B, [CG_SYM_L] = c.L, [CG_SYM_D] = c.D, [CG_SYM_N] = c.N,
                                             [CG_SYM_G] = 1}};
                const int ksf = (bwd ? CG_KS_BWD : 0) | (strided ? CG_KS_SEQ_MAJOR : 0);
                cg_devinfo dev;
                cg__cpu_devinfo(&dev, cg__pool_size(cg__ctx_pool(ctx)));
                cg_cfg def;
                CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "sscan_cpu", &ks, ksf, &dev, NULL, &def));
                const cg_exec ex = {.backend = CG_BACKEND_CPU};
                CG_CHECK_OK(ctx, ss_fwd(ctx, &s, &c, &ex));
                if (bwd) CG_CHECK_OK(ctx, ss_bwd(ctx, &s, &c, &ex));
                char want[64];
                if (bwd)
                    snprintf(want, sizeof want, "segment=%s block_d=%s ", cg__cfg_str(&def, "segment", "?"),
                             cg__cfg_str(&def, "block_d", "?"));
                else
                    snprintf(want, sizeof want, "block_d=%s ", cg__cfg_str(&def, "block_d", "?"));
                const char *got = cg_last_dispatch(ctx);
                CG_CHECK(got && strstr(got, want), "isa %s %s strided=%d: ran '%s', Lua default %s",
                         cg__cpu_isa_name((cg_cpu_isa)isa), bwd ? "bwd" : "fwd", strided, got ? got : "(null)", want);
                if (bwd && !first[0]) snprintf(first, sizeof first, "%s", want);
                else if (bwd && strcmp(first, want)) distinct = 1;
            }
        }
        sst_free(&s);
    }
    CG_CHECK(distinct, "the layout reaches the default (%s for both)", first);
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    cg_context_free(ctx);
}

/* ------------------------------------------------------------ bf16 / fp16
 * x, delta, B, C, z, dy in bf16 / fp16 (and y, dx, ddelta, dB, dC, dz written in it),
 * through the kernels' internal entry points (problem views that say so), against the
 * float32 path run on the same rounded inputs: each 16-bit output is the float32 output
 * rounded once, bit for bit, each float32 output (hT, dA, dD, ddelta_bias, dh0) the same
 * bits; and the 16-bit outputs are within the bounds of the float64 reference. */
static const int k_half_slots[] = {T_X, T_DELTA, T_B, T_C, T_Z, T_DY, T_Y, T_DX, T_DDELTA, T_DB, T_DC, T_DZ};

static cg_view *ss_view(cg_sscan_prob *p, int slot) {
    cg_view *const v[T_COUNT] = {&p->x,  &p->delta, &p->A,  &p->Bm,  &p->Cm,     &p->Dv, &p->z,  &p->dbias,
                                 &p->h0, &p->dy,    &p->dhT, &p->y,  &p->hT,     &p->dx, &p->ddelta, &p->dA,
                                 &p->dB, &p->dC,    &p->dD, &p->dz,  &p->ddbias, &p->dh0};
    return v[slot];
}

/* mask: bit i of k_half_slots 16-bit (the others float32) */
static void ss_check_half(const sst_case *c, cg_dtype dt, unsigned mask, uint64_t seed) {
    char what[300];
    ss_describe(c, what, sizeof what);
    snprintf(what + strlen(what), sizeof what - strlen(what), " %s mask=0x%03x", cht_name(dt), mask);
    CG_TEST_CONTEXT(ctx);
    sst_set cpu, g, ref; /* float32 run; the 16-bit run's float32 outputs; float64 reference */
    ss_alloc(&cpu, c, CG_F32, 1);
    ss_alloc(&g, c, CG_F32, 1);
    ss_alloc(&ref, c, CG_F64, 0);
    ss_fill(&cpu, c, seed);
    uint16_t *h[T_COUNT] = {0};
    for (unsigned u = 0; u < sizeof k_half_slots / sizeof k_half_slots[0]; u++) {
        const int i = k_half_slots[u];
        if (!(mask >> u & 1) || !cpu.on[i]) continue;
        h[i] = i <= T_DHT ? cht_round(&cpu.t[i], dt) : cht_out(&cpu.t[i]);
    }
    for (int i = 0; i <= T_DHT; i++) cg_tbuf_copy(&ref.t[i], &cpu.t[i]);
    const cg_exec ref_ex = {.backend = CG_BACKEND_REF}, cpu_ex = {.backend = CG_BACKEND_CPU, .config = c->config};
    CG_CHECK_OK(ctx, ss_fwd(ctx, &ref, c, &ref_ex));
    CG_CHECK_OK(ctx, ss_bwd(ctx, &ref, c, &ref_ex));
    cg_cfg cfg;
    CG_CHECK_OK(ctx, cg__cfg_parse(ctx, c->config ? c->config : "", &cfg));

    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        char desc[340];
        snprintf(desc, sizeof desc, "%s isa=%s", what, cg__cpu_isa_name((cg_cpu_isa)isa));
        CG_CHECK_OK(ctx, ss_fwd(ctx, &cpu, c, &cpu_ex));
        CG_CHECK_OK(ctx, ss_bwd(ctx, &cpu, c, &cpu_ex));
        cg_sscan_fwd_args fa = sst_fwd_args(&cpu, c);
        cg_sscan_bwd_args ba = sst_bwd_args(&cpu, c);
        cg_sscan_prob pf, pb;
        CG_CHECK_OK(ctx, cg__sscan_fwd_prob(ctx, &fa, &pf));
        CG_CHECK_OK(ctx, cg__sscan_bwd_prob(ctx, &ba, &pb));
        cg_sscan_prob *ps[2] = {&pf, &pb};
        for (int u = 0; u < 2; u++)
            for (int i = 0; i < T_COUNT; i++) {
                cg_view *v = ss_view(ps[u], i);
                if (!v->p) continue;
                if (h[i]) v->p = h[i], v->dt = dt;
                else if (i >= T_Y) v->p = g.t[i].mem; /* float32 outputs of this run */
            }
        for (int i = T_Y; i < T_COUNT; i++) /* no stale results */
            if (g.t[i].mem) memset(g.t[i].mem, 0xff, (size_t)g.t[i].count * sizeof(float));
        CG_CHECK_OK(ctx, cg__sscan_cpu_fwd(ctx, &pf, &cfg, NULL));
        CG_CHECK_OK(ctx, cg__sscan_cpu_bwd(ctx, &pb, &cfg, NULL));
        for (int i = T_Y; i < T_COUNT; i++) {
            if (!cpu.on[i]) continue;
            if (!h[i]) {
                cht_check_same(&g.t[i], &cpu.t[i], sst_names[i], desc);
                continue;
            }
            cht_check_rounded(h[i], &cpu.t[i], dt, sst_names[i], desc);
            if (isa == 0) cht_check_ref(h[i], &cpu.t[i], &ref.t[i], dt, sst_names[i], desc);
        }
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    for (int i = 0; i < T_COUNT; i++) free(h[i]);
    sst_free(&cpu);
    sst_free(&g);
    sst_free(&ref);
    cg_context_free(ctx);
}

CG_TEST(sscan_cpu_half_odd_shapes) {
    sst_case c1 = {.B = 2, .L = 1, .D = 5, .N = 7};
    sst_case c2 = {.B = 2, .L = 37, .D = 19, .N = 16, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1, .dhT = 1,
                  .config = "segment=8,block_d=8"};
    sst_case c3 = {.B = 2, .L = 29, .D = 12, .N = 33, .G = 3, .z = 1, .h0 = 1, .config = "segment=5,block_d=3"};
    const cg_dtype dts[] = {CG_BF16, CG_F16};
    for (int d = 0; d < 2; d++) {
        ss_check_half(&c1, dts[d], 0xfff, 11);
        ss_check_half(&c2, dts[d], 0xfff, 12);
        ss_check_half(&c3, dts[d], 0xfff, 13);
    }
}

CG_TEST(sscan_cpu_half_strided_and_mixed) {
    /* mamba's [B, D, L] memory for x / delta / z / dy and [B, G, N, L] for B / C */
    sst_case c = {.B = 2, .L = 45, .D = 21, .N = 16, .G = 3, .z = 1, .Dv = 1, .bias = 1, .softplus = 1, .h0 = 1,
                 .dhT = 1, .strided = 1, .config = "segment=10"};
    ss_check_half(&c, CG_BF16, 0xfff, 21);
    ss_check_half(&c, CG_F16, 0xfff, 22);
    /* bf16 x, z, dy and their gradients with float32 delta, B, C (a peer's mix) */
    sst_case u = {.B = 2, .L = 37, .D = 19, .N = 7, .z = 1, .softplus = 1, .config = "segment=8,block_d=8"};
    ss_check_half(&u, CG_BF16, 0x1 | 0x10 | 0x20 | 0x40 | 0x80 | 0x800, 23);
    ss_check_half(&u, CG_F16, 0x2 | 0x4 | 0x8 | 0x100 | 0x200 | 0x400, 24);
}
