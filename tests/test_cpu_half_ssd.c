/* test_cpu_half_ssd.c -- the SSD CPU kernels with bf16 / fp16 tensors, through their
 * internal entry points (problem structs whose views say bf16 / fp16), in every ISA
 * variant this machine runs and both backward schedules. The float32 path, which
 * test_ssd_cpu.c checks against the float64 reference, runs on the same values (the
 * inputs rounded to the 16-bit dtype); the 16-bit kernels compute in float32 in the same
 * order, so every 16-bit output must be the float32 output rounded once (half.h), bit
 * for bit, and every float32 output (hT, dlog_alpha, dh0) must be the same bits. Then
 * their error against the float64 reference on the rounded inputs stays within the
 * issue's bounds (bf16 1e-2, fp16 2e-3). Odd shapes: T = 1 and 37, dk 7 / 48 / 130,
 * dv 40, G = 2 < H = 4, both layouts and strided views; mixed dtypes (some tensors
 * float32). */
#include "cpu_half_testlib.h"
#include "ssd_testlib.h"

#include "cpu/cpu_isa.h"

/* Which tensors are 16-bit. */
enum { H_Q = 1, H_K = 2, H_V = 4, H_DOUT = 8, H_O = 16, H_DQ = 32, H_DK = 64, H_DV = 128, H_ALL = 255 };

typedef struct hcase {
    ssdt_dims d;
    int h0, dhT, dh0;
    const char *config; /* pins besides bwd_split, or NULL */
} hcase;

static const cg_tensor none;

/* The problem of the float32 tensors of f (validated as the public calls do). */
static void probs(cg_context *ctx, ssdt_set *f, const hcase *c, cg_ssd_prob *pf, cg_ssd_prob *pb) {
    cg_ssd_fwd_args a = {.layout = c->d.layout, .q = f->q.t, .k = f->k.t, .v = f->v.t, .log_alpha = f->la.t,
                         .h0 = c->h0 ? f->h0.t : none, .o = f->o.t, .hT = f->hT.t};
    cg_ssd_bwd_args b = {.layout = c->d.layout, .q = f->q.t, .k = f->k.t, .v = f->v.t, .log_alpha = f->la.t,
                         .h0 = c->h0 ? f->h0.t : none, .dout = f->dout.t, .dhT = c->dhT ? f->dhT.t : none,
                         .dq = f->dq.t, .dk = f->dk.t, .dv = f->dv.t, .dlog_alpha = f->dla.t,
                         .dh0 = c->dh0 ? f->dh0.t : none};
    CG_CHECK_OK(ctx, cg__ssd_fwd_prob(ctx, &a, pf));
    CG_CHECK_OK(ctx, cg__ssd_bwd_prob(ctx, &b, pb));
}

static void set16(cg_view *v, void *mem, cg_dtype dt) {
    v->p = mem;
    v->dt = dt;
}

static void run_case(const hcase *c, cg_dtype dt, unsigned m) {
    char desc[300], dims[160];
    snprintf(desc, sizeof desc, "%s layout=%s%s %s mask=0x%02x config=%s", ssdt_dims_str(c->d, dims, sizeof dims),
             c->d.layout == CG_LAYOUT_HEAD_MAJOR ? "bhtd" : "bthd", c->d.swapped ? "(swapped)" : "", cht_name(dt), m,
             c->config ? c->config : "(default)");
    CG_TEST_CONTEXT(ctx);
    ssdt_set f, g, r; /* f: float32 run; g: the 16-bit run's float32 outputs; r: float64 reference */
    ssdt_set_alloc(&f, c->d, CG_F32, SSDT_FWD | SSDT_BWD);
    ssdt_set_alloc(&g, c->d, CG_F32, SSDT_FWD | SSDT_BWD);
    ssdt_set_alloc(&r, c->d, CG_F64, SSDT_FWD | SSDT_BWD);
    cg_rng rng = {7 + m};
    ssdt_fill_inputs(&f, &rng, -0.5, 0.0, SSDT_FWD | SSDT_BWD);
    uint16_t *q = m & H_Q ? cht_round(&f.q, dt) : NULL, *k = m & H_K ? cht_round(&f.k, dt) : NULL;
    uint16_t *v = m & H_V ? cht_round(&f.v, dt) : NULL, *dout = m & H_DOUT ? cht_round(&f.dout, dt) : NULL;
    uint16_t *o = cht_out(&f.o), *dq = cht_out(&f.dq), *dk = cht_out(&f.dk), *dv = cht_out(&f.dv);
    ssdt_copy_inputs(&r, &f, SSDT_FWD | SSDT_BWD);
    CG_CHECK_OK(ctx, ssdt_run_fwd(ctx, &r, c->d.layout, c->h0, 1, CG_BACKEND_REF, NULL));
    CG_CHECK_OK(ctx, ssdt_run_bwd(ctx, &r, c->d.layout, c->h0, c->dhT, c->dh0, CG_BACKEND_REF, NULL));

    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        for (int split = 0; split < 2; split++) {
            char config[160], d2[400];
            snprintf(config, sizeof config, "%s%sbwd_split=%d", c->config ? c->config : "", c->config ? "," : "", split);
            snprintf(d2, sizeof d2, "%s isa=%s bwd_split=%d", desc, cg__cpu_isa_name((cg_cpu_isa)isa), split);
            CG_CHECK_OK(ctx, ssdt_run_fwd(ctx, &f, c->d.layout, c->h0, 1, CG_BACKEND_CPU, config));
            CG_CHECK_OK(ctx, ssdt_run_bwd(ctx, &f, c->d.layout, c->h0, c->dhT, c->dh0, CG_BACKEND_CPU, config));

            cg_ssd_prob pf, pb;
            probs(ctx, &f, c, &pf, &pb);
            cg_ssd_prob *ps[2] = {&pf, &pb};
            for (int u = 0; u < 2; u++) {
                if (q) set16(&ps[u]->q, q, dt);
                if (k) set16(&ps[u]->k, k, dt);
                if (v) set16(&ps[u]->v, v, dt);
            }
            if (m & H_O) set16(&pf.o, o, dt);
            else pf.o.p = g.o.mem;
            pf.hT.p = g.hT.mem;
            if (dout) set16(&pb.dout, dout, dt);
            if (m & H_DQ) set16(&pb.grad_q, dq, dt);
            else pb.grad_q.p = g.dq.mem;
            if (m & H_DK) set16(&pb.grad_k, dk, dt);
            else pb.grad_k.p = g.dk.mem;
            if (m & H_DV) set16(&pb.grad_v, dv, dt);
            else pb.grad_v.p = g.dv.mem;
            pb.grad_la.p = g.dla.mem;
            if (pb.grad_h0.p) pb.grad_h0.p = g.dh0.mem;
            ssdt_poison_outputs(&g, SSDT_FWD | SSDT_BWD);
            cg_cfg cfg;
            CG_CHECK_OK(ctx, cg__cfg_parse(ctx, config, &cfg));
            CG_CHECK_OK(ctx, cg__ssd_cpu_fwd(ctx, &pf, &cfg, NULL));
            CG_CHECK_OK(ctx, cg__ssd_cpu_bwd(ctx, &pb, &cfg, NULL));

            if (m & H_O) cht_check_rounded(o, &f.o, dt, "o", d2);
            else cht_check_same(&g.o, &f.o, "o", d2);
            cht_check_same(&g.hT, &f.hT, "hT", d2);
            if (m & H_DQ) cht_check_rounded(dq, &f.dq, dt, "dq", d2);
            else cht_check_same(&g.dq, &f.dq, "dq", d2);
            if (m & H_DK) cht_check_rounded(dk, &f.dk, dt, "dk", d2);
            else cht_check_same(&g.dk, &f.dk, "dk", d2);
            if (m & H_DV) cht_check_rounded(dv, &f.dv, dt, "dv", d2);
            else cht_check_same(&g.dv, &f.dv, "dv", d2);
            cht_check_same(&g.dla, &f.dla, "dlog_alpha", d2);
            if (c->dh0) cht_check_same(&g.dh0, &f.dh0, "dh0", d2);
            if (isa == 0 && split == 0) {
                if (m & H_O) cht_check_ref(o, &f.o, &r.o, dt, "o", d2);
                if (m & H_DQ) cht_check_ref(dq, &f.dq, &r.dq, dt, "dq", d2);
                if (m & H_DK) cht_check_ref(dk, &f.dk, &r.dk, dt, "dk", d2);
                if (m & H_DV) cht_check_ref(dv, &f.dv, &r.dv, dt, "dv", d2);
            }
        }
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    free(q), free(k), free(v), free(dout), free(o), free(dq), free(dk), free(dv);
    ssdt_set_free(&f);
    ssdt_set_free(&g);
    ssdt_set_free(&r);
    cg_context_free(ctx);
}

static hcase base(int64_t T, int64_t dk, int64_t dv) {
    hcase c = {{2, T, 2, 4, dk, dv, CG_LAYOUT_TOKEN_MAJOR, 0}, 1, 1, 1, "chunk=16"};
    return c;
}

CG_TEST(cpu_half_ssd_bf16_odd_shapes) {
    static const int64_t shapes[][3] = {{1, 7, 40}, {37, 48, 40}, {37, 130, 40}, {37, 7, 7}};
    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        hcase c = base(shapes[i][0], shapes[i][1], shapes[i][2]);
        run_case(&c, CG_BF16, H_ALL);
    }
}

CG_TEST(cpu_half_ssd_f16_odd_shapes) {
    static const int64_t shapes[][3] = {{1, 48, 40}, {37, 7, 40}, {37, 130, 40}};
    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        hcase c = base(shapes[i][0], shapes[i][1], shapes[i][2]);
        run_case(&c, CG_F16, H_ALL);
    }
}

CG_TEST(cpu_half_ssd_layouts) {
    for (int layout = 0; layout < 2; layout++)
        for (int swapped = 0; swapped < 2; swapped++) {
            hcase c = base(37, 48, 40);
            c.d.layout = layout, c.d.swapped = swapped;
            c.h0 = swapped, c.dhT = layout, c.dh0 = !swapped;
            run_case(&c, layout ? CG_F16 : CG_BF16, H_ALL);
        }
}

CG_TEST(cpu_half_ssd_mixed_and_defaults) {
    /* some tensors float32 (each read and written in its own dtype) */
    hcase c = base(37, 48, 40);
    run_case(&c, CG_BF16, H_Q | H_DOUT | H_DQ | H_DV);
    run_case(&c, CG_F16, H_K | H_V | H_O | H_DK);
    /* the default config (a group of heads per task, dv blocks) at a longer T */
    c = base(150, 40, 48);
    c.config = NULL;
    run_case(&c, CG_BF16, H_ALL);
    c.d.G = 1, c.d.H = 1, c.d.B = 1;
    run_case(&c, CG_F16, H_ALL);
}
