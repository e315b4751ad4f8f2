/* test_dtype_acc.c -- the accuracy targets of 16-bit storage (issue #15 item 5,
 * docs/dtypes.md): on the odd-shape set, for every backend that takes 16-bit tensors,
 * every output and gradient is compared with the float64 reference on the same rounded
 * inputs. Metric (cg_erracc, one definition): max |out - ref| / max |ref| per tensor.
 * A 16-bit output must be within its dtype's target (bf16 1e-2, f16 2e-3: cg__tol_dtype)
 * and within 2x the error of the same backend's float32 computation on the same inputs
 * with its result rounded to that dtype; a float32 output of a 16-bit call (hT, dA, ...)
 * within its float32 target and 2x the float32 computation's error. The worst errors
 * and ratios per backend, op and dtype go to stderr (the table in docs/dtypes.md). */
#include "test_dtype_lib.h"

/* The backends that take 16-bit tensors and the ops they take them for (1 << cg_op):
 * one line each (issue #15 items 2 and 3 add theirs as they land). */
static const struct acc_backend {
    cg_backend be;
    unsigned ops;
} k_backends[] = {
    {CG_BACKEND_REF, 0xf},
    {CG_BACKEND_CPU, 0xf}, /* issue #15 item 3: runtime/cpu/cpu_half.h */
    {CG_BACKEND_EMULATE, 0xf}, /* the generated kernels: sscan, and SSD (templates/ssd_*.cu, issue #15 item 2) */
};
#define NBACKENDS ((int)(sizeof k_backends / sizeof k_backends[0]))

/* The odd-shape set: SSD T 1 and 37, dk 7 / 48 / 130, dv 40, G 2 < H 4, both layouts;
 * sscan L 1 and 37, (D, N) (6, 5) / (40, 16) / (130, 3), G 2 grouped and ungrouped. */
typedef struct acc_shape {
    int64_t dims[CG_SYM_COUNT];
    int grouped, hm;
} acc_shape;

static int shapes_of(const cg_op_desc *d, acc_shape *s) {
    int n = 0;
    const int64_t seq[2] = {1, 37}, dk[3] = {7, 48, 130}, D[3] = {6, 40, 130}, N[3] = {5, 16, 3};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++) {
                acc_shape *x = &s[n++];
                memset(x, 0, sizeof *x);
                x->dims[CG_SYM_B] = 2, x->dims[CG_SYM_G] = 2;
                if (!strcmp(d->family, "ssd")) {
                    x->dims[CG_SYM_T] = seq[a], x->dims[CG_SYM_H] = 4, x->dims[CG_SYM_DK] = dk[b];
                    x->dims[CG_SYM_DV] = 40;
                    x->grouped = 1, x->hm = c;
                } else {
                    x->dims[CG_SYM_L] = seq[a], x->dims[CG_SYM_D] = D[b], x->dims[CG_SYM_N] = N[b];
                    x->grouped = c;
                }
            }
    return n;
}

typedef struct acc_worst {
    double err16, ratio; /* worst 16-bit output error; worst err / err of float32 rounded */
    const char *at;
} acc_worst;

/* One case: returns 0 when it could not run (a failure is recorded). */
static int run_case(cg_context *ctx, const struct acc_backend *bk, const cg_op_desc *d, const acc_shape *sh,
                    cg_dtype H, uint64_t seed, acc_worst *w) {
    dtt_prob p16, p32, r64;
    dtt_new(&p16, d->op, sh->dims, sh->grouped, sh->hm, H, CG_F32, 0);
    dtt_new(&p32, d->op, sh->dims, sh->grouped, sh->hm, CG_F32, CG_F32, 0);
    dtt_new(&r64, d->op, sh->dims, sh->grouped, sh->hm, CG_F64, CG_F64, 0);
    dtt_fill(&p16, seed); /* rounded once into the 16-bit inputs */
    dtt_copy_inputs(&p32, &p16);
    dtt_copy_inputs(&r64, &p16);
    int ok = 1;
    cg_status s16 = dtt_run(ctx, &p16, bk->be);
    CG_CHECK(s16 == CG_OK, "%s %s on %s: %s", d->name, cg__dtype_name(H), cg_backend_name(bk->be), cg_errmsg(ctx));
    cg_status s32 = dtt_run(ctx, &p32, bk->be);
    CG_CHECK(s32 == CG_OK, "%s f32 on %s: %s", d->name, cg_backend_name(bk->be), cg_errmsg(ctx));
    cg_status s64 = dtt_run(ctx, &r64, CG_BACKEND_REF);
    CG_CHECK(s64 == CG_OK, "%s f64 ref: %s", d->name, cg_errmsg(ctx));
    if (s16 || s32 || s64) ok = 0;
    for (int i = 0; ok && i < d->nt; i++) {
        if (d->t[i].role != CG_TD_OUT || !p16.t[i].t.data) continue;
        const cg_tbuf *o16 = &p16.t[i];
        const cg_dtype dt = o16->t.dtype;
        cg_tbuf q = cg_tbuf_new(dt, o16->t.ndim, o16->t.shape); /* the float32 result rounded to dt */
        cg_tbuf_copy(&q, &p32.t[i]);
        const double e16 = cg_rel_err(o16, &r64.t[i]), e32 = cg_rel_err(&q, &r64.t[i]);
        const double tol = cg__tol_dtype(d->t[i].tol, dt);
        cg_tbuf_free(&q);
        char at[160];
        snprintf(at, sizeof at, "%s.%s %s T/L=%lld dk/D=%lld %s%s", d->name, d->t[i].name, cg__dtype_name(dt),
                 (long long)(sh->dims[CG_SYM_T] + sh->dims[CG_SYM_L]), (long long)(sh->dims[CG_SYM_DK] + sh->dims[CG_SYM_D]),
                 sh->hm ? "head-major" : "token-major", sh->grouped ? "" : " ungrouped");
        CG_CHECK(e16 <= tol, "%s on %s: rel err %.3g above the target %.0e", at, cg_backend_name(bk->be), e16, tol);
        CG_CHECK(e16 <= 2 * e32, "%s on %s: rel err %.3g more than 2x the float32 computation's rounded (%.3g)", at,
                 cg_backend_name(bk->be), e16, e32);
        if (cg__dtype_half(dt) && e16 > w->err16) w->err16 = e16, w->at = d->t[i].name;
        if (e32 > 0 && e16 / e32 > w->ratio) w->ratio = e16 / e32;
    }
    dtt_free(&p16);
    dtt_free(&p32);
    dtt_free(&r64);
    return ok;
}

CG_TEST(dtype_acc_odd_shapes) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    int ran = 0;
    for (int b = 0; b < NBACKENDS; b++)
        for (int op = 0; op < CG_OP_COUNT; op++) {
            if (!(k_backends[b].ops >> op & 1u)) continue;
            const cg_op_desc *d = cg__op_desc((cg_op)op);
            acc_shape sh[16];
            int ns = shapes_of(d, sh);
            for (int h = 0; h < 2; h++) {
                const cg_dtype H = h ? CG_F16 : CG_BF16;
                acc_worst w = {0, 0, ""};
                for (int k = 0; k < ns; k++) ran += run_case(ctx, &k_backends[b], d, &sh[k], H, 100 + (uint64_t)k, &w);
                fprintf(stderr, "accuracy %-7s %-9s %-7s worst 16-bit rel err %.2e (%s), worst ratio to float32 rounded %.2f\n",
                        cg_backend_name(k_backends[b].be), d->name, cg__dtype_name(H), w.err16, w.at, w.ratio);
            }
        }
    CG_CHECK(ran > 0, "no case ran");
    cg_context_free(ctx);
}
