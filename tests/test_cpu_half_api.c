/* test_cpu_half_api.c -- the CPU backend with bf16 / fp16 tensors through the public API
 * (validation, dispatch, the backend's dtype mask), every op, on the odd-shape set:
 * T = 1 and 37, dk 7 / 48 / 130, dv 40, G = 2 < H = 4, both layouts (SSD); L = 1 and 37,
 * N 7 / 16 / 33, grouped and ungrouped B / C (selective scan). Each 16-bit output must
 * be the CPU's float32 output on the same inputs rounded once (bit for bit; so its error
 * is the float32 computation's rounded to the dtype), each float32 output (states,
 * dlog_alpha, dA, ...) the same bits, and the 16-bit outputs within the bounds of
 * the float64 reference on the same rounded inputs (bf16 1e-2, fp16 2e-3). */
#include "cpu_half_testlib.h"
#include "test_dtype_lib.h"

static void check_op(cg_context *ctx, cg_op op, const int64_t dims[CG_SYM_COUNT], int grouped, int hm, cg_dtype H,
                     uint64_t seed) {
    const cg_op_desc *d = cg__op_desc(op);
    char desc[200];
    snprintf(desc, sizeof desc, "%s %s T/L=%lld dk=%lld dv=%lld N=%lld grouped=%d head-major=%d", d->name,
             cht_name(H), (long long)(dims[CG_SYM_T] ? dims[CG_SYM_T] : dims[CG_SYM_L]), (long long)dims[CG_SYM_DK],
             (long long)dims[CG_SYM_DV], (long long)dims[CG_SYM_N], grouped, hm);
    dtt_prob p16, p32, r;
    dtt_new(&p16, op, dims, grouped, hm, H, CG_F32, 0);
    dtt_new(&p32, op, dims, grouped, hm, CG_F32, CG_F32, 0);
    dtt_new(&r, op, dims, grouped, hm, CG_F64, CG_F64, 0);
    dtt_fill(&p16, seed);
    dtt_copy_inputs(&p32, &p16);
    dtt_copy_inputs(&r, &p16);
    CG_CHECK_OK(ctx, dtt_run(ctx, &p16, CG_BACKEND_CPU));
    CG_CHECK_OK(ctx, dtt_run(ctx, &p32, CG_BACKEND_CPU));
    CG_CHECK_OK(ctx, dtt_run(ctx, &r, CG_BACKEND_REF));
    for (int i = 0; i < d->nt; i++) {
        const cg_tbuf *got = &p16.t[i];
        if (d->t[i].role != CG_TD_OUT || !got->t.data) continue;
        char what[240];
        snprintf(what, sizeof what, "%s.%s", d->name, d->t[i].name);
        if (got->t.dtype == CG_F32) {
            cht_check_same(got, &p32.t[i], what, desc);
            continue;
        }
        CG_CHECK(got->t.dtype == H, "%s: dtype %d, expected %s", what, (int)got->t.dtype, cht_name(H));
        cg_tbuf want = cg_tbuf_new(H, got->t.ndim, got->t.shape);
        cg_tbuf_copy(&want, &p32.t[i]); /* rounds once */
        CG_CHECK(!memcmp(want.mem, got->mem, (size_t)want.count * sizeof(uint16_t)),
                 "%s: not the float32 result rounded once [%s]", what, desc);
        cg_tbuf_free(&want);
        const double err = cg_rel_err(got, &r.t[i]), tol = H == CG_BF16 ? 1e-2 : 2e-3;
        if (getenv("CHT_VERBOSE")) fprintf(stderr, "    %-24s %s rel err %.3g\n", what, cht_name(H), err);
        CG_CHECK(err <= tol, "%s rel err %.3g against the float64 reference > %.0e [%s]", what, err, tol, desc);
    }
    dtt_free(&p16);
    dtt_free(&p32);
    dtt_free(&r);
}

CG_TEST(cpu_half_api_ssd) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return;
    static const int64_t shapes[][2] = {{1, 7}, {37, 7}, {37, 48}, {37, 130}, {1, 130}};
    uint64_t seed = 100;
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int hm = 0; hm < 2; hm++)
            for (int h = 0; h < 2; h++)
                for (int op = CG_OP_SSD_FWD; op <= CG_OP_SSD_BWD; op++) {
                    int64_t dims[CG_SYM_COUNT] = {0};
                    dims[CG_SYM_B] = 2, dims[CG_SYM_T] = shapes[s][0], dims[CG_SYM_G] = 2, dims[CG_SYM_H] = 4;
                    dims[CG_SYM_DK] = shapes[s][1], dims[CG_SYM_DV] = 40;
                    check_op(ctx, (cg_op)op, dims, 1, hm, h ? CG_F16 : CG_BF16, seed++);
                }
    cg_context_free(ctx);
}

CG_TEST(cpu_half_api_sscan) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return;
    static const int64_t shapes[][2] = {{1, 7}, {37, 16}, {37, 33}};
    uint64_t seed = 200;
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int grouped = 0; grouped < 2; grouped++)
            for (int h = 0; h < 2; h++)
                for (int op = CG_OP_SSCAN_FWD; op <= CG_OP_SSCAN_BWD; op++) {
                    int64_t dims[CG_SYM_COUNT] = {0};
                    dims[CG_SYM_B] = 2, dims[CG_SYM_L] = shapes[s][0], dims[CG_SYM_D] = 10;
                    dims[CG_SYM_N] = shapes[s][1], dims[CG_SYM_G] = 2;
                    check_op(ctx, (cg_op)op, dims, grouped, 0, h ? CG_F16 : CG_BF16, seed++);
                }
    cg_context_free(ctx);
}

/* The kernels' entry points refuse what they do not take, naming the tensor: a 16-bit
 * state, log_alpha or A (the validation never builds one; a caller of the internal
 * entry points could), and float64 math. */
CG_TEST(cpu_half_refuses_float32_only_tensors) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return;
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_B] = 1, dims[CG_SYM_T] = 5, dims[CG_SYM_G] = 1, dims[CG_SYM_H] = 2, dims[CG_SYM_DK] = 7, dims[CG_SYM_DV] = 6;
    dims[CG_SYM_L] = 5, dims[CG_SYM_D] = 4, dims[CG_SYM_N] = 3;
    dtt_prob s, x;
    dtt_new(&s, CG_OP_SSD_FWD, dims, 1, 0, CG_BF16, CG_F32, 0);
    dtt_new(&x, CG_OP_SSCAN_BWD, dims, 1, 0, CG_F16, CG_F32, 0);
    cg_ssd_prob ps;
    cg_sscan_prob px;
    CG_CHECK_OK(ctx, cg__op_validate(ctx, s.d, dtt_args(&s), &ps));
    CG_CHECK_OK(ctx, cg__op_validate(ctx, x.d, dtt_args(&x), &px));
    CG_CHECK(ps.q.dt == CG_BF16 && ps.la.dt == CG_F32 && px.x.dt == CG_F16 && px.A.dt == CG_F32, "the views' dtypes");
    CG_CHECK_OK(ctx, cg__ssd_cpu_fwd(ctx, &ps, NULL, NULL));
    CG_CHECK_OK(ctx, cg__sscan_cpu_bwd(ctx, &px, NULL, NULL));
    cg_ssd_prob bad = ps;
    bad.h0.dt = CG_BF16;
    CG_CHECK_REFUSED(ctx, cg__ssd_cpu_fwd(ctx, &bad, NULL, NULL), CG_EUNSUPPORTED, "h0: CG_BF16", "bf16 h0");
    bad = ps;
    bad.la.dt = CG_F16;
    CG_CHECK_REFUSED(ctx, cg__ssd_cpu_fwd(ctx, &bad, NULL, NULL), CG_EUNSUPPORTED, "log_alpha: CG_F16", "f16 log_alpha");
    bad = ps;
    bad.dtype = CG_F64;
    CG_CHECK_REFUSED(ctx, cg__ssd_cpu_fwd(ctx, &bad, NULL, NULL), CG_EUNSUPPORTED, "CG_F64", "float64 math");
    cg_sscan_prob badx = px;
    badx.A.dt = CG_BF16;
    CG_CHECK_REFUSED(ctx, cg__sscan_cpu_bwd(ctx, &badx, NULL, NULL), CG_EUNSUPPORTED, "A: CG_BF16", "bf16 A");
    badx = px;
    badx.dA.dt = CG_F16;
    CG_CHECK_REFUSED(ctx, cg__sscan_cpu_bwd(ctx, &badx, NULL, NULL), CG_EUNSUPPORTED, "dA: CG_F16", "f16 dA");
    dtt_free(&s);
    dtt_free(&x);
    cg_context_free(ctx);
}
