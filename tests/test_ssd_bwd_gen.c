/* test_ssd_bwd_gen.c -- the generated SSD backward kernels under the SIMT emulator
 * against the float64 reference: every config the Lua constraints accept, on small odd
 * shapes (T = 1, T not a multiple of the chunk, dk/dv 7, 40, 48, G = 2 < H = 4, both
 * layouts, strided views, h0, dhT and dh0 present and absent), every gradient. Each
 * config runs at least once per test run; the shapes rotate over the configs so the
 * whole space stays within a few minutes. The same checks run natively with
 * CG_BACKEND_CUDA when a GPU is present. */
#include "cg_test.h"

#include "gen.h"

#include <string.h>

#define TOL_FP32 1e-4 /* ieee and 3xtf32, gradients */
#define TOL_TF32 5e-3

typedef struct bshape {
    int64_t B, T, G, H, dk, dv;
    int layout;  /* order of the shapes */
    int swapped; /* memory order with the two middle dims swapped: strided views */
    int h0;      /* h0 given */
    int dhT;     /* dhT given */
    int dh0;     /* dh0 wanted */
} bshape;

/* Small odd shapes; each config runs on one of those whose constraints accept it.
 * The last two are the only ones long enough for chunk 64. */
static const bshape k_shapes[] = {
    {1, 1, 1, 1, 7, 7, CG_LAYOUT_TOKEN_MAJOR, 0, 1, 1, 1},
    {2, 37, 2, 4, 48, 40, CG_LAYOUT_HEAD_MAJOR, 0, 0, 1, 1},
    {1, 21, 1, 2, 7, 20, CG_LAYOUT_TOKEN_MAJOR, 1, 1, 0, 1},
    {1, 45, 2, 2, 40, 48, CG_LAYOUT_TOKEN_MAJOR, 0, 1, 1, 0},
    {1, 70, 1, 1, 48, 33, CG_LAYOUT_HEAD_MAJOR, 1, 0, 0, 1},
};
#define NSHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

typedef struct bset {
    cg_tbuf q, k, v, la, h0, dout, dhT; /* inputs */
    cg_tbuf dq, dk, dv, dla, dh0;       /* outputs */
} bset;

static cg_tbuf mk(const bshape *c, cg_dtype dt, int64_t heads, int64_t dim) {
    static const int perm4[4] = {0, 2, 1, 3}, perm3[3] = {0, 2, 1};
    const int swap = dt == CG_F32 && c->swapped;
    if (dim == 0) { /* log_alpha */
        int64_t s[3] = {c->B, c->T, heads};
        if (c->layout == CG_LAYOUT_HEAD_MAJOR) s[1] = heads, s[2] = c->T;
        return cg_tbuf_new_perm(dt, 3, s, swap ? perm3 : NULL);
    }
    int64_t s[4] = {c->B, c->T, heads, dim};
    if (c->layout == CG_LAYOUT_HEAD_MAJOR) s[1] = heads, s[2] = c->T;
    return cg_tbuf_new_perm(dt, 4, s, swap ? perm4 : NULL);
}

static void set_alloc(bset *s, const bshape *c, cg_dtype dt) {
    int64_t st[4] = {c->B, c->H, c->dk, c->dv};
    s->q = mk(c, dt, c->G, c->dk);
    s->k = mk(c, dt, c->G, c->dk);
    s->v = mk(c, dt, c->H, c->dv);
    s->la = mk(c, dt, c->H, 0);
    s->dout = mk(c, dt, c->H, c->dv);
    s->dq = mk(c, dt, c->G, c->dk);
    s->dk = mk(c, dt, c->G, c->dk);
    s->dv = mk(c, dt, c->H, c->dv);
    s->dla = mk(c, dt, c->H, 0);
    s->h0 = cg_tbuf_new(dt, 4, st);
    s->dhT = cg_tbuf_new(dt, 4, st);
    s->dh0 = cg_tbuf_new(dt, 4, st);
}

static void set_free(bset *s) {
    cg_tbuf *all[] = {&s->q, &s->k, &s->v, &s->la, &s->h0, &s->dout, &s->dhT,
                      &s->dq, &s->dk, &s->dv, &s->dla, &s->dh0};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

static const cg_tensor absent;

static cg_status run_bwd(cg_context *ctx, bset *s, const bshape *c, cg_backend be, const char *config) {
    cg_ssd_bwd_args a;
    memset(&a, 0, sizeof a);
    a.layout = (cg_layout)c->layout;
    a.q = s->q.t;
    a.k = s->k.t;
    a.v = s->v.t;
    a.log_alpha = s->la.t;
    a.h0 = c->h0 ? s->h0.t : absent;
    a.dout = s->dout.t;
    a.dhT = c->dhT ? s->dhT.t : absent;
    a.dq = s->dq.t;
    a.dk = s->dk.t;
    a.dv = s->dv.t;
    a.dlog_alpha = s->dla.t;
    a.dh0 = c->dh0 ? s->dh0.t : absent;
    cg_exec ex = {be, config, NULL, NULL, 0, 0};
    return cg_ssd_bwd(ctx, &a, &ex);
}

/* A problem in F32 (for the kernels) and its F64 reference gradients. */
typedef struct bcase {
    bshape c;
    bset f, d; /* f32 inputs/outputs, f64 reference */
} bcase;

static void case_new(cg_context *ctx, bcase *g, const bshape *c, uint64_t seed) {
    g->c = *c;
    set_alloc(&g->f, c, CG_F32);
    set_alloc(&g->d, c, CG_F64);
    cg_rng r = {seed};
    cg_tbuf_fill(&g->f.q, &r, -1, 1);
    cg_tbuf_fill(&g->f.k, &r, -1, 1);
    cg_tbuf_fill(&g->f.v, &r, -1, 1);
    cg_tbuf_fill(&g->f.la, &r, -0.4, 0.0); /* decays from 0.67 to 1 */
    cg_tbuf_fill(&g->f.h0, &r, -1, 1);
    cg_tbuf_fill(&g->f.dout, &r, -1, 1);
    cg_tbuf_fill(&g->f.dhT, &r, -1, 1);
    cg_tbuf *in_f[] = {&g->f.q, &g->f.k, &g->f.v, &g->f.la, &g->f.h0, &g->f.dout, &g->f.dhT};
    cg_tbuf *in_d[] = {&g->d.q, &g->d.k, &g->d.v, &g->d.la, &g->d.h0, &g->d.dout, &g->d.dhT};
    for (int i = 0; i < 7; i++) cg_tbuf_copy(in_d[i], in_f[i]); /* the reference sees the same float32 values */
    CG_CHECK_OK(ctx, run_bwd(ctx, &g->d, c, CG_BACKEND_REF, NULL));
}

static void case_free(bcase *g) {
    set_free(&g->f);
    set_free(&g->d);
}

static void cfg_text(const cg_cfg *cfg, char *out, size_t len) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < cfg->n && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%s%s=%s", i ? "," : "", cfg->kv[i].key, cfg->kv[i].val);
}

static void kshape_of(const bshape *c, cg_kshape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->B = c->B, ks->T = c->T, ks->G = c->G, ks->H = c->H, ks->dk = c->dk, ks->dv = c->dv;
    ks->flags = (c->h0 ? CG_KS_H0 : 0) | (c->dhT ? CG_KS_DHT : 0);
}

/* Run one config on g with backend be and check every gradient. Returns 1 when it ran. */
static int check_config(cg_context *ctx, bcase *g, cg_backend be, const char *config, double tol) {
    /* poison the outputs so a kernel that skips an element fails */
    cg_tbuf_fill(&g->f.dq, &(cg_rng){7}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dk, &(cg_rng){8}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dv, &(cg_rng){9}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dla, &(cg_rng){10}, 1e3, 2e3);
    cg_tbuf_fill(&g->f.dh0, &(cg_rng){11}, 1e3, 2e3);
    cg_status s = run_bwd(ctx, &g->f, &g->c, be, config);
    const bshape *c = &g->c;
    if (s != CG_OK) {
        CG_CHECK(0, "config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld: %s: %s", config ? config : "(default)",
                 (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H, (long long)c->dk,
                 (long long)c->dv, cg_status_str(s), cg_errmsg(ctx));
        return 0;
    }
    const double eq = cg_rel_err(&g->f.dq, &g->d.dq), ek = cg_rel_err(&g->f.dk, &g->d.dk);
    const double ev = cg_rel_err(&g->f.dv, &g->d.dv), ea = cg_rel_err(&g->f.dla, &g->d.dla);
    const double eh = c->dh0 ? cg_rel_err(&g->f.dh0, &g->d.dh0) : 0;
    CG_CHECK(eq <= tol && ek <= tol && ev <= tol && ea <= tol && eh <= tol,
             "config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld layout=%d swapped=%d h0=%d dhT=%d dh0=%d: "
             "rel err dq %.3g dk %.3g dv %.3g dla %.3g dh0 %.3g (tol %g) [%s]",
             config ? config : "(default)", (long long)c->B, (long long)c->T, (long long)c->G, (long long)c->H,
             (long long)c->dk, (long long)c->dv, c->layout, c->swapped, c->h0, c->dhT, c->dh0, eq, ek, ev, ea, eh,
             tol, cg_last_dispatch(ctx));
    if (getenv("CHUNKGEN_TEST_VERBOSE"))
        fprintf(stderr, "  %s T=%lld dk=%lld dv=%lld: dq %.2g dk %.2g dv %.2g dla %.2g dh0 %.2g\n",
                config ? config : "(default)", (long long)c->T, (long long)c->dk, (long long)c->dv, eq, ek, ev, ea,
                eh);
    return 1;
}

static int space_has(const cg_cfg *list, int n, const cg_cfg *c) {
    for (int i = 0; i < n; i++) {
        if (list[i].n != c->n) continue;
        int eq = 1;
        for (int j = 0; j < c->n && eq; j++)
            eq = !strcmp(list[i].kv[j].key, c->kv[j].key) && !strcmp(list[i].kv[j].val, c->kv[j].val);
        if (eq) return 1;
    }
    return 0;
}

/* Every config with precision `prec` accepted for any test shape, each run once on a
 * rotating choice among the shapes that accept it; with stride > 1 only every stride-th
 * config of the union. */
static void run_space(const char *prec, cg_backend be, int stride) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    cg_devinfo dev;
    if (be == CG_BACKEND_EMULATE) {
        cg__devinfo_emulated(&dev);
    } else if (cg__kexec_cuda.device(ctx, &dev) != CG_OK) {
        cg_test_skip("no CUDA device");
        cg_context_free(ctx);
        return;
    }
    cg_cfg *space[NSHAPES];
    int nspace[NSHAPES];
    for (int i = 0; i < NSHAPES; i++) {
        cg_kshape ks;
        kshape_of(&k_shapes[i], &ks);
        space[i] = NULL;
        nspace[i] = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_bwd", &ks, &dev, &space[i], &nspace[i]));
        CG_CHECK(nspace[i] > 0, "no config accepted for shape %d", i);
    }
    bcase cases[NSHAPES];
    int made[NSHAPES] = {0};
    int ran = 0, total = 0, rot = 0;
    const double tol = strcmp(prec, "tf32") == 0 ? TOL_TF32 : TOL_FP32;
    for (int i = 0; i < NSHAPES; i++) {
        for (int j = 0; j < nspace[i]; j++) {
            const cg_cfg *cf = &space[i][j];
            if (strcmp(cg__cfg_str(cf, "precision", ""), prec)) continue;
            int seen = 0;
            for (int a = 0; a < i && !seen; a++) seen = space_has(space[a], nspace[a], cf);
            if (seen) continue;
            if (total++ % stride) continue;
            int pick = -1;
            for (int t = 0; t < NSHAPES && pick < 0; t++) {
                int cand = (rot + t) % NSHAPES;
                if (space_has(space[cand], nspace[cand], cf)) pick = cand;
            }
            CG_CHECK(pick >= 0, "a config of the union not in any space");
            if (pick < 0) continue;
            rot = (pick + 1) % NSHAPES;
            if (!made[pick]) {
                case_new(ctx, &cases[pick], &k_shapes[pick], 1000 + (uint64_t)pick);
                made[pick] = 1;
            }
            char text[512];
            cfg_text(cf, text, sizeof text);
            ran += check_config(ctx, &cases[pick], be, text, tol);
        }
    }
    CG_CHECK(total > 0, "no %s config in the space", prec);
    const int want = (total + stride - 1) / stride;
    CG_CHECK(ran == want, "%d of %d %s configs ran", ran, want, prec);
    fprintf(stderr, "ssd_bwd_gen: %d of %d %s configs checked on %s\n", ran, total, prec, cg_backend_name(be));
    for (int i = 0; i < NSHAPES; i++) {
        if (made[i]) case_free(&cases[i]);
        free(space[i]);
    }
    cg_context_free(ctx);
}

CG_TEST(ssd_bwd_gen_emu_ieee) { run_space("ieee", CG_BACKEND_EMULATE, 1); }
CG_TEST(ssd_bwd_gen_emu_tf32) { run_space("tf32", CG_BACKEND_EMULATE, 1); }
CG_TEST(ssd_bwd_gen_emu_3xtf32) { run_space("3xtf32", CG_BACKEND_EMULATE, 1); }

/* The default config (fp32-accurate) on every shape; the dispatch line names the
 * kernel; a second call hits the plan table and gives the same bits (deterministic). */
CG_TEST(ssd_bwd_gen_emu_default) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    for (int i = 0; i < NSHAPES; i++) {
        bcase g;
        case_new(ctx, &g, &k_shapes[i], 2000 + (uint64_t)i);
        if (check_config(ctx, &g, CG_BACKEND_EMULATE, NULL, TOL_FP32)) {
            const char *d = cg_last_dispatch(ctx);
            CG_CHECK(strstr(d, "kernel=ssd_bwd_") != NULL, "dispatch line without the kernel name: %s", d);
            CG_CHECK(strstr(d, "_tf32") == NULL || strstr(d, "_3xtf32") != NULL, "default is plain tf32: %s", d);
        }
        cg_tbuf dq1 = mk(&g.c, CG_F32, g.c.G, g.c.dk), dla1 = mk(&g.c, CG_F32, g.c.H, 0);
        cg_tbuf_copy(&dq1, &g.f.dq);
        cg_tbuf_copy(&dla1, &g.f.dla);
        CG_CHECK_OK(ctx, run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, NULL));
        CG_CHECK(cg_rel_err(&g.f.dq, &dq1) == 0 && cg_rel_err(&g.f.dla, &dla1) == 0, "second run differs (shape %d)",
                 i);
        cg_tbuf_free(&dq1);
        cg_tbuf_free(&dla1);
        case_free(&g);
    }
    cg_context_free(ctx);
}

/* Pins outside the space or rejected by the constraints fail with a reason. */
CG_TEST(ssd_bwd_gen_emu_bad_config) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    bcase g;
    case_new(ctx, &g, &k_shapes[0], 3000);
    cg_status s = run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=48");
    CG_CHECK(s == CG_EINVAL, "chunk=48 (outside the space): got %s: %s", cg_status_str(s), cg_errmsg(ctx));
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk") != NULL, "message does not name chunk: %s", cg_errmsg(ctx));
    /* T = 1: a 64-token chunk only multiplies zeros */
    s = run_bwd(ctx, &g.f, &g.c, CG_BACKEND_EMULATE, "chunk=64,block_dv=16,warps=2,precision=ieee");
    CG_CHECK(s == CG_EUNSUPPORTED, "chunk=64 on T=1: got %s: %s", cg_status_str(s), cg_errmsg(ctx));
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk") != NULL, "message does not name chunk: %s", cg_errmsg(ctx));
    case_free(&g);
    cg_context_free(ctx);
}

/* Natively on a GPU (skipped without one): every 4th config of the device's space
 * (CHUNKGEN_TEST_ALL_CONFIGS=1: all of them). Host tensors: the launcher stages them. */
static int cuda_stride(void) {
    const char *e = getenv("CHUNKGEN_TEST_ALL_CONFIGS");
    return e && e[0] == '1' ? 1 : 4;
}
CG_TEST(ssd_bwd_gen_cuda_ieee) { run_space("ieee", CG_BACKEND_CUDA, cuda_stride()); }
CG_TEST(ssd_bwd_gen_cuda_tf32) { run_space("tf32", CG_BACKEND_CUDA, cuda_stride()); }
CG_TEST(ssd_bwd_gen_cuda_3xtf32) { run_space("3xtf32", CG_BACKEND_CUDA, cuda_stride()); }
