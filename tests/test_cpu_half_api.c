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

#include <stddef.h>

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

/* Every shape of the set x variant (SSD: layout; sscan: grouped) x dtype x direction. */
static void sweep(int ssd) {
    CG_TEST_CONTEXT(ctx);
    static const int64_t ssd_shapes[][2] = {{1, 7}, {37, 7}, {37, 48}, {37, 130}, {1, 130}}; /* T, dk */
    static const int64_t ss_shapes[][2] = {{1, 7}, {37, 16}, {37, 33}};                       /* L, N */
    const int n = ssd ? 5 : 3;
    const cg_op first = ssd ? CG_OP_SSD_FWD : CG_OP_SSCAN_FWD;
    uint64_t seed = ssd ? 100 : 200;
    for (int s = 0; s < n; s++)
        for (int var = 0; var < 2; var++)
            for (int h = 0; h < 2; h++)
                for (int bwd = 0; bwd < 2; bwd++) {
                    int64_t dims[CG_SYM_COUNT] = {0};
                    dims[CG_SYM_B] = 2, dims[CG_SYM_G] = 2;
                    if (ssd) {
                        dims[CG_SYM_T] = ssd_shapes[s][0], dims[CG_SYM_H] = 4;
                        dims[CG_SYM_DK] = ssd_shapes[s][1], dims[CG_SYM_DV] = 40;
                    } else {
                        dims[CG_SYM_L] = ss_shapes[s][0], dims[CG_SYM_D] = 10, dims[CG_SYM_N] = ss_shapes[s][1];
                    }
                    check_op(ctx, (cg_op)(first + bwd), dims, ssd ? 1 : var, ssd ? var : 0, h ? CG_F16 : CG_BF16,
                             seed++);
                }
    cg_context_free(ctx);
}

CG_TEST(cpu_half_api_ssd) { sweep(1); }

CG_TEST(cpu_half_api_sscan) { sweep(0); }

/* The kernels' entry points refuse what they do not take, naming the tensor: a 16-bit
 * state, log_alpha or A (the validation never builds one; a caller of the internal
 * entry points could), and float64 math. */
CG_TEST(cpu_half_refuses_float32_only_tensors) {
    CG_TEST_CONTEXT(ctx);
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
    static const struct {
        int ssd;
        size_t off; /* of the view in the problem */
        cg_dtype dt, math;
        const char *word;
    } k[] = {
        {1, offsetof(cg_ssd_prob, h0), CG_BF16, CG_F32, "h0: CG_BF16"},
        {1, offsetof(cg_ssd_prob, la), CG_F16, CG_F32, "log_alpha: CG_F16"},
        {1, offsetof(cg_ssd_prob, q), CG_F32, CG_F64, "CG_F64"},
        {0, offsetof(cg_sscan_prob, A), CG_BF16, CG_F32, "A: CG_BF16"},
        {0, offsetof(cg_sscan_prob, dA), CG_F16, CG_F32, "dA: CG_F16"},
    };
    for (unsigned u = 0; u < sizeof k / sizeof k[0]; u++) {
        cg_ssd_prob bs = ps;
        cg_sscan_prob bx = px;
        char *base = k[u].ssd ? (char *)&bs : (char *)&bx;
        cg_view *v = (cg_view *)(base + k[u].off);
        if (k[u].math != CG_F32) bs.dtype = k[u].math;
        else v->dt = k[u].dt;
        const cg_status st = k[u].ssd ? cg__ssd_cpu_fwd(ctx, &bs, NULL, NULL) : cg__sscan_cpu_bwd(ctx, &bx, NULL, NULL);
        CG_CHECK_REFUSED(ctx, st, CG_EUNSUPPORTED, k[u].word, k[u].word);
    }
    dtt_free(&s);
    dtt_free(&x);
    cg_context_free(ctx);
}
