/* test_op_flops.c -- cg_op_flops, the op table's model of each op's work (the bench's
 * GFLOP/s and roofline fractions): the counts against the formulas of docs/bench.md
 * written out here, the model's parameter taken from a config text, and the refusals
 * that name the argument. Public API only. */
#include "cg_test.h"

static cg_shape parse(cg_context *ctx, const char *text) {
    cg_shape s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, text, &s));
    return s;
}

static double flops_of(cg_context *ctx, const char *text, const char *config, char *used, size_t cap) {
    cg_shape s = parse(ctx, text);
    double f = -1;
    CG_CHECK_OK(ctx, cg_op_flops(ctx, &s, config, &f, used, cap));
    return f;
}

/* docs/bench.md: per (b, h) and chunk of c tokens, forward c(c+1)(dk+dv) + 4 c dk dv,
 * backward c(c+1)(3dk+2dv) + 10 c dk dv + 4 c dk; the chunks of C tokens and a last
 * partial one. */
static double ssd_formula(double B, double T, double H, double dk, double dv, double C, int bwd) {
    double tot = 0;
    for (double t0 = 0; t0 < T; t0 += C) {
        double c = T - t0 < C ? T - t0 : C;
        tot += bwd ? c * (c + 1) * (3 * dk + 2 * dv) + 10 * c * dk * dv + 4 * c * dk
                   : c * (c + 1) * (dk + dv) + 4 * c * dk * dv;
    }
    return tot * B * H;
}

CG_TEST(op_flops_models) {
    CG_TEST_CONTEXT(ctx);
    char used[32];
    /* SSD: the model's default chunk (64), then chunks given by the config */
    double f = flops_of(ctx, "ssd_fwd:B=2,T=96,G=1,H=3,dk=8,dv=4", NULL, used, sizeof used);
    CG_CHECK(f == ssd_formula(2, 96, 3, 8, 4, 64, 0), "ssd_fwd default chunk: %.17g", f);
    CG_CHECK(!strcmp(used, "chunk=64"), "used: '%s'", used);
    f = flops_of(ctx, "ssd_bwd:B=2,T=96,G=1,H=3,dk=8,dv=4", "chunk=32,threads=2", used, sizeof used);
    CG_CHECK(f == ssd_formula(2, 96, 3, 8, 4, 32, 1), "ssd_bwd chunk 32: %.17g", f);
    CG_CHECK(!strcmp(used, "chunk=32"), "used: '%s'", used);
    f = flops_of(ctx, "ssd_fwd:B=1,T=100,G=2,H=4,dk=16,dv=8,layout=head,dtype=bf16", "threads=2 chunk=48", NULL, 0);
    CG_CHECK(f == ssd_formula(1, 100, 4, 16, 8, 48, 0), "ssd_fwd chunk 48 (spaces): %.17g", f);
    /* linear in the batch, independent of the dtype and the layout */
    CG_CHECK(flops_of(ctx, "ssd_fwd:B=4,T=96,G=1,H=3,dk=8,dv=4,dtype=f16", NULL, NULL, 0) ==
                 2 * flops_of(ctx, "ssd_fwd:B=2,T=96,G=1,H=3,dk=8,dv=4", NULL, NULL, 0),
             "ssd_fwd not linear in B");
    /* selective scan: per (b, l, d, n) 7 forward, 24 backward; per (b, l, d) 11 and 20; no parameter */
    f = flops_of(ctx, "sscan_fwd:B=2,L=70,D=16,N=4", "chunk=32", used, sizeof used);
    CG_CHECK(f == 2.0 * 70 * 16 * (7 * 4 + 11), "sscan_fwd: %.17g", f);
    CG_CHECK(!strcmp(used, ""), "sscan used: '%s'", used);
    f = flops_of(ctx, "sscan_bwd:B=2,L=70,G=2,D=16,N=4", NULL, used, sizeof used);
    CG_CHECK(f == 2.0 * 70 * 16 * (24 * 4 + 20), "sscan_bwd: %.17g", f);
    /* every op has a model that counts some work */
    for (int op = 0; op < cg_op_count(); op++) {
        cg_op_info in;
        memset(&in, 0, sizeof in);
        in.size = sizeof in;
        CG_CHECK_OK(ctx, cg_op_describe(ctx, (cg_op)op, &in));
        char text[CG_SHAPE_TEXT_MAX];
        int n = snprintf(text, sizeof text, "%s:", in.name);
        for (int k = 0; k < in.nsyms; k++)
            if (!(in.groupable && in.syms[k] == CG_SYM_G))
                n += snprintf(text + n, sizeof text - n, "%s%s=%d", k ? "," : "", cg_sym_name(in.syms[k]), 4);
        f = flops_of(ctx, text, NULL, NULL, 0);
        CG_CHECK(f > 0 && isfinite(f), "%s: %g flops", text, f);
    }
    cg_context_free(ctx);
}

CG_TEST(op_flops_refusals) {
    CG_TEST_CONTEXT(ctx);
    cg_shape s = parse(ctx, "ssd_fwd:B=2,T=96,G=1,H=3,dk=8,dv=4");
    double f = 0;
    char used[32];
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, NULL, NULL, &f, NULL, 0), CG_EINVAL, "shape", "NULL shape");
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &s, NULL, NULL, NULL, 0), CG_EINVAL, "flops", "NULL flops");
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &s, "chunk=0", &f, NULL, 0), CG_EINVAL, "config", "chunk 0");
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &s, "chunk=abc", &f, NULL, 0), CG_EINVAL, "chunk=N", "chunk abc");
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &s, "threads=2,chunk=-8", &f, NULL, 0), CG_EINVAL, "config", "chunk -8");
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &s, NULL, &f, used, 4), CG_EINVAL, "used", "used too small");
    cg_shape bad = s;
    bad.dim[CG_SYM_H] = 0;
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &bad, NULL, &f, NULL, 0), CG_EINVAL, "shape", "H = 0");
    bad = s;
    bad.op = (cg_op)cg_op_count();
    CG_CHECK_REFUSED(ctx, cg_op_flops(ctx, &bad, NULL, &f, NULL, 0), CG_EINVAL, "shape", "op out of range");
    /* a NULL context: refused all the same */
    CG_CHECK(cg_op_flops(NULL, NULL, NULL, &f, NULL, 0) == CG_EINVAL, "NULL ctx, NULL shape accepted");
    /* a key the op's model does not read is ignored */
    CG_CHECK_OK(ctx, cg_op_flops(ctx, &s, "block_dv=abc", &f, NULL, 0));
    cg_context_free(ctx);
}
