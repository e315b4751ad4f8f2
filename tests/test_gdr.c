/* test_gdr.c -- the gated delta rule (#35): the cpu backend against the float64 reference
 * on the test matrix of MATH_GDN.md 4.3 (T = 1, T not a multiple of a chunk, dk / dv not
 * powers of two, grouped heads, both layouts, a varlen batch of 3 sequences with a
 * 1-token one, h0 / hT / dhT on and off, the L2 norm on and off, beta near 0, 1 and 2, a
 * given scale, long memory; d = 128, a pinned chunk), in float32, bfloat16 and float16
 * storage: every output within the op table's tolerance for its dtype, and for 16-bit
 * inputs within fla's own (relative RMS error: 5e-3 on o and hT, 8e-3 on dq, dk, dv and
 * dh0, 2e-2 on dbeta and dg); bitwise equal results for 1 and 3 threads; bad input
 * refused with a message naming the argument. */
#include "gdr_testlib.h"
#include "cli_testlib.h"

#include <math.h>
#include <string.h>


static const gdr_case k_cases[] = {
    GDR_CASE_T1,
    GDR_CASE_T37_HEAD,
    {"t37_h3_dk7_dv5_bare", 1, 37, 1, 3, 7, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}},
    {"beta_near0", 1, 50, 1, 2, 16, 12, 0, 1, 1, 0, 0.01, 0, 0, 0, 0, {0}},
    {"beta_near1", 1, 50, 1, 2, 16, 12, 1, 1, 1, 0.99, 1, 0, 0, 0, 0, {0}},
    {"beta_near2", 1, 50, 2, 2, 16, 12, 0, 1, 1, 1.9, 1.999, 0, 0, 0, 0, {0}},
    {"scale_l2off", 2, 20, 1, 1, 32, 16, 0, 0, 1, 0, 0, 0, 0, 0.3, 0, {0}},
    GDR_CASE_VARLEN,
    {"varlen_head_bare", 1, 108, 1, 2, 9, 6, 1, 0, 0, 0, 0, 0, 0, 0, 3, {0, 70, 71, 108}},
    {"long_memory_t8192", 1, 8192, 1, 2, 24, 20, 0, 1, 1, 0, 0, -2e-3, 0, 0, 0, {0}},
};

/* More of the chunked path (the cpu backend's): T across a 64-token chunk, d = 128, and a
 * pinned chunk of 16 with a scale, head-major. */
static const struct pinned_case {
    gdr_case c;
    const char *pins; /* the config (NULL: the default) */
} k_pinned[] = {
    {{"t1_g2h6_dk48_dv40", 2, 1, 2, 6, 48, 40, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}}, NULL},
    {{"t65_head", 1, 65, 2, 6, 48, 40, 1, 1, 1, 0, 0, 0, 0, 0, 0, {0}}, NULL},
    {{"t130_dk7_dv5_bare", 1, 130, 1, 3, 7, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}}, NULL},
    {{"t100_beta_near2", 1, 100, 2, 4, 32, 24, 0, 1, 1, 1.9, 1.999, 0, 0, 0, 0, {0}}, NULL},
    {{"t90_scale_chunk16_head", 2, 90, 1, 2, 24, 40, 1, 0, 1, 0, 0, 0, 0, 0.3, 0, {0}}, "chunk=16"},
    {{"t150_d128", 1, 150, 1, 2, 128, 128, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}}, NULL},
};

static cg_context *new_ctx(int threads) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK || cg_context_set_threads(ctx, threads) != CG_OK) abort();
    return ctx;
}

/* Case c of op (beta's and g's ranges drawn from seed ^ 0x9d7), and its run on backend be
 * (threads: the context's). */
static void gnew(dtt_prob *p, cg_tbuf *cu, cg_op op, const gdr_case *c, cg_dtype half, cg_dtype other, uint64_t seed) {
    gdr_case_new(p, cu, op, c, half, other, seed, 0x9d7);
}
static cg_status grun(cg_context *ctx, dtt_prob *p, const cg_tbuf *cu, const gdr_case *c, cg_backend be) {
    return gdr_case_run(ctx, p, cu, c, be, NULL);
}

/* Case c of op in storage dtype half on the cpu backend (config pins) against the reference
 * on the same (rounded) inputs: every output within its tolerance for its dtype, and within
 * fla's relative RMS error for 16-bit inputs; then the same call with another thread
 * count, bit for bit. */
static void check_case(const gdr_case *c, const char *pins, cg_op op, cg_dtype half, uint64_t seed) {
    cg_context *ctx = new_ctx(1), *ctx3 = new_ctx(3);
    dtt_prob p, r, p3;
    cg_tbuf cu;
    gnew(&p, &cu, op, c, half, CG_F32, seed);
    cg_tbuf_free(&cu);
    gnew(&p3, &cu, op, c, half, CG_F32, seed);
    cg_tbuf_free(&cu);
    gnew(&r, &cu, op, c, CG_F64, CG_F64, seed); /* (its offsets are the ones the calls take) */
    dtt_copy_inputs(&r, &p); /* the rounded inputs */
    const char *dn = cg_dtype_name(half);
    cg_status st = gdr_case_run(ctx, &p, &cu, c, CG_BACKEND_CPU, pins);
    CG_CHECK(st == CG_OK, "%s %s %s: cpu: %s", p.d->name, c->name, dn, cg_errmsg(ctx));
    st = grun(ctx, &r, &cu, c, CG_BACKEND_REF);
    CG_CHECK(st == CG_OK, "%s %s %s: ref: %s", p.d->name, c->name, dn, cg_errmsg(ctx));
    char what[128];
    snprintf(what, sizeof what, "%s %s %s", p.d->name, c->name, dn);
    dtt_check_outputs(&p, &r, what);
    gdr_check_fla_rms(&p, &r, what);
    st = gdr_case_run(ctx3, &p3, &cu, c, CG_BACKEND_CPU, pins);
    CG_CHECK(st == CG_OK, "%s %s %s: cpu, 3 threads: %s", p.d->name, c->name, dn, cg_errmsg(ctx3));
    const char *diff = dtt_first_diff(&p, &p3);
    CG_CHECK(!diff, "%s %s %s: %s differs between 1 and 3 threads", p.d->name, c->name, dn, diff);
    dtt_free(&p), dtt_free(&p3), dtt_free(&r);
    cg_tbuf_free(&cu);
    cg_context_free(ctx);
    cg_context_free(ctx3);
}

static void check_all(cg_dtype half) {
    for (int op = CG_OP_GDR_FWD; op <= CG_OP_GDR_BWD; op++) {
        for (size_t k = 0; k < sizeof k_cases / sizeof k_cases[0]; k++)
            check_case(&k_cases[k], NULL, (cg_op)op, half, 1000 + (uint64_t)k * 7 + (uint64_t)op);
        for (size_t k = 0; k < sizeof k_pinned / sizeof k_pinned[0]; k++)
            check_case(&k_pinned[k].c, k_pinned[k].pins, (cg_op)op, half, 77 + (uint64_t)k * 13 + (uint64_t)op);
    }
}

CG_TEST(gdr_cpu_f32_matrix) { check_all(CG_F32); }
CG_TEST(gdr_cpu_bf16_matrix) { check_all(CG_BF16); }
CG_TEST(gdr_cpu_f16_matrix) { check_all(CG_F16); }

/* p's tensor `tname` replaced by one of dtype dt and shape (nd, shape): the cpu call is
 * refused with CG_EINVAL and a message containing msg; then the tensor is restored. */
static void refused_with(cg_context *ctx, dtt_prob *p, const cg_tbuf *cu, const gdr_case *c, const char *tname,
                         cg_dtype dt, int nd, const int64_t *shape, const char *msg) {
    const int i = dtt_idx(p, tname);
    const cg_tbuf keep = p->t[i];
    p->t[i] = cg_tbuf_new(dt, nd, shape);
    CG_CHECK_REFUSED(ctx, grun(ctx, p, cu, c, CG_BACKEND_CPU), CG_EINVAL, msg, p->d->name);
    cg_tbuf_free(&p->t[i]);
    p->t[i] = keep;
}

/* Bad arguments: a status and a message naming the argument and what was expected. */
CG_TEST(gdr_bad_inputs) {
    cg_context *ctx = new_ctx(1);
    for (int op = CG_OP_GDR_FWD; op <= CG_OP_GDR_BWD; op++) {
        const gdr_case c = {"bad", 2, 5, 2, 4, 6, 5, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}};
        dtt_prob p;
        cg_tbuf cu;
        gnew(&p, &cu, (cg_op)op, &c, CG_F32, CG_F32, 5);
        const char *name = p.d->name;
        CG_CHECK_OK(ctx, grun(ctx, &p, &cu, &c, CG_BACKEND_CPU));
        /* H % G != 0: v with 3 heads for G = 2 */
        refused_with(ctx, &p, &cu, &c, "v", CG_F32, 4, (const int64_t[]){2, 5, 3, 5},
                     "H = 3 is not a multiple of G = 2 (expected H % G == 0)");
        /* g of the wrong shape; g stays float32 */
        refused_with(ctx, &p, &cu, &c, "g", CG_F32, 3, (const int64_t[]){2, 5, 3},
                     "g: shape (2, 5, 3) but expected (2, 5, 4) [B, T, H]");
        refused_with(ctx, &p, &cu, &c, "g", CG_BF16, 3, (const int64_t[]){2, 5, 4},
                     "g: dtype CG_BF16 but expected CG_F32 (g stays float32");
        /* beta: float64 in a float32 call */
        refused_with(ctx, &p, &cu, &c, "beta", CG_F64, 3, (const int64_t[]){2, 5, 4},
                     "beta: dtype CG_F64 but expected CG_F32");
        /* scale: negative, NaN, infinite */
        const double bad[] = {-1, NAN, INFINITY};
        for (int k = 0; k < 3; k++) {
            gdr_case cs = c;
            cs.scale = bad[k];
            CG_CHECK_REFUSED(ctx, grun(ctx, &p, &cu, &cs, CG_BACKEND_CPU), CG_EINVAL,
                             "but expected a finite value >= 0 (0: dk^-1/2)", name);
            CG_CHECK(!strncmp(cg_errmsg(ctx), "scale: ", 7), "%s: message does not start with scale: %s", name,
                     cg_errmsg(ctx));
        }
        dtt_free(&p);
    }
    /* beta in another 16-bit dtype than q's */
    const gdr_case c = {"bad16", 1, 3, 1, 1, 4, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, {0}};
    dtt_prob p;
    cg_tbuf cu;
    gnew(&p, &cu, CG_OP_GDR_FWD, &c, CG_BF16, CG_F32, 9);
    refused_with(ctx, &p, &cu, &c, "beta", CG_F16, 3, (const int64_t[]){1, 3, 1},
                 "beta: dtype CG_F16 but expected CG_BF16 like q");
    dtt_free(&p);
    cg_context_free(ctx);
}

/* The resolved scale: 0 is dk^-1/2 (the output scales linearly in it: o(2 s) = 2 o(s)). */
CG_TEST(gdr_scale_default) {
    cg_context *ctx = new_ctx(1);
    const gdr_case c0 = {"s0", 1, 4, 1, 1, 9, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}};
    gdr_case c1 = c0, c2 = c0;
    c1.scale = 1.0 / 3, c2.scale = 2.0 / 3;
    dtt_prob p0, p1, p2;
    cg_tbuf cu;
    gnew(&p0, &cu, CG_OP_GDR_FWD, &c0, CG_F64, CG_F64, 3);
    gnew(&p1, &cu, CG_OP_GDR_FWD, &c1, CG_F64, CG_F64, 3);
    gnew(&p2, &cu, CG_OP_GDR_FWD, &c2, CG_F64, CG_F64, 3);
    CG_CHECK_OK(ctx, grun(ctx, &p0, &cu, &c0, CG_BACKEND_REF));
    CG_CHECK_OK(ctx, grun(ctx, &p1, &cu, &c1, CG_BACKEND_REF));
    CG_CHECK_OK(ctx, grun(ctx, &p2, &cu, &c2, CG_BACKEND_REF));
    const int io = dtt_idx(&p0, "o");
    const double *o0 = p0.t[io].mem, *o1 = p1.t[io].mem, *o2 = p2.t[io].mem;
    double e01 = 0, e12 = 0;
    for (int64_t i = 0; i < p0.t[io].count; i++) e01 = fmax(e01, fabs(o0[i] - o1[i])), e12 = fmax(e12, fabs(2 * o1[i] - o2[i]));
    CG_CHECK(e01 <= 1e-15 && e12 <= 1e-14, "scale 0 vs dk^-1/2: %.3g; o(2s) - 2 o(s): %.3g", e01, e12);
    dtt_free(&p0), dtt_free(&p1), dtt_free(&p2);
    cg_context_free(ctx);
}

/* Tuning a gdr shape on the cpu: both directions tuned through generator/cpu/gdr_cpu.lua
 * (cg_kernel_list names gdr_cpu), the stored config one of its space's (chunk and threads)
 * and the one a call then looks up. */
CG_TEST(gdr_tune_cpu) {
    char dir[4096];
    if (mk_tmpdir(dir, sizeof dir)) return;
    setenv("CHUNKGEN_TUNE_FAKE_TIMING", "1", 1);
    cg_context *ctx = new_ctx(1);
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, dir));
    cg_shape s = {.size = sizeof(cg_shape)};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "gdr_fwd:B=1,T=40,G=1,H=2,dk=8,dv=8", &s));
    const char *const *names;
    int n = 0, space = 0;
    CG_CHECK_OK(ctx, cg_kernel_list(ctx, &names, &n));
    for (int i = 0; i < n; i++) space |= !strcmp(names[i], "gdr_cpu");
    cg_tune_options o = CG_TUNE_OPTIONS_INIT;
    o.backend = CG_BACKEND_CPU, o.max_candidates = 2, o.directions = 3;
    cg_tune_summary sum = CG_TUNE_SUMMARY_INIT;
    CG_CHECK_OK(ctx, cg_tune(ctx, &s, 1, &o, &sum));
    /* T = 40: chunks 32 and 64 (128 covers T twice over), plus the default: every candidate
     * verified against float64 and timed, none rejected */
    CG_CHECK(space && sum.keys == 2 && sum.failed == 0 && sum.tuned == 2 && sum.candidates >= 4 && !sum.rejected,
             "space %d: %d keys, %d tuned, %d unsupported, %d failed, %d candidates, %d rejected", space, sum.keys,
             sum.tuned, sum.unsupported, sum.failed, sum.candidates, sum.rejected);
    cg_tuned_config tc = {.size = sizeof tc};
    CG_CHECK_OK(ctx, cg_config_lookup(ctx, CG_BACKEND_CPU, &s, &tc));
    CG_CHECK(!strcmp(tc.source, "exact") && (!tc.config[0] || strstr(tc.config, "chunk=")), "lookup: %s '%s'",
             tc.source, tc.config); /* "": the default measured best */
    unsetenv("CHUNKGEN_TUNE_FAKE_TIMING");
    cg_context_free(ctx);
    rm_tree(dir);
}

/* The real argument seen from outside (cg_op_describe, cg_op_args_real), as the int options
 * are: a binding or a CLI sets scale without naming the op. */
CG_TEST(gdr_real_argument_public) {
    for (int op = 0; op < CG_OP_COUNT; op++) {
        cg_op_info in = {.size = sizeof in};
        CG_CHECK_OK(NULL, cg_op_describe(NULL, (cg_op)op, &in));
        const int gdr = op == CG_OP_GDR_FWD || op == CG_OP_GDR_BWD || op == CG_OP_GDR_STEP;
        CG_CHECK(in.nreals == gdr && (!gdr || !strcmp(in.reals[0], "scale")), "%s: %d reals", in.name, in.nreals);
    }
    cg_gdr_fwd_args a = CG_GDR_FWD_ARGS_INIT;
    cg_gdr_bwd_args b = CG_GDR_BWD_ARGS_INIT;
    CG_CHECK(cg_op_args_real(CG_OP_GDR_FWD, &a, 0) == &a.scale && cg_op_args_real(CG_OP_GDR_BWD, &b, 0) == &b.scale &&
                 !cg_op_args_real(CG_OP_GDR_FWD, &a, 1) && !cg_op_args_real(CG_OP_SSD_FWD, &a, 0) &&
                 !cg_op_args_real((cg_op)CG_OP_COUNT, &a, 0),
             "cg_op_args_real");
}

/* Backend auto: host tensors run on the cpu (no generated kernel needed); emulate runs the
 * generated kernels (tests/test_gdr_gen.c checks them against the reference). */
CG_TEST(gdr_auto_runs_on_cpu) {
    cg_context *ctx = new_ctx(1);
    const gdr_case c = {"auto", 1, 9, 1, 2, 4, 3, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}};
    for (int op = CG_OP_GDR_FWD; op <= CG_OP_GDR_BWD; op++) {
        dtt_prob p;
        cg_tbuf cu;
        gnew(&p, &cu, (cg_op)op, &c, CG_F32, CG_F32, 21);
        CG_CHECK_OK(ctx, grun(ctx, &p, &cu, &c, CG_BACKEND_AUTO));
        CG_CHECK(strstr(cg_last_dispatch(ctx), "backend=cpu (auto: host pointers)") != NULL, "%s", cg_last_dispatch(ctx));
        CG_CHECK_OK(ctx, grun(ctx, &p, &cu, &c, CG_BACKEND_EMULATE)); /* the generated kernels: test_gdr_gen.c */
        dtt_free(&p);
    }
    cg_context_free(ctx);
}
