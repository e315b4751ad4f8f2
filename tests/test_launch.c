/* test_launch.c -- the one launcher of generated kernels (runtime/launch.c): a call
 * resolves its plan in Lua once (supports() makes the plan of the config the call runs,
 * and the run finds it), a repeated call not at all; and the result matches the float64
 * reference. Backend emulate, a stored config in a temporary cache directory. */
#include "cg_test.h"
#include "ssd_testlib.h"
#include "tune_testlib.h"
#include "cli_testlib.h"
#include "gen.h"
#include "ops.h"

#include <unistd.h>

/* A context on a new cache directory (dir: a mkdtemp template), no config from the
 * environment. */
static cg_context *launch_ctx(char *dir) {
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    unsetenv("CHUNKGEN_CONFIG");
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    return tune_test_ctx(dir);
}

static int64_t resolves(cg_context *ctx) {
    cg_gen_stats st;
    cg__gen_stats(ctx, &st);
    return st.resolves;
}

/* Not the default of the shape below (that is chunk=64 ... precision=3xtf32). */
#define TUNED "chunk=16,block_dv=16,warps=2,stages=1,precision=ieee,strategy=seq"

CG_TEST(launch_tuned_call_resolves_once) {
    char dir[] = "/tmp/cg_launch_test_XXXXXX";
    cg_context *ctx = launch_ctx(dir);

    const int64_t B = 1, T = 37, G = 1, H = 2, dk = 16, dv = 16; /* tune_test_entry's B, G, H, dk */
    /* the stored config of this key, as a tune would have left it, for backend emulate */
    cg_tune_entry e;
    tune_test_entry(ctx, &e, T, dv, 0, TUNED, 0, 1.0, 0.01);
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "emulate", &e.shape, 0, &e.key));
    snprintf(e.kernel, sizeof e.kernel, "ssd_fwd");
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e));
    cg__tune_entry_free(&e);

    ssdt_dims dims = {B, T, G, H, dk, dv, CG_LAYOUT_TOKEN_MAJOR, 0};
    ssdt_set x, ref;
    ssdt_pair_new(&x, &ref, dims, CG_F64, SSDT_FWD, 11, -0.3, -0.01);

    /* first call: the stored config, resolved once */
    int64_t r0 = resolves(ctx);
    CG_CHECK_OK(ctx, ssdt_run_fwd(ctx, &x, dims.layout, 1, 1, CG_BACKEND_EMULATE, NULL));
    const char *d = cg_last_dispatch(ctx);
    CG_CHECK(strstr(d, "source=exact") && strstr(d, "chunk=16") && strstr(d, "_c16_"), "dispatch line: %s", d);
    CG_CHECK(resolves(ctx) - r0 == 1, "a tuned call resolved its plan %lld times (want 1)",
             (long long)(resolves(ctx) - r0));
    /* the first call says where its kernel came from and what it cost; the next, the process */
    CG_CHECK(strstr(d, "kernel_from=") && !strstr(d, "kernel_from=process") && strstr(d, "render "),
             "first call's origin: %s", d);
    /* a repeated call: the plan table has it */
    r0 = resolves(ctx);
    CG_CHECK_OK(ctx, ssdt_run_fwd(ctx, &x, dims.layout, 1, 1, CG_BACKEND_EMULATE, NULL));
    CG_CHECK(resolves(ctx) == r0, "a repeated call resolved %lld times (want 0)", (long long)(resolves(ctx) - r0));
    CG_CHECK(strstr(cg_last_dispatch(ctx), "kernel_from=process") != NULL, "repeat's origin: %s", cg_last_dispatch(ctx));

    /* and it computed the op: against the float64 reference */
    CG_CHECK_OK(ctx, ssdt_run_fwd(ctx, &ref, dims.layout, 1, 1, CG_BACKEND_REF, NULL));
    double eo = cg_rel_err(&x.o, &ref.o), eh = cg_rel_err(&x.hT, &ref.hT);
    CG_CHECK(eo <= cg__tol(CG_TOL_FWD) && eh <= cg__tol(CG_TOL_FWD), "rel err o %g, hT %g (tolerance %g)", eo, eh,
             cg__tol(CG_TOL_FWD));

    /* a pinned call resolves once too, and its repeat not at all */
    for (int rep = 0; rep < 2; rep++) {
        r0 = resolves(ctx);
        CG_CHECK_OK(ctx, ssdt_run_fwd(ctx, &x, dims.layout, 1, 1, CG_BACKEND_EMULATE,
                                      "chunk=32,block_dv=16,warps=2,stages=1,precision=ieee,strategy=seq"));
        CG_CHECK(resolves(ctx) - r0 == (rep == 0), "pinned call %d: %lld resolves", rep,
                 (long long)(resolves(ctx) - r0));
    }

    ssdt_set_free(&x);
    ssdt_set_free(&ref);
    cg_context_free(ctx);
    rm_tree(dir);
}

static int64_t loads(cg_context *ctx) { return cg__launch_loads(ctx); }

/* cg_workspace_size makes the plan and nothing else; cg_prepare also compiles and loads,
 * so the call that follows resolves and loads nothing; a caller's workspace of the size
 * asked for (poisoned with NaN) serves the call, whose gradients match the reference. */
CG_TEST(launch_prepare_and_workspace) {
    char dir[] = "/tmp/cg_launch_prep_XXXXXX";
    cg_context *ctx = launch_ctx(dir);
    ssdt_dims dims = {1, 70, 1, 2, 16, 8, CG_LAYOUT_TOKEN_MAJOR, 0}; /* T = 70: chunks and a partial one */
    ssdt_set x, ref;
    ssdt_pair_new(&x, &ref, dims, CG_F64, SSDT_BWD, 5, -0.3, -0.01);
    cg_ssd_bwd_args a = {.layout = CG_LAYOUT_TOKEN_MAJOR, .q = x.q.t, .k = x.k.t, .v = x.v.t, .log_alpha = x.la.t,
                         .h0 = x.h0.t, .dout = x.dout.t, .dhT = x.dhT.t, .dq = x.dq.t, .dk = x.dk.t, .dv = x.dv.t,
                         .dlog_alpha = x.dla.t, .dh0 = x.dh0.t};
    cg_exec ex = {.backend = CG_BACKEND_EMULATE};

    size_t bytes = 0, bytes2 = 0;
    int64_t r0 = resolves(ctx), l0 = loads(ctx);
    CG_CHECK_OK(ctx, cg_workspace_size(ctx, CG_OP_SSD_BWD, &a, &ex, &bytes));
    CG_CHECK(bytes > 0, "the backward keeps chunk states in its workspace: %zu bytes", bytes);
    CG_CHECK(resolves(ctx) - r0 == 1 && loads(ctx) == l0, "size: %lld resolves, %lld loads (want 1, 0)",
             (long long)(resolves(ctx) - r0), (long long)(loads(ctx) - l0));
    CG_CHECK_OK(ctx, cg_prepare(ctx, CG_OP_SSD_BWD, &a, &ex, &bytes2));
    CG_CHECK(bytes2 == bytes && loads(ctx) - l0 == 1, "prepare: %zu bytes (size said %zu), %lld loads", bytes2, bytes,
             (long long)(loads(ctx) - l0));

    float *ws = malloc(bytes);
    CG_CHECK(ws != NULL, "malloc");
    for (size_t i = 0; ws && i < bytes / sizeof *ws; i++) ws[i] = NAN;
    ex.workspace = ws;
    ex.workspace_bytes = bytes;
    r0 = resolves(ctx), l0 = loads(ctx);
    CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &a, &ex));
    CG_CHECK(resolves(ctx) == r0 && loads(ctx) == l0, "the prepared call: %lld resolves, %lld loads (want 0, 0)",
             (long long)(resolves(ctx) - r0), (long long)(loads(ctx) - l0));
    CG_CHECK_OK(ctx, ssdt_run_bwd(ctx, &ref, dims.layout, 1, 1, 1, CG_BACKEND_REF, NULL));
    const cg_tbuf *got[] = {&x.dq, &x.dk, &x.dv, &x.dla, &x.dh0}, *want[] = {&ref.dq, &ref.dk, &ref.dv, &ref.dla, &ref.dh0};
    for (int i = 0; i < 5; i++) {
        double e = cg_rel_err(got[i], want[i]);
        CG_CHECK(e <= cg__tol(CG_TOL_BWD), "gradient %d with the caller's workspace: rel err %g", i, e);
    }

    /* the CPU path takes no workspace; bad arguments are refused by name */
    ex = (cg_exec){.backend = CG_BACKEND_CPU};
    CG_CHECK_OK(ctx, cg_workspace_size(ctx, CG_OP_SSD_BWD, &a, &ex, &bytes));
    CG_CHECK(bytes == 0, "cpu workspace %zu", bytes);
    CG_CHECK(cg_workspace_size(ctx, (cg_op)99, &a, &ex, &bytes) == CG_EINVAL && strstr(cg_errmsg(ctx), "op"),
             "bad op: %s", cg_errmsg(ctx));
    CG_CHECK(cg_workspace_size(ctx, CG_OP_SSD_BWD, &a, &ex, NULL) == CG_EINVAL && strstr(cg_errmsg(ctx), "bytes"),
             "null bytes: %s", cg_errmsg(ctx));
    a.q.shape[3] = 5;
    CG_CHECK(cg_prepare(ctx, CG_OP_SSD_BWD, &a, &ex, NULL) == CG_EINVAL && strstr(cg_errmsg(ctx), "[B, T, G, dk]"),
             "prepare validates like the call: %s", cg_errmsg(ctx));

    free(ws);
    ssdt_set_free(&x);
    ssdt_set_free(&ref);
    cg_context_free(ctx);
    rm_tree(dir);
}
