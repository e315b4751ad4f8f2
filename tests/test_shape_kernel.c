/* test_shape_kernel.c -- what Lua's shape table adds to a call's cg_shape is made in one
 * place (runtime/kshape.c): the flags (cg__shape_kflags: grouped, the flag of each optional
 * tensor given and scalar option set by the op table's kflag column) and the 16-bit
 * tensors (cg__shape_dtypes); and a validated problem carries the call's cg_shape (its op
 * and extents, written by validation). White-box: the library's own headers. */
#include "cg_test.h"
#include "gen.h"
#include "ops.h"

/* Every op with everything on (optional tensors, scalars, grouped, bf16) and with nothing. */
CG_TEST(shape_kernel_flags) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        for (int on = 0; on < 2; on++) {
            char text[CG_SHAPE_TEXT_MAX];
            size_t n = (size_t)snprintf(text, sizeof text, "%s:", d->name);
            for (int s = 1; s < CG_SYM_COUNT; s++)
                if (d->dim_off[s] != (size_t)-1 && (s != CG_SYM_G || on || d->grouped_off == (size_t)-1))
                    n += (size_t)snprintf(text + n, sizeof text - n, "%s=%d,", cg_sym_name((cg_sym)s), s == CG_SYM_G ? 1 : 4);
            int want = 0;
            for (int i = 0; on && i < d->nt; i++)
                if (d->t[i].optional) {
                    n += (size_t)snprintf(text + n, sizeof text - n, "%s,", d->t[i].name);
                    want |= d->t[i].kflag;
                }
            for (int k = 0; on && k < d->nscalar; k++) {
                n += (size_t)snprintf(text + n, sizeof text - n, "%s,", d->scalar[k].name);
                want |= d->scalar[k].kflag;
            }
            if (on && d->grouped_off != (size_t)-1) want |= CG_KS_GROUPED;
            if (on) n += (size_t)snprintf(text + n, sizeof text - n, "dtype=bf16,");
            text[n - 1] = 0;
            cg_shape s = {0};
            CG_CHECK_OK(ctx, cg_shape_parse(ctx, text, &s));
            const int flags = cg__shape_kflags(&s, CG_KS_BWD);
            CG_CHECK(flags == (want | CG_KS_BWD), "%s: flags %#x, want %#x", text, flags, want | CG_KS_BWD);
            char dtypes[CG_KS_DTYPES_CAP];
            cg__shape_dtypes(&s, dtypes);
            /* dtypes: "name=bf16" for exactly the 16-bit tensors, in table order */
            char want_dt[CG_KS_DTYPES_CAP] = "";
            for (int i = 0, m = 0; i < d->nt; i++)
                if (s.half & ((uint64_t)1 << i)) m += snprintf(want_dt + m, sizeof want_dt - (size_t)m, "%s%s=bf16", m ? " " : "", d->t[i].name);
            CG_CHECK(!strcmp(dtypes, want_dt) && (!on || want_dt[0]), "%s: dtypes \"%s\", want \"%s\"", text, dtypes, want_dt);
        }
    }
    cg_context_free(ctx);
}

/* The validated problem carries the call's cg_shape (internal.h, written by validation):
 * its op and each of the op's extents (CG_DIM), for every op; a symbol the op lacks
 * stays 0. The symbols take distinct values so that a mixed-up offset shows. */
CG_TEST(shape_kernel_prob_carries_shape) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    static const int64_t val[CG_SYM_COUNT] = {0, 2, 3, 1, 2, 5, 7, 3, 4, 6, 3}; /* B T G H dk dv L D N S */
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        char text[CG_SHAPE_TEXT_MAX];
        size_t n = (size_t)snprintf(text, sizeof text, "%s:", d->name);
        for (int k = 1; k < CG_SYM_COUNT; k++)
            if (d->dim_off[k] != (size_t)-1)
                n += (size_t)snprintf(text + n, sizeof text - n, "%s=%lld,", cg_sym_name((cg_sym)k), (long long)val[k]);
        text[n - 1] = 0;
        cg_shape s = {.size = sizeof s};
        CG_CHECK_OK(ctx, cg_shape_parse(ctx, text, &s));
        cg_args_any args;
        cg_prob_any prob;
        cg_tbuf buf[CG_OP_MAX_TENSORS];
        memset(&args, 0, sizeof args);
        memset(buf, 0, sizeof buf);
        for (int i = 0; i < d->nt; i++) { /* every required tensor: zeros, slots 0, 1 ... */
            cg_tensor t;
            CG_CHECK_OK(ctx, cg_shape_tensor(ctx, &s, i, &t));
            if (d->t[i].optional) continue;
            buf[i] = cg_tbuf_new(t.dtype, t.ndim, t.shape);
            for (int64_t j = 0; (d->t[i].flags & CG_TD_INDEX) && j < buf[i].count; j++) /* slots: distinct */
                if (t.dtype == CG_I32) ((int32_t *)buf[i].mem)[j] = (int32_t)j;
                else ((int64_t *)buf[i].mem)[j] = j;
            *cg__args_tensor(d, &args, i) = buf[i].t;
        }
        CG_CHECK_OK(ctx, cg__op_validate(ctx, d, &args, &prob));
        const cg_shape *ps = (const cg_shape *)&prob; /* every problem's first member */
        CG_CHECK(ps->op == (cg_op)op && ps->size == sizeof *ps, "%s: the problem's shape is of op %d", text, (int)ps->op);
        for (int k = 1; k < CG_SYM_COUNT; k++) {
            const int64_t want = d->dim_off[k] != (size_t)-1 ? val[k] : 0;
            CG_CHECK(ps->dim[k] == want && cg__prob_dim(d, &prob, (cg_sym)k) == want, "%s: %s = %lld, want %lld", text,
                     cg_sym_name((cg_sym)k), (long long)ps->dim[k], (long long)want);
        }
        for (int i = 0; i < d->nt; i++) cg_tbuf_free(&buf[i]);
    }
    cg_context_free(ctx);
}
