/* test_conformance.c -- one harness for every op x every backend x a list of odd shapes
 * against the float64 reference (in the style of ggml's test-backend-ops).
 *
 * Everything about an op's tensors comes from the op table (runtime/ops.h): which exist,
 * their extents, their value ranges and the accuracy class of each output; the targets
 * come from the one tolerance table (cg__tol), the error from the one relative-error
 * helper. Head-major cases pass permuted views of token-major memory; outputs start as
 * NaN so an element a backend does not write fails. */
#include "cg_test.h"
#include "ops.h"
#include "gen.h"

typedef struct conf_case {
    const char *name;
    const char *family;         /* the ops it runs: the op table's family */
    int64_t B, T, G, H, dk, dv; /* SSD and gdr; T is L for sscan */
    int64_t D, N;               /* sscan */
    int hm;                     /* SSD, gdr: head-major layout */
    int all;                    /* every optional tensor and option on (else all off) */
} conf_case;

/* T = 1; T not a multiple of any chunk; dk, dv not powers of two; G > 1 with G < H; both
 * layouts; grouped and ungrouped B/C; options on and off. */
static const conf_case k_cases[] = {
    {.name = "ssd_t1", .family = "ssd", .B = 1, .T = 1, .G = 1, .H = 1, .dk = 8, .dv = 8, .all = 1},
    {.name = "ssd_g2h4_dk7_dv40_head", .family = "ssd", .B = 2, .T = 37, .G = 2, .H = 4, .dk = 7, .dv = 40, .hm = 1,
     .all = 1},
    {.name = "ssd_dk48_dv40_t130_bare", .family = "ssd", .B = 1, .T = 130, .G = 1, .H = 2, .dk = 48, .dv = 40},
    {.name = "sscan_l1", .family = "sscan", .B = 1, .T = 1, .G = 1, .D = 4, .N = 3, .all = 1},
    {.name = "sscan_l37_d6_n5_bare", .family = "sscan", .B = 2, .T = 37, .G = 1, .D = 6, .N = 5},
    {.name = "sscan_l97_g2_grouped", .family = "sscan", .B = 2, .T = 97, .G = 2, .D = 8, .N = 4, .all = 1},
    {.name = "gdr_t1", .family = "gdr", .B = 1, .T = 1, .G = 1, .H = 1, .dk = 8, .dv = 8, .all = 1},
    {.name = "gdr_g2h6_dk48_dv40_t37_head", .family = "gdr", .B = 2, .T = 37, .G = 2, .H = 6, .dk = 48, .dv = 40,
     .hm = 1, .all = 1},
    {.name = "gdr_dk7_dv5_t130_bare", .family = "gdr", .B = 1, .T = 130, .G = 1, .H = 2, .dk = 7, .dv = 5},
    {.name = "lru_l1", .family = "lru", .B = 1, .T = 1, .G = 1, .D = 4, .all = 1},
    {.name = "lru_l37_d37_head", .family = "lru", .B = 2, .T = 37, .G = 1, .D = 37, .hm = 1, .all = 1},
    {.name = "lru_l130_d5_bare", .family = "lru", .B = 1, .T = 130, .G = 1, .D = 5},
    {.name = "lru_l33_d200_blocks", .family = "lru", .B = 3, .T = 33, .G = 1, .D = 200, .all = 1},
};

typedef cg_args_any conf_args; /* any op's args struct (op_list.h) */

typedef struct conf_run {
    int present[CG_OP_MAX_TENSORS];
    cg_tbuf f32[CG_OP_MAX_TENSORS], f64[CG_OP_MAX_TENSORS];
    void *dev[CG_OP_MAX_TENSORS]; /* kernel memory (cuda) */
} conf_run;

/* Whether tensor i takes part in case c. */
static int present(const cg_op_desc *d, int i, const conf_case *c) {
    const cg_tdesc *t = &d->t[i];
    if (!t->optional) return 1;
    if (t->requires && !present(d, cg__op_tensor(d, t->requires), c)) return 0;
    return c->all;
}

/* A generated-kernel backend and an op without generated kernels (cg_kernel_list names
 * them by op: generator/kernels/<op>.lua). */
static int kx_less_op(cg_context *ctx, const cg_op_desc *d, cg_backend backend) {
    if (backend != CG_BACKEND_CUDA && backend != CG_BACKEND_EMULATE) return 0;
    const char *const *names;
    int n = 0;
    CG_CHECK_OK(ctx, cg_kernel_list(ctx, &names, &n));
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], d->name)) return 0;
    return 1;
}

/* Run case c of op on backend (kx: through copies in kernel memory). */
static void run_case(cg_context *ctx, cg_op op, const conf_case *c, cg_backend backend, const cg_kexec *kx) {
    const cg_op_desc *d = cg__op_desc(op);
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_NONE] = 1;
    dims[CG_SYM_B] = c->B, dims[CG_SYM_G] = c->G;
    if (d->seq == CG_SYM_L) dims[CG_SYM_L] = c->T, dims[CG_SYM_D] = c->D, dims[CG_SYM_N] = c->N;
    else dims[CG_SYM_T] = c->T, dims[CG_SYM_H] = c->H, dims[CG_SYM_DK] = c->dk, dims[CG_SYM_DV] = c->dv;
    const int grouped = c->G > 1;
    conf_run r;
    memset(&r, 0, sizeof r);
    conf_args a32, a64;
    memset(&a32, 0, sizeof a32);
    memset(&a64, 0, sizeof a64);
    cg_rng rng = {0xc0f ^ (uint64_t)op * 977 ^ (uint64_t)c->T};
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *t = &d->t[i];
        if (!(r.present[i] = present(d, i, c))) continue;
        int64_t shape[4];
        int nd = cg__op_given_shape(d, i, dims, grouped, c->hm, shape);
        /* head-major: a permuted view of token-major memory */
        int perm[4] = {0, 1, 2, 3};
        if ((t->flags & CG_TD_LAYOUT) && c->hm) perm[1] = 2, perm[2] = 1;
        r.f32[i] = cg_tbuf_new_perm(CG_F32, nd, shape, perm);
        r.f64[i] = cg_tbuf_new_perm(CG_F64, nd, shape, perm);
        if (t->role == CG_TD_IN) {
            cg_tbuf_fill(&r.f32[i], &rng, t->lo, t->hi);
            cg_tbuf_copy(&r.f64[i], &r.f32[i]);
        } else {
            cg_tbuf_fill(&r.f32[i], &rng, NAN, NAN);
        }
        *cg__args_tensor(d, &a32, i) = r.f32[i].t;
        *cg__args_tensor(d, &a64, i) = r.f64[i].t;
    }
    if (d->layout_arg_off != (size_t)-1) {
        *(cg_layout *)((char *)&a32 + d->layout_arg_off) = c->hm ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
        *(cg_layout *)((char *)&a64 + d->layout_arg_off) = c->hm ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
    }
    for (int k = 0; k < d->nscalar; k++) {
        *(int *)((char *)&a32 + d->scalar[k].arg_off) = c->all;
        *(int *)((char *)&a64 + d->scalar[k].arg_off) = c->all;
    }
    cg_exec ref = {.backend = CG_BACKEND_REF};
    CG_CHECK_OK(ctx, cg_run(ctx, op, &a64, &ref));

    cg_status st = CG_OK;
    if (kx) { /* device copies of every tensor, outputs as NaN too */
        for (int i = 0; i < d->nt && st == CG_OK; i++) {
            if (!r.present[i]) continue;
            size_t bytes = (size_t)r.f32[i].count * sizeof(float);
            st = kx->alloc(ctx, bytes, &r.dev[i]);
            if (st == CG_OK) st = kx->copy(ctx, r.dev[i], r.f32[i].mem, bytes, 0, NULL);
            cg_tensor *t = cg__args_tensor(d, &a32, i);
            t->data = (char *)r.dev[i] + ((char *)t->data - (char *)r.f32[i].mem);
        }
        CG_CHECK_OK(ctx, st);
    }
    cg_exec ex = {.backend = backend};
    if (st == CG_OK && kx_less_op(ctx, d, backend)) {
        /* no generated kernel for the op yet: the backend refuses it, saying so */
        st = cg_run(ctx, op, &a32, &ex);
        CG_CHECK(st == CG_EUNSUPPORTED && strstr(cg_errmsg(ctx), "no kernel"), "%s %s on %s: %s: %s", d->name, c->name,
                 cg_backend_name(backend), cg_status_str(st), cg_errmsg(ctx));
        st = CG_EUNSUPPORTED; /* nothing to compare */
    } else if (st == CG_OK) {
        st = cg_run(ctx, op, &a32, &ex);
        CG_CHECK(st == CG_OK, "%s %s on %s: %s: %s", d->name, c->name, cg_backend_name(backend), cg_status_str(st),
                 cg_errmsg(ctx));
    }
    for (int i = 0; kx && i < d->nt && st == CG_OK; i++)
        if (r.present[i] && d->t[i].role == CG_TD_OUT)
            st = kx->copy(ctx, r.f32[i].mem, r.dev[i], (size_t)r.f32[i].count * sizeof(float), 1, NULL);
    for (int i = 0; i < d->nt && st == CG_OK; i++) {
        if (!r.present[i] || d->t[i].role != CG_TD_OUT) continue;
        double err = cg_rel_err(&r.f32[i], &r.f64[i]), tol = cg__tol(d->t[i].tol);
        CG_CHECK(err <= tol, "%s %s on %s: %s rel err %.3g > %.0e (%s)", d->name, c->name, cg_backend_name(backend),
                 d->t[i].name, err, tol, cg_last_dispatch(ctx));
    }
    for (int i = 0; i < d->nt; i++) {
        if (!r.present[i]) continue;
        if (r.dev[i]) kx->free(ctx, r.dev[i]);
        cg_tbuf_free(&r.f32[i]);
        cg_tbuf_free(&r.f64[i]);
    }
}

static void run_all(cg_backend backend, const cg_kexec *kx) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    if (kx) {
        cg_devinfo dev;
        if (kx->device(ctx, &dev) != CG_OK) {
            cg_test_skip("no CUDA device");
            cg_context_free(ctx);
            return;
        }
    }
    for (int op = 0; op < CG_OP_COUNT; op++)
        for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
            if (!strcmp(k_cases[c].family, cg__op_desc((cg_op)op)->family) &&
                !cg__op_slots(cg__op_desc((cg_op)op))) /* decode steps (slot indices): tests/test_step.c */
                run_case(ctx, (cg_op)op, &k_cases[c], backend, kx);
    cg_context_free(ctx);
}

CG_TEST(conformance_cpu) { run_all(CG_BACKEND_CPU, NULL); }
CG_TEST(conformance_emulate) { run_all(CG_BACKEND_EMULATE, NULL); }
/* The reference itself on float32 views (it computes in float64 either way). */
CG_TEST(conformance_ref_f32) { run_all(CG_BACKEND_REF, NULL); }
CG_TEST(conformance_cuda) { run_all(CG_BACKEND_CUDA, &cg__kexec_cuda); }
