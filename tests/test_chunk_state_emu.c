/* test_chunk_state_emu.c -- the generated ssd_chunk_state kernel (phase 1 of the
 * three-phase SSD forward, templates/ssd_chunk_state.cu) run under the SIMT emulator:
 * every config of its space, each on one of a few odd shapes in turn, against a
 * float64 computation of U_c = (K * w)^T V, w_j = exp(A_last - A_j), and
 * gamma_c = exp(A_last) (KERNEL_MATH.md). */
#include "cg_test.h"
#include "emu/emu.h"
#include "gen.h"
#include "ssd_chunk_state_params.h"

#define CS_TOL 1e-5

/* One test shape. layout 0: token-major tensors ([B, T, G, dk], [B, T, H, dv],
 * [B, T, H]) and dense outputs; layout 1: head-major tensors ([B, G, T, dk],
 * [B, H, T, dv], [B, H, T]) and outputs with padding between rows, chunks, heads
 * and batches, which must be left untouched. */
typedef struct cs_shape {
    int64_t B, T, G, H, dk, dv;
    int flags; /* CG_KS_*: the kernel does not read h0/hT; the space must not depend on them */
    int layout;
} cs_shape;

static const cs_shape k_cs_shapes[] = {
    {2, 37, 2, 4, 7, 5, 0, 0},                       /* T not a multiple of any chunk */
    {1, 1, 2, 4, 48, 40, CG_KS_H0, 1},               /* T = 1 */
    {1, 70, 2, 4, 130, 33, CG_KS_H0 | CG_KS_HT, 1},  /* dk past 128: several dk tiles */
    {2, 129, 2, 4, 48, 40, CG_KS_HT, 0},             /* a last chunk of one token */
};
#define CS_NSHAPES ((int)(sizeof k_cs_shapes / sizeof k_cs_shapes[0]))

/* Host inputs of one shape, logical order [B, T, G|H, d] whatever the layout. */
typedef struct cs_case {
    const cs_shape *s;
    float *k, *v, *la;        /* host copies in the shape's layout */
    int64_t k_sb, k_st, k_sg; /* their strides */
    int64_t v_sb, v_st, v_sh;
    int64_t la_sb, la_st, la_sh;
    size_t nk, nv, nl;        /* elements */
    void *dk, *dv, *dla;      /* kernel memory */
} cs_case;

static void cs_case_new(cg_context *ctx, cs_case *c, const cs_shape *s, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->s = s;
    const int64_t B = s->B, T = s->T, G = s->G, H = s->H;
    c->nk = (size_t)(B * T * G * s->dk);
    c->nv = (size_t)(B * T * H * s->dv);
    c->nl = (size_t)(B * T * H);
    if (s->layout == 0) {
        c->k_sb = T * G * s->dk, c->k_st = G * s->dk, c->k_sg = s->dk;
        c->v_sb = T * H * s->dv, c->v_st = H * s->dv, c->v_sh = s->dv;
        c->la_sb = T * H, c->la_st = H, c->la_sh = 1;
    } else {
        c->k_sb = G * T * s->dk, c->k_sg = T * s->dk, c->k_st = s->dk;
        c->v_sb = H * T * s->dv, c->v_sh = T * s->dv, c->v_st = s->dv;
        c->la_sb = H * T, c->la_sh = T, c->la_st = 1;
    }
    c->k = malloc(c->nk * 4);
    c->v = malloc(c->nv * 4);
    c->la = malloc(c->nl * 4);
    CG_CHECK(c->k && c->v && c->la, "out of memory");
    if (!c->k || !c->v || !c->la) return;
    cg_rng r = {seed};
    for (size_t i = 0; i < c->nk; i++) c->k[i] = (float)cg_rng_uniform(&r, -1, 1);
    for (size_t i = 0; i < c->nv; i++) c->v[i] = (float)cg_rng_uniform(&r, -1, 1);
    for (size_t i = 0; i < c->nl; i++) c->la[i] = (float)cg_rng_uniform(&r, -0.4, 0.0); /* decays 0.67..1 */
    const cg_kexec *x = &cg__kexec_emu;
    CG_CHECK_OK(ctx, x->alloc(ctx, c->nk * 4, &c->dk));
    CG_CHECK_OK(ctx, x->alloc(ctx, c->nv * 4, &c->dv));
    CG_CHECK_OK(ctx, x->alloc(ctx, c->nl * 4, &c->dla));
    if (c->dk) CG_CHECK_OK(ctx, x->copy(ctx, c->dk, c->k, c->nk * 4, 0, NULL));
    if (c->dv) CG_CHECK_OK(ctx, x->copy(ctx, c->dv, c->v, c->nv * 4, 0, NULL));
    if (c->dla) CG_CHECK_OK(ctx, x->copy(ctx, c->dla, c->la, c->nl * 4, 0, NULL));
}

static void cs_case_free(cg_context *ctx, cs_case *c) {
    cg__kexec_emu.free(ctx, c->dk);
    cg__kexec_emu.free(ctx, c->dv);
    cg__kexec_emu.free(ctx, c->dla);
    free(c->k);
    free(c->v);
    free(c->la);
}

static void cs_kshape(const cs_shape *s, cg_kshape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->B = s->B, ks->T = s->T, ks->G = s->G, ks->H = s->H, ks->dk = s->dk, ks->dv = s->dv;
    ks->flags = s->flags;
}

static int cs_cfg_eq(const cg_cfg *a, const cg_cfg *b) {
    if (a->n != b->n) return 0;
    for (int j = 0; j < a->n; j++)
        if (strcmp(a->kv[j].key, b->kv[j].key) || strcmp(a->kv[j].val, b->kv[j].val)) return 0;
    return 1;
}

static int cs_space_has(const cg_cfg *list, int n, const cg_cfg *c) {
    for (int i = 0; i < n; i++)
        if (cs_cfg_eq(&list[i], c)) return 1;
    return 0;
}

/* A bit pattern (a NaN) the outputs start as: padding must keep it, results replace it. */
static const uint32_t k_cs_sentinel = 0x7fc0d00du;

static int cs_is_sentinel(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u == k_cs_sentinel;
}

/* Run plan (all its launches) on case c and check U and gamma; 1 when it ran.
 * worst[0], worst[1]: the largest U and gamma rel errs seen so far. */
static int cs_check_plan(cg_context *ctx, const cs_case *c, const cg_plan *plan, double worst[2]) {
    const cs_shape *s = c->s;
    const cg_kexec *x = &cg__kexec_emu;
    const int64_t B = s->B, T = s->T, G = s->G, H = s->H, dk = s->dk, dv = s->dv;
    const int64_t C = cg__cfg_int(&plan->params, "chunk", 0);
    CG_CHECK(C >= 1 && C <= 256, "%s: chunk %lld", plan->name, (long long)C);
    if (C < 1 || C > 256) return 0;
    const int64_t NC = (T + C - 1) / C;
    /* output strides; layout 1 pads every level */
    const int pad = s->layout == 1;
    const int64_t U_si = dv + 3 * pad, U_sc = dk * U_si + 5 * pad, U_sh = NC * U_sc + 2 * pad,
                  U_sb = H * U_sh + 7 * pad;
    const int64_t gamma_sh = NC + pad, gamma_sb = H * gamma_sh + 3 * pad;
    const size_t nu = (size_t)(B * U_sb), ng = (size_t)(B * gamma_sb);
    float *U = malloc(nu * 4), *gm = malloc(ng * 4);
    CG_CHECK(U && gm, "out of memory");
    void *dU = NULL, *dg = NULL, *mod = NULL;
    int ran = 0;
    if (!U || !gm) goto done;
    for (size_t i = 0; i < nu; i++) memcpy(&U[i], &k_cs_sentinel, 4);
    for (size_t i = 0; i < ng; i++) memcpy(&gm[i], &k_cs_sentinel, 4);
    if (x->alloc(ctx, nu * 4, &dU) != CG_OK || x->alloc(ctx, ng * 4, &dg) != CG_OK) {
        CG_CHECK(0, "alloc: %s", cg_errmsg(ctx));
        goto done;
    }
    CG_CHECK_OK(ctx, x->copy(ctx, dU, U, nu * 4, 0, NULL));
    CG_CHECK_OK(ctx, x->copy(ctx, dg, gm, ng * 4, 0, NULL));
    if (x->load(ctx, plan, &mod) != CG_OK) {
        CG_CHECK(0, "%s: load: %s", plan->name, cg_errmsg(ctx));
        goto done;
    }
    cg_ssd_chunk_state_params p = {
        .k = c->dk, .v = c->dv, .la = c->dla, .U = dU, .gamma = dg,
        .k_sb = c->k_sb, .k_st = c->k_st, .k_sg = c->k_sg,
        .v_sb = c->v_sb, .v_st = c->v_st, .v_sh = c->v_sh,
        .la_sb = c->la_sb, .la_st = c->la_st, .la_sh = c->la_sh,
        .U_sb = U_sb, .U_sh = U_sh, .U_sc = U_sc, .U_si = U_si,
        .gamma_sb = gamma_sb, .gamma_sh = gamma_sh,
        .B = B, .T = T, .G = G, .H = H, .dk = dk, .dv = dv, .nchunks = NC};
    CG_CHECK(plan->nlaunch >= 1, "%s: %d launches", plan->name, plan->nlaunch);
    for (int l = 0; l < plan->nlaunch; l++) {
        if (x->launch(ctx, mod, &plan->launch[l], &p, sizeof p, NULL) != CG_OK) {
            CG_CHECK(0, "%s: launch %d: %s", plan->name, l, cg_errmsg(ctx));
            goto done;
        }
    }
    CG_CHECK_OK(ctx, x->sync(ctx, NULL));
    CG_CHECK_OK(ctx, x->copy(ctx, U, dU, nu * 4, 1, NULL));
    CG_CHECK_OK(ctx, x->copy(ctx, gm, dg, ng * 4, 1, NULL));
    ran = 1;

    /* float64 reference; every output element must be written and finite, every
     * padding element left as it was */
    double uerr = 0, uref = 0, gerr = 0, gref = 0;
    int64_t bad = 0, touched = 0;
    char *written = calloc(nu + ng, 1);
    double *A = malloc((size_t)C * sizeof *A);
    CG_CHECK(written && A, "out of memory");
    if (!written || !A) {
        free(written);
        free(A);
        goto done;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t ch = 0; ch < NC; ch++) {
                const int64_t g = h / (H / G), t0 = ch * C, len = T - t0 < C ? T - t0 : C;
                double acc = 0;
                for (int64_t j = 0; j < len; j++) A[j] = acc += c->la[b * c->la_sb + (t0 + j) * c->la_st + h * c->la_sh];
                const double gr = exp(A[len - 1]);
                const int64_t go = b * gamma_sb + h * gamma_sh + ch;
                const double gg = gm[go];
                written[nu + (size_t)go] = 1;
                if (!isfinite(gg)) bad++;
                else if (fabs(gg - gr) > gerr) gerr = fabs(gg - gr);
                if (fabs(gr) > gref) gref = fabs(gr);
                for (int64_t i = 0; i < dk; i++)
                    for (int64_t jj = 0; jj < dv; jj++) {
                        double r = 0;
                        for (int64_t j = 0; j < len; j++)
                            r += exp(A[len - 1] - A[j]) * c->k[b * c->k_sb + (t0 + j) * c->k_st + g * c->k_sg + i] *
                                 c->v[b * c->v_sb + (t0 + j) * c->v_st + h * c->v_sh + jj];
                        const int64_t uo = b * U_sb + h * U_sh + ch * U_sc + i * U_si + jj;
                        const double got = U[uo];
                        written[uo] = 1;
                        if (!isfinite(got)) bad++;
                        else if (fabs(got - r) > uerr) uerr = fabs(got - r);
                        if (fabs(r) > uref) uref = fabs(r);
                    }
            }
    for (size_t i = 0; i < nu + ng; i++)
        if (!written[i] && !cs_is_sentinel(i < nu ? U[i] : gm[i - nu])) touched++;
    free(written);
    free(A);
    const double ue = uref > 0 ? uerr / uref : uerr, ge = gref > 0 ? gerr / gref : gerr;
    if (ue > worst[0]) worst[0] = ue;
    if (ge > worst[1]) worst[1] = ge;
    CG_CHECK(bad == 0, "%s: %lld outputs not written or not finite", plan->name, (long long)bad);
    CG_CHECK(touched == 0, "%s: %lld padding elements overwritten", plan->name, (long long)touched);
    CG_CHECK(ue <= CS_TOL, "%s: U rel err %.3g (max |ref| %.3g)", plan->name, ue, uref);
    CG_CHECK(ge <= CS_TOL, "%s: gamma rel err %.3g (max |ref| %.3g)", plan->name, ge, gref);
done:
    x->free(ctx, dU);
    x->free(ctx, dg);
    free(U);
    free(gm);
    return ran;
}

/* Every config the constraints accept for any of the shapes, each run once on a
 * rotating choice among the shapes that accept it. */
CG_TEST(gen_emu_ssd_chunk_state_all_configs) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return;
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_cfg *space[CS_NSHAPES];
    int nspace[CS_NSHAPES];
    for (int i = 0; i < CS_NSHAPES; i++) {
        cg_kshape ks;
        cs_kshape(&k_cs_shapes[i], &ks);
        space[i] = NULL;
        nspace[i] = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_chunk_state", &ks, &dev, &space[i], &nspace[i]));
        CG_CHECK(nspace[i] > 0, "no config accepted for shape %d", i);
    }
    /* the union of the spaces in order of first appearance, with the shape each runs on */
    int cap = 0;
    for (int i = 0; i < CS_NSHAPES; i++) cap += nspace[i];
    cg_plan *plans = calloc((size_t)(cap ? cap : 1), sizeof *plans);
    int *pick_of = calloc((size_t)(cap ? cap : 1), sizeof *pick_of);
    CG_CHECK(plans && pick_of, "out of memory");
    int total = 0, nplan = 0, rot = 0;
    for (int i = 0; plans && pick_of && i < CS_NSHAPES; i++)
        for (int j = 0; j < nspace[i]; j++) {
            const cg_cfg *cf = &space[i][j];
            int seen = 0;
            for (int a = 0; a < i && !seen; a++) seen = cs_space_has(space[a], nspace[a], cf);
            if (seen) continue;
            total++;
            int pick = -1;
            for (int t = 0; t < CS_NSHAPES && pick < 0; t++) {
                const int cand = (rot + t) % CS_NSHAPES;
                if (cs_space_has(space[cand], nspace[cand], cf)) pick = cand;
            }
            CG_CHECK(pick >= 0, "a config of the union is in no space");
            if (pick < 0) continue;
            rot = (pick + 1) % CS_NSHAPES;
            cg_kshape ks;
            cs_kshape(&k_cs_shapes[pick], &ks);
            if (cg__gen_plan(ctx, "ssd_chunk_state", &ks, &dev, cf, &plans[nplan]) != CG_OK) {
                CG_CHECK(0, "plan (shape %d): %s", pick, cg_errmsg(ctx));
                continue;
            }
            CG_CHECK(cs_cfg_eq(&plans[nplan].params, cf), "%s: the plan's config is not the pinned one",
                     plans[nplan].name);
            pick_of[nplan++] = pick;
        }
    /* compile the modules in parallel first; the loads then hit the disk cache */
    if (nplan) CG_CHECK_OK(ctx, cg__emu_prebuild(ctx, plans, nplan));
    cs_case cases[CS_NSHAPES];
    int made[CS_NSHAPES] = {0}, ran = 0;
    double worst[2] = {0, 0};
    int64_t per_shape[CS_NSHAPES] = {0};
    for (int n = 0; n < nplan; n++) {
        const int pick = pick_of[n];
        if (!made[pick]) {
            cs_case_new(ctx, &cases[pick], &k_cs_shapes[pick], 4000 + (uint64_t)pick);
            made[pick] = 1;
        }
        if (!cases[pick].dk || !cases[pick].dv || !cases[pick].dla) continue;
        const int ok = cs_check_plan(ctx, &cases[pick], &plans[n], worst);
        ran += ok;
        per_shape[pick] += ok;
    }
    CG_CHECK(total > 0, "no config in the space");
    CG_CHECK(ran == total, "%d of %d configs ran", ran, total);
    for (int i = 0; i < CS_NSHAPES; i++)
        CG_CHECK(per_shape[i] > 0, "no config ran on shape %d (dk=%lld dv=%lld T=%lld)", i,
                 (long long)k_cs_shapes[i].dk, (long long)k_cs_shapes[i].dv, (long long)k_cs_shapes[i].T);
    fprintf(stderr, "ssd_chunk_state: %d of %d configs checked on the emulator (per shape:", ran, total);
    for (int i = 0; i < CS_NSHAPES; i++) fprintf(stderr, " %lld", (long long)per_shape[i]);
    fprintf(stderr, "), worst rel err U %.3g gamma %.3g\n", worst[0], worst[1]);
    for (int i = 0; i < CS_NSHAPES; i++) {
        if (made[i]) cs_case_free(ctx, &cases[i]);
        free(space[i]);
    }
    for (int n = 0; n < nplan; n++) cg__plan_free(&plans[n]);
    free(plans);
    free(pick_of);
    cg_context_free(ctx);
}
