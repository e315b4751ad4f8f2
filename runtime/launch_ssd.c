/* launch_ssd.c -- host side of the generated SSD kernels: fill the params struct and
 * launch the plan (plan table, workspace and staging: runtime/launch_common.c).
 *
 * Memory: the kernels address kernel memory (device memory for cuda, host memory for
 * the emulator). When a tensor is not kernel-addressable (host pointers given to the
 * cuda backend) the call stages every tensor through temporary kernel memory and
 * copies the outputs back, synchronizing: correct, but not the fast path. The auto
 * backend never takes this path; it runs the CPU path on host pointers. */
#include "launch_common.h"
#include "cg_kernel_params.h"

#include <string.h>

static void ssd_kshape(const cg_ssd_prob *p, cg_kshape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->B = p->B;
    ks->T = p->T;
    ks->G = p->G;
    ks->H = p->H;
    ks->dk = p->dk;
    ks->dv = p->dv;
    ks->flags = (p->h0.p ? CG_KS_H0 : 0) | (p->hT.p ? CG_KS_HT : 0);
}

static cg_ktensor ktensor(const cg_view *v, float *p) {
    cg_ktensor t;
    t.p = p;
    t.s0 = v->s[0];
    t.s1 = v->s[1];
    t.s2 = v->s[2];
    return t;
}

/* The kernels index the innermost dimension with stride 1. */
static int inner_ok(const cg_view *v, int64_t n) { return !v->p || n <= 1 || v->s[3] == 1; }

/* 1 when kernel has a plan with its default config for p on kx (reason in ctx if not). */
static int gen_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const char *kernel,
                        const cg_kshape *ks) {
    if (!kx || !kx->device) {
        cg__err(ctx, CG_EUNSUPPORTED, "%s: this library was built without that kernel executor", kernel);
        return 0;
    }
    if (p->dtype != CG_F32) {
        cg__err(ctx, CG_EUNSUPPORTED, "%s: generated kernels take F32 tensors", kernel);
        return 0;
    }
    cg_devinfo dev;
    if (kx->device(ctx, &dev) != CG_OK) return 0;
    cg_plan_entry *e = cg__plan_get(ctx, kx, &dev, kernel, ks, NULL);
    if (!e) {
        cg__err(ctx, CG_ENOMEM, "%s: out of memory for a plan", kernel);
        return 0;
    }
    if (e->status != CG_OK) {
        cg__err(ctx, e->status, "%s", e->why);
        return 0;
    }
    return 1;
}

int cg__ssd_gen_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p) {
    cg_kshape ks;
    ssd_kshape(p, &ks);
    return gen_supports(ctx, kx, p, "ssd_fwd", &ks);
}

cg_status cg__ssd_gen_fwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex) {
    if (!kx || !kx->device)
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: this library was built without that kernel executor");
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: generated kernels take F32 tensors (got F64)");
    if (!inner_ok(&p->q, p->dk) || !inner_ok(&p->k, p->dk))
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: generated kernels need q and k with a contiguous dk dimension");
    if (!inner_ok(&p->v, p->dv) || !inner_ok(&p->o, p->dv) || !inner_ok(&p->h0, p->dv) || !inner_ok(&p->hT, p->dv))
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: generated kernels need v, o, h0 and hT with a contiguous dv dimension");

    cg_devinfo dev;
    cg_status s = kx->device(ctx, &dev);
    if (s) return s;
    cg_kshape ks;
    ssd_kshape(p, &ks);
    cg_plan_entry *e = cg__plan_get(ctx, kx, &dev, "ssd_fwd", &ks, cfg);
    if (!e) return cg__err(ctx, CG_ENOMEM, "ssd_fwd: out of memory for a plan");
    if (e->status != CG_OK) return cg__err(ctx, e->status, "%s", e->why);
    if (!e->module && (s = kx->load(ctx, &e->plan, &e->module))) return s;

    /* Tensors the kernels cannot address are staged through kernel memory. */
    const int64_t B = p->B, T = p->T, G = p->G, H = p->H, dk = p->dk, dv = p->dv;
    cg_staged sv[] = {
        {&p->q, {B, T, G, dk}, 0, NULL, 0},  {&p->k, {B, T, G, dk}, 0, NULL, 0},
        {&p->v, {B, T, H, dv}, 0, NULL, 0},  {&p->la, {B, T, H, 1}, 0, NULL, 0},
        {&p->h0, {B, H, dk, dv}, 0, NULL, 0}, {&p->o, {B, T, H, dv}, 1, NULL, 0},
        {&p->hT, {B, H, dk, dv}, 1, NULL, 0},
    };
    enum { NSV = sizeof sv / sizeof sv[0] };
    void *stream = ex ? ex->stream : NULL;
    float *ptr[NSV];
    int stage = 0;
    s = cg__stage_in(ctx, kx, sv, NSV, stream, ptr, &stage);

    cg_ssd_fwd_params kp;
    memset(&kp, 0, sizeof kp);
    kp.q = ktensor(&p->q, ptr[0]);
    kp.k = ktensor(&p->k, ptr[1]);
    kp.v = ktensor(&p->v, ptr[2]);
    kp.la = ktensor(&p->la, ptr[3]);
    kp.h0 = ktensor(&p->h0, ptr[4]);
    kp.o = ktensor(&p->o, ptr[5]);
    kp.hT = ktensor(&p->hT, ptr[6]);
    kp.B = B;
    kp.T = T;
    kp.G = G;
    kp.H = H;
    kp.dk = dk;
    kp.dv = dv;
    const int64_t chunk = cg__cfg_int(&e->plan.params, "chunk", 0);
    CG_ASSERT(chunk > 0);
    kp.nchunks = (T + chunk - 1) / chunk;
    if (s == CG_OK) {
        void *ws = NULL;
        s = cg__workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &ws);
        kp.ws = ws;
    }
    if (s == CG_OK) s = cg__launch_plan(ctx, e, &kp, sizeof kp, stream);
    if (stage) s = cg__stage_out(ctx, kx, sv, NSV, stream, s);
    if (s == CG_OK) cg__note_kernel(ctx, e, stage);
    return s;
}

/* ----------------------------------------------------------------- backward */

static void ssd_bwd_kshape(const cg_ssd_prob *p, cg_kshape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->B = p->B;
    ks->T = p->T;
    ks->G = p->G;
    ks->H = p->H;
    ks->dk = p->dk;
    ks->dv = p->dv;
    ks->flags = (p->h0.p ? CG_KS_H0 : 0) | (p->dhT.p ? CG_KS_DHT : 0);
}

int cg__ssd_gen_bwd_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p) {
    cg_kshape ks;
    ssd_bwd_kshape(p, &ks);
    return gen_supports(ctx, kx, p, "ssd_bwd", &ks);
}

cg_status cg__ssd_gen_bwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex) {
    if (!kx || !kx->device)
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_bwd: this library was built without that kernel executor");
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_bwd: generated kernels take F32 tensors (got F64)");
    if (!inner_ok(&p->q, p->dk) || !inner_ok(&p->k, p->dk) || !inner_ok(&p->dq, p->dk) || !inner_ok(&p->dk_, p->dk))
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "ssd_bwd: generated kernels need q, k, dq and dk with a contiguous dk dimension");
    if (!inner_ok(&p->v, p->dv) || !inner_ok(&p->dout, p->dv) || !inner_ok(&p->dv_, p->dv) ||
        !inner_ok(&p->h0, p->dv) || !inner_ok(&p->dhT, p->dv) || !inner_ok(&p->dh0, p->dv))
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "ssd_bwd: generated kernels need v, dout, dv, h0, dhT and dh0 with a contiguous dv dimension");

    cg_devinfo dev;
    cg_status s = kx->device(ctx, &dev);
    if (s) return s;
    cg_kshape ks;
    ssd_bwd_kshape(p, &ks);
    cg_plan_entry *e = cg__plan_get(ctx, kx, &dev, "ssd_bwd", &ks, cfg);
    if (!e) return cg__err(ctx, CG_ENOMEM, "ssd_bwd: out of memory for a plan");
    if (e->status != CG_OK) return cg__err(ctx, e->status, "%s", e->why);
    if (!e->module && (s = kx->load(ctx, &e->plan, &e->module))) return s;

    const int64_t B = p->B, T = p->T, G = p->G, H = p->H, dk = p->dk, dv = p->dv;
    cg_staged sv[] = {
        {&p->q, {B, T, G, dk}, 0, NULL, 0},    {&p->k, {B, T, G, dk}, 0, NULL, 0},
        {&p->v, {B, T, H, dv}, 0, NULL, 0},    {&p->la, {B, T, H, 1}, 0, NULL, 0},
        {&p->h0, {B, H, dk, dv}, 0, NULL, 0},  {&p->dout, {B, T, H, dv}, 0, NULL, 0},
        {&p->dhT, {B, H, dk, dv}, 0, NULL, 0}, {&p->dq, {B, T, G, dk}, 1, NULL, 0},
        {&p->dk_, {B, T, G, dk}, 1, NULL, 0},  {&p->dv_, {B, T, H, dv}, 1, NULL, 0},
        {&p->dla, {B, T, H, 1}, 1, NULL, 0},   {&p->dh0, {B, H, dk, dv}, 1, NULL, 0},
    };
    enum { NSV = sizeof sv / sizeof sv[0] };
    void *stream = ex ? ex->stream : NULL;
    float *ptr[NSV];
    int stage = 0;
    s = cg__stage_in(ctx, kx, sv, NSV, stream, ptr, &stage);

    cg_ssd_bwd_params kp;
    memset(&kp, 0, sizeof kp);
    kp.q = ktensor(&p->q, ptr[0]);
    kp.k = ktensor(&p->k, ptr[1]);
    kp.v = ktensor(&p->v, ptr[2]);
    kp.la = ktensor(&p->la, ptr[3]);
    kp.h0 = ktensor(&p->h0, ptr[4]);
    kp.dout = ktensor(&p->dout, ptr[5]);
    kp.dhT = ktensor(&p->dhT, ptr[6]);
    kp.dq = ktensor(&p->dq, ptr[7]);
    kp.dk = ktensor(&p->dk_, ptr[8]);
    kp.dv = ktensor(&p->dv_, ptr[9]);
    kp.dla = ktensor(&p->dla, ptr[10]);
    kp.dh0 = ktensor(&p->dh0, ptr[11]);
    kp.B = B;
    kp.T = T;
    kp.G = G;
    kp.H = H;
    kp.dim_k = dk;
    kp.dim_v = dv;
    const int64_t chunk = cg__cfg_int(&e->plan.params, "chunk", 0);
    CG_ASSERT(chunk > 0);
    kp.nchunks = (T + chunk - 1) / chunk;
    if (s == CG_OK) {
        void *ws = NULL;
        s = cg__workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &ws);
        kp.ws = ws;
    }
    if (s == CG_OK) s = cg__launch_plan(ctx, e, &kp, sizeof kp, stream);
    if (stage) s = cg__stage_out(ctx, kx, sv, NSV, stream, s);
    if (s == CG_OK) cg__note_kernel(ctx, e, stage);
    return s;
}
