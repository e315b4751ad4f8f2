/* test_ssd16_gen.c -- the generated SSD kernels with 16-bit storage (issue #15,
 * docs/dtypes.md): q, k, v, o (forward) and q, k, v, dout, dq, dk, dv (backward) in bf16
 * or fp16, log_alpha and the states float32. Under the SIMT emulator against the float64
 * reference on the same rounded inputs, every output and gradient:
 *   ssd16_gen_emu_{fwd,bwd}_space  the configs of the 16-bit space (accepted for some
 *                                  shape below; precision=mma16 only, docs/dtypes.md)
 *                                  that sweep_sample.h selects (every one under
 *                                  CHUNKGEN_TEST_SWEEP=full), bf16 and f16 taking turns,
 *                                  each on a rotating choice among the shapes that accept it;
 *   ssd16_gen_emu_default          the default of every shape in both dtypes, forward and
 *                                  backward: the kernel named for the dtype, a second call
 *                                  the same bits;
 *   ssd16_gen_emu_mixed            mixed signatures (q alone bf16, v alone f16);
 *   ssd16_gen_emu_mixed_space      a mixed signature's space (float32 precisions on widened
 *                                  16-bit tiles), selected likewise;
 *   ssd16_gen_heads_rounding       heads=loop refused where it would round per head;
 *   ssd16_gen_emu_ldmatrix_banks   the mma16 kernels' ldmatrix reads are conflict-free;
 *   ssd16_gen_nvrtc_sm{80,90}      16-bit configs compiled by NVRTC with 0 spills (see
 *                                  nvrtc16 for what is covered).
 * Tolerances: a 16-bit output within its dtype's target (bf16 1e-2, f16 2e-3), plus the
 * tf32 error for precision=tf32; a float32 output (hT, dlog_alpha, dh0) within the
 * float32 sweeps' tolerances (the inputs are exact in float32, the math is float32). */
#include "cg_test.h"

#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"
#include "emu/emu.h"
#include "gen.h"
#include "nvrtc_testlib.h"
#include "test_dtype_lib.h"
#include "sweep_sample.h"

#include <string.h>

#define TOL_FWD 1e-5  /* float32 outputs, ieee and 3xtf32 (test_ssd_gen.c) */
#define TOL_BWD 1e-4  /* (test_ssd_bwd_gen.c) */
#define TOL_TF32 5e-3 /* precision=tf32 */

/* Small odd shapes (those of test_ssd_gen.c / test_ssd_bwd_gen.c in the op table's
 * terms): T = 1, T not a multiple of the chunk, dk 7 / 40 / 48 / 130 (the 2-byte path,
 * and 16-byte loads of 8 halves), dv 20 / 33 / 40 / 48 / 72, G < H, both layouts (the
 * head-major v row pitch dv = 20 is not a multiple of 8 halves: the 2-byte path),
 * optional states on and off. Long T for chunk 64 and recompute 4. */
typedef struct s16_shape {
    int64_t B, T, G, H, dk, dv;
    int hm;        /* head-major */
    int h0, state; /* h0 given; hT wanted (forward) or dhT given (backward) */
    int dh0;       /* backward: dh0 wanted */
} s16_shape;

static const s16_shape k_fwd[] = {
    {1, 1, 1, 1, 7, 7, 0, 1, 1, 0},     {2, 37, 2, 4, 48, 40, 1, 0, 1, 0}, {1, 21, 1, 2, 7, 20, 1, 1, 0, 0},
    {1, 45, 2, 2, 40, 48, 0, 1, 1, 0},  {1, 19, 1, 1, 130, 33, 1, 1, 1, 0}, {1, 70, 1, 1, 48, 72, 1, 1, 0, 0},
    {1, 29, 1, 3, 40, 130, 0, 0, 1, 0},
};
static const s16_shape k_bwd[] = {
    {1, 1, 1, 1, 7, 7, 0, 1, 1, 1},    {2, 37, 2, 4, 48, 40, 1, 0, 1, 1},   {1, 21, 1, 2, 7, 20, 1, 1, 0, 1},
    {1, 45, 2, 2, 40, 48, 0, 1, 1, 0}, {1, 70, 1, 1, 48, 33, 1, 0, 0, 1},   {1, 300, 1, 2, 7, 33, 0, 1, 1, 1},
    {1, 400, 2, 4, 40, 20, 1, 1, 0, 1},
};
#define NFWD ((int)(sizeof k_fwd / sizeof k_fwd[0]))
#define NBWD ((int)(sizeof k_bwd / sizeof k_bwd[0]))
#define MAXSH 8

static const s16_shape *shapes(int bwd, int *n) {
    *n = bwd ? NBWD : NFWD;
    return bwd ? k_bwd : k_fwd;
}

static const char *kernel_of(int bwd) { return bwd ? "ssd_bwd" : "ssd_fwd"; }
static cg_op op_of(int bwd) { return bwd ? CG_OP_SSD_BWD : CG_OP_SSD_FWD; }

/* The optional tensors a shape leaves out (dtt_new's omit bits). */
static unsigned omit_of(int bwd, const s16_shape *s) {
    const cg_op_desc *d = cg__op_desc(op_of(bwd));
    unsigned m = 0;
    if (!s->h0) m |= 1u << cg__op_tensor(d, "h0");
    if (!s->state) m |= 1u << cg__op_tensor(d, bwd ? "dhT" : "hT");
    if (bwd && !s->dh0) m |= 1u << cg__op_tensor(d, "dh0");
    return m;
}

static void dims_of(const s16_shape *s, int64_t dims[CG_SYM_COUNT]) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_B] = s->B, dims[CG_SYM_T] = s->T, dims[CG_SYM_G] = s->G, dims[CG_SYM_H] = s->H;
    dims[CG_SYM_DK] = s->dk, dims[CG_SYM_DV] = s->dv;
}

/* One case: the 16-bit problem (inputs rounded once) and the float64 reference on the
 * same values. */
typedef struct s16_case {
    const s16_shape *s;
    int bwd;
    cg_dtype dt;
    dtt_prob p, r;
} s16_case;

static void case_sig(cg_context *ctx, s16_case *c, int bwd, const s16_shape *s, cg_dtype dt, const char *const *only,
                     uint64_t seed) {
    int64_t dims[CG_SYM_COUNT];
    dims_of(s, dims);
    c->s = s, c->bwd = bwd, c->dt = dt;
    dtt_new(&c->p, op_of(bwd), dims, 1, s->hm, only ? CG_F32 : dt, CG_F32, omit_of(bwd, s));
    for (; only && *only; only++) { /* a mixed signature: these tensors alone in dt */
        cg_tbuf *t = &c->p.t[cg__op_tensor(c->p.d, *only)];
        cg_tbuf h = cg_tbuf_new(dt, t->t.ndim, t->t.shape);
        cg_tbuf_free(t);
        *t = h;
    }
    dtt_new(&c->r, op_of(bwd), dims, 1, s->hm, CG_F64, CG_F64, omit_of(bwd, s));
    dtt_fill(&c->p, seed);
    dtt_copy_inputs(&c->r, &c->p);
    CG_CHECK_OK(ctx, dtt_run(ctx, &c->r, CG_BACKEND_REF));
}

static void case_new(cg_context *ctx, s16_case *c, int bwd, const s16_shape *s, cg_dtype dt, uint64_t seed) {
    case_sig(ctx, c, bwd, s, dt, NULL, seed);
}

static void case_free(s16_case *c) {
    dtt_free(&c->p);
    dtt_free(&c->r);
}

/* only: the tensors stored in dt (NULL: every 16-bit-capable one; else a NULL-ended list of
 * names, a mixed signature, the rest float32). */
static int in_only(const char *const *only, const char *name) {
    if (!only) return 1;
    for (; *only; only++)
        if (!strcmp(*only, name)) return 1;
    return 0;
}

/* The shape of a case (what the launcher derives from the call), the tensors of only stored
 * in dt; returns its shape flags (the generator's extra flags, gen.h). */
static int case_shape_sig(int bwd, const s16_shape *s, cg_dtype dt, const char *const *only, cg_shape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->size = sizeof *ks, ks->op = op_of(bwd), ks->dtype = CG_F32;
    ks->dim[CG_SYM_B] = s->B, ks->dim[CG_SYM_T] = s->T, ks->dim[CG_SYM_G] = s->G, ks->dim[CG_SYM_H] = s->H;
    ks->dim[CG_SYM_DK] = s->dk, ks->dim[CG_SYM_DV] = s->dv;
    const cg_op_desc *d = cg__op_desc(ks->op);
    for (int i = 0; cg__dtype_half(dt) && i < d->nt; i++)
        if ((d->t[i].flags & CG_TD_HALF) && in_only(only, d->t[i].name)) ks->dtype = dt, ks->half |= (uint64_t)1 << i;
    return (s->h0 ? CG_KS_H0 : 0) | (s->state ? (bwd ? CG_KS_DHT : CG_KS_HT) : 0);
}

static int case_shape(int bwd, const s16_shape *s, cg_dtype dt, cg_shape *ks) { return case_shape_sig(bwd, s, dt, NULL, ks); }

static cg_status run_case(cg_context *ctx, s16_case *c, cg_backend be, const char *config) {
    cg_exec ex = {.backend = be, .config = config};
    const void *a = dtt_args(&c->p);
    return c->bwd ? cg_ssd_bwd(ctx, a, &ex) : cg_ssd_fwd(ctx, a, &ex);
}

/* Run config (NULL: the default) on c, every output against the reference. 1: it ran. */
static int check_case(cg_context *ctx, s16_case *c, cg_backend be, const char *config, int tf32) {
    const cg_op_desc *d = c->p.d;
    uint64_t seed = 7;
    for (int i = 0; i < d->nt; i++) /* poisoned: a kernel that skips an element fails */
        if (d->t[i].role == CG_TD_OUT && c->p.t[i].t.data) cg_tbuf_fill(&c->p.t[i], &(cg_rng){seed++}, 1e3, 2e3);
    const cg_status st = run_case(ctx, c, be, config);
    CG_CHECK(st == CG_OK, "%s %s config %s: %s", d->name, cg__dtype_name(c->dt), config ? config : "(default)",
             cg_errmsg(ctx));
    if (st != CG_OK) return 0;
    for (int i = 0; i < d->nt; i++) {
        if (d->t[i].role != CG_TD_OUT || !c->p.t[i].t.data) continue;
        const cg_dtype dt = c->p.t[i].t.dtype;
        double tol = cg__dtype_half(dt) ? cg__tol_dtype(d->t[i].tol, dt) : c->bwd ? TOL_BWD : TOL_FWD;
        if (tf32) tol = cg__dtype_half(dt) ? (tol > 2 * TOL_TF32 ? tol : TOL_TF32 + tol) : TOL_TF32;
        const double e = cg_rel_err(&c->p.t[i], &c->r.t[i]);
        CG_CHECK(e <= tol, "%s.%s (%s) config %s on B=%lld T=%lld G=%lld H=%lld dk=%lld dv=%lld %s: rel err %.3g (tol %g) [%s]",
                 d->name, d->t[i].name, cg__dtype_name(dt), config ? config : "(default)", (long long)c->s->B,
                 (long long)c->s->T, (long long)c->s->G, (long long)c->s->H, (long long)c->s->dk, (long long)c->s->dv,
                 c->s->hm ? "head-major" : "token-major", e, tol, cg_last_dispatch(ctx));
    }
    return 1;
}

/* The union of the 16-bit spaces of the shapes on dev (bf16; f16's is the same), in
 * order of first appearance, each with a shape that accepts it (rotating). Returns the
 * count (*cfgs, *shape_of: caller frees). */
static int space_sig(cg_context *ctx, int bwd, const cg_devinfo *dev, const char *const *only, cg_cfg **cfgs,
                     int **shape_of) {
    int ns;
    const s16_shape *sh = shapes(bwd, &ns);
    cg_cfg *sp[MAXSH];
    int nsp[MAXSH], cap = 0, n = 0, rot = 0;
    for (int i = 0; i < ns; i++) {
        cg_shape ks;
        int ksf;
        ksf = case_shape_sig(bwd, &sh[i], CG_BF16, only, &ks);
        sp[i] = NULL, nsp[i] = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, kernel_of(bwd), &ks, ksf, dev, &sp[i], &nsp[i]));
        CG_CHECK(nsp[i] > 0, "%s: no 16-bit config for shape %d", kernel_of(bwd), i);
        cap += nsp[i];
    }
    *cfgs = calloc((size_t)cap + 1, sizeof **cfgs);
    *shape_of = calloc((size_t)cap + 1, sizeof **shape_of);
    for (int i = 0; *cfgs && *shape_of && i < ns; i++)
        for (int j = 0; j < nsp[i]; j++) {
            if (cg_sweep_cfg_in(*cfgs, n, &sp[i][j])) continue;
            int pick = i;
            for (int t = 0; t < ns; t++) {
                const int cand = (rot + t) % ns;
                if (cg_sweep_cfg_in(sp[cand], nsp[cand], &sp[i][j])) {
                    pick = cand;
                    break;
                }
            }
            rot = (pick + 1) % ns;
            (*shape_of)[n] = pick;
            (*cfgs)[n++] = sp[i][j];
        }
    for (int i = 0; i < ns; i++) free(sp[i]);
    return n;
}

static int space16(cg_context *ctx, int bwd, const cg_devinfo *dev, cg_cfg **cfgs, int **shape_of) {
    return space_sig(ctx, bwd, dev, NULL, cfgs, shape_of);
}

/* The configs of the union that cg_sweep_select keeps (sweep_sample.h): the k-th kept
 * one in bf16 when k is even, else f16; on backend be (emulate, or cuda: the device's
 * space, skipped without one). */
static void space_sig_run(int bwd, const char *const *only, cg_backend be) {
    cg_devinfo dev;
    cg_context *ctx = cg_test_device_context(be, &dev);
    if (!ctx) return;
    cg_cfg *cfgs = NULL;
    int *shape_of = NULL, ns;
    const s16_shape *sh = shapes(bwd, &ns);
    const int n = space_sig(ctx, bwd, &dev, only, &cfgs, &shape_of);
    cg_sweep_sel sel;
    /* mma16 (only) is a code path of its own: pairs; a mixed signature runs the float32
     * precisions on widened tiles, a variant of the float32 space: each value */
    cg_sweep_select_array(cfgs, n, only ? CG_SWEEP_VALUES : CG_SWEEP_PAIRS, &sel);
    /* emulated: compile the modules in parallel first (the runs then hit the disk cache) */
    cg_plan *plans = be == CG_BACKEND_EMULATE ? calloc((size_t)n + 1, sizeof *plans) : NULL;
    int nplan = 0;
    for (int q = 0, k = 0; plans && q < n; q++) {
        if (!cg_sweep_keeps(&sel, q)) continue;
        cg_shape ks;
        int ksf;
        ksf = case_shape_sig(bwd, &sh[shape_of[q]], k++ % 2 ? CG_F16 : CG_BF16, only, &ks);
        if (cg__gen_plan(ctx, kernel_of(bwd), &ks, ksf, &dev, &cfgs[q], &plans[nplan]) == CG_OK) nplan++;
    }
    if (nplan) CG_CHECK_OK(ctx, cg__emu_prebuild(ctx, plans, nplan));
    for (int q = 0; q < nplan; q++) cg__plan_free(&plans[q]);
    free(plans);
    s16_case cases[2][MAXSH];
    int made[2][MAXSH] = {{0}}, ran = 0, want = 0;
    for (int q = 0; q < n; q++) {
        if (!cg_sweep_keeps(&sel, q)) continue;
        const int s = shape_of[q], h = want % 2;
        if (!made[h][s]) {
            case_sig(ctx, &cases[h][s], bwd, &sh[s], h ? CG_F16 : CG_BF16, only,
                     500 + (uint64_t)s + 50 * (uint64_t)bwd + (only ? 25 : 0));
            made[h][s] = 1;
        }
        char text[512];
        cg__cfg_text(&cfgs[q], text, sizeof text);
        want++;
        ran += check_case(ctx, &cases[h][s], be, text, !strcmp(cg__cfg_str(&cfgs[q], "precision", ""), "tf32"));
    }
    CG_CHECK(n > 0 && want > 0 && ran == want, "%s: %d of %d configs ran", kernel_of(bwd), ran, want);
    char what[96];
    fprintf(stderr, "ssd16_gen: 16-bit %s configs%s checked on %s: %s, bf16 and f16 in turn\n", kernel_of(bwd),
            only ? " of a mixed signature" : "", cg_backend_name(be), cg_sweep_describe(&sel, what, sizeof what));
    cg_sweep_sel_free(&sel);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < ns; s++)
            if (made[h][s]) case_free(&cases[h][s]);
    free(cfgs);
    free(shape_of);
    cg_context_free(ctx);
}

CG_TEST(ssd16_gen_emu_fwd_space) { space_sig_run(0, NULL, CG_BACKEND_EMULATE); }
CG_TEST(ssd16_gen_emu_bwd_space) { space_sig_run(1, NULL, CG_BACKEND_EMULATE); }
/* Natively on a GPU (skipped without one): the mma m16n8k16 and ldmatrix kernels, the
 * same selection of the device's 16-bit space, bf16 and f16. */
CG_TEST(ssd16_gen_cuda_fwd_space) { space_sig_run(0, NULL, CG_BACKEND_CUDA); }
CG_TEST(ssd16_gen_cuda_bwd_space) { space_sig_run(1, NULL, CG_BACKEND_CUDA); }

/* A mixed signature's space: v (and o, which follows it) 16-bit with q, k float32 forward,
 * q (and dq) 16-bit with k, v, dout float32 backward. mma16 needs all its inputs 16-bit, so
 * these run the float32 precisions (ieee, tf32, 3xtf32) on widened 16-bit tiles
 * (ssdc::load_tile16): the selected configs, bf16 and f16 in turn. */
static const char *const k_mixed_fwd[] = {"v", "o", NULL};
static const char *const k_mixed_bwd[] = {"q", "dq", NULL};
CG_TEST(ssd16_gen_emu_mixed_space) {
    space_sig_run(0, k_mixed_fwd, CG_BACKEND_EMULATE);
    space_sig_run(1, k_mixed_bwd, CG_BACKEND_EMULATE);
}

/* The default of every shape in bf16 and f16, forward and backward: the dispatch line
 * names the kernel generated for the dtype; a second call gives the same bits. */
CG_TEST(ssd16_gen_emu_default) {
    CG_TEST_CONTEXT(ctx);
    for (int bwd = 0; bwd < 2; bwd++) {
        int ns;
        const s16_shape *sh = shapes(bwd, &ns);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < ns; s++) {
                s16_case c;
                case_new(ctx, &c, bwd, &sh[s], h ? CG_F16 : CG_BF16, 700 + (uint64_t)s);
                if (check_case(ctx, &c, CG_BACKEND_EMULATE, NULL, 0)) {
                    const char *dl = cg_last_dispatch(ctx);
                    char want[64];
                    snprintf(want, sizeof want, "kernel=%s_", kernel_of(bwd));
                    CG_CHECK(strstr(dl, want) && strstr(dl, h ? "_f16" : "_bf16"), "dispatch line: %s", dl);
                    const int io = cg__op_tensor(c.p.d, bwd ? "dq" : "o");
                    cg_tbuf keep = cg_tbuf_new(c.p.t[io].t.dtype, c.p.t[io].t.ndim, c.p.t[io].t.shape);
                    cg_tbuf_copy(&keep, &c.p.t[io]);
                    CG_CHECK_OK(ctx, run_case(ctx, &c, CG_BACKEND_EMULATE, NULL));
                    CG_CHECK(cg_rel_err(&c.p.t[io], &keep) == 0, "%s shape %d: a second run differs", kernel_of(bwd), s);
                    cg_tbuf_free(&keep);
                }
                case_free(&c);
            }
    }
    cg_context_free(ctx);
}

/* A mixed signature: q alone bf16 (k, v float32; forward o float32 like v, backward dq
 * bf16 like q) and v alone f16, on the G < H shape, forward and backward, default config:
 * each tensor staged or stored in its own type, against the reference. */
CG_TEST(ssd16_gen_emu_mixed) {
    CG_TEST_CONTEXT(ctx);
    for (int bwd = 0; bwd < 2; bwd++)
        for (int m = 0; m < 2; m++) {
            const s16_shape *sh = bwd ? &k_bwd[1] : &k_fwd[1];
            const char *in = m ? "v" : "q", *out = m ? (bwd ? "dv" : "o") : (bwd ? "dq" : NULL);
            const cg_dtype dt = m ? CG_F16 : CG_BF16;
            s16_case c;
            int64_t dims[CG_SYM_COUNT];
            dims_of(sh, dims);
            c.s = sh, c.bwd = bwd, c.dt = dt;
            dtt_new(&c.p, op_of(bwd), dims, 1, sh->hm, CG_F32, CG_F32, omit_of(bwd, sh));
            dtt_new(&c.r, op_of(bwd), dims, 1, sh->hm, CG_F64, CG_F64, omit_of(bwd, sh));
            for (int k = 0; k < 2; k++) {
                const char *name = k ? out : in;
                if (!name) continue;
                cg_tbuf *t = &c.p.t[cg__op_tensor(c.p.d, name)];
                cg_tbuf h = cg_tbuf_new(dt, t->t.ndim, t->t.shape);
                cg_tbuf_free(t);
                *t = h;
            }
            dtt_fill(&c.p, 800 + (uint64_t)(2 * bwd + m));
            dtt_copy_inputs(&c.r, &c.p);
            CG_CHECK_OK(ctx, dtt_run(ctx, &c.r, CG_BACKEND_REF));
            if (check_case(ctx, &c, CG_BACKEND_EMULATE, NULL, 0)) {
                const char *dl = cg_last_dispatch(ctx);
                CG_CHECK(strstr(dl, "_dt") != NULL, "%s %s alone: dispatch line %s", kernel_of(bwd), in, dl);
            }
            case_free(&c);
        }
    cg_context_free(ctx);
}

/* A 16-bit dq or dk of a grouped shape (G < H) is summed over the heads in float and
 * rounded once: heads=loop is refused there (it would round per head), the default
 * splits; with G = H heads=loop stays. */
CG_TEST(ssd16_gen_heads_rounding) {
    CG_TEST_CONTEXT(ctx);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_shape ks;
    int ksf;
    ksf = case_shape(1, &k_bwd[1], CG_BF16, &ks); /* G = 2 < H = 4 */
    cg_plan p;
    CG_CHECK_REFUSED(ctx, cg__gen_plan(ctx, "ssd_bwd", &ks, ksf, &dev, &(cg_cfg){.n = 1, .kv = {{"heads", "loop"}}}, &p),
                     CG_EUNSUPPORTED, "rounded per head", "heads=loop with bf16 dq over 2 heads");
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_bwd", &ks, ksf, &dev, NULL, &p));
    CG_CHECK(strstr(p.name, "_split_") != NULL, "default %s: expected heads=split", p.name);
    cg__plan_free(&p);
    ksf = case_shape(1, &k_bwd[0], CG_BF16, &ks); /* G = H */
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_bwd", &ks, ksf, &dev, NULL, &p));
    CG_CHECK(strstr(p.name, "_loop_") != NULL, "default %s: expected heads=loop", p.name);
    cg__plan_free(&p);
    cg_context_free(ctx);
}

/* precision=mma16 is the 16-bit call's precision: valid() accepts only it when the
 * products' operands are all 16-bit (forward q, k; backward q, k, v, dout), refuses it
 * for float32 and for a mixed call whose operands are not all 16-bit (those keep ieee /
 * tf32 / 3xtf32), and every config of the 16-bit spaces has it. */
CG_TEST(ssd16_gen_mma16_precision) {
    CG_TEST_CONTEXT(ctx);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    for (int bwd = 0; bwd < 2; bwd++) {
        const s16_shape *sh = bwd ? &k_bwd[1] : &k_fwd[1];
        cg_shape ks;
        int ksf;
        cg_plan p;
        const cg_cfg c3 = {.n = 1, .kv = {{"precision", "3xtf32"}}}, cm = {.n = 1, .kv = {{"precision", "mma16"}}};
        ksf = case_shape(bwd, sh, CG_BF16, &ks);
        CG_CHECK_REFUSED(ctx, cg__gen_plan(ctx, kernel_of(bwd), &ks, ksf, &dev, &c3, &p), CG_EUNSUPPORTED,
                         "the precision is mma16", "3xtf32 for a bf16 call");
        cg_status st = cg__gen_plan(ctx, kernel_of(bwd), &ks, ksf, &dev, &cm, &p);
        CG_CHECK(st == CG_OK && strstr(p.name, "_mma16_"), "%s bf16 mma16: %s", kernel_of(bwd), cg_errmsg(ctx));
        if (st == CG_OK) cg__plan_free(&p);
        ksf = case_shape(bwd, sh, CG_F32, &ks);
        CG_CHECK_REFUSED(ctx, cg__gen_plan(ctx, kernel_of(bwd), &ks, ksf, &dev, &cm, &p), CG_EUNSUPPORTED,
                         "needs 16-bit", "mma16 for a float32 call");
        /* q alone 16-bit: the products' other operand is float32 */
        static const char *const q_only[] = {"q", NULL}, *const q_dq[] = {"q", "dq", NULL};
        ksf = case_shape_sig(bwd, sh, CG_BF16, bwd ? q_dq : q_only, &ks);
        CG_CHECK_REFUSED(ctx, cg__gen_plan(ctx, kernel_of(bwd), &ks, ksf, &dev, &cm, &p), CG_EUNSUPPORTED,
                         "needs 16-bit", "mma16 with q alone bf16");
        st = cg__gen_plan(ctx, kernel_of(bwd), &ks, ksf, &dev, &c3, &p);
        CG_CHECK(st == CG_OK, "%s q alone bf16, 3xtf32: %s", kernel_of(bwd), cg_errmsg(ctx));
        if (st == CG_OK) cg__plan_free(&p);
        cg_cfg *cfgs = NULL;
        int *shape_of = NULL, bad = 0;
        const int n = space16(ctx, bwd, &dev, &cfgs, &shape_of);
        for (int q = 0; q < n; q++) bad += strcmp(cg__cfg_str(&cfgs[q], "precision", ""), "mma16") != 0;
        CG_CHECK(n > 0 && bad == 0, "%s: %d of the %d 16-bit configs are not mma16", kernel_of(bwd), bad, n);
        free(cfgs);
        free(shape_of);
    }
    cg_context_free(ctx);
}

/* The mma16 kernels' ldmatrix reads of the raw 16-bit tiles (pitch width + 8 halves,
 * templates/ssd_mma16.cuh) are free of bank conflicts: under the emulator's access
 * statistics, every 16-byte shared load counted at a line of ssd_mma16.cuh (the ldmatrix
 * rows, one per lane) takes its ideal wavefronts, forward and backward (defaults, bf16,
 * dk 48: dkp + 8 = 56 halves, dv 40 and the dv tiles 64 / 32 + 8). */
CG_TEST(ssd16_gen_emu_ldmatrix_banks) {
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg__emu_stats_enable(ctx, 1));
    static const s16_shape sh = {1, 37, 1, 2, 48, 40, 0, 1, 1, 1};
    for (int bwd = 0; bwd < 2; bwd++) {
        s16_case c;
        case_new(ctx, &c, bwd, &sh, CG_BF16, 900 + (uint64_t)bwd);
        const int first = cg__emu_stats_count(ctx);
        if (check_case(ctx, &c, CG_BACKEND_EMULATE, NULL, 0)) {
            CG_CHECK(strstr(cg_last_dispatch(ctx), "_mma16_") != NULL, "default: %s", cg_last_dispatch(ctx));
            uint64_t req = 0, bad = 0;
            for (int i = first; i < cg__emu_stats_count(ctx); i++) {
                const cg_emu_launch_stats *L = cg__emu_stats_get(ctx, i);
                for (int j = 0; L && j < L->nlines; j++) {
                    const cg_emu_line_stat *l = &L->lines[j];
                    if (strcmp(l->file, "ssd_mma16.cuh") || l->space != CG_EMU_SPACE_SHARED || l->store || l->width != 16)
                        continue;
                    req += l->requests;
                    bad += l->units != l->ideal;
                    CG_CHECK(l->units == l->ideal, "%s: ssd_mma16.cuh:%d: %llu wavefronts for %llu requests, ideal %llu",
                             L->kernel, l->line, (unsigned long long)l->units, (unsigned long long)l->requests,
                             (unsigned long long)l->ideal);
                }
            }
            CG_CHECK(req > 0, "%s: no ldmatrix reads counted in ssd_mma16.cuh", kernel_of(bwd));
            if (!bad)
                fprintf(stderr, "  %s: %llu ldmatrix requests, all at their ideal wavefronts\n", kernel_of(bwd),
                        (unsigned long long)req);
        }
        case_free(&c);
    }
    cg_context_free(ctx);
}

/* NVRTC for arch: the selected configs of both kernels' 16-bit spaces (the unions above
 * on that arch; mma16 only; sweep_sample.h: the covering sample, every one under
 * CHUNKGEN_TEST_SWEEP=full) rendered and compiled, bf16 and f16 in turn, ptxas reports no
 * spills, plus every shape's default in both dtypes. CPU (2026-12-02), all configs: 216
 * modules on sm_80, 399 CPU-s; 231 on sm_90, 484 CPU-s.
 * CHUNKGEN_TEST_KCACHE=dir: CUBINs and ptxas logs keyed as the executor keys them. */
static void nvrtc16(int arch) {
    cg_test_nvrtc nv;
    if (!cg_test_nvrtc_begin(&nv, arch)) return;
    int total = 0, nkept = 0;
    for (int bwd = 0; bwd < 2; bwd++) {
        int ns;
        const s16_shape *sh = shapes(bwd, &ns);
        cg_cfg *cfgs = NULL;
        int *shape_of = NULL;
        const int n = space16(nv.ctx, bwd, &nv.dev, &cfgs, &shape_of);
        total += n;
        cg_sweep_sel sel;
        cg_sweep_select_array(cfgs, n, CG_SWEEP_PAIRS, &sel); /* mma16: a code path of its own */
        nkept += sel.nkept;
        for (int q = 0, k = 0; q < n + 2 * ns; q++) {
            const int dflt = q >= n;
            if (!dflt && !cg_sweep_keeps(&sel, q)) continue;
            const int h = dflt ? (q - n) % 2 : k++ % 2, s = dflt ? (q - n) / 2 : shape_of[q];
            cg_shape ks;
            int ksf;
            ksf = case_shape(bwd, &sh[s], h ? CG_F16 : CG_BF16, &ks);
            cg_plan p;
            if (!cg_test_nvrtc_plan(&nv, kernel_of(bwd), &ks, ksf, dflt ? NULL : &cfgs[q], &p)) continue;
            CG_CHECK(strstr(p.source, h ? "#define CG_T_Q cg_f16\n" : "#define CG_T_Q cg_bf16\n") &&
                         strstr(p.name, h ? "_f16" : "_bf16"),
                     "%s: 16-bit defines and name", p.name);
            cg_test_nvrtc_nospill(&nv, &p);
        }
        cg_sweep_sel_free(&sel);
        free(cfgs);
        free(shape_of);
    }
    char note[96];
    snprintf(note, sizeof note, "%d of %d configs, and the defaults", nkept, total);
    cg_test_nvrtc_end(&nv, "16-bit SSD", note);
}

CG_TEST(ssd16_gen_nvrtc_sm80) { nvrtc16(80); }
CG_TEST(ssd16_gen_nvrtc_sm90) { nvrtc16(90); }
