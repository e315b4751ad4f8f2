/* test_shape_kernel.c -- what Lua's shape table adds to a call's cg_shape is made in one
 * place (runtime/kshape.c): the flags (cg__shape_kflags: grouped, the flag of each optional
 * tensor given and scalar option set by the op table's kflag column) and the 16-bit
 * tensors (cg__shape_dtypes); and the shape of a validated problem (cg__shape_of_prob, the launcher's
 * and the CPU path's key) is cg_shape_of's. White-box: the library's own headers. */
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
