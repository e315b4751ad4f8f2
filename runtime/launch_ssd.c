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

/* The kernel shape of p: the sizes and which optional tensors are present (flags). */
static void ssd_kshape(const cg_ssd_prob *p, int flags, cg_kshape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->B = p->B;
    ks->T = p->T;
    ks->G = p->G;
    ks->H = p->H;
    ks->dk = p->dk;
    ks->dv = p->dv;
    ks->flags = flags;
}
static void ssd_fwd_kshape(const cg_ssd_prob *p, cg_kshape *ks) {
    ssd_kshape(p, (p->h0.p ? CG_KS_H0 : 0) | (p->hT.p ? CG_KS_HT : 0), ks);
}
static void ssd_bwd_kshape(const cg_ssd_prob *p, cg_kshape *ks) {
    ssd_kshape(p, (p->h0.p ? CG_KS_H0 : 0) | (p->dhT.p ? CG_KS_DHT : 0), ks);
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
    ssd_fwd_kshape(p, &ks);
    return gen_supports(ctx, kx, p, "ssd_fwd", &ks);
}

/* The launchers' first checks: an executor, and F32 tensors. */
static cg_status gen_check(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const char *kernel) {
    if (!kx || !kx->device)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: this library was built without that kernel executor", kernel);
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: generated kernels take F32 tensors (got F64)", kernel);
    return CG_OK;
}

/* The plan of kernel for ks (cfg pins it, or NULL) on kx, its module loaded, in *out. */
static cg_status gen_plan(cg_context *ctx, const cg_kexec *kx, const char *kernel, const cg_kshape *ks,
                          const cg_cfg *cfg, cg_plan_entry **out) {
    cg_devinfo dev;
    cg_status s = kx->device(ctx, &dev);
    if (s) return s;
    cg_plan_entry *e = cg__plan_get(ctx, kx, &dev, kernel, ks, cfg);
    if (!e) return cg__err(ctx, CG_ENOMEM, "%s: out of memory for a plan", kernel);
    if (e->status != CG_OK) return cg__err(ctx, e->status, "%s", e->why);
    if (!e->module && (s = kx->load(ctx, &e->plan, &e->module))) return s;
    *out = e;
    return CG_OK;
}

/* Chunks of T at the plan's chunk length. */
static int64_t plan_nchunks(const cg_plan_entry *e, int64_t T) {
    const int64_t chunk = cg__cfg_int(&e->plan.params, "chunk", 0);
    CG_ASSERT(chunk > 0);
    return (T + chunk - 1) / chunk;
}

/* Stage the n tensors of sv in (when the kernels cannot address them; *stage 1 then) and
 * point kt[i] at tensor i, as the kernels see it. */
static cg_status gen_stage_in(cg_context *ctx, const cg_kexec *kx, const cg_exec *ex, cg_staged *sv, int n,
                              cg_ktensor *const *kt, int *stage) {
    float *ptr[16];
    CG_ASSERT(n <= 16);
    memset(ptr, 0, sizeof ptr);
    *stage = 0;
    cg_status s = cg__stage_in(ctx, kx, sv, n, ex ? ex->stream : NULL, ptr, stage);
    for (int i = 0; i < n; i++) *kt[i] = ktensor(sv[i].v, ptr[i]);
    return s;
}

/* The rest of a launch, once the tensors are staged in (status s) and the params struct
 * kp (size bytes) is filled but for its workspace *ws: get the workspace, launch the
 * plan, stage the outputs back, note the kernel on the dispatch line. */
static cg_status gen_run(cg_context *ctx, const cg_kexec *kx, const cg_exec *ex, cg_plan_entry *e, cg_staged *sv,
                         int nsv, int stage, cg_status s, void *kp, size_t size, float **ws) {
    void *stream = ex ? ex->stream : NULL;
    if (s == CG_OK) {
        void *w = NULL;
        s = cg__workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &w);
        *ws = w;
    }
    if (s == CG_OK) s = cg__launch_plan(ctx, e, kp, size, stream);
    if (stage) s = cg__stage_out(ctx, kx, sv, nsv, stream, s);
    if (s == CG_OK) cg__note_kernel(ctx, e, stage);
    return s;
}

cg_status cg__ssd_gen_fwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex) {
    cg_status s = gen_check(ctx, kx, p, "ssd_fwd");
    if (s) return s;
    if (!inner_ok(&p->q, p->dk) || !inner_ok(&p->k, p->dk))
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: generated kernels need q and k with a contiguous dk dimension");
    if (!inner_ok(&p->v, p->dv) || !inner_ok(&p->o, p->dv) || !inner_ok(&p->h0, p->dv) || !inner_ok(&p->hT, p->dv))
        return cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: generated kernels need v, o, h0 and hT with a contiguous dv dimension");

    cg_kshape ks;
    ssd_fwd_kshape(p, &ks);
    cg_plan_entry *e = NULL;
    if ((s = gen_plan(ctx, kx, "ssd_fwd", &ks, cfg, &e))) return s;

    /* Tensors the kernels cannot address are staged through kernel memory. */
    const int64_t B = p->B, T = p->T, G = p->G, H = p->H, dk = p->dk, dv = p->dv;
    cg_staged sv[] = {
        {&p->q, {B, T, G, dk}, 0, NULL, 0},  {&p->k, {B, T, G, dk}, 0, NULL, 0},
        {&p->v, {B, T, H, dv}, 0, NULL, 0},  {&p->la, {B, T, H, 1}, 0, NULL, 0},
        {&p->h0, {B, H, dk, dv}, 0, NULL, 0}, {&p->o, {B, T, H, dv}, 1, NULL, 0},
        {&p->hT, {B, H, dk, dv}, 1, NULL, 0},
    };
    enum { NSV = sizeof sv / sizeof sv[0] };
    cg_ssd_fwd_params kp;
    memset(&kp, 0, sizeof kp);
    cg_ktensor *const kt[NSV] = {&kp.q, &kp.k, &kp.v, &kp.la, &kp.h0, &kp.o, &kp.hT}; /* as sv */
    int stage;
    s = gen_stage_in(ctx, kx, ex, sv, NSV, kt, &stage);
    kp.B = B, kp.T = T, kp.G = G, kp.H = H, kp.dk = dk, kp.dv = dv;
    kp.nchunks = plan_nchunks(e, T);
    return gen_run(ctx, kx, ex, e, sv, NSV, stage, s, &kp, sizeof kp, &kp.ws);
}

/* ----------------------------------------------------------------- backward */

int cg__ssd_gen_bwd_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p) {
    cg_kshape ks;
    ssd_bwd_kshape(p, &ks);
    return gen_supports(ctx, kx, p, "ssd_bwd", &ks);
}

cg_status cg__ssd_gen_bwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex) {
    cg_status s = gen_check(ctx, kx, p, "ssd_bwd");
    if (s) return s;
    if (!inner_ok(&p->q, p->dk) || !inner_ok(&p->k, p->dk) || !inner_ok(&p->dq, p->dk) || !inner_ok(&p->dk_, p->dk))
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "ssd_bwd: generated kernels need q, k, dq and dk with a contiguous dk dimension");
    if (!inner_ok(&p->v, p->dv) || !inner_ok(&p->dout, p->dv) || !inner_ok(&p->dv_, p->dv) ||
        !inner_ok(&p->h0, p->dv) || !inner_ok(&p->dhT, p->dv) || !inner_ok(&p->dh0, p->dv))
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "ssd_bwd: generated kernels need v, dout, dv, h0, dhT and dh0 with a contiguous dv dimension");

    cg_kshape ks;
    ssd_bwd_kshape(p, &ks);
    cg_plan_entry *e = NULL;
    if ((s = gen_plan(ctx, kx, "ssd_bwd", &ks, cfg, &e))) return s;

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
    cg_ssd_bwd_params kp;
    memset(&kp, 0, sizeof kp);
    cg_ktensor *const kt[NSV] = {&kp.q,  &kp.k,  &kp.v,  &kp.la, &kp.h0,  &kp.dout,
                                 &kp.dhT, &kp.dq, &kp.dk, &kp.dv, &kp.dla, &kp.dh0}; /* as sv */
    int stage;
    s = gen_stage_in(ctx, kx, ex, sv, NSV, kt, &stage);
    kp.B = B, kp.T = T, kp.G = G, kp.H = H, kp.dim_k = dk, kp.dim_v = dv;
    kp.nchunks = plan_nchunks(e, T);
    return gen_run(ctx, kx, ex, e, sv, NSV, stage, s, &kp, sizeof kp, &kp.ws);
}
