/* test_api.c -- bad input gets a status and a message naming the argument; NaN and
 * Inf propagate; contexts and statuses behave. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"

#include <sys/wait.h>
#include <unistd.h>

typedef struct ssd_fix {
    cg_tbuf q, k, v, la, h0, o, hT, dout, dhT, dq, dk, dv, dla, dh0;
} ssd_fix;

static void ssd_fix_new(ssd_fix *f, int64_t B, int64_t T, int64_t G, int64_t H, int64_t dk, int64_t dv) {
    cg_rng r = {42};
    int64_t sq[] = {B, T, G, dk}, sv[] = {B, T, H, dv}, sl[] = {B, T, H}, ss[] = {B, H, dk, dv};
    f->q = cg_tbuf_new(CG_F32, 4, sq);  f->k = cg_tbuf_new(CG_F32, 4, sq);
    f->v = cg_tbuf_new(CG_F32, 4, sv);  f->la = cg_tbuf_new(CG_F32, 3, sl);
    f->h0 = cg_tbuf_new(CG_F32, 4, ss); f->o = cg_tbuf_new(CG_F32, 4, sv);
    f->hT = cg_tbuf_new(CG_F32, 4, ss); f->dout = cg_tbuf_new(CG_F32, 4, sv);
    f->dhT = cg_tbuf_new(CG_F32, 4, ss); f->dq = cg_tbuf_new(CG_F32, 4, sq);
    f->dk = cg_tbuf_new(CG_F32, 4, sq); f->dv = cg_tbuf_new(CG_F32, 4, sv);
    f->dla = cg_tbuf_new(CG_F32, 3, sl); f->dh0 = cg_tbuf_new(CG_F32, 4, ss);
    cg_tbuf_fill(&f->q, &r, -1, 1); cg_tbuf_fill(&f->k, &r, -1, 1); cg_tbuf_fill(&f->v, &r, -1, 1);
    cg_tbuf_fill(&f->la, &r, -0.5, 0); cg_tbuf_fill(&f->h0, &r, -1, 1); cg_tbuf_fill(&f->dout, &r, -1, 1);
    cg_tbuf_fill(&f->dhT, &r, -1, 1);
}

static void ssd_fix_free(ssd_fix *f) {
    cg_tbuf *all[] = {&f->q, &f->k, &f->v, &f->la, &f->h0, &f->o, &f->hT, &f->dout, &f->dhT,
                      &f->dq, &f->dk, &f->dv, &f->dla, &f->dh0};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

static cg_ssd_fwd_args ssd_fwd_args(ssd_fix *f) {
    cg_ssd_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = f->q.t; a.k = f->k.t; a.v = f->v.t; a.log_alpha = f->la.t; a.h0 = f->h0.t;
    a.o = f->o.t; a.hT = f->hT.t;
    return a;
}

static cg_ssd_bwd_args ssd_bwd_args(ssd_fix *f) {
    cg_ssd_bwd_args a;
    memset(&a, 0, sizeof a);
    a.q = f->q.t; a.k = f->k.t; a.v = f->v.t; a.log_alpha = f->la.t; a.h0 = f->h0.t;
    a.dout = f->dout.t; a.dhT = f->dhT.t;
    a.dq = f->dq.t; a.dk = f->dk.t; a.dv = f->dv.t; a.dlog_alpha = f->dla.t; a.dh0 = f->dh0.t;
    return a;
}

/* Expect status st and a message containing every needle. */
static void expect_err(cg_context *ctx, cg_status got, cg_status want, const char *n1, const char *n2, int line) {
    if (got != want)
        cg_test_fail(__FILE__, line, "status %s, expected %s (msg: %s)", cg_status_str(got), cg_status_str(want),
                     cg_errmsg(ctx));
    else if ((n1 && !strstr(cg_errmsg(ctx), n1)) || (n2 && !strstr(cg_errmsg(ctx), n2)))
        cg_test_fail(__FILE__, line, "message \"%s\" lacks \"%s\"/\"%s\"", cg_errmsg(ctx), n1 ? n1 : "", n2 ? n2 : "");
}
#define EXPECT_ERR(ctx, expr, want, n1, n2) expect_err(ctx, (expr), want, n1, n2, __LINE__)

static const cg_exec k_cpu = {.backend = CG_BACKEND_CPU};

CG_TEST(api_status_strings) {
    CG_CHECK(strcmp(cg_status_str(CG_OK), "ok") == 0, "CG_OK text");
    CG_CHECK(strcmp(cg_status_str(CG_EINVAL), "invalid argument") == 0, "EINVAL text");
    CG_CHECK(strcmp(cg_status_str((cg_status)-999), "unknown status") == 0, "unknown code");
    CG_CHECK(strcmp(cg_version(), CG_VERSION_STRING) == 0, "version");
    cg_backend b;
    CG_CHECK(cg_backend_parse("emulate", &b) == CG_OK && b == CG_BACKEND_EMULATE, "parse emulate");
    CG_CHECK(cg_backend_parse("gpu", &b) == CG_EINVAL, "unknown backend name");
    CG_CHECK(strcmp(cg_backend_name(CG_BACKEND_REF), "ref") == 0, "name of ref");
    cg_context_free(NULL);
    CG_CHECK(cg_context_create(NULL) == CG_EINVAL, "create(NULL)");
}

CG_TEST(api_ssd_bad_shapes) {
    CG_TEST_CONTEXT(ctx);
    ssd_fix f;
    ssd_fix_new(&f, 2, 5, 2, 4, 3, 2);
    cg_ssd_fwd_args a = ssd_fwd_args(&f);
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &a, &k_cpu));

    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, NULL, &k_cpu), CG_EINVAL, "args", NULL);
    a = ssd_fwd_args(&f); a.k.shape[2] = 3;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "k:", "[B, T, G, dk]");
    a = ssd_fwd_args(&f); a.v.shape[2] = 3; a.o.shape[2] = 3; a.log_alpha.shape[2] = 3;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "H % G", "v:");
    a = ssd_fwd_args(&f); a.q.shape[1] = 0; a.k.shape[1] = 0;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "q:", "T = 0");
    a = ssd_fwd_args(&f); a.q.shape[3] = -4;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "q:", "dk = -4");
    a = ssd_fwd_args(&f); a.log_alpha.data = NULL;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "log_alpha", "null");
    a = ssd_fwd_args(&f); a.o.data = NULL;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "o:", "null");
    a = ssd_fwd_args(&f); a.h0.shape[3] = 5;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "h0:", "[B, H, dk, dv]");
    /* the message says the shape expected, not only its symbols */
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "h0: shape (2, 4, 3, 5)", "but expected (2, 4, 3, 2)");
    a = ssd_fwd_args(&f); a.q.ndim = 3;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "q:", "expected 4");
    a = ssd_fwd_args(&f); a.layout = (cg_layout)7;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "layout", NULL);
    a = ssd_fwd_args(&f); a.q.dtype = CG_F64;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "dtype", "k");
    /* overlapping outputs, output over input */
    a = ssd_fwd_args(&f); a.hT.data = f.o.t.data;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "overlaps", "o");
    a = ssd_fwd_args(&f); a.o.data = f.v.t.data;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "o:", "input v");
    /* strides */
    a = ssd_fwd_args(&f); a.q.stride[0] = -1;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "q:", "out of range");
    a = ssd_fwd_args(&f); a.k.stride[1] = INT64_MAX / 4;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "k:", "out of range");
    a = ssd_fwd_args(&f); a.q.stride[3] = 2;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "q:", "innermost");
    a = ssd_fwd_args(&f); a.o.stride[1] = 0;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "o:", "overlap itself");
    /* element counts that overflow */
    a = ssd_fwd_args(&f);
    a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = a.log_alpha.shape[0] = INT64_MAX / 2;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "overflows", NULL);
    /* bad exec */
    a = ssd_fwd_args(&f);
    cg_exec ex = k_cpu;
    ex.backend = (cg_backend)42;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &ex), CG_EINVAL, "exec.backend", NULL);
    ex = k_cpu;
    ex.config = "chunk";
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &ex), CG_EINVAL, "config", "key=value");

    cg_ssd_bwd_args b = ssd_bwd_args(&f);
    CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &b, &k_cpu));
    b = ssd_bwd_args(&f); b.dout.data = NULL;
    EXPECT_ERR(ctx, cg_ssd_bwd(ctx, &b, &k_cpu), CG_EINVAL, "dout", "null");
    b = ssd_bwd_args(&f); b.dk.data = f.dq.t.data;
    EXPECT_ERR(ctx, cg_ssd_bwd(ctx, &b, &k_cpu), CG_EINVAL, "overlaps", "dq");
    b = ssd_bwd_args(&f); b.dlog_alpha.shape[1] = 4;
    EXPECT_ERR(ctx, cg_ssd_bwd(ctx, &b, &k_cpu), CG_EINVAL, "dlog_alpha", "[B, T, H]");
    ssd_fix_free(&f);
    cg_context_free(ctx);
}

CG_TEST(api_ssd_nan_propagates) {
    CG_TEST_CONTEXT(ctx);
    ssd_fix f;
    ssd_fix_new(&f, 1, 7, 1, 2, 5, 3);
    int64_t i0[] = {0, 2, 0, 1};
    cg_tbuf_set(&f.q, i0, NAN);
    int64_t i1[] = {0, 4, 1};
    cg_tbuf_set(&f.la, i1, INFINITY);
    cg_ssd_fwd_args a = ssd_fwd_args(&f);
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &a, &k_cpu));
    int64_t o2[] = {0, 2, 0, 0}, o1[] = {0, 1, 0, 0};
    CG_CHECK(isnan(cg_tbuf_get(&f.o, o2)), "NaN in q at t=2 reaches o at t=2");
    CG_CHECK(isfinite(cg_tbuf_get(&f.o, o1)), "o before the NaN stays finite");
    cg_ssd_bwd_args b = ssd_bwd_args(&f);
    CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &b, &k_cpu));
    ssd_fix_free(&f);
    cg_context_free(ctx);
}

CG_TEST(api_sscan_bad_shapes) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {7};
    int64_t sx[] = {2, 5, 6}, sa[] = {6, 3}, sb[] = {2, 5, 3}, sbg[] = {2, 5, 4, 3}, sd[] = {6}, sh[] = {2, 6, 3};
    cg_tbuf x = cg_tbuf_new(CG_F32, 3, sx), dl = cg_tbuf_new(CG_F32, 3, sx), A = cg_tbuf_new(CG_F32, 2, sa);
    cg_tbuf Bm = cg_tbuf_new(CG_F32, 3, sb), Cm = cg_tbuf_new(CG_F32, 3, sb), Bg = cg_tbuf_new(CG_F32, 4, sbg);
    cg_tbuf y = cg_tbuf_new(CG_F32, 3, sx), D = cg_tbuf_new(CG_F32, 1, sd), hT = cg_tbuf_new(CG_F32, 3, sh);
    cg_tbuf_fill(&x, &r, -1, 1); cg_tbuf_fill(&dl, &r, -1, 1); cg_tbuf_fill(&A, &r, -1, 0);
    cg_tbuf_fill(&Bm, &r, -1, 1); cg_tbuf_fill(&Cm, &r, -1, 1); cg_tbuf_fill(&Bg, &r, -1, 1);
    cg_sscan_fwd_args a0;
    memset(&a0, 0, sizeof a0);
    a0.x = x.t; a0.delta = dl.t; a0.A = A.t; a0.B = Bm.t; a0.C = Cm.t; a0.y = y.t; a0.hT = hT.t;
    cg_sscan_fwd_args a = a0;
    CG_CHECK_OK(ctx, cg_sscan_fwd(ctx, &a, &k_cpu));
    a = a0; a.C.shape[2] = 4;
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "C:", "[B, L, N]");
    a = a0; a.B = Bg.t; /* G = 4 does not divide D = 6 */
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "D % G", NULL);
    a = a0; a.D = D.t; a.D.shape[0] = 5;
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "D:", "[D]");
    a = a0; a.delta.data = NULL;
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "delta", "null");
    a = a0; a.hT.data = y.t.data;
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "overlaps", NULL);
    a = a0; a.A.shape[1] = 0;
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "A:", "N = 0");
    a = a0; a.x.stride[2] = -3;
    EXPECT_ERR(ctx, cg_sscan_fwd(ctx, &a, &k_cpu), CG_EINVAL, "x:", "out of range");
    /* backward: dD without D */
    cg_sscan_bwd_args b;
    memset(&b, 0, sizeof b);
    b.x = x.t; b.delta = dl.t; b.A = A.t; b.B = Bm.t; b.C = Cm.t; b.dy = y.t;
    cg_tbuf dx = cg_tbuf_new(CG_F32, 3, sx), ddl = cg_tbuf_new(CG_F32, 3, sx), dA = cg_tbuf_new(CG_F32, 2, sa);
    cg_tbuf dB = cg_tbuf_new(CG_F32, 3, sb), dC = cg_tbuf_new(CG_F32, 3, sb), dD = cg_tbuf_new(CG_F32, 1, sd);
    b.dx = dx.t; b.ddelta = ddl.t; b.dA = dA.t; b.dB = dB.t; b.dC = dC.t;
    CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &b, &k_cpu));
    b.dD = dD.t;
    EXPECT_ERR(ctx, cg_sscan_bwd(ctx, &b, &k_cpu), CG_EINVAL, "dD", "D is absent");
    cg_tbuf *all[] = {&x, &dl, &A, &Bm, &Cm, &Bg, &y, &D, &hT, &dx, &ddl, &dA, &dB, &dC, &dD};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
    cg_context_free(ctx);
}

CG_TEST(api_f64_only_for_ref) {
    CG_TEST_CONTEXT(ctx);
    int64_t sq[] = {1, 3, 1, 2}, sl[] = {1, 3, 1};
    cg_tbuf q = cg_tbuf_new(CG_F64, 4, sq), k = cg_tbuf_new(CG_F64, 4, sq), v = cg_tbuf_new(CG_F64, 4, sq);
    cg_tbuf la = cg_tbuf_new(CG_F64, 3, sl), o = cg_tbuf_new(CG_F64, 4, sq);
    cg_ssd_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = q.t; a.k = k.t; a.v = v.t; a.log_alpha = la.t; a.o = o.t;
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "CG_F64", "ref");
    cg_exec ref = {.backend = CG_BACKEND_REF};
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &a, &ref));
    CG_CHECK(strstr(cg_last_dispatch(ctx), "ref") != NULL, "dispatch line names the backend: %s", cg_last_dispatch(ctx));
    cg_tbuf_free(&q); cg_tbuf_free(&k); cg_tbuf_free(&v); cg_tbuf_free(&la); cg_tbuf_free(&o);
    cg_context_free(ctx);
}

/* cg_validate checks a call's arguments as the call does, before its outputs exist
 * (issue #39 item 8: a binding validates before it allocates the outputs from the
 * inputs' extents), and runs nothing. */
CG_TEST(api_validate_before_outputs) {
    CG_TEST_CONTEXT(ctx);
    ssd_fix f;
    ssd_fix_new(&f, 1, 9, 1, 2, 4, 3);
    cg_ssd_fwd_args a0 = ssd_fwd_args(&f), a = a0;
    a0.o.data = a0.hT.data = NULL; /* not allocated yet */
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &a, &k_cpu));
    const char *before = strcmp(cg_last_dispatch(ctx), "") ? "ran" : "";
    a = a0;
    CG_CHECK_OK(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu));
    CG_CHECK_OK(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, NULL));
    CG_CHECK(before[0] && strstr(cg_last_dispatch(ctx), "backend=cpu"), "cg_validate changed the dispatch line: %s",
             cg_last_dispatch(ctx));
    /* the call itself still wants its outputs */
    EXPECT_ERR(ctx, cg_ssd_fwd(ctx, &a, &k_cpu), CG_EINVAL, "o:", "null data pointer");
    /* a huge q (all-zero strides: contiguous; never read) and a k of another T: the k message */
    a = a0;
    a.q.shape[1] = (int64_t)1 << 40;
    memset(a.q.stride, 0, sizeof a.q.stride);
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu), CG_EINVAL, "k: shape", "but expected (1, 1099511627776, 1, 4)");
    /* the byte size of an input that overflows 64 bits names it */
    a = a0;
    a.q.shape[1] = (int64_t)1 << 62;
    a.k.shape[1] = a.v.shape[1] = a.log_alpha.shape[1] = a.q.shape[1];
    memset(a.q.stride, 0, sizeof a.q.stride);
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu), CG_EINVAL, "q:", "overflows 64 bits");
    /* outputs that are given are checked, overlaps included */
    a = a0;
    a.o = f.o.t;
    a.o.shape[2] = 3;
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu), CG_EINVAL, "o: shape", NULL);
    a = a0;
    a.hT = f.hT.t;
    a.hT.data = f.v.t.data;
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu), CG_EINVAL, "hT", "overlaps input v");
    /* the exec rules the call applies before choosing a config */
    cg_exec bad = {.backend = (cg_backend)99};
    a = a0;
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &bad), CG_EINVAL, "exec.backend", NULL);
    cg_exec badcfg = {.config = "chunk"};
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &badcfg), CG_EINVAL, "config", NULL);
    a.q.dtype = a.k.dtype = CG_F64; /* (the pointers are never read) */
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu), CG_EINVAL, NULL, NULL);
    /* cu_seqlens: its host offsets are read and checked */
    int32_t cu[3] = {0, 5, 4};
    int64_t ncu = 3;
    a = a0;
    a.h0.data = NULL; /* (one state per sequence) */
    a.cu_seqlens = cg_tensor_contiguous(cu, CG_I32, 1, &ncu);
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu), CG_EINVAL, "cu_seqlens[2] = 4", NULL);
    cu[2] = 9;
    CG_CHECK_OK(ctx, cg_validate(ctx, CG_OP_SSD_FWD, &a, &k_cpu));
    /* the op and the args themselves */
    EXPECT_ERR(ctx, cg_validate(ctx, (cg_op)99, &a, &k_cpu), CG_EINVAL, "op", NULL);
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_FWD, NULL, &k_cpu), CG_EINVAL, "args", NULL);
    CG_CHECK(cg_validate(NULL, CG_OP_SSD_FWD, &a, &k_cpu) == CG_EINVAL, "no context");
    /* backward: the gradients are outputs; dh0 given without h0 is fine, a bad dout is not */
    cg_ssd_bwd_args b = ssd_bwd_args(&f);
    b.dq.data = b.dk.data = b.dv.data = b.dlog_alpha.data = b.dh0.data = NULL;
    CG_CHECK_OK(ctx, cg_validate(ctx, CG_OP_SSD_BWD, &b, &k_cpu));
    b.dout.shape[3] = 2;
    EXPECT_ERR(ctx, cg_validate(ctx, CG_OP_SSD_BWD, &b, &k_cpu), CG_EINVAL, "dout: shape", NULL);
    ssd_fix_free(&f);
    cg_context_free(ctx);
}

/* A call given a CUDA stream where the CUDA driver cannot be loaded says so (issue #33: a
 * failed CUDA load is never silent): device tensors cannot be told from host memory
 * there, so running on the host path would read them as host memory. In a child with
 * CHUNKGEN_LIBCUDA naming no file (the driver is loaded once per process). */
CG_TEST(api_stream_without_driver) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CHUNKGEN_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
        const char *why = NULL;
        if (cg__cu_api(&why)) _exit(77); /* loaded before the fork: cannot test here */
        cg_context *ctx;
        if (cg_context_create(&ctx) != CG_OK) _exit(2);
        ssd_fix f;
        ssd_fix_new(&f, 1, 9, 1, 2, 4, 3);
        cg_ssd_fwd_args a = ssd_fwd_args(&f);
        cg_exec ex = {.stream = (void *)(uintptr_t)0x1000};
        cg_status s = cg_ssd_fwd(ctx, &a, &ex);
        int ok = s == CG_ENODEV && strstr(cg_errmsg(ctx), "exec.stream") && strstr(cg_errmsg(ctx), "/nonexistent/libcuda.so.1");
        if (!ok) fprintf(stderr, "  status %s: %s\n", cg_status_str(s), cg_errmsg(ctx));
        ex.stream = NULL; /* host tensors without a stream: the CPU path, as always */
        ok &= cg_ssd_fwd(ctx, &a, &ex) == CG_OK;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    CG_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork/wait");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        cg_test_skip("the CUDA driver was loaded before the fork");
        return;
    }
    CG_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a stream without a driver: not refused by name (exit %d)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
