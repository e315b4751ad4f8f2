/* test_gdr_gen.c -- the gated delta rule's generated kernels (generator/kernels/gdr_*.lua,
 * templates/gdr_*.cu) run by the SIMT emulator against the float64 reference on small odd
 * shapes: T = 1, T not a multiple of any chunk, dk / dv not powers of two, grouped heads,
 * both layouts, a varlen batch with a 1-token sequence, h0 / hT on and off, the L2 norm on
 * and off, beta near 2; every config of the space on a rotating case (gdr_gen_emu_space,
 * label sweep), the default config on every case in float32, bfloat16 and float16
 * (gdr_gen_emu_default). NVRTC compiles every config for sm_80 and sm_90 in
 * test_gen_nvrtc.c (the all-configs sweep covers every kernel of generator/kernels/, in
 * float32 without varlen); gdr_gen_nvrtc_half_smN the variants it does not render: the
 * sampled configs varlen with the L2 norm, in bf16 and f16 in turn (label sweep). */
#include "test_dtype_lib.h"
#include "nvrtc_testlib.h"
#include "sweep_sample.h"

#include <math.h>
#include <string.h>

typedef struct ggcase {
    const char *name;
    int64_t B, T, G, H, dk, dv;
    int hm, l2norm, states; /* head-major; use_qk_l2norm; h0, hT (dhT, dh0) given */
    double blo, bhi;        /* beta's range (0, 0: the table's) */
    double scale;           /* 0: dk^-1/2 */
    int nseq;               /* varlen: sequences (B = 1); offsets in cu */
    int64_t cu[4];
} ggcase;

static const ggcase k_gg[] = {
    {"t1", 1, 1, 1, 1, 8, 8, 0, 1, 1, 0, 0, 0, 0, {0}},
    {"t37_g2h6_dk48_dv40_head", 2, 37, 2, 6, 48, 40, 1, 1, 1, 0, 0, 0, 0, {0}},
    {"t37_h3_dk7_dv5_bare", 1, 37, 1, 3, 7, 5, 0, 0, 0, 0, 0, 0.3, 0, {0}},
    {"beta_near2_t70", 1, 70, 2, 2, 16, 12, 0, 1, 1, 1.9, 1.999, 0, 0, {0}},
    {"varlen_1_37_70", 1, 108, 2, 4, 16, 24, 0, 1, 1, 0, 0, 0, 3, {0, 1, 38, 108}},
    {"varlen_head_bare", 1, 80, 1, 2, 9, 6, 1, 0, 0, 0, 0, 0, 3, {0, 40, 40, 80}},
};
#define NGG (int)(sizeof k_gg / sizeof k_gg[0])

/* The problem of case c for op, its tensors in `half` (16-bit-capable ones) and `other`,
 * states per sequence when varlen, inputs drawn from seed; offsets into *cu. */
static void gg_new(dtt_prob *p, cg_tbuf *cu, cg_op op, const ggcase *c, cg_dtype half, cg_dtype other,
                   uint64_t seed) {
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
    if (c->bhi > 0) {
        cg_rng r = {seed ^ 0x51};
        cg_tbuf_fill(&p->t[dtt_idx(p, "beta")], &r, c->blo, c->bhi);
    }
    memset(cu, 0, sizeof *cu);
    if (c->nseq) {
        const int64_t n1 = c->nseq + 1;
        *cu = cg_tbuf_new(CG_I64, 1, &n1);
        memcpy(cu->mem, c->cu, (size_t)n1 * sizeof(int64_t));
    }
}

/* p on backend be with the case's options, config pinned to cfg (NULL: the default). */
static cg_status gg_run(cg_context *ctx, dtt_prob *p, const cg_tbuf *cu, const ggcase *c, cg_backend be,
                        const char *cfg) {
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
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    ex.config = cfg;
    return cg_run(ctx, p->d->op, args, &ex);
}

/* Case c of op in storage dtype half under the emulator (config cfg) against the
 * reference on the same rounded inputs. Returns 1 when it ran, 0 when the config is
 * refused for this case (CG_EUNSUPPORTED; only with a pinned config). */
static int gg_check(cg_context *ctx, const ggcase *c, cg_op op, cg_dtype half, const char *cfg) {
    const uint64_t seed = 500 + (uint64_t)(c - k_gg) * 11 + (uint64_t)op;
    dtt_prob p, r;
    cg_tbuf cu;
    gg_new(&p, &cu, op, c, half, CG_F32, seed);
    cg_tbuf_free(&cu);
    gg_new(&r, &cu, op, c, CG_F64, CG_F64, seed);
    dtt_copy_inputs(&r, &p);
    const char *dn = cg_dtype_name(half);
    cg_status st = gg_run(ctx, &p, &cu, c, CG_BACKEND_EMULATE, cfg);
    int ran = st != CG_EUNSUPPORTED || !cfg;
    if (ran) {
        CG_CHECK(st == CG_OK, "%s %s %s [%s]: emulate: %s", p.d->name, c->name, dn, cfg ? cfg : "default",
                 cg_errmsg(ctx));
        st = gg_run(ctx, &r, &cu, c, CG_BACKEND_REF, NULL);
        CG_CHECK(st == CG_OK, "%s %s: ref: %s", p.d->name, c->name, cg_errmsg(ctx));
        for (int i = 0; i < p.d->nt && st == CG_OK; i++) {
            const cg_tdesc *t = &p.d->t[i];
            if (t->role != CG_TD_OUT || !p.t[i].t.data) continue;
            const double err = cg_rel_err(&p.t[i], &r.t[i]), tol = cg__tol_dtype(t->tol, p.t[i].t.dtype);
            CG_CHECK(err <= tol, "%s %s %s [%s]: %s rel err %.3g > %.0e", p.d->name, c->name, dn,
                     cfg ? cfg : "default", t->name, err, tol);
        }
    }
    dtt_free(&p), dtt_free(&r);
    cg_tbuf_free(&cu);
    return ran;
}

static cg_context *emu_ctx(void) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    return ctx;
}

/* Every config of op's kernel space (chunk x block_dv x warps) once, on a rotating case
 * that accepts it; each config must run on some case. */
static void run_space(cg_op op) {
    static const int chunks[] = {16, 32, 64}, bvs[] = {16, 32, 64}, warps[] = {1, 2, 4, 8};
    cg_context *ctx = emu_ctx();
    int q = 0, ran = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int w = 0; w < 4; w++, q++) {
                char cfg[96];
                snprintf(cfg, sizeof cfg, "chunk=%d,block_dv=%d,warps=%d", chunks[a], bvs[b], warps[w]);
                int ok = 0;
                for (int k = 0; k < NGG && !ok; k++) ok = gg_check(ctx, &k_gg[(q + k) % NGG], op, CG_F32, cfg);
                CG_CHECK(ok, "%s: config %s refused for every case", cg__op_desc(op)->name, cfg);
                ran += ok;
            }
    fprintf(stderr, "gdr_gen: %d configs of %s checked under the emulator\n", ran, cg__op_desc(op)->name);
    cg_context_free(ctx);
}

/* The default config on every case, float32, then bf16 and f16 on two of them. */
static void run_default(cg_op op) {
    cg_context *ctx = emu_ctx();
    for (int k = 0; k < NGG; k++) gg_check(ctx, &k_gg[k], op, CG_F32, NULL);
    gg_check(ctx, &k_gg[1], op, CG_BF16, NULL);
    gg_check(ctx, &k_gg[4], op, CG_F16, NULL);
    cg_context_free(ctx);
}

CG_TEST(gdr_gen_emu_default) { run_default(CG_OP_GDR_FWD); }
CG_TEST(gdr_gen_emu_bwd_default) { run_default(CG_OP_GDR_BWD); }
CG_TEST(gdr_gen_emu_fwd_space) { run_space(CG_OP_GDR_FWD); }
CG_TEST(gdr_gen_emu_bwd_space) { run_space(CG_OP_GDR_BWD); }

/* A config outside the space is refused by name; one the constraints refuse says why. */
CG_TEST(gdr_gen_refusals) {
    cg_context *ctx = emu_ctx();
    dtt_prob p;
    cg_tbuf cu;
    gg_new(&p, &cu, CG_OP_GDR_FWD, &k_gg[2], CG_F32, CG_F32, 3);
    CG_CHECK_REFUSED(ctx, gg_run(ctx, &p, &cu, &k_gg[2], CG_BACKEND_EMULATE, "chunk=8"), CG_EINVAL, "chunk",
                     "chunk=8 (outside the space)");
    CG_CHECK_REFUSED(ctx, gg_run(ctx, &p, &cu, &k_gg[2], CG_BACKEND_EMULATE, "chunk=16,block_dv=64,warps=1"),
                     CG_EUNSUPPORTED, "covers dv", "block_dv 64 for dv = 5");
    dtt_free(&p);
    cg_tbuf_free(&cu);
    cg_context_free(ctx);
}

/* The sweep's sample of the configs of both kernels (every one under
 * CHUNKGEN_TEST_SWEEP=full), varlen with the L2 norm, bf16 and f16 in turn, through NVRTC
 * for sm_arch: no spills. */
static void nvrtc_variants(int arch) {
    cg_test_nvrtc nv;
    if (!cg_test_nvrtc_begin(&nv, arch)) return;
    static const char *const kernels[] = {"gdr_fwd", "gdr_bwd"};
    int k = 0;
    for (int o = 0; o < 2; o++) {
        cg_kshape ks = {.B = 1, .T = 4096, .G = 4, .H = 8, .dk = 128, .dv = 128, .nseq = 3};
        ks.flags = CG_KS_L2NORM | CG_KS_H0 | (o ? CG_KS_DHT : CG_KS_HT);
        cg_cfg *space = NULL;
        int n = 0;
        CG_CHECK_OK(nv.ctx, cg__gen_space(nv.ctx, kernels[o], &ks, &nv.dev, &space, &n));
        CG_CHECK(n > 0, "%s: no config", kernels[o]);
        cg_sweep_sel sel;
        cg_sweep_select_array(space, n, CG_SWEEP_VALUES, &sel); /* every config under CHUNKGEN_TEST_SWEEP=full */
        for (int q = 0; q < n; q++) {
            if (!cg_sweep_keeps(&sel, q)) continue;
            k++;
            const char *dt = k % 2 ? "f16" : "bf16";
            snprintf(ks.dtypes, sizeof ks.dtypes,
                     o ? "q=%s k=%s v=%s beta=%s dout=%s dq=%s dk=%s dv=%s dbeta=%s" : "q=%s k=%s v=%s beta=%s o=%s%.0s%.0s%.0s%.0s",
                     dt, dt, dt, dt, dt, dt, dt, dt, dt);
            cg_plan p;
            if (!cg_test_nvrtc_plan(&nv, kernels[o], &ks, &space[q], &p)) continue;
            CG_CHECK(strstr(p.source, "#define CG_VARLEN 1\n") && strstr(p.source, "#define CG_L2NORM 1\n"),
                     "%s: varlen and l2norm defines", p.name);
            cg_test_nvrtc_nospill(&nv, &p);
        }
        cg_sweep_sel_free(&sel);
        free(space);
    }
    cg_test_nvrtc_end(&nv, "gdr varlen l2norm 16-bit", "");
}
CG_TEST(gdr_gen_nvrtc_half_sm80) { nvrtc_variants(80); }
CG_TEST(gdr_gen_nvrtc_half_sm90) { nvrtc_variants(90); }
