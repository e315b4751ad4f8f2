/* test_fallback.c -- the auto backend's CPU path over host copies of kernel memory
 * (runtime/fallback.c), run here through the emulator's kernel executor, whose kernel
 * memory is host memory: the same copies, syncs and pointer rebasing the CUDA executor
 * gets on a GPU. The results must equal the CPU backend's on the original tensors
 * bit for bit (same code, same thread count), and the gaps of strided outputs must
 * come back untouched. */
#include "ssd_testlib.h"

#include "internal.h"

static const cg_tensor absent;

static cg_context *new_ctx(void) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    return ctx;
}

/* Max |a - b| over two tensors of the same shape (0 when bitwise equal values). */
static double max_diff(const cg_tbuf *a, const cg_tbuf *b) { return cg_rel_err(a, b); }

/* The backward problem of set a, as validation builds it for a cg_ssd_bwd call. */
static cg_status bwd_prob(cg_context *ctx, const ssdt_set *a, int layout, cg_ssd_prob *p) {
    cg_ssd_bwd_args args;
    memset(&args, 0, sizeof args);
    args.layout = (cg_layout)layout;
    args.q = a->q.t, args.k = a->k.t, args.v = a->v.t, args.log_alpha = a->la.t, args.h0 = a->h0.t;
    args.dout = a->dout.t, args.dhT = a->dhT.t;
    args.dq = a->dq.t, args.dk = a->dk.t, args.dv = a->dv.t, args.dlog_alpha = a->dla.t, args.dh0 = a->dh0.t;
    return cg__ssd_bwd_prob(ctx, &args, p);
}

CG_TEST(fallback_ssd_bwd_host_copies) {
    cg_context *ctx = new_ctx();
    cg_context_set_threads(ctx, 2);
    ssdt_dims d = {2, 37, 2, 4, 40, 24, CG_LAYOUT_TOKEN_MAJOR, 1};
    ssdt_set a, b;
    ssdt_pair_new(&a, &b, d, CG_F32, SSDT_BWD, 11, -0.4, -0.01);

    /* b: the CPU backend directly. */
    CG_CHECK_OK(ctx, ssdt_run_bwd(ctx, &b, d.layout, 1, 1, 1, CG_BACKEND_CPU, NULL));

    /* a: through the fallback, with the problem as validation builds it. */
    cg_ssd_prob p;
    CG_CHECK_OK(ctx, bwd_prob(ctx, &a, d.layout, &p));
    cg_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    CG_CHECK_OK(ctx, cg__host_fallback(ctx, &cg__kexec_emu, &cg__backend_cpu, CG_OP_SSD_BWD, &p, &cfg, NULL, "test"));
    /* The caller's views are left pointing at its own memory. */
    CG_CHECK(p.grad_q.p == a.dq.t.data, "problem views repointed");

    const cg_tbuf *out_a[] = {&a.dq, &a.dk, &a.dv, &a.dla, &a.dh0};
    const cg_tbuf *out_b[] = {&b.dq, &b.dk, &b.dv, &b.dla, &b.dh0};
    const char *names[] = {"dq", "dk", "dv", "dlog_alpha", "dh0"};
    for (int i = 0; i < 5; i++) {
        double e = max_diff(out_a[i], out_b[i]);
        CG_CHECK(e == 0.0, "%s: fallback differs from the CPU backend by %g", names[i], e);
    }
    ssdt_set_free(&a);
    ssdt_set_free(&b);
    cg_context_free(ctx);
}

/* sscan backward with dx written into every other element of a larger buffer. */
CG_TEST(fallback_sscan_bwd_strided_gaps) {
    cg_context *ctx = new_ctx();
    cg_context_set_threads(ctx, 2);
    const int64_t B = 2, L = 13, D = 6, N = 5;
    const int64_t sx[] = {B, L, D}, sa[] = {D, N}, sb[] = {B, L, N}, sd[] = {D};
    cg_rng r = {5};
    cg_tbuf x = cg_tbuf_new(CG_F32, 3, sx), dl = cg_tbuf_new(CG_F32, 3, sx), A = cg_tbuf_new(CG_F32, 2, sa);
    cg_tbuf Bm = cg_tbuf_new(CG_F32, 3, sb), Cm = cg_tbuf_new(CG_F32, 3, sb), Dv = cg_tbuf_new(CG_F32, 1, sd);
    cg_tbuf dy = cg_tbuf_new(CG_F32, 3, sx);
    cg_tbuf_fill(&x, &r, -1, 1);
    cg_tbuf_fill(&dl, &r, -2, 1);
    cg_tbuf_fill(&A, &r, -2, -0.1);
    cg_tbuf_fill(&Bm, &r, -1, 1);
    cg_tbuf_fill(&Cm, &r, -1, 1);
    cg_tbuf_fill(&Dv, &r, -1, 1);
    cg_tbuf_fill(&dy, &r, -1, 1);

    /* two output sets: [0] via the CPU backend, [1] via the fallback */
    cg_tbuf ddl[2], dA[2], dB[2], dC[2], dD[2];
    float *dxmem[2];
    cg_sscan_bwd_args a[2];
    const int64_t total = 2 * B * L * D;
    for (int i = 0; i < 2; i++) {
        ddl[i] = cg_tbuf_new(CG_F32, 3, sx), dA[i] = cg_tbuf_new(CG_F32, 2, sa);
        dB[i] = cg_tbuf_new(CG_F32, 3, sb), dC[i] = cg_tbuf_new(CG_F32, 3, sb), dD[i] = cg_tbuf_new(CG_F32, 1, sd);
        dxmem[i] = malloc((size_t)total * sizeof(float));
        for (int64_t j = 0; j < total; j++) dxmem[i][j] = 777.0f;
        memset(&a[i], 0, sizeof a[i]);
        a[i].x = x.t, a[i].delta = dl.t, a[i].A = A.t, a[i].B = Bm.t, a[i].C = Cm.t, a[i].D = Dv.t;
        a[i].z = absent, a[i].delta_bias = absent, a[i].h0 = absent, a[i].dy = dy.t, a[i].dhT = absent;
        a[i].delta_softplus = 1;
        a[i].dx.data = dxmem[i];
        a[i].dx.dtype = CG_F32;
        a[i].dx.ndim = 3;
        a[i].dx.shape[0] = B, a[i].dx.shape[1] = L, a[i].dx.shape[2] = D;
        a[i].dx.stride[0] = 2 * L * D, a[i].dx.stride[1] = 2 * D, a[i].dx.stride[2] = 2;
        a[i].ddelta = ddl[i].t, a[i].dA = dA[i].t, a[i].dB = dB[i].t, a[i].dC = dC[i].t, a[i].dD = dD[i].t;
    }
    cg_exec ex = {.backend = CG_BACKEND_CPU};
    CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &a[0], &ex));
    cg_sscan_prob p;
    CG_CHECK_OK(ctx, cg__sscan_bwd_prob(ctx, &a[1], &p));
    cg_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    CG_CHECK_OK(ctx, cg__host_fallback(ctx, &cg__kexec_emu, &cg__backend_cpu, CG_OP_SSCAN_BWD, &p, &cfg, NULL, "test"));

    int gaps_ok = 1, same = 1;
    for (int64_t j = 0; j < total; j++) {
        if (j % 2) gaps_ok &= dxmem[1][j] == 777.0f;
        else same &= dxmem[1][j] == dxmem[0][j] && dxmem[1][j] != 777.0f;
    }
    CG_CHECK(gaps_ok, "dx: the gaps between strided elements were overwritten");
    CG_CHECK(same, "dx: fallback differs from the CPU backend");
    CG_CHECK(max_diff(&ddl[1], &ddl[0]) == 0.0, "ddelta differs");
    CG_CHECK(max_diff(&dA[1], &dA[0]) == 0.0, "dA differs");
    CG_CHECK(max_diff(&dB[1], &dB[0]) == 0.0, "dB differs");
    CG_CHECK(max_diff(&dC[1], &dC[0]) == 0.0, "dC differs");
    CG_CHECK(max_diff(&dD[1], &dD[0]) == 0.0, "dD differs");
    for (int i = 0; i < 2; i++) {
        cg_tbuf_free(&ddl[i]), cg_tbuf_free(&dA[i]), cg_tbuf_free(&dB[i]), cg_tbuf_free(&dC[i]);
        cg_tbuf_free(&dD[i]);
        free(dxmem[i]);
    }
    cg_tbuf_free(&x), cg_tbuf_free(&dl), cg_tbuf_free(&A), cg_tbuf_free(&Bm), cg_tbuf_free(&Cm);
    cg_tbuf_free(&Dv), cg_tbuf_free(&dy);
    cg_context_free(ctx);
}

/* The one-time warning names the host backend that ran (ref here, as auto picks for a
 * float64 call), and that backend's result comes back: ref over the copies equals ref
 * on the original tensors bit for bit. */
static char g_warning[512];
static void keep_warning(cg_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == CG_LOG_WARN && !g_warning[0]) snprintf(g_warning, sizeof g_warning, "%s", msg);
}

CG_TEST(fallback_warning_names_host_backend) {
    cg_context *ctx = new_ctx();
    ssdt_dims d = {1, 5, 2, 4, 3, 6, CG_LAYOUT_HEAD_MAJOR, 1};
    ssdt_set a, b;
    ssdt_pair_new(&a, &b, d, CG_F32, SSDT_BWD, 7, -0.4, -0.01);
    CG_CHECK_OK(ctx, ssdt_run_bwd(ctx, &b, d.layout, 1, 1, 1, CG_BACKEND_REF, NULL));
    cg_ssd_prob p;
    CG_CHECK_OK(ctx, bwd_prob(ctx, &a, d.layout, &p));
    cg_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cg_set_log_callback(keep_warning, NULL);
    CG_CHECK_OK(ctx, cg__host_fallback(ctx, &cg__kexec_emu, &cg__backend_ref, CG_OP_SSD_BWD, &p, &cfg, NULL, "test"));
    cg_set_log_callback(NULL, NULL);
    CG_CHECK(strstr(g_warning, "host backend ref") != NULL, "warning does not name backend ref: \"%s\"", g_warning);
    CG_CHECK(strstr(g_warning, "(test)") != NULL, "warning does not give the reason: \"%s\"", g_warning);
    const cg_tbuf *out_a[] = {&a.dq, &a.dk, &a.dv, &a.dla, &a.dh0};
    const cg_tbuf *out_b[] = {&b.dq, &b.dk, &b.dv, &b.dla, &b.dh0};
    for (int i = 0; i < 5; i++) CG_CHECK(max_diff(out_a[i], out_b[i]) == 0.0, "output %d: fallback differs from ref", i);
    ssdt_set_free(&a);
    ssdt_set_free(&b);
    cg_context_free(ctx);
}
