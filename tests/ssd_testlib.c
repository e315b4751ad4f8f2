/* ssd_testlib.c -- scaffolding shared by the SSD tests (see ssd_testlib.h). No tests here. */
#include "ssd_testlib.h"

#include <string.h>

#include "cuda_testlib.h"
#include "sweep_sample.h"

cg_tbuf ssdt_mk(ssdt_dims d, cg_dtype dt, int64_t heads, int64_t dim) {
    static const int perm4[4] = {0, 2, 1, 3}, perm3[3] = {0, 2, 1};
    const int swap = dt == CG_F32 && d.swapped;
    if (dim == 0) { /* log_alpha */
        int64_t s[3] = {d.B, d.T, heads};
        if (d.layout == CG_LAYOUT_HEAD_MAJOR) s[1] = heads, s[2] = d.T;
        return cg_tbuf_new_perm(dt, 3, s, swap ? perm3 : NULL);
    }
    int64_t s[4] = {d.B, d.T, heads, dim};
    if (d.layout == CG_LAYOUT_HEAD_MAJOR) s[1] = heads, s[2] = d.T;
    return cg_tbuf_new_perm(dt, 4, s, swap ? perm4 : NULL);
}

void ssdt_set_alloc(ssdt_set *s, ssdt_dims d, cg_dtype dt, int which) {
    int64_t st[4] = {d.B, d.H, d.dk, d.dv};
    memset(s, 0, sizeof *s);
    s->q = ssdt_mk(d, dt, d.G, d.dk);
    s->k = ssdt_mk(d, dt, d.G, d.dk);
    s->v = ssdt_mk(d, dt, d.H, d.dv);
    s->la = ssdt_mk(d, dt, d.H, 0);
    s->h0 = cg_tbuf_new(dt, 4, st);
    if (which & SSDT_FWD) {
        s->o = ssdt_mk(d, dt, d.H, d.dv);
        s->hT = cg_tbuf_new(dt, 4, st);
    }
    if (which & SSDT_BWD) {
        s->dout = ssdt_mk(d, dt, d.H, d.dv);
        s->dq = ssdt_mk(d, dt, d.G, d.dk);
        s->dk = ssdt_mk(d, dt, d.G, d.dk);
        s->dv = ssdt_mk(d, dt, d.H, d.dv);
        s->dla = ssdt_mk(d, dt, d.H, 0);
        s->dhT = cg_tbuf_new(dt, 4, st);
        s->dh0 = cg_tbuf_new(dt, 4, st);
    }
}

void ssdt_set_free(ssdt_set *s) {
    cg_tbuf *all[] = {&s->q,   &s->k,   &s->v,  &s->la, &s->h0, &s->o,   &s->hT,
                      &s->dout, &s->dhT, &s->dq, &s->dk, &s->dv, &s->dla, &s->dh0};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

void ssdt_fill_inputs(ssdt_set *f, cg_rng *r, double la_lo, double la_hi, int which) {
    cg_tbuf_fill(&f->q, r, -1, 1);
    cg_tbuf_fill(&f->k, r, -1, 1);
    cg_tbuf_fill(&f->v, r, -1, 1);
    cg_tbuf_fill(&f->la, r, la_lo, la_hi);
    cg_tbuf_fill(&f->h0, r, -1, 1);
    if (which & SSDT_BWD) {
        cg_tbuf_fill(&f->dout, r, -1, 1);
        cg_tbuf_fill(&f->dhT, r, -1, 1);
    }
}

void ssdt_copy_inputs(ssdt_set *d, const ssdt_set *f, int which) {
    cg_tbuf_copy(&d->q, &f->q);
    cg_tbuf_copy(&d->k, &f->k);
    cg_tbuf_copy(&d->v, &f->v);
    cg_tbuf_copy(&d->la, &f->la);
    cg_tbuf_copy(&d->h0, &f->h0);
    if (which & SSDT_BWD) {
        cg_tbuf_copy(&d->dout, &f->dout);
        cg_tbuf_copy(&d->dhT, &f->dhT);
    }
}

void ssdt_pair_new(ssdt_set *f, ssdt_set *d, ssdt_dims dims, cg_dtype dd, int which, uint64_t seed, double la_lo,
                   double la_hi) {
    ssdt_set_alloc(f, dims, CG_F32, which);
    ssdt_set_alloc(d, dims, dd, which);
    cg_rng r = {seed};
    ssdt_fill_inputs(f, &r, la_lo, la_hi, which);
    ssdt_copy_inputs(d, f, which);
}

static const cg_tensor absent;

/* The inputs both directions take, as designated initializers of their args struct. */
#define SSDT_INPUT_ARGS(s, layout, h0)                                                                       \
    .layout = (cg_layout)(layout), .q = (s)->q.t, .k = (s)->k.t, .v = (s)->v.t, .log_alpha = (s)->la.t,        \
    .h0 = (h0) ? (s)->h0.t : absent

cg_status ssdt_run_fwd(cg_context *ctx, ssdt_set *s, int layout, int h0, int hT, cg_backend be,
                       const char *config) {
    cg_ssd_fwd_args a = {SSDT_INPUT_ARGS(s, layout, h0), .o = s->o.t};
    a.hT = hT ? s->hT.t : absent;
    cg_exec ex = {.backend = be, .config = config};
    return cg_ssd_fwd(ctx, &a, &ex);
}

cg_status ssdt_run_bwd(cg_context *ctx, ssdt_set *s, int layout, int h0, int dhT, int dh0, cg_backend be,
                       const char *config) {
    cg_ssd_bwd_args a = {SSDT_INPUT_ARGS(s, layout, h0), .dout = s->dout.t};
    a.dhT = dhT ? s->dhT.t : absent;
    a.dq = s->dq.t;
    a.dk = s->dk.t;
    a.dv = s->dv.t;
    a.dlog_alpha = s->dla.t;
    a.dh0 = dh0 ? s->dh0.t : absent;
    cg_exec ex = {.backend = be, .config = config};
    return cg_ssd_bwd(ctx, &a, &ex);
}

void ssdt_shape(ssdt_dims d, cg_shape *s) {
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    s->dim[CG_SYM_B] = d.B, s->dim[CG_SYM_T] = d.T, s->dim[CG_SYM_G] = d.G, s->dim[CG_SYM_H] = d.H;
    s->dim[CG_SYM_DK] = d.dk, s->dim[CG_SYM_DV] = d.dv;
}

/* s's outputs, in this order, with their names; the first two the forward's. */
#define SSDT_NOUT 7
static const char *const k_out_names[SSDT_NOUT] = {"o", "hT", "dq", "dk", "dv", "dla", "dh0"};
static void outputs(ssdt_set *s, cg_tbuf *out[SSDT_NOUT]) {
    cg_tbuf *all[SSDT_NOUT] = {&s->o, &s->hT, &s->dq, &s->dk, &s->dv, &s->dla, &s->dh0};
    memcpy(out, all, sizeof all);
}
static int out_of(int i, int which) { return (which & (i < 2 ? SSDT_FWD : SSDT_BWD)) != 0; }

void ssdt_poison_outputs(ssdt_set *s, int which) {
    cg_tbuf *out[SSDT_NOUT];
    outputs(s, out);
    uint64_t seed = 7;
    for (int i = 0; i < SSDT_NOUT; i++)
        if (out_of(i, which)) cg_tbuf_fill(out[i], &(cg_rng){seed++}, 1e3, 2e3);
}

const char *ssdt_again_differs(cg_context *ctx, ssdt_set *s, ssdt_dims d, int which,
                               cg_status (*again)(cg_context *, ssdt_set *, const void *), const void *arg) {
    ssdt_set keep;
    ssdt_set_alloc(&keep, d, CG_F32, which);
    cg_tbuf *out[SSDT_NOUT], *kept[SSDT_NOUT];
    outputs(s, out), outputs(&keep, kept);
    for (int i = 0; i < SSDT_NOUT; i++)
        if (out_of(i, which)) cg_tbuf_copy(kept[i], out[i]);
    const char *diff = NULL;
    CG_CHECK_OK(ctx, again(ctx, s, arg));
    for (int i = 0; i < SSDT_NOUT && !diff; i++)
        if (out_of(i, which) && cg_rel_err(out[i], kept[i]) != 0) diff = k_out_names[i];
    ssdt_set_free(&keep);
    return diff;
}

const char *ssdt_dims_str(ssdt_dims d, char *buf, size_t len) {
    snprintf(buf, len, "B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld", (long long)d.B, (long long)d.T, (long long)d.G,
             (long long)d.H, (long long)d.dk, (long long)d.dv);
    return buf;
}

int ssdt_ran(cg_context *ctx, cg_status s, const char *config, ssdt_dims d) {
    char dims[200];
    if (s == CG_OK) return 1;
    CG_CHECK(0, "config %s on %s: %s: %s", config ? config : "(default)", ssdt_dims_str(d, dims, sizeof dims),
             cg_status_str(s), cg_errmsg(ctx));
    return 0;
}

enum { MAX_SHAPES = 16 };

void ssdt_run_space(const ssdt_space *sp, const char *prec, cg_backend be, double tol_fp32,
                    double tol_tf32) {
    CG_CHECK(sp->nshapes <= MAX_SHAPES, "%d shapes, at most %d", sp->nshapes, MAX_SHAPES);
    if (sp->nshapes > MAX_SHAPES) return;
    cg_devinfo dev;
    cg_context *ctx = cg_test_device_context(be, &dev);
    if (!ctx) return;
    const int ns = sp->nshapes;
    cg_cfg *space[MAX_SHAPES];
    int nspace[MAX_SHAPES];
    for (int i = 0; i < ns; i++) {
        cg_shape ks;
        const int ksf = sp->shape(sp->user, i, &ks);
        space[i] = NULL;
        nspace[i] = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, sp->kernel, &ks, ksf, &dev, &space[i], &nspace[i]));
        CG_CHECK(nspace[i] > 0, "no config accepted for shape %d", i);
    }
    /* the union of the spaces (configs of precision prec), each on a rotating choice among
     * the shapes that accept it */
    const cg_cfg **cfgs;
    int *pick_of;
    const int total = cg_sweep_union(space, nspace, ns, prec, &cfgs, &pick_of);
    cg_sweep_sel sel;
    cg_sweep_select(cfgs, total, CG_SWEEP_PAIRS, &sel);
    int made[MAX_SHAPES] = {0};
    int ran = 0;
    const double tol = strcmp(prec, "tf32") == 0 ? tol_tf32 : tol_fp32;
    for (int q = 0; q < total; q++) {
        if (!cg_sweep_keeps(&sel, q)) continue;
        const int pick = pick_of[q];
        if (!made[pick]) {
            sp->make(sp->user, ctx, pick, 1000 + (uint64_t)pick);
            made[pick] = 1;
        }
        char text[512];
        cg__cfg_text(cfgs[q], text, sizeof text);
        ran += sp->check(sp->user, ctx, pick, be, text, tol);
    }
    CG_CHECK(total > 0, "no %s config in the space", prec);
    CG_CHECK(ran == sel.nkept && sel.nkept > 0, "%d of %d %s configs ran", ran, sel.nkept, prec);
    char what[96];
    fprintf(stderr, "%s: %s configs checked on %s: %s\n", sp->label, prec, cg_backend_name(be),
            cg_sweep_describe(&sel, what, sizeof what));
    cg_sweep_sel_free(&sel);
    free(cfgs);
    free(pick_of);
    for (int i = 0; i < ns; i++) {
        if (made[i]) sp->drop(sp->user, i);
        free(space[i]);
    }
    cg_context_free(ctx);
}

void ssdt_run_default(const ssdt_space *sp, double tol) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    char want[96];
    snprintf(want, sizeof want, "kernel=%s_", sp->kernel);
    for (int i = 0; i < sp->nshapes; i++) {
        sp->make(sp->user, ctx, i, 2000 + (uint64_t)i);
        if (sp->check(sp->user, ctx, i, CG_BACKEND_EMULATE, NULL, tol)) {
            const char *d = cg_last_dispatch(ctx);
            CG_CHECK(strstr(d, want) != NULL, "dispatch line without the kernel name: %s", d);
            CG_CHECK(strstr(d, "_tf32") == NULL || strstr(d, "_3xtf32") != NULL, "default is plain tf32: %s", d);
        }
        sp->again(sp->user, ctx, i);
        sp->drop(sp->user, i);
    }
    cg_context_free(ctx);
}
