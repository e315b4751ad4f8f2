/* test_ref.c -- the float64 reference checked against itself: every gradient against
 * central finite differences of the forward, and the forward against formulas of one
 * and two tokens written out by hand. Loss = sum(out * W) + sum(hT * W2). */
#include "cg_test.h"

#define FD_EPS 1e-5
#define FD_TOL 1e-6

/* Clone of b's layout with fresh zeroed memory. */
static cg_tbuf tbuf_like(const cg_tbuf *b) {
    cg_tbuf c = *b;
    c.mem = calloc((size_t)(b->count ? b->count : 1), b->t.dtype == CG_F64 ? sizeof(double) : sizeof(float));
    if (!c.mem) abort();
    c.t.data = c.mem;
    return c;
}

static double dot_flat(const cg_tbuf *a, const cg_tbuf *w) {
    const double *x = a->mem, *y = w->mem;
    double s = 0;
    for (int64_t i = 0; i < a->count; i++) s += x[i] * y[i];
    return s;
}

typedef double (*loss_fn)(void *arg);

/* Central differences of loss() in every element of x (F64, compact memory), compared
 * with the analytic gradient an. */
static void fd_check(const char *what, cg_tbuf *x, const cg_tbuf *an, loss_fn loss, void *arg) {
    cg_tbuf fd = tbuf_like(an);
    double *xm = x->mem, *fm = fd.mem;
    for (int64_t i = 0; i < x->count; i++) {
        double x0 = xm[i];
        xm[i] = x0 + FD_EPS;
        double lp = loss(arg);
        xm[i] = x0 - FD_EPS;
        double lm = loss(arg);
        xm[i] = x0;
        fm[i] = (lp - lm) / (2 * FD_EPS);
    }
    double err = cg_rel_err(an, &fd);
    CG_CHECK(err <= FD_TOL, "%s: rel err %.3g vs finite differences", what, err);
    cg_tbuf_free(&fd);
}

/* A buffer and the range its values are drawn from. */
typedef struct fill_rule {
    cg_tbuf *b;
    double lo, hi;
} fill_rule;

/* From r, in this order: the inputs in[n], the initial state h0 (when the case has one) and
 * the cotangents W of the output and W2 of the final state (W2 when the case has dhT). */
static void fill_case(const fill_rule *in, size_t n, cg_tbuf *h0, cg_tbuf *W, cg_tbuf *W2, int has_h0, int has_dhT,
                      cg_rng *r) {
    for (size_t i = 0; i < n; i++) cg_tbuf_fill(in[i].b, r, in[i].lo, in[i].hi);
    if (has_h0) cg_tbuf_fill(h0, r, -1, 1);
    cg_tbuf_fill(W, r, -1, 1);
    if (has_dhT) cg_tbuf_fill(W2, r, -1, 1);
}

static void free_bufs(cg_tbuf *const *all, size_t n) {
    for (size_t i = 0; i < n; i++) cg_tbuf_free(all[i]);
}

/* The loss whose gradients the backward gives: <out, W> (+ <hT, W2> when hT is not NULL),
 * after the forward that returned st. */
static double cot_loss(cg_context *ctx, cg_status st, const char *what, const cg_tbuf *out, const cg_tbuf *W,
                       const cg_tbuf *hT, const cg_tbuf *W2) {
    CG_CHECK(st == CG_OK, "%s forward: %s", what, cg_errmsg(ctx));
    double l = dot_flat(out, W);
    if (hT) l += dot_flat(hT, W2);
    return l;
}

/* ------------------------------------------------------------------------ SSD */

typedef struct ssd_case {
    int64_t B, T, G, H, dk, dv;
    int h0, dhT;     /* present */
    cg_layout layout;
} ssd_case;

typedef struct ssd_bufs {
    const ssd_case *c;
    cg_context *ctx;
    cg_tbuf q, k, v, la, h0, o, hT, W, W2;
    cg_tbuf dq, dk, dv, dla, dh0;
    int use_h0;      /* pass h0 to the forward (FD of dh0 with h0 absent uses zeros) */
} ssd_bufs;

static cg_tbuf ssd_buf(const ssd_case *c, int64_t heads, int64_t dim) {
    int64_t sh[4] = {c->B, c->T, heads, dim};
    if (c->layout == CG_LAYOUT_HEAD_MAJOR) { sh[1] = heads; sh[2] = c->T; }
    return cg_tbuf_new(CG_F64, dim ? 4 : 3, sh);
}

/* s's buffers for c on ctx (s zeroed first), the inputs and the cotangents drawn from seed. */
static void ssd_alloc(ssd_bufs *s, cg_context *ctx, const ssd_case *c, uint64_t seed) {
    cg_rng rng = {seed}, *r = &rng;
    int64_t st[4] = {c->B, c->H, c->dk, c->dv};
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->c = c;
    s->q = ssd_buf(c, c->G, c->dk);
    s->k = ssd_buf(c, c->G, c->dk);
    s->v = ssd_buf(c, c->H, c->dv);
    s->la = ssd_buf(c, c->H, 0);
    s->o = ssd_buf(c, c->H, c->dv);
    s->W = ssd_buf(c, c->H, c->dv);
    s->dq = ssd_buf(c, c->G, c->dk);
    s->dk = ssd_buf(c, c->G, c->dk);
    s->dv = ssd_buf(c, c->H, c->dv);
    s->dla = ssd_buf(c, c->H, 0);
    s->h0 = cg_tbuf_new(CG_F64, 4, st);
    s->hT = cg_tbuf_new(CG_F64, 4, st);
    s->W2 = cg_tbuf_new(CG_F64, 4, st);
    s->dh0 = cg_tbuf_new(CG_F64, 4, st);
    const fill_rule in[] = {{&s->q, -1, 1}, {&s->k, -1, 1}, {&s->v, -1, 1}, {&s->la, -0.8, 0.1}};
    fill_case(in, sizeof in / sizeof in[0], &s->h0, &s->W, &s->W2, c->h0, c->dhT, r);
    s->use_h0 = c->h0;
}

static void ssd_free(ssd_bufs *s) {
    cg_tbuf *all[] = {&s->q, &s->k, &s->v, &s->la, &s->h0, &s->o, &s->hT, &s->W, &s->W2,
                      &s->dq, &s->dk, &s->dv, &s->dla, &s->dh0};
    free_bufs(all, sizeof all / sizeof all[0]);
}

static const cg_exec ref_exec = {.backend = CG_BACKEND_REF};
static const cg_tensor no_tensor;

static cg_status ssd_forward(ssd_bufs *s, int want_hT) {
    cg_ssd_fwd_args a = {.layout = s->c->layout, .q = s->q.t, .k = s->k.t, .v = s->v.t,
                         .log_alpha = s->la.t, .h0 = s->use_h0 ? s->h0.t : no_tensor,
                         .o = s->o.t, .hT = want_hT ? s->hT.t : no_tensor};
    return cg_ssd_fwd(s->ctx, &a, &ref_exec);
}

static double ssd_loss(void *arg) {
    ssd_bufs *s = arg;
    return cot_loss(s->ctx, ssd_forward(s, 1), "ssd", &s->o, &s->W, s->c->dhT ? &s->hT : NULL, &s->W2);
}

static void ssd_fd_case(cg_context *ctx, const ssd_case *c, uint64_t seed) {
    ssd_bufs s;
    ssd_alloc(&s, ctx, c, seed);
    cg_ssd_bwd_args a = {.layout = c->layout, .q = s.q.t, .k = s.k.t, .v = s.v.t, .log_alpha = s.la.t,
                         .h0 = c->h0 ? s.h0.t : no_tensor, .dout = s.W.t, .dhT = c->dhT ? s.W2.t : no_tensor,
                         .dq = s.dq.t, .dk = s.dk.t, .dv = s.dv.t, .dlog_alpha = s.dla.t, .dh0 = s.dh0.t};
    CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &a, &ref_exec));
    char name[160];
#define SSD_FD(x, g)                                                                             \
    snprintf(name, sizeof name, "ssd B%lld T%lld G%lld H%lld dk%lld dv%lld h0=%d dhT=%d layout=%d: %s", \
             (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk,       \
             (long long)c->dv, c->h0, c->dhT, (int)c->layout, #g);                                        \
    fd_check(name, &s.x, &s.g, ssd_loss, &s)
    SSD_FD(q, dq);
    SSD_FD(k, dk);
    SSD_FD(v, dv);
    SSD_FD(la, dla);
    s.use_h0 = 1; /* h0 absent: its values are zeros, the gradient is taken there */
    SSD_FD(h0, dh0);
#undef SSD_FD
    ssd_free(&s);
}

CG_TEST(ref_ssd_grad_fd) {
    CG_TEST_CONTEXT(ctx);
    const ssd_case cases[] = {
        {2, 5, 2, 4, 3, 2, 1, 1, CG_LAYOUT_TOKEN_MAJOR},
        {2, 5, 2, 4, 3, 2, 0, 0, CG_LAYOUT_TOKEN_MAJOR},
        {2, 5, 2, 4, 3, 2, 1, 0, CG_LAYOUT_HEAD_MAJOR},
        {1, 7, 1, 3, 2, 3, 0, 1, CG_LAYOUT_HEAD_MAJOR},
        {2, 1, 2, 4, 3, 2, 1, 1, CG_LAYOUT_TOKEN_MAJOR},
        {1, 1, 1, 1, 1, 1, 0, 0, CG_LAYOUT_TOKEN_MAJOR},
        {1, 4, 3, 3, 5, 1, 1, 1, CG_LAYOUT_TOKEN_MAJOR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) ssd_fd_case(ctx, &cases[i], 100 + i);
    cg_context_free(ctx);
}

/* Element of a token-major buffer [B, T, heads(, dim)]. */
static double at4(const cg_tbuf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int64_t idx[4] = {i0, i1, i2, i3};
    return cg_tbuf_get(b, idx);
}

/* o and hT of one and two tokens, written out from the definition:
 *   T=1: o_0 = q_0 (e^{a0} h0 + k_0^T v_0)
 *   T=2: hT = e^{a0+a1} h0 + e^{a1} k_0^T v_0 + k_1^T v_1, o_1 = q_1 hT. */
CG_TEST(ref_ssd_fwd_by_hand) {
    CG_TEST_CONTEXT(ctx);
    for (int64_t T = 1; T <= 2; T++) {
        const ssd_case c = {2, T, 1, 2, 2, 3, 1, 1, CG_LAYOUT_TOKEN_MAJOR};
        ssd_bufs s;
        ssd_alloc(&s, ctx, &c, 7 + (uint64_t)T);
        CG_CHECK_OK(ctx, ssd_forward(&s, 1));
        double maxerr = 0;
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t h = 0; h < c.H; h++)
                for (int64_t j = 0; j < c.dv; j++) {
                    double a0 = at4(&s.la, b, 0, h, 0), o0 = 0, o1 = 0;
                    for (int64_t i = 0; i < c.dk; i++) {
                        double h0 = at4(&s.h0, b, h, i, j);
                        double s0 = exp(a0) * h0 + at4(&s.k, b, 0, 0, i) * at4(&s.v, b, 0, h, j);
                        o0 += at4(&s.q, b, 0, 0, i) * s0;
                        double want_hT = s0;
                        if (T == 2) {
                            double a1 = at4(&s.la, b, 1, h, 0);
                            want_hT = exp(a0 + a1) * h0 + exp(a1) * at4(&s.k, b, 0, 0, i) * at4(&s.v, b, 0, h, j) +
                                      at4(&s.k, b, 1, 0, i) * at4(&s.v, b, 1, h, j);
                            o1 += at4(&s.q, b, 1, 0, i) * want_hT;
                        }
                        maxerr = fmax(maxerr, fabs(at4(&s.hT, b, h, i, j) - want_hT));
                    }
                    maxerr = fmax(maxerr, fabs(at4(&s.o, b, 0, h, j) - o0));
                    if (T == 2) maxerr = fmax(maxerr, fabs(at4(&s.o, b, 1, h, j) - o1));
                }
        CG_CHECK(maxerr <= 1e-13, "T=%lld: max abs err %.3g against the hand formula", (long long)T, maxerr);
        ssd_free(&s);
    }
    cg_context_free(ctx);
}

/* ---------------------------------------------------------- gated delta rule */

typedef struct gdr_case {
    ssd_case s;      /* shapes, h0 / dhT present, layout (the SSD buffers' shapes) */
    int l2norm;
    double scale;    /* 0: dk^-1/2 */
} gdr_case;

typedef struct gdr_bufs {
    const gdr_case *c;
    cg_context *ctx;
    cg_tbuf q, k, v, g, beta, h0, o, hT, W, W2;
    cg_tbuf dq, dk, dv, dg, dbeta, dh0;
    int use_h0;
} gdr_bufs;

/* As ssd_alloc; k small enough without the norm that the recurrence stays tame, beta in
 * (0, 2) (fla's allow_neg_eigval range), g of either sign. */
static void gdr_alloc(gdr_bufs *s, cg_context *ctx, const gdr_case *gc, uint64_t seed) {
    const ssd_case *c = &gc->s;
    cg_rng rng = {seed}, *r = &rng;
    int64_t st[4] = {c->B, c->H, c->dk, c->dv};
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->c = gc;
    s->q = ssd_buf(c, c->G, c->dk), s->k = ssd_buf(c, c->G, c->dk), s->v = ssd_buf(c, c->H, c->dv);
    s->g = ssd_buf(c, c->H, 0), s->beta = ssd_buf(c, c->H, 0);
    s->o = ssd_buf(c, c->H, c->dv), s->W = ssd_buf(c, c->H, c->dv);
    s->dq = ssd_buf(c, c->G, c->dk), s->dk = ssd_buf(c, c->G, c->dk), s->dv = ssd_buf(c, c->H, c->dv);
    s->dg = ssd_buf(c, c->H, 0), s->dbeta = ssd_buf(c, c->H, 0);
    s->h0 = cg_tbuf_new(CG_F64, 4, st), s->hT = cg_tbuf_new(CG_F64, 4, st);
    s->W2 = cg_tbuf_new(CG_F64, 4, st), s->dh0 = cg_tbuf_new(CG_F64, 4, st);
    const double kr = gc->l2norm ? 1 : 0.5;
    const fill_rule in[] = {{&s->q, -1, 1}, {&s->k, -kr, kr}, {&s->v, -1, 1}, {&s->g, -0.8, 0.1}, {&s->beta, 0.05, 1.95}};
    fill_case(in, sizeof in / sizeof in[0], &s->h0, &s->W, &s->W2, c->h0, c->dhT, r);
    s->use_h0 = c->h0;
}

static void gdr_free(gdr_bufs *s) {
    cg_tbuf *all[] = {&s->q, &s->k, &s->v, &s->g, &s->beta, &s->h0, &s->o, &s->hT, &s->W, &s->W2,
                      &s->dq, &s->dk, &s->dv, &s->dg, &s->dbeta, &s->dh0};
    free_bufs(all, sizeof all / sizeof all[0]);
}

static cg_status gdr_forward(gdr_bufs *s, int want_hT) {
    cg_gdr_fwd_args a = {.layout = s->c->s.layout, .q = s->q.t, .k = s->k.t, .v = s->v.t, .g = s->g.t,
                         .beta = s->beta.t, .h0 = s->use_h0 ? s->h0.t : no_tensor, .scale = s->c->scale,
                         .use_qk_l2norm = s->c->l2norm, .o = s->o.t, .hT = want_hT ? s->hT.t : no_tensor};
    return cg_gdr_fwd(s->ctx, &a, &ref_exec);
}

static double gdr_loss(void *arg) {
    gdr_bufs *s = arg;
    return cot_loss(s->ctx, gdr_forward(s, 1), "gdr", &s->o, &s->W, s->c->s.dhT ? &s->hT : NULL, &s->W2);
}

static void gdr_fd_case(cg_context *ctx, const gdr_case *gc, uint64_t seed) {
    const ssd_case *c = &gc->s;
    gdr_bufs s;
    gdr_alloc(&s, ctx, gc, seed);
    cg_gdr_bwd_args a = {.layout = c->layout, .q = s.q.t, .k = s.k.t, .v = s.v.t, .g = s.g.t, .beta = s.beta.t,
                         .h0 = c->h0 ? s.h0.t : no_tensor, .dout = s.W.t, .dhT = c->dhT ? s.W2.t : no_tensor,
                         .scale = gc->scale, .use_qk_l2norm = gc->l2norm, .dq = s.dq.t, .dk = s.dk.t,
                         .dv = s.dv.t, .dg = s.dg.t, .dbeta = s.dbeta.t, .dh0 = s.dh0.t};
    CG_CHECK_OK(ctx, cg_gdr_bwd(ctx, &a, &ref_exec));
    char name[200];
#define GDR_FD(x, g)                                                                                           \
    snprintf(name, sizeof name, "gdr B%lld T%lld G%lld H%lld dk%lld dv%lld h0=%d dhT=%d layout=%d l2norm=%d scale=%g: %s", \
             (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk,             \
             (long long)c->dv, c->h0, c->dhT, (int)c->layout, gc->l2norm, gc->scale, #g);                     \
    fd_check(name, &s.x, &s.g, gdr_loss, &s)
    GDR_FD(q, dq);
    GDR_FD(k, dk);
    GDR_FD(v, dv);
    GDR_FD(g, dg);
    GDR_FD(beta, dbeta);
    s.use_h0 = 1; /* h0 absent: its values are zeros, the gradient is taken there */
    GDR_FD(h0, dh0);
#undef GDR_FD
    gdr_free(&s);
}

/* Every gradient of the gated delta rule against central differences: grouped heads,
 * both layouts, T = 1, h0 / dhT on and off, the L2 norm on and off, a given scale. */
CG_TEST(ref_gdr_grad_fd) {
    CG_TEST_CONTEXT(ctx);
    const gdr_case cases[] = {
        {{2, 5, 2, 4, 3, 2, 1, 1, CG_LAYOUT_TOKEN_MAJOR}, 1, 0},
        {{2, 5, 2, 4, 3, 2, 0, 0, CG_LAYOUT_TOKEN_MAJOR}, 0, 0},
        {{2, 5, 1, 3, 4, 2, 1, 0, CG_LAYOUT_HEAD_MAJOR}, 1, 0.7},
        {{1, 7, 1, 2, 2, 3, 0, 1, CG_LAYOUT_HEAD_MAJOR}, 0, 1.3},
        {{2, 1, 2, 4, 3, 2, 1, 1, CG_LAYOUT_TOKEN_MAJOR}, 1, 0},
        {{1, 1, 1, 1, 1, 1, 0, 0, CG_LAYOUT_TOKEN_MAJOR}, 0, 0},
        {{1, 6, 2, 6, 5, 1, 1, 1, CG_LAYOUT_TOKEN_MAJOR}, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) gdr_fd_case(ctx, &cases[i], 300 + i);
    cg_context_free(ctx);
}

/* One token, written out (MATH_GDN.md 1.1): with S' = e^{g0} h0, kn, qn the normalised
 * rows and s = dk^-1/2,  hT = S' + beta kn (v - S'^T kn)^T,  o_0 = s hT^T qn. */
CG_TEST(ref_gdr_fwd_by_hand) {
    CG_TEST_CONTEXT(ctx);
    const gdr_case gc = {{2, 1, 1, 2, 3, 2, 1, 1, CG_LAYOUT_TOKEN_MAJOR}, 1, 0};
    const ssd_case *c = &gc.s;
    gdr_bufs s;
    gdr_alloc(&s, ctx, &gc, 11);
    CG_CHECK_OK(ctx, gdr_forward(&s, 1));
    double maxerr = 0, nq = 1e-6, nk = 1e-6;
    for (int64_t i = 0; i < c->dk; i++) nq += at4(&s.q, 0, 0, 0, i) * at4(&s.q, 0, 0, 0, i);
    for (int64_t i = 0; i < c->dk; i++) nk += at4(&s.k, 0, 0, 0, i) * at4(&s.k, 0, 0, 0, i);
    for (int64_t h = 0; h < c->H; h++) { /* b = 0 */
        const double a = exp(at4(&s.g, 0, 0, h, 0)), beta = at4(&s.beta, 0, 0, h, 0);
        for (int64_t j = 0; j < c->dv; j++) {
            double pj = 0, o = 0;
            for (int64_t i = 0; i < c->dk; i++) pj += a * at4(&s.h0, 0, h, i, j) * at4(&s.k, 0, 0, 0, i) / sqrt(nk);
            for (int64_t i = 0; i < c->dk; i++) {
                const double kn = at4(&s.k, 0, 0, 0, i) / sqrt(nk), qn = at4(&s.q, 0, 0, 0, i) / sqrt(nq);
                const double want = a * at4(&s.h0, 0, h, i, j) + beta * kn * (at4(&s.v, 0, 0, h, j) - pj);
                maxerr = fmax(maxerr, fabs(at4(&s.hT, 0, h, i, j) - want));
                o += want * qn / sqrt((double)c->dk);
            }
            maxerr = fmax(maxerr, fabs(at4(&s.o, 0, 0, h, j) - o));
        }
    }
    CG_CHECK(maxerr <= 1e-13, "max abs err %.3g against the hand formula", maxerr);
    gdr_free(&s);
    cg_context_free(ctx);
}

/* ------------------------------------------------------------- selective scan */

typedef struct sscan_case {
    int64_t B, L, D, N, G; /* G = 0: ungrouped B/C [B, L, N] */
    int softplus, z, Dv, bias, h0, dhT;
    int permuted;          /* x, delta, z, dy, dx, ddelta, dz stored as [L, B, D] */
} sscan_case;

typedef struct sscan_bufs {
    const sscan_case *c;
    cg_context *ctx;
    cg_tbuf x, delta, A, Bm, Cm, Dv, z, bias, h0, y, hT, W, W2;
    cg_tbuf dx, ddelta, dA, dB, dC, dD, dz, dbias, dh0;
    int use_h0;
} sscan_bufs;

static cg_tbuf bld(const sscan_case *c) {
    static const int perm[3] = {1, 0, 2};
    int64_t sh[3] = {c->B, c->L, c->D};
    return cg_tbuf_new_perm(CG_F64, 3, sh, c->permuted ? perm : NULL);
}

static cg_tbuf bc(const sscan_case *c) {
    int64_t sg[4] = {c->B, c->L, c->G, c->N}, su[3] = {c->B, c->L, c->N};
    return c->G ? cg_tbuf_new(CG_F64, 4, sg) : cg_tbuf_new(CG_F64, 3, su);
}

/* As ssd_alloc. */
static void sscan_alloc(sscan_bufs *s, cg_context *ctx, const sscan_case *c, uint64_t seed) {
    cg_rng rng = {seed}, *r = &rng;
    int64_t sa[2] = {c->D, c->N}, sd[1] = {c->D}, sh[3] = {c->B, c->D, c->N};
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->c = c;
    s->x = bld(c); s->delta = bld(c); s->z = bld(c); s->y = bld(c); s->W = bld(c);
    s->dx = bld(c); s->ddelta = bld(c); s->dz = bld(c);
    s->A = cg_tbuf_new(CG_F64, 2, sa); s->dA = cg_tbuf_new(CG_F64, 2, sa);
    s->Bm = bc(c); s->Cm = bc(c); s->dB = bc(c); s->dC = bc(c);
    s->Dv = cg_tbuf_new(CG_F64, 1, sd); s->dD = cg_tbuf_new(CG_F64, 1, sd);
    s->bias = cg_tbuf_new(CG_F64, 1, sd); s->dbias = cg_tbuf_new(CG_F64, 1, sd);
    s->h0 = cg_tbuf_new(CG_F64, 3, sh); s->hT = cg_tbuf_new(CG_F64, 3, sh);
    s->W2 = cg_tbuf_new(CG_F64, 3, sh); s->dh0 = cg_tbuf_new(CG_F64, 3, sh);
    const fill_rule in[] = {{&s->x, -1, 1},  {&s->delta, c->softplus ? -1.5 : 0.2, 1}, {&s->A, -1.5, -0.2},
                            {&s->Bm, -1, 1}, {&s->Cm, -1, 1}, {&s->Dv, -1, 1}, {&s->z, -2, 2}, {&s->bias, -0.15, 0.15}};
    fill_case(in, sizeof in / sizeof in[0], &s->h0, &s->W, &s->W2, c->h0, c->dhT, r);
    s->use_h0 = c->h0;
}

static void sscan_free(sscan_bufs *s) {
    cg_tbuf *all[] = {&s->x, &s->delta, &s->A, &s->Bm, &s->Cm, &s->Dv, &s->z, &s->bias, &s->h0,
                      &s->y, &s->hT, &s->W, &s->W2, &s->dx, &s->ddelta, &s->dA, &s->dB, &s->dC,
                      &s->dD, &s->dz, &s->dbias, &s->dh0};
    free_bufs(all, sizeof all / sizeof all[0]);
}

static cg_status sscan_forward(sscan_bufs *s) {
    const sscan_case *c = s->c;
    cg_sscan_fwd_args a = {.x = s->x.t, .delta = s->delta.t, .A = s->A.t, .B = s->Bm.t, .C = s->Cm.t,
                           .D = c->Dv ? s->Dv.t : no_tensor, .z = c->z ? s->z.t : no_tensor,
                           .delta_bias = c->bias ? s->bias.t : no_tensor,
                           .h0 = s->use_h0 ? s->h0.t : no_tensor, .delta_softplus = c->softplus,
                           .y = s->y.t, .hT = s->hT.t};
    return cg_sscan_fwd(s->ctx, &a, &ref_exec);
}

static double sscan_loss(void *arg) {
    sscan_bufs *s = arg;
    return cot_loss(s->ctx, sscan_forward(s), "sscan", &s->y, &s->W, s->c->dhT ? &s->hT : NULL, &s->W2);
}

static void sscan_fd_case(cg_context *ctx, const sscan_case *c, uint64_t seed) {
    sscan_bufs s;
    sscan_alloc(&s, ctx, c, seed);
    cg_sscan_bwd_args a = {.x = s.x.t, .delta = s.delta.t, .A = s.A.t, .B = s.Bm.t, .C = s.Cm.t,
                           .D = c->Dv ? s.Dv.t : no_tensor, .z = c->z ? s.z.t : no_tensor,
                           .delta_bias = c->bias ? s.bias.t : no_tensor, .h0 = c->h0 ? s.h0.t : no_tensor,
                           .dy = s.W.t, .dhT = c->dhT ? s.W2.t : no_tensor, .delta_softplus = c->softplus,
                           .dx = s.dx.t, .ddelta = s.ddelta.t, .dA = s.dA.t, .dB = s.dB.t, .dC = s.dC.t,
                           .dD = c->Dv ? s.dD.t : no_tensor, .dz = c->z ? s.dz.t : no_tensor,
                           .ddelta_bias = c->bias ? s.dbias.t : no_tensor, .dh0 = s.dh0.t};
    CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &a, &ref_exec));
    char name[200];
#define SSCAN_FD(x, g)                                                                                   \
    snprintf(name, sizeof name,                                                                          \
             "sscan B%lld L%lld D%lld N%lld G%lld softplus=%d z=%d D=%d bias=%d h0=%d dhT=%d perm=%d: %s",  \
             (long long)c->B, (long long)c->L, (long long)c->D, (long long)c->N, (long long)c->G,         \
             c->softplus, c->z, c->Dv, c->bias, c->h0, c->dhT, c->permuted, #g);                          \
    fd_check(name, &s.x, &s.g, sscan_loss, &s)
    SSCAN_FD(x, dx);
    SSCAN_FD(delta, ddelta);
    SSCAN_FD(A, dA);
    SSCAN_FD(Bm, dB);
    SSCAN_FD(Cm, dC);
    if (c->Dv) { SSCAN_FD(Dv, dD); }
    if (c->z) { SSCAN_FD(z, dz); }
    if (c->bias) { SSCAN_FD(bias, dbias); }
    s.use_h0 = 1;
    SSCAN_FD(h0, dh0);
#undef SSCAN_FD
    sscan_free(&s);
}

CG_TEST(ref_sscan_grad_fd) {
    CG_TEST_CONTEXT(ctx);
    const sscan_case cases[] = {
        /* B  L  D  N  G  sp z  D  bi h0 dhT perm */
        {2, 6, 4, 3, 2, 1, 1, 1, 1, 1, 1, 0},
        {2, 6, 4, 3, 0, 1, 1, 1, 1, 1, 1, 1},
        {2, 6, 4, 3, 2, 0, 0, 0, 0, 0, 0, 0},
        {2, 6, 4, 3, 0, 0, 1, 0, 1, 0, 1, 0},
        {2, 6, 4, 3, 4, 1, 0, 1, 0, 1, 0, 1},
        {1, 1, 3, 2, 1, 1, 1, 1, 1, 1, 1, 0},
        {1, 5, 6, 1, 3, 0, 1, 1, 0, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) sscan_fd_case(ctx, &cases[i], 200 + i);
    cg_context_free(ctx);
}

static double sp_hand(double v) { return log(1.0 + exp(v)); }

/* y and hT of one and two tokens from the definition, grouped B/C (G = 2, D = 4):
 *   dt = softplus(delta + bias), a_t = e^{dt_t A}
 *   T=1: h_0 = a_0 h0 + dt_0 B_0 x_0
 *   T=2: h_1 = a_1 a_0 h0 + a_1 dt_0 B_0 x_0 + dt_1 B_1 x_1
 *   y_t = (C_t . h_t + D x_t) * z_t / (1 + e^{-z_t}). */
CG_TEST(ref_sscan_fwd_by_hand) {
    CG_TEST_CONTEXT(ctx);
    for (int64_t L = 1; L <= 2; L++) {
        const sscan_case c = {2, L, 4, 3, 2, 1, 1, 1, 1, 1, 1, 0};
        sscan_bufs s;
        sscan_alloc(&s, ctx, &c, 31 + (uint64_t)L);
        CG_CHECK_OK(ctx, sscan_forward(&s));
        double maxerr = 0;
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t d = 0; d < c.D; d++) {
                int64_t g = d / (c.D / c.G), i1[1] = {d};
                double bias = cg_tbuf_get(&s.bias, i1), Dd = cg_tbuf_get(&s.Dv, i1);
                double y0 = 0, y1 = 0;
                double dt0 = sp_hand(at4(&s.delta, b, 0, d, 0) + bias), x0 = at4(&s.x, b, 0, d, 0);
                double dt1 = L == 2 ? sp_hand(at4(&s.delta, b, 1, d, 0) + bias) : 0;
                double x1 = L == 2 ? at4(&s.x, b, 1, d, 0) : 0;
                for (int64_t n = 0; n < c.N; n++) {
                    int64_t ia[2] = {d, n}, ih[3] = {b, d, n};
                    double A = cg_tbuf_get(&s.A, ia), h0 = cg_tbuf_get(&s.h0, ih);
                    double h_0 = exp(dt0 * A) * h0 + dt0 * at4(&s.Bm, b, 0, g, n) * x0, want_hT = h_0;
                    y0 += at4(&s.Cm, b, 0, g, n) * h_0;
                    if (L == 2) {
                        want_hT = exp(dt1 * A) * exp(dt0 * A) * h0 + exp(dt1 * A) * dt0 * at4(&s.Bm, b, 0, g, n) * x0 +
                                  dt1 * at4(&s.Bm, b, 1, g, n) * x1;
                        y1 += at4(&s.Cm, b, 1, g, n) * want_hT;
                    }
                    maxerr = fmax(maxerr, fabs(cg_tbuf_get(&s.hT, ih) - want_hT));
                }
                double z0 = at4(&s.z, b, 0, d, 0);
                y0 = (y0 + Dd * x0) * z0 / (1.0 + exp(-z0));
                maxerr = fmax(maxerr, fabs(at4(&s.y, b, 0, d, 0) - y0));
                if (L == 2) {
                    double z1 = at4(&s.z, b, 1, d, 0);
                    y1 = (y1 + Dd * x1) * z1 / (1.0 + exp(-z1));
                    maxerr = fmax(maxerr, fabs(at4(&s.y, b, 1, d, 0) - y1));
                }
            }
        CG_CHECK(maxerr <= 1e-13, "L=%lld: max abs err %.3g against the hand formula", (long long)L, maxerr);
        sscan_free(&s);
    }
    cg_context_free(ctx);
}

/* ------------------------------------------------- F32 views, NaN propagation */

/* F32 copy of src; with `permuted`, memory ordered with dims 0 and 1 swapped (the
 * innermost dimension keeps stride 1). */
static cg_tbuf to_f32(const cg_tbuf *src, int permuted) {
    static const int perm[4] = {1, 0, 2, 3};
    cg_tbuf d = cg_tbuf_new_perm(CG_F32, src->t.ndim, src->t.shape, permuted && src->t.ndim >= 3 ? perm : NULL);
    cg_tbuf_copy(&d, src);
    return d;
}

/* The F32 outputs out[n] agree with the F64 ones out64 (the forward's two closer, 1e-5, than
 * the gradients, 1e-4); then in[n] and out[n] are freed. */
static void f32_agree_free(const char *what, cg_tbuf *in, cg_tbuf *out, cg_tbuf *const *out64, int n) {
    for (int i = 0; i < n; i++) {
        double err = cg_rel_err(&out[i], out64[i]), tol = i < 2 ? 1e-5 : 1e-4;
        CG_CHECK(err <= tol, "%s f32 output %d: rel err %.3g", what, i, err);
    }
    for (int i = 0; i < n; i++) {
        cg_tbuf_free(&in[i]);
        cg_tbuf_free(&out[i]);
    }
}

/* The reference reads and writes F32 views of any strides; results agree with F64. */
CG_TEST(ref_f32_views) {
    CG_TEST_CONTEXT(ctx);
    {
        const ssd_case c = {2, 6, 2, 4, 3, 5, 1, 1, CG_LAYOUT_TOKEN_MAJOR};
        ssd_bufs s;
        ssd_alloc(&s, ctx, &c, 5);
        CG_CHECK_OK(ctx, ssd_forward(&s, 1));
        cg_ssd_bwd_args a = {.layout = c.layout, .q = s.q.t, .k = s.k.t, .v = s.v.t, .log_alpha = s.la.t,
                             .h0 = s.h0.t, .dout = s.W.t, .dhT = s.W2.t, .dq = s.dq.t, .dk = s.dk.t,
                             .dv = s.dv.t, .dlog_alpha = s.dla.t, .dh0 = s.dh0.t};
        CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &a, &ref_exec));
        cg_tbuf *in64[] = {&s.q, &s.k, &s.v, &s.la, &s.h0, &s.W, &s.W2};
        cg_tbuf *out64[] = {&s.o, &s.hT, &s.dq, &s.dk, &s.dv, &s.dla, &s.dh0};
        cg_tbuf in[7], out[7];
        for (int i = 0; i < 7; i++) in[i] = to_f32(in64[i], i != 4 && i != 6);
        for (int i = 0; i < 7; i++) out[i] = to_f32(out64[i], i == 0 || i == 4);
        cg_ssd_fwd_args f = {.layout = c.layout, .q = in[0].t, .k = in[1].t, .v = in[2].t, .log_alpha = in[3].t,
                             .h0 = in[4].t, .o = out[0].t, .hT = out[1].t};
        memset(out[0].mem, 0, (size_t)out[0].count * sizeof(float));
        memset(out[1].mem, 0, (size_t)out[1].count * sizeof(float));
        CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &f, &ref_exec));
        cg_ssd_bwd_args b = {.layout = c.layout, .q = in[0].t, .k = in[1].t, .v = in[2].t, .log_alpha = in[3].t,
                             .h0 = in[4].t, .dout = in[5].t, .dhT = in[6].t, .dq = out[2].t, .dk = out[3].t,
                             .dv = out[4].t, .dlog_alpha = out[5].t, .dh0 = out[6].t};
        for (int i = 2; i < 7; i++) memset(out[i].mem, 0, (size_t)out[i].count * sizeof(float));
        CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &b, &ref_exec));
        f32_agree_free("ssd", in, out, out64, 7);
        ssd_free(&s);
    }
    {
        const sscan_case c = {2, 7, 4, 3, 2, 1, 1, 1, 1, 1, 1, 0};
        sscan_bufs s;
        sscan_alloc(&s, ctx, &c, 6);
        CG_CHECK_OK(ctx, sscan_forward(&s));
        cg_tbuf *in64[] = {&s.x, &s.delta, &s.A, &s.Bm, &s.Cm, &s.Dv, &s.z, &s.bias, &s.h0, &s.W, &s.W2};
        cg_tbuf *out64[] = {&s.y, &s.hT, &s.dx, &s.ddelta, &s.dA, &s.dB, &s.dC, &s.dD, &s.dz, &s.dbias, &s.dh0};
        cg_sscan_bwd_args a = {.x = s.x.t, .delta = s.delta.t, .A = s.A.t, .B = s.Bm.t, .C = s.Cm.t, .D = s.Dv.t,
                               .z = s.z.t, .delta_bias = s.bias.t, .h0 = s.h0.t, .dy = s.W.t, .dhT = s.W2.t,
                               .delta_softplus = 1, .dx = s.dx.t, .ddelta = s.ddelta.t, .dA = s.dA.t,
                               .dB = s.dB.t, .dC = s.dC.t, .dD = s.dD.t, .dz = s.dz.t, .ddelta_bias = s.dbias.t,
                               .dh0 = s.dh0.t};
        CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &a, &ref_exec));
        cg_tbuf in[11], out[11];
        for (int i = 0; i < 11; i++) in[i] = to_f32(in64[i], 1);
        for (int i = 0; i < 11; i++) out[i] = to_f32(out64[i], i % 2);
        for (int i = 0; i < 11; i++) memset(out[i].mem, 0, (size_t)out[i].count * sizeof(float));
        cg_sscan_fwd_args f = {.x = in[0].t, .delta = in[1].t, .A = in[2].t, .B = in[3].t, .C = in[4].t,
                               .D = in[5].t, .z = in[6].t, .delta_bias = in[7].t, .h0 = in[8].t,
                               .delta_softplus = 1, .y = out[0].t, .hT = out[1].t};
        CG_CHECK_OK(ctx, cg_sscan_fwd(ctx, &f, &ref_exec));
        cg_sscan_bwd_args b = {.x = in[0].t, .delta = in[1].t, .A = in[2].t, .B = in[3].t, .C = in[4].t,
                               .D = in[5].t, .z = in[6].t, .delta_bias = in[7].t, .h0 = in[8].t, .dy = in[9].t,
                               .dhT = in[10].t, .delta_softplus = 1, .dx = out[2].t, .ddelta = out[3].t,
                               .dA = out[4].t, .dB = out[5].t, .dC = out[6].t, .dD = out[7].t, .dz = out[8].t,
                               .ddelta_bias = out[9].t, .dh0 = out[10].t};
        CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &b, &ref_exec));
        f32_agree_free("sscan", in, out, out64, 11);
        sscan_free(&s);
    }
    cg_context_free(ctx);
}

/* A NaN in one input reaches exactly the outputs that depend on it; nothing crashes. */
CG_TEST(ref_nan_propagates) {
    CG_TEST_CONTEXT(ctx);
    {
        const ssd_case c = {2, 4, 1, 2, 2, 3, 0, 1, CG_LAYOUT_TOKEN_MAJOR};
        ssd_bufs s;
        ssd_alloc(&s, ctx, &c, 9);
        int64_t iv[4] = {1, 2, 1, 0}; /* b=1, t=2, h=1 */
        cg_tbuf_set(&s.v, iv, NAN);
        CG_CHECK_OK(ctx, ssd_forward(&s, 1));
        CG_CHECK(isnan(at4(&s.o, 1, 3, 1, 0)) && isnan(at4(&s.hT, 1, 1, 0, 0)), "NaN did not reach o/hT");
        CG_CHECK(!isnan(at4(&s.o, 1, 1, 1, 0)) && !isnan(at4(&s.o, 0, 3, 1, 0)) && !isnan(at4(&s.o, 1, 3, 0, 0)),
                 "NaN reached an independent output");
        cg_ssd_bwd_args a = {.layout = c.layout, .q = s.q.t, .k = s.k.t, .v = s.v.t, .log_alpha = s.la.t,
                             .dout = s.W.t, .dhT = s.W2.t, .dq = s.dq.t, .dk = s.dk.t, .dv = s.dv.t,
                             .dlog_alpha = s.dla.t, .dh0 = s.dh0.t};
        CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &a, &ref_exec));
        CG_CHECK(isnan(at4(&s.dk, 1, 2, 0, 0)) && !isnan(at4(&s.dk, 0, 2, 0, 0)), "NaN in dk");
        ssd_free(&s);
    }
    {
        const sscan_case c = {2, 4, 2, 2, 0, 1, 1, 1, 1, 0, 1, 0};
        sscan_bufs s;
        sscan_alloc(&s, ctx, &c, 10);
        int64_t ix[3] = {0, 1, 1};
        cg_tbuf_set(&s.delta, ix, INFINITY);
        int64_t ix2[3] = {1, 2, 0};
        cg_tbuf_set(&s.x, ix2, NAN);
        CG_CHECK_OK(ctx, sscan_forward(&s));
        int64_t iy[3] = {1, 3, 0}, iy0[3] = {0, 3, 0}, iy1[3] = {1, 1, 0};
        CG_CHECK(isnan(cg_tbuf_get(&s.y, iy)) && !isnan(cg_tbuf_get(&s.y, iy0)) && !isnan(cg_tbuf_get(&s.y, iy1)),
                 "NaN propagation in sscan y");
        cg_sscan_bwd_args a = {.x = s.x.t, .delta = s.delta.t, .A = s.A.t, .B = s.Bm.t, .C = s.Cm.t, .D = s.Dv.t,
                               .z = s.z.t, .delta_bias = s.bias.t, .dy = s.W.t, .dhT = s.W2.t, .delta_softplus = 1,
                               .dx = s.dx.t, .ddelta = s.ddelta.t, .dA = s.dA.t, .dB = s.dB.t, .dC = s.dC.t,
                               .dD = s.dD.t, .dz = s.dz.t, .ddelta_bias = s.dbias.t};
        CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &a, &ref_exec));
        sscan_free(&s);
    }
    cg_context_free(ctx);
}

/* ------------------------------------------------------------------ LRU */

typedef struct lru_case {
    int64_t B, L, D;
    int h0, dhT;     /* present */
    cg_layout layout;
} lru_case;

typedef struct lru_bufs {
    const lru_case *c;
    cg_context *ctx;
    cg_tbuf a, b, x, h0, y, hT, W, W2, da, db, dx, dh0;
    int use_h0;
} lru_bufs;

static cg_tbuf lru_buf(const lru_case *c) {
    int64_t sh[3] = {c->B, c->L, c->D};
    if (c->layout == CG_LAYOUT_HEAD_MAJOR) sh[1] = c->D, sh[2] = c->L;
    return cg_tbuf_new(CG_F64, 3, sh);
}

static cg_status lru_forward(lru_bufs *s) {
    cg_lru_fwd_args a = {.layout = s->c->layout, .a = s->a.t, .b = s->b.t, .x = s->x.t,
                         .h0 = s->use_h0 ? s->h0.t : no_tensor, .y = s->y.t, .hT = s->hT.t};
    return cg_lru_fwd(s->ctx, &a, &ref_exec);
}

static double lru_loss(void *arg) {
    lru_bufs *s = arg;
    return cot_loss(s->ctx, lru_forward(s), "lru", &s->y, &s->W, s->c->dhT ? &s->hT : NULL, &s->W2);
}

/* Every gradient of the LRU against central differences; a of either sign and above 1
 * (any real is accepted). */
static void lru_fd_case(cg_context *ctx, const lru_case *c, uint64_t seed) {
    cg_rng rng = {seed};
    int64_t st[2] = {c->B, c->D};
    lru_bufs s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx, s.c = c;
    cg_tbuf *seqs[] = {&s.a, &s.b, &s.x, &s.y, &s.W, &s.da, &s.db, &s.dx}, *states[] = {&s.h0, &s.hT, &s.W2, &s.dh0};
    for (size_t i = 0; i < 8; i++) *seqs[i] = lru_buf(c);
    for (size_t i = 0; i < 4; i++) *states[i] = cg_tbuf_new(CG_F64, 2, st);
    const fill_rule in[] = {{&s.a, -1.2, 1.2}, {&s.b, -1, 1}, {&s.x, -1, 1}};
    fill_case(in, 3, &s.h0, &s.W, &s.W2, c->h0, c->dhT, &rng);
    s.use_h0 = c->h0;
    cg_lru_bwd_args a = {.layout = c->layout, .a = s.a.t, .b = s.b.t, .x = s.x.t, .h0 = c->h0 ? s.h0.t : no_tensor,
                         .dy = s.W.t, .dhT = c->dhT ? s.W2.t : no_tensor, .da = s.da.t, .db = s.db.t, .dx = s.dx.t,
                         .dh0 = s.dh0.t};
    CG_CHECK_OK(ctx, cg_lru_bwd(ctx, &a, &ref_exec));
    char name[160];
#define LRU_FD(x, g)                                                                                           \
    snprintf(name, sizeof name, "lru B%lld L%lld D%lld h0=%d dhT=%d layout=%d: %s", (long long)c->B,           \
             (long long)c->L, (long long)c->D, c->h0, c->dhT, (int)c->layout, #g);                           \
    fd_check(name, &s.x, &s.g, lru_loss, &s)
    LRU_FD(a, da);
    LRU_FD(b, db);
    LRU_FD(x, dx);
    s.use_h0 = 1; /* h0 absent: its values are zeros, the gradient is taken there */
    LRU_FD(h0, dh0);
#undef LRU_FD
    cg_tbuf *all[] = {&s.a, &s.b, &s.x, &s.y, &s.W, &s.da, &s.db, &s.dx, &s.h0, &s.hT, &s.W2, &s.dh0};
    free_bufs(all, sizeof all / sizeof all[0]);
}

/* T = 1, T and D odd, both layouts, h0 / dhT on and off. */
CG_TEST(ref_lru_grad_fd) {
    CG_TEST_CONTEXT(ctx);
    const lru_case cases[] = {
        {2, 5, 3, 1, 1, CG_LAYOUT_TOKEN_MAJOR}, {2, 7, 4, 0, 0, CG_LAYOUT_TOKEN_MAJOR},
        {1, 9, 5, 1, 0, CG_LAYOUT_HEAD_MAJOR},  {2, 6, 3, 0, 1, CG_LAYOUT_HEAD_MAJOR},
        {3, 1, 2, 1, 1, CG_LAYOUT_TOKEN_MAJOR}, {1, 1, 1, 0, 0, CG_LAYOUT_TOKEN_MAJOR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) lru_fd_case(ctx, &cases[i], 400 + i);
    cg_context_free(ctx);
}

/* Two tokens, written out: h_1 = a_1 (a_0 h0 + b_0 x_0) + b_1 x_1 = y_1 = hT. */
CG_TEST(ref_lru_fwd_by_hand) {
    CG_TEST_CONTEXT(ctx);
    const lru_case c = {1, 2, 1, 1, 1, CG_LAYOUT_TOKEN_MAJOR};
    lru_bufs s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx, s.c = &c, s.use_h0 = 1;
    int64_t st[2] = {1, 1};
    cg_tbuf *seqs[] = {&s.a, &s.b, &s.x, &s.y};
    for (size_t i = 0; i < 4; i++) *seqs[i] = lru_buf(&c);
    s.h0 = cg_tbuf_new(CG_F64, 2, st), s.hT = cg_tbuf_new(CG_F64, 2, st);
    double *a = s.a.mem, *b = s.b.mem, *x = s.x.mem, *y = s.y.mem;
    a[0] = 0.9, a[1] = -1.5, b[0] = 2, b[1] = 0.25, x[0] = -0.5, x[1] = 3, ((double *)s.h0.mem)[0] = 0.7;
    CG_CHECK_OK(ctx, lru_forward(&s));
    const double h1 = 0.9 * 0.7 + 2 * -0.5, h2 = -1.5 * h1 + 0.25 * 3;
    CG_CHECK(fabs(y[0] - h1) < 1e-15 && fabs(y[1] - h2) < 1e-15 && fabs(((double *)s.hT.mem)[0] - h2) < 1e-15,
             "y = (%g, %g), hT = %g; expected (%g, %g), %g", y[0], y[1], ((double *)s.hT.mem)[0], h1, h2, h2);
    cg_tbuf *all[] = {&s.a, &s.b, &s.x, &s.y, &s.h0, &s.hT};
    free_bufs(all, sizeof all / sizeof all[0]);
    cg_context_free(ctx);
}
