/* gdr_testlib.c -- the gated delta rule's test cases (gdr_testlib.h). */
#include "gdr_testlib.h"

#include <string.h>

void gdr_case_new(dtt_prob *p, cg_tbuf *cu, cg_op op, const gdr_case *c, cg_dtype half, cg_dtype other,
                  uint64_t seed, uint64_t salt) {
    const cg_op_desc *d = cg__op_desc(op);
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_B] = c->B, dims[CG_SYM_T] = c->T, dims[CG_SYM_G] = c->G, dims[CG_SYM_H] = c->H;
    dims[CG_SYM_DK] = c->dk, dims[CG_SYM_DV] = c->dv;
    unsigned omit = 0;
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].optional && !c->states) omit |= 1u << i;
    dtt_new(p, op, dims, 1, c->hm, half, other, omit);
    for (int i = 0; i < d->nt && c->nseq; i++) { /* states [nseq, ...] */
        if (!(d->t[i].flags & CG_TD_PERSEQ) || !p->t[i].t.data) continue;
        int64_t shape[4];
        const int nd = cg__op_given_shape(d, i, p->dims, 1, c->hm, shape);
        shape[0] = c->nseq;
        const cg_dtype dt = p->t[i].t.dtype;
        cg_tbuf_free(&p->t[i]);
        p->t[i] = cg_tbuf_new(dt, nd, shape);
    }
    dtt_fill(p, seed);
    cg_rng r = {seed ^ salt};
    if (c->bhi > 0) cg_tbuf_fill(&p->t[dtt_idx(p, "beta")], &r, c->blo, c->bhi);
    if (c->glo < 0) cg_tbuf_fill(&p->t[dtt_idx(p, "g")], &r, c->glo, c->ghi);
    memset(cu, 0, sizeof *cu);
    if (c->nseq) {
        const int64_t n1 = c->nseq + 1;
        *cu = cg_tbuf_new(CG_I64, 1, &n1);
        memcpy(cu->mem, c->cu, (size_t)n1 * sizeof(int64_t));
    }
}

void *gdr_case_args(dtt_prob *p, const cg_tbuf *cu, const gdr_case *c) {
    void *args = (void *)dtt_args(p);
    if (p->d->op == CG_OP_GDR_FWD) {
        cg_gdr_fwd_args *a = args;
        a->use_qk_l2norm = c->l2norm, a->scale = c->scale;
        if (c->nseq) a->cu_seqlens = cu->t;
    } else {
        cg_gdr_bwd_args *a = args;
        a->use_qk_l2norm = c->l2norm, a->scale = c->scale;
        if (c->nseq) a->cu_seqlens = cu->t;
    }
    return args;
}

cg_status gdr_case_run(cg_context *ctx, dtt_prob *p, const cg_tbuf *cu, const gdr_case *c, cg_backend be,
                       const char *cfg) {
    void *args = gdr_case_args(p, cu, c);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    ex.config = cfg;
    return cg_run(ctx, p->d->op, args, &ex);
}

void gdr_check_fla_rms(const dtt_prob *p, const dtt_prob *r, const char *what) {
    static const struct {
        const char *name;
        double tol;
    } fla[] = {{"o", 5e-3},  {"hT", 5e-3},  {"dq", 8e-3},    {"dk", 8e-3},
               {"dv", 8e-3}, {"dh0", 8e-3}, {"dbeta", 2e-2}, {"dg", 2e-2}};
    const cg_dtype dt = p->t[dtt_idx(p, "q")].t.dtype;
    if (dt != CG_BF16 && dt != CG_F16) return;
    char line[256];
    int n = snprintf(line, sizeof line, "  %s: fla rms", what);
    for (size_t k = 0; k < sizeof fla / sizeof fla[0]; k++) {
        int i = -1;
        for (int j = 0; j < p->d->nt; j++)
            if (p->d->t[j].role == CG_TD_OUT && !strcmp(p->d->t[j].name, fla[k].name)) i = j;
        if (i < 0 || !p->t[i].t.data) continue;
        const double err = cg_rms_err(&p->t[i], &r->t[i]);
        CG_CHECK(err <= fla[k].tol, "%s: %s relative rms err %.3g > fla's %.0e", what, fla[k].name, err, fla[k].tol);
        if (n < (int)sizeof line) n += snprintf(line + n, sizeof line - (size_t)n, " %s %.2e", fla[k].name, err);
    }
    printf("%s\n", line);
}
