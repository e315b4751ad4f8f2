/* test_gdr_cpu.c -- the gated delta rule's chunked CPU path (runtime/cpu/gdr_cpu_chunk*.c)
 * against a float64 sequential loop written here (MATH_GDN.md 4.1 forward, 4.2 its
 * hand-written reverse mode, with the L2 norm, the scale and the grouped heads): o, hT
 * and every gradient within 1e-4 relative (max |err| / max |ref|) in float32, on odd
 * shapes, both layouts, h0 / dhT on and off, l2norm on and off, beta near 0, 1 and 2,
 * long memory; and bitwise equal results across runs and thread counts. */
#include "cg_test.h"
#include "cpu/gdr_cpu_chunk.h"

#include <math.h>

typedef struct range {
    double lo, hi;
    int set; /* 0: the default range */
} range;
#define RANGE(lo, hi) {lo, hi, 1}

/* A case names what differs from the default: B 1, h0, dhT and the L2 norm on, beta in
 * [0.1, 0.9], g in [-0.5, -0.01], token-major, the default chunk. */
typedef struct gcase {
    const char *name;
    int64_t B, T, G, H, dk, dv;
    int head_major, no_h0, no_dhT, no_l2;
    range beta, g;
    int chunk;
} gcase;

/* c with its defaults filled in. */
static gcase gcase_full(const gcase *c) {
    gcase f = *c;
    if (!f.B) f.B = 1;
    if (!f.beta.set) f.beta = (range)RANGE(0.1, 0.9);
    if (!f.g.set) f.g = (range)RANGE(-0.5, -0.01);
    return f;
}

/* One problem's float32 buffers and views. */
typedef struct gset {
    gcase c;
    cg_gdr_prob p;
    float *q, *k, *v, *g, *beta, *h0, *o, *hT, *dout, *dhT, *dq, *dk, *dv, *dg, *dbeta, *dh0;
} gset;

static void strides4(const gcase *c, int64_t n, int64_t d, int64_t s[4]) {
    if (c->head_major) s[0] = n * c->T * d, s[1] = d, s[2] = c->T * d, s[3] = 1;
    else s[0] = c->T * n * d, s[1] = n * d, s[2] = d, s[3] = 1;
}
static void strides3(const gcase *c, int64_t s[4]) {
    if (c->head_major) s[0] = c->H * c->T, s[1] = 1, s[2] = c->T, s[3] = 0;
    else s[0] = c->T * c->H, s[1] = c->H, s[2] = 1, s[3] = 0;
}
static cg_view view(float *p, const int64_t s[4]) {
    cg_view v = {.p = p, .dt = CG_F32};
    memcpy(v.s, s, sizeof v.s);
    return v;
}

static float *fill(int64_t n, cg_rng *r, double lo, double hi) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)cg_rng_uniform(r, lo, hi);
    return x;
}

static void gset_make(gset *s, const gcase *in, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->c = gcase_full(in);
    const gcase *c = &s->c;
    cg_rng r = {seed};
    const int64_t nq = c->B * c->T * c->G * c->dk, nv = c->B * c->T * c->H * c->dv, na = c->B * c->T * c->H,
                  ns = c->B * c->H * c->dk * c->dv;
    /* without the op's L2 norm the keys come in with norms in [0.5, 1] (as a caller
     * passes normalised keys), so that the recurrence stays contractive */
    const double amp = !c->no_l2 ? 1.0 : 1.0 / sqrt((double)c->dk);
    s->q = fill(nq, &r, -1, 1), s->k = fill(nq, &r, -amp, amp), s->v = fill(nv, &r, -1, 1);
    s->g = fill(na, &r, c->g.lo, c->g.hi), s->beta = fill(na, &r, c->beta.lo, c->beta.hi);
    s->h0 = !c->no_h0 ? fill(ns, &r, -1, 1) : NULL;
    s->dout = fill(nv, &r, -1, 1), s->dhT = !c->no_dhT ? fill(ns, &r, -1, 1) : NULL;
    if (c->no_l2)
        for (int64_t i = 0; i < nq / c->dk; i++) {
            double n2 = 0;
            float *x = s->k + i * c->dk;
            for (int64_t j = 0; j < c->dk; j++) n2 += (double)x[j] * x[j];
            const double want = cg_rng_uniform(&r, 0.5, 1.0), m = want / sqrt(n2 + 1e-30);
            for (int64_t j = 0; j < c->dk; j++) x[j] = (float)(x[j] * m);
        }
    s->o = calloc((size_t)nv, 4), s->hT = calloc((size_t)ns, 4);
    s->dq = calloc((size_t)nq, 4), s->dk = calloc((size_t)nq, 4), s->dv = calloc((size_t)nv, 4);
    s->dg = calloc((size_t)na, 4), s->dbeta = calloc((size_t)na, 4), s->dh0 = !c->no_h0 ? calloc((size_t)ns, 4) : NULL;

    cg_gdr_prob *p = &s->p;
    CG_DIM(p, B) = c->B, CG_DIM(p, T) = c->T, CG_DIM(p, G) = c->G, CG_DIM(p, H) = c->H, CG_DIM(p, DK) = c->dk, CG_DIM(p, DV) = c->dv;
    p->dtype = CG_F32, p->scale = 1.0 / sqrt((double)c->dk), p->l2norm = !c->no_l2;
    int64_t sq[4], sv[4], sa[4], ss[4] = {c->H * c->dk * c->dv, c->dk * c->dv, c->dv, 1};
    strides4(c, c->G, c->dk, sq), strides4(c, c->H, c->dv, sv), strides3(c, sa);
    p->q = view(s->q, sq), p->k = view(s->k, sq), p->v = view(s->v, sv), p->g = view(s->g, sa);
    p->beta = view(s->beta, sa), p->h0 = view(s->h0, ss), p->o = view(s->o, sv), p->hT = view(s->hT, ss);
    p->dout = view(s->dout, sv), p->dhT = view(s->dhT, ss);
    p->grad_q = view(s->dq, sq), p->grad_k = view(s->dk, sq), p->grad_v = view(s->dv, sv);
    p->grad_g = view(s->dg, sa), p->grad_beta = view(s->dbeta, sa), p->grad_h0 = view(s->dh0, ss);
}

/* The outputs, in this order. */
enum { NOUT = 8 };
static const char *const k_out[NOUT] = {"o", "hT", "dq", "dk", "dv", "dg", "dbeta", "dh0"};

/* s's outputs in k_out's order and their lengths (0: not computed). */
static void gset_outs(const gset *s, const float *x[NOUT], int64_t n[NOUT]) {
    const gcase *c = &s->c;
    const int64_t nq = c->B * c->T * c->G * c->dk, nv = c->B * c->T * c->H * c->dv, na = c->B * c->T * c->H,
                  ns = c->B * c->H * c->dk * c->dv;
    const float *xs[NOUT] = {s->o, s->hT, s->dq, s->dk, s->dv, s->dg, s->dbeta, s->dh0};
    const int64_t ns_[NOUT] = {nv, ns, nq, nq, nv, na, na, !c->no_h0 ? ns : 0};
    memcpy(x, xs, sizeof xs), memcpy(n, ns_, sizeof ns_);
}

static void gset_free(gset *s) {
    float *all[] = {s->q, s->k, s->v, s->g, s->beta, s->h0, s->o, s->hT, s->dout, s->dhT,
                    s->dq, s->dk, s->dv, s->dg, s->dbeta, s->dh0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* ------------------------------------------------------------ float64 reference */

typedef struct gref {
    double *o, *hT, *dq, *dk, *dv, *dg, *dbeta, *dh0; /* in the views' layouts */
} gref;

#define AT4(v, b, t, n, x) ((double)((const float *)(v).p)[(b) * (v).s[0] + (t) * (v).s[1] + (n) * (v).s[2] + (x)])
#define AT3(v, b, t, n) ((double)((const float *)(v).p)[(b) * (v).s[0] + (t) * (v).s[1] + (n) * (v).s[2]])
#define OFF4(v, b, t, n, x) ((b) * (v).s[0] + (t) * (v).s[1] + (n) * (v).s[2] + (x))
#define OFF3(v, b, t, n) ((b) * (v).s[0] + (t) * (v).s[1] + (n) * (v).s[2])

/* x (normalised when l2) times mul into y; rstd out */
static double ref_norm(const cg_view *x, int64_t b, int64_t t, int64_t g, int64_t dk, int l2, double mul, double *y) {
    double ss = 0;
    for (int64_t i = 0; i < dk; i++) ss += AT4(*x, b, t, g, i) * AT4(*x, b, t, g, i);
    const double rstd = l2 ? 1.0 / sqrt(ss + 1e-6) : 1.0;
    for (int64_t i = 0; i < dk; i++) y[i] = mul * rstd * AT4(*x, b, t, g, i);
    return rstd;
}

static void gref_run(const gset *s, gref *R) {
    const cg_gdr_prob *p = &s->p;
    const int64_t B = CG_DIM(p, B), T = CG_DIM(p, T), H = CG_DIM(p, H), G = CG_DIM(p, G), K = CG_DIM(p, DK), V = CG_DIM(p, DV), grp = H / G;
    const int64_t nq = B * T * G * K, nv = B * T * H * V, na = B * T * H, ns = B * H * K * V;
    R->o = calloc((size_t)nv, 8), R->hT = calloc((size_t)ns, 8), R->dq = calloc((size_t)nq, 8);
    R->dk = calloc((size_t)nq, 8), R->dv = calloc((size_t)nv, 8), R->dg = calloc((size_t)na, 8);
    R->dbeta = calloc((size_t)na, 8), R->dh0 = calloc((size_t)ns, 8);
    double *S = malloc((size_t)(T + 1) * K * V * 8), *dS = malloc((size_t)K * V * 8), *dSp = malloc((size_t)K * V * 8);
    double *qs = malloc((size_t)K * 8), *kn = malloc((size_t)K * 8), *u = malloc((size_t)V * 8),
           *pv = malloc((size_t)V * 8), *dqt = malloc((size_t)K * 8), *dkt = malloc((size_t)K * 8),
           *du = malloc((size_t)V * 8), *y = malloc((size_t)K * 8);
    /* per (b, h): dq, dk of the scaled / normalised rows, then the chain rule into the group */
    double *dqn = malloc((size_t)T * K * 8), *dkn = malloc((size_t)T * K * 8);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / grp;
            for (int64_t x = 0; x < K * V; x++) S[x] = p->h0.p ? ((const float *)p->h0.p)[b * p->h0.s[0] + h * p->h0.s[1] + x] : 0;
            for (int64_t t = 0; t < T; t++) { /* forward, keeping every state */
                double *Sp = S + t * K * V, *Sn = S + (t + 1) * K * V;
                ref_norm(&p->q, b, t, g, K, p->l2norm, p->scale, qs);
                ref_norm(&p->k, b, t, g, K, p->l2norm, 1.0, kn);
                const double a = exp(AT3(p->g, b, t, h)), bt = AT3(p->beta, b, t, h);
                for (int64_t j = 0; j < V; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < K; i++) acc += a * Sp[i * V + j] * kn[i];
                    u[j] = bt * (AT4(p->v, b, t, h, j) - acc);
                }
                for (int64_t i = 0; i < K; i++)
                    for (int64_t j = 0; j < V; j++) Sn[i * V + j] = a * Sp[i * V + j] + kn[i] * u[j];
                for (int64_t j = 0; j < V; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < K; i++) acc += Sn[i * V + j] * qs[i];
                    R->o[OFF4(p->o, b, t, h, j)] = acc;
                }
            }
            for (int64_t x = 0; x < K * V; x++) {
                R->hT[b * p->hT.s[0] + h * p->hT.s[1] + x] = S[T * K * V + x];
                dS[x] = p->dhT.p ? ((const float *)p->dhT.p)[b * p->dhT.s[0] + h * p->dhT.s[1] + x] : 0;
            }
            for (int64_t t = T - 1; t >= 0; t--) { /* reverse (MATH_GDN.md 4.2) */
                const double *Sprev = S + t * K * V, *St = S + (t + 1) * K * V;
                ref_norm(&p->q, b, t, g, K, p->l2norm, p->scale, qs);
                ref_norm(&p->k, b, t, g, K, p->l2norm, 1.0, kn);
                const double a = exp(AT3(p->g, b, t, h)), bt = AT3(p->beta, b, t, h);
                double dO[512];
                for (int64_t j = 0; j < V; j++) dO[j] = AT4(p->dout, b, t, h, j);
                for (int64_t i = 0; i < K; i++)
                    for (int64_t j = 0; j < V; j++) dS[i * V + j] += qs[i] * dO[j];
                for (int64_t i = 0; i < K; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j < V; j++) acc += St[i * V + j] * dO[j];
                    dqt[i] = acc;
                }
                for (int64_t j = 0; j < V; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < K; i++) acc += a * Sprev[i * V + j] * kn[i];
                    pv[j] = acc;
                    u[j] = bt * (AT4(p->v, b, t, h, j) - acc);
                }
                for (int64_t i = 0; i < K; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j < V; j++) acc += dS[i * V + j] * u[j];
                    dkt[i] = acc;
                }
                double dbt = 0;
                for (int64_t j = 0; j < V; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < K; i++) acc += dS[i * V + j] * kn[i];
                    du[j] = acc;
                    dbt += acc * (AT4(p->v, b, t, h, j) - pv[j]);
                    R->dv[OFF4(p->grad_v, b, t, h, j)] = bt * acc;
                }
                double dgt = 0;
                for (int64_t i = 0; i < K; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j < V; j++) {
                        const double dp = -bt * du[j];
                        dSp[i * V + j] = dS[i * V + j] + kn[i] * dp;
                        acc += a * Sprev[i * V + j] * dp;
                        dgt += a * Sprev[i * V + j] * dSp[i * V + j];
                    }
                    dkt[i] += acc;
                }
                for (int64_t x = 0; x < K * V; x++) dS[x] = a * dSp[x];
                R->dbeta[OFF3(p->grad_beta, b, t, h)] = dbt;
                R->dg[OFF3(p->grad_g, b, t, h)] = dgt;
                for (int64_t i = 0; i < K; i++) dqn[t * K + i] = dqt[i], dkn[t * K + i] = dkt[i];
            }
            for (int64_t x = 0; x < K * V; x++) R->dh0[b * p->grad_h0.s[0] + h * p->grad_h0.s[1] + x] = dS[x];
            for (int64_t t = 0; t < T; t++) /* scale, L2 norm backward, group sum */
                for (int w = 0; w < 2; w++) {
                    const cg_view *xv = w ? &p->k : &p->q;
                    const double mul = w ? 1.0 : p->scale, *dn = (w ? dkn : dqn) + t * K;
                    double *out = w ? R->dk : R->dq;
                    const double rstd = ref_norm(xv, b, t, g, K, p->l2norm, 1.0, y);
                    double dot = 0;
                    for (int64_t i = 0; i < K; i++) dot += mul * dn[i] * y[i];
                    for (int64_t i = 0; i < K; i++)
                        out[OFF4(*xv, b, t, g, i)] += p->l2norm ? rstd * (mul * dn[i] - dot * y[i]) : mul * dn[i];
                }
        }
    free(S), free(dS), free(dSp), free(qs), free(kn), free(u), free(pv), free(dqt), free(dkt), free(du), free(y);
    free(dqn), free(dkn);
}

static void gref_free(gref *R) { free(R->o), free(R->hT), free(R->dq), free(R->dk), free(R->dv), free(R->dg), free(R->dbeta), free(R->dh0); }

/* max |x - r| / max |r| */
static double rel_err(const float *x, const double *r, int64_t n) {
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)x[i] - r[i]);
        e = d > e || isnan(d) ? d : e;
        m = fabs(r[i]) > m ? fabs(r[i]) : m;
    }
    return m > 0 ? e / m : e;
}

static cg_status run_both(cg_context *ctx, gset *s, const char *config) {
    cg_cfg cfg;
    cg_status st = cg__cfg_parse(ctx, config ? config : "", &cfg);
    if (st == CG_OK) st = cg__gdr_cpu_chunk_fwd(ctx, &s->p, &cfg, NULL);
    if (st == CG_OK) st = cg__gdr_cpu_chunk_bwd(ctx, &s->p, &cfg, NULL);
    return st;
}

/* Check one case against the reference; returns the worst relative error. */
static double check_case(cg_context *ctx, const gcase *c, double tol) {
    gset s;
    gset_make(&s, c, 0x9e3779b97f4a7c15ull ^ (uint64_t)(c->T * 131 + c->dk * 7 + c->H));
    char config[64] = "";
    if (c->chunk) snprintf(config, sizeof config, "chunk=%d", c->chunk);
    CG_CHECK_OK(ctx, run_both(ctx, &s, config));
    gref R;
    gref_run(&s, &R);
    const float *x[NOUT];
    int64_t n[NOUT];
    gset_outs(&s, x, n);
    const double *r[NOUT] = {R.o, R.hT, R.dq, R.dk, R.dv, R.dg, R.dbeta, R.dh0};
    double worst = 0;
    for (int i = 0; i < NOUT; i++) {
        if (!n[i]) continue;
        const double e = rel_err(x[i], r[i], n[i]);
        CG_CHECK(e <= tol, "%s: %s rel err %.3g > %.1g", c->name, k_out[i], e, tol);
        if (!(e <= worst)) worst = e;
    }
    gref_free(&R);
    gset_free(&s);
    return worst;
}

static const gcase k_cases[] = {
    {.name = "T1_grouped", .B = 2, .T = 1, .G = 2, .H = 6, .dk = 48, .dv = 40},
    {.name = "T63_head", .T = 63, .G = 2, .H = 6, .dk = 48, .dv = 40, .head_major = 1, .no_h0 = 1, .no_dhT = 1},
    {.name = "T64", .T = 64, .G = 2, .H = 6, .dk = 48, .dv = 40, .no_l2 = 1},
    {.name = "T65_head", .B = 2, .T = 65, .G = 2, .H = 6, .dk = 48, .dv = 40, .head_major = 1, .no_dhT = 1},
    {.name = "T200", .T = 200, .G = 2, .H = 6, .dk = 48, .dv = 40},
    {.name = "T200_noh0_nol2", .T = 200, .G = 1, .H = 2, .dk = 48, .dv = 40, .no_h0 = 1, .no_l2 = 1},
    {.name = "dk7_dv5", .T = 130, .G = 1, .H = 3, .dk = 7, .dv = 5},
    {.name = "d128", .T = 150, .G = 1, .H = 2, .dk = 128, .dv = 128},
    {.name = "beta_near0", .T = 130, .G = 2, .H = 4, .dk = 48, .dv = 40, .beta = RANGE(0.0, 0.01)},
    {.name = "beta_near1", .T = 130, .G = 2, .H = 4, .dk = 48, .dv = 40, .head_major = 1, .beta = RANGE(0.99, 1.0)},
    {.name = "beta_near2", .T = 130, .G = 2, .H = 4, .dk = 48, .dv = 40, .beta = RANGE(1.95, 1.999)},
    {.name = "g0", .T = 100, .G = 1, .H = 2, .dk = 32, .dv = 32, .g = RANGE(0.0, 0.0)},
    {.name = "g_underflow", .T = 100, .G = 1, .H = 2, .dk = 32, .dv = 32, .g = RANGE(-25.0, -15.0)},
    {.name = "chunk16", .T = 75, .G = 2, .H = 6, .dk = 48, .dv = 40, .head_major = 1, .chunk = 16},
    {.name = "chunk32_dk130", .T = 70, .G = 1, .H = 1, .dk = 130, .dv = 24, .chunk = 32},
    {.name = "chunk1", .T = 9, .G = 1, .H = 2, .dk = 20, .dv = 12, .head_major = 1, .chunk = 1},
    {.name = "chunk7", .T = 30, .G = 2, .H = 4, .dk = 20, .dv = 12, .beta = RANGE(0.1, 1.9), .chunk = 7},
    {.name = "d256_chunk128", .T = 140, .G = 1, .H = 1, .dk = 256, .dv = 256, .chunk = 128},
};

CG_TEST(gdr_cpu_chunk_vs_f64) {
    CG_TEST_CONTEXT(ctx);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const double e = check_case(ctx, &k_cases[i], 1e-4);
        printf("  %-16s worst rel err %.2e\n", k_cases[i].name, e);
    }
    cg_context_free(ctx);
}

/* Long memory (g ~ -1e-3: the state remembers thousands of tokens; a cheaper stand-in for
 * the T = 8192) */
CG_TEST(gdr_cpu_chunk_long_memory) {
    CG_TEST_CONTEXT(ctx);
    const gcase c = {.name = "T2048_long", .T = 2048, .G = 1, .H = 2, .dk = 64, .dv = 64, .g = RANGE(-2e-3, 0.0)};
    printf("  %-16s worst rel err %.2e\n", c.name, check_case(ctx, &c, 1e-4));
    cg_context_free(ctx);
}

/* Bitwise equal outputs across runs and thread counts (the work split is fixed; with
 * fewer (b, g) pairs than threads the backward runs a task per value head and adds their
 * dq, dk after, in the same order: the second case, on 2 threads). */
static void check_same(const gcase *c, const gset *a, const gset *x, const char *what) {
    const float *xa[NOUT], *xx[NOUT];
    int64_t n[NOUT], nx[NOUT];
    gset_outs(a, xa, n), gset_outs(x, xx, nx);
    for (int i = 0; i < NOUT; i++)
        CG_CHECK(!memcmp(xa[i], xx[i], (size_t)n[i] * 4), "%s: %s differs (%s)", c->name, k_out[i], what);
}

CG_TEST(gdr_cpu_chunk_deterministic) {
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 2));
    const gcase cases[] = {{.name = "det", .B = 2, .T = 300, .G = 2, .H = 6, .dk = 48, .dv = 40},
                           {.name = "det_split", .T = 150, .G = 1, .H = 3, .dk = 40, .dv = 24, .head_major = 1}};
    for (int k = 0; k < 2; k++) {
        gset s[3];
        const char *cfg[3] = {"threads=1", "threads=2", "threads=2"};
        for (int r = 0; r < 3; r++) {
            gset_make(&s[r], &cases[k], 42);
            CG_CHECK_OK(ctx, run_both(ctx, &s[r], cfg[r]));
        }
        check_same(&cases[k], &s[0], &s[1], "threads 1 and 2");
        check_same(&cases[k], &s[1], &s[2], "two runs");
        for (int r = 0; r < 3; r++) gset_free(&s[r]);
    }
    cg_context_free(ctx);
}
