/* ssd_testlib.h -- scaffolding shared by the SSD tests (test_ssd_cpu.c, test_ssd_gen.c,
 * test_ssd_bwd_gen.c): the tensor set of a problem in either layout and dtype, the calls
 * with optional tensors, the inputs and their float64 copies, and the loops that run a
 * generated kernel's whole config space, and its default config, over a table of shapes. The assertions and the
 * tolerances stay in the tests. */
#ifndef SSD_TESTLIB_H
#define SSD_TESTLIB_H

#include "cg_test.h"

#include "gen.h"

/* Sizes and memory order of one problem. */
typedef struct ssdt_dims {
    int64_t B, T, G, H, dk, dv;
    int layout;  /* CG_LAYOUT_TOKEN_MAJOR or CG_LAYOUT_HEAD_MAJOR: the order of the shapes */
    int swapped; /* F32 memory order with the two middle dims swapped (strided views) */
} ssdt_dims;

/* One dtype's tensors; ssdt_set_alloc allocates those of the directions asked for. */
typedef struct ssdt_set {
    cg_tbuf q, k, v, la, h0, o, hT, dout, dhT, dq, dk, dv, dla, dh0;
} ssdt_set;

enum { SSDT_FWD = 1, SSDT_BWD = 2 };

/* A [B, T, heads, dim] tensor in d's layout (dim 0: log_alpha, [B, T, heads]). */
cg_tbuf ssdt_mk(ssdt_dims d, cg_dtype dt, int64_t heads, int64_t dim);
/* which: SSDT_FWD (q k v la h0, o hT) and/or SSDT_BWD (q k v la h0 dout dhT, dq dk dv
 * dla dh0); the others stay empty. */
void ssdt_set_alloc(ssdt_set *s, ssdt_dims d, cg_dtype dt, int which);
void ssdt_set_free(ssdt_set *s);
/* Fill the inputs of `which` from r (q k v, la in [la_lo, la_hi), h0, then dout dhT),
 * and copy them exactly into d (the reference sees the same float32 values). */
void ssdt_fill_inputs(ssdt_set *f, cg_rng *r, double la_lo, double la_hi, int which);
void ssdt_copy_inputs(ssdt_set *d, const ssdt_set *f, int which);
/* f (float32) and d (dtype dd) of dims for the directions `which`: f's inputs random
 * (seed; log_alpha in [la_lo, la_hi)) and the same values in d. */
void ssdt_pair_new(ssdt_set *f, ssdt_set *d, ssdt_dims dims, cg_dtype dd, int which, uint64_t seed, double la_lo,
                   double la_hi);

/* cg_ssd_fwd / cg_ssd_bwd on s; h0, hT, dhT, dh0 0: passed absent. */
cg_status ssdt_run_fwd(cg_context *ctx, ssdt_set *s, int layout, int h0, int hT, cg_backend be,
                       const char *config);
cg_status ssdt_run_bwd(cg_context *ctx, ssdt_set *s, int layout, int h0, int dhT, int dh0, cg_backend be,
                       const char *config);

/* The generator's shape of d (its symbols; float32, nothing optional given). */
void ssdt_shape(ssdt_dims d, cg_shape *s);
/* Poison the outputs of `which` (SSDT_FWD: o hT; SSDT_BWD: dq dk dv dla dh0; uniform in
 * [1e3, 2e3) from seeds 7, 8, ... in that order) so a kernel that skips an element fails. */
void ssdt_poison_outputs(ssdt_set *s, int which);
/* The outputs of `which` of s (dims d, float32) kept, again(ctx, s, arg) run (a failure
 * when it does not return CG_OK), and the name of the first output of `which` whose values
 * it changed; NULL: the same values. */
const char *ssdt_again_differs(cg_context *ctx, ssdt_set *s, ssdt_dims d, int which,
                               cg_status (*again)(cg_context *, ssdt_set *, const void *), const void *arg);
/* "B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld" of d in buf; returns buf. */
const char *ssdt_dims_str(ssdt_dims d, char *buf, size_t len);
/* 1 when a call with config (NULL: the default) on d returned CG_OK, else a test failure
 * naming the config, the shape, the status and the message, and 0. */
int ssdt_ran(cg_context *ctx, cg_status s, const char *config, ssdt_dims d);

/* A generated kernel's config space over a test's table of shapes. The callbacks get
 * `user` (the test's cases); a case is made on the first config that runs on it. */
typedef struct ssdt_space {
    const char *kernel; /* "ssd_fwd" */
    const char *label;  /* of the summary line on stderr */
    int nshapes;
    void *user;
    int (*shape)(void *user, int shape, cg_shape *s); /* the generator's shape; returns its flags */
    void (*make)(void *user, cg_context *ctx, int shape, uint64_t seed);
    void (*drop)(void *user, int shape);
    /* run config on the case of shape, check it against tol; 1 when it ran */
    int (*check)(void *user, cg_context *ctx, int shape, cg_backend be, const char *config, double tol);
    /* the default config's second call on the case of shape (emulated): the same bits */
    void (*again)(void *user, cg_context *ctx, int shape);
} ssdt_space;

/* The configs with precision prec accepted for any shape that cg_sweep_select keeps (the
 * covering sample; every one under CHUNKGEN_TEST_SWEEP=full: tests/sweep_sample.h), each
 * run once on a rotating choice among the shapes that accept it. tol_tf32 for tf32,
 * tol_fp32 otherwise. Skips without a CUDA device. */
void ssdt_run_space(const ssdt_space *sp, const char *prec, cg_backend be, double tol_fp32,
                    double tol_tf32);

/* Emulated, the default config (fp32-accurate) on every shape (cases of seed 2000 + i):
 * each checked against tol, its dispatch line names the kernel (kernel=KERNEL_) and is
 * not plain tf32; then again() on it. */
void ssdt_run_default(const ssdt_space *sp, double tol);

/* A test's cases over its shapes of type SHAPE (whose first member is `ssdt_dims d`):
 * `tcase` holds a problem in F32 (for the kernels) and its F64 reference, computed by
 * the test's RUN(ctx, set, shape, CG_BACKEND_REF, NULL), for the directions WHICH;
 * case_new(ctx, case, shape, seed) makes one and case_free frees it; check_again(ctx, case,
 * i) runs the default config again (emulated) and checks every output of WHICH bit for bit. */
#define SSDT_CASES(SHAPE, RUN, WHICH)                                                                          \
    typedef struct tcase {                                                                                     \
        SHAPE c;                                                                                               \
        ssdt_set f, d; /* f32 inputs/outputs, f64 reference */                                                 \
    } tcase;                                                                                                   \
    static void case_new(cg_context *ctx, tcase *g, const SHAPE *c, uint64_t seed) {                           \
        g->c = *c;                                                                                             \
        ssdt_pair_new(&g->f, &g->d, c->d, CG_F64, WHICH, seed, -0.4, 0.0); /* decays from 0.67 to 1 */         \
        CG_CHECK_OK(ctx, RUN(ctx, &g->d, c, CG_BACKEND_REF, NULL));                                            \
    }                                                                                                          \
    static void case_free(tcase *g) {                                                                          \
        ssdt_set_free(&g->f);                                                                                  \
        ssdt_set_free(&g->d);                                                                                  \
    }                                                                                                          \
    static cg_status run_default_emu(cg_context *ctx, ssdt_set *s, const void *c) {                            \
        return RUN(ctx, s, (const SHAPE *)c, CG_BACKEND_EMULATE, NULL);                                        \
    }                                                                                                          \
    /* The default config's second call (the plan table's) gives the same bits: deterministic. */            \
    static void check_again(cg_context *ctx, tcase *g, int i) {                                                \
        const char *diff = ssdt_again_differs(ctx, &g->f, g->c.d, WHICH, run_default_emu, &g->c);              \
        CG_CHECK(!diff, "second run differs: %s (shape %d)", diff ? diff : "", i);                             \
    }

/* A test's run_space(prec, be) and run_default() over its `k_shapes[NSHAPES]`
 * (SSDT_CASES): cases checked by check_config(ctx, case, be, config, tol) and
 * check_again(ctx, case, shape) of the test; FLAGS(c) are the CG_KS_* flags of shape c.
 * run_space: the configs with precision `prec` accepted for any test shape that the
 * sweep's selection keeps (the covering sample in CI, all of them under
 * CHUNKGEN_TEST_SWEEP=full: sweep_sample.h), each run once on a rotating choice among the
 * shapes that accept it. run_default: the default config on every shape, and a second
 * call (check_again). */
#define SSDT_RUN_SPACE(FLAGS, kernel, label)                                                                   \
    static tcase g_cases[NSHAPES];                                                                             \
    static int sp_shape(void *u, int i, cg_shape *s) {                                                         \
        (void)u;                                                                                               \
        ssdt_shape(k_shapes[i].d, s);                                                                          \
        return FLAGS(&k_shapes[i]);                                                                            \
    }                                                                                                          \
    static void sp_make(void *u, cg_context *ctx, int i, uint64_t seed) {                                      \
        case_new(ctx, &((tcase *)u)[i], &k_shapes[i], seed);                                                   \
    }                                                                                                          \
    static void sp_drop(void *u, int i) { case_free(&((tcase *)u)[i]); }                                       \
    static int sp_check(void *u, cg_context *ctx, int i, cg_backend be, const char *config, double tol) {     \
        return check_config(ctx, &((tcase *)u)[i], be, config, tol);                                           \
    }                                                                                                          \
    static void sp_again(void *u, cg_context *ctx, int i) { check_again(ctx, &((tcase *)u)[i], i); }           \
    static const ssdt_space k_space = {kernel, label, NSHAPES, g_cases, sp_shape, sp_make,                     \
                                       sp_drop, sp_check,   sp_again};                                         \
    static void run_space(const char *prec, cg_backend be) {                                                   \
        ssdt_run_space(&k_space, prec, be, TOL_FP32, TOL_TF32);                                                \
    }                                                                                                          \
    static void run_default(void) { ssdt_run_default(&k_space, TOL_FP32); }


#endif
