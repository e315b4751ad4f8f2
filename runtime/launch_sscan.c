/* launch_sscan.c -- host side of the generated selective-scan kernels (templates/sscan_*.cu):
 * plans, workspace, launches.
 *
 * Same scheme as runtime/launch_ssd.c, through the shared helpers of
 * runtime/launch_common.c: the plan and module come from the context's in-memory
 * table (Lua and the compiler run only on the first call for a key), the workspace
 * from cg_exec.workspace or a context-owned buffer, and a call only fills the params
 * struct and launches: no Lua, no allocation, no host synchronization after first use,
 * so repeated calls can be captured in a CUDA graph. Tensors the kernels cannot
 * address (host pointers with the cuda backend) are staged through kernel memory.
 *
 * The kernels take any strides (also the innermost), so every validated view goes
 * through unchanged; ungrouped B/C arrive as G = 1 with group stride 0 (the kernels are
 * compiled per G). The backward's grads-pass work split and workspace are computed here
 * with the formulas of work() and ws_floats() in generator/kernels/sscan_bwd.lua (the
 * plan's workspace_bytes is checked against the total). */
#include "launch_common.h"
#include "sscan_params.h"

#include <string.h>

static void sscan_kshape(const cg_sscan_prob *p, int bwd, cg_kshape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->B = p->B;
    ks->L = p->L;
    ks->D = p->D;
    ks->N = p->N;
    ks->G = p->G;
    ks->flags = (p->h0.p ? CG_KS_H0 : 0) | (p->softplus ? CG_KS_SOFTPLUS : 0) | (p->Dv.p ? CG_KS_HAS_D : 0) |
                (p->z.p ? CG_KS_HAS_Z : 0) | (p->dbias.p ? CG_KS_HAS_BIAS : 0) | (p->grouped ? CG_KS_GROUPED : 0);
    if (!bwd && p->hT.p) ks->flags |= CG_KS_HT;
    if (bwd && p->dhT.p) ks->flags |= CG_KS_DHT;
}

static cg_stensor stensor(const cg_view *v, float *p) {
    cg_stensor t;
    t.p = p;
    t.s0 = v->s[0];
    t.s1 = v->s[1];
    t.s2 = v->s[2];
    t.s3 = v->s[3];
    return t;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t r4(int64_t n) { return (n + 3) / 4 * 4; }

/* The plan entry of kernel for p on kx (*out), or the reason in ctx. */
static cg_status sscan_entry(cg_context *ctx, const cg_kexec *kx, const char *kernel, const cg_sscan_prob *p,
                             const cg_cfg *cfg, cg_plan_entry **out) {
    *out = NULL;
    if (!kx || !kx->device)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: this library was built without that kernel executor", kernel);
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: generated kernels take F32 tensors (got F64)", kernel);
    cg_devinfo dev;
    cg_status s = kx->device(ctx, &dev);
    if (s) return s;
    cg_kshape ks;
    sscan_kshape(p, !strcmp(kernel, "sscan_bwd"), &ks);
    cg_plan_entry *e = cg__plan_get(ctx, kx, &dev, kernel, &ks, cfg);
    if (!e) return cg__err(ctx, CG_ENOMEM, "%s: out of memory for a plan", kernel);
    if (e->status != CG_OK) return cg__err(ctx, e->status, "%s", e->why);
    *out = e;
    return CG_OK;
}

/* 1 when a plan with the default config exists for p (the kernel's Lua constraints). */
int cg__sscan_gen_supports(cg_context *ctx, const cg_kexec *kx, int bwd, const cg_sscan_prob *p) {
    cg_plan_entry *e;
    return sscan_entry(ctx, kx, bwd ? "sscan_bwd" : "sscan_fwd", p, NULL, &e) == CG_OK;
}

/* The thread layout of a plan (mirrors the traits of sscan_fwd.cu). */
typedef struct sscan_geom {
    int64_t chunk, bd, nt, npt, segment, nblk;
} sscan_geom;

static void sscan_geom_of(const cg_plan *plan, const cg_sscan_prob *p, sscan_geom *g) {
    g->chunk = cg__cfg_int(&plan->params, "chunk", 0);
    g->bd = cg__cfg_int(&plan->params, "dim_block", 0);
    g->nt = 32 * cg__cfg_int(&plan->params, "warps", 0);
    g->segment = cg__cfg_int(&plan->params, "segment", 0);
    CG_ASSERT(g->chunk > 0 && g->bd > 0 && g->nt % g->bd == 0);
    g->npt = cdiv(p->N, g->nt / g->bd);
    g->nblk = cdiv(p->D, g->bd);
}

static cg_sscan_dims sscan_dims(const cg_sscan_prob *p, const sscan_geom *g) {
    cg_sscan_dims n;
    memset(&n, 0, sizeof n);
    n.B = p->B;
    n.L = p->L;
    n.D = p->D;
    n.N = p->N;
    n.G = p->G;
    n.dpg = p->D / p->G;
    n.softplus = p->softplus;
    n.nblk = g->nblk;
    return n;
}

cg_status cg__sscan_gen_fwd(cg_context *ctx, const cg_kexec *kx, const cg_sscan_prob *p, const cg_cfg *cfg,
                            const cg_exec *ex) {
    cg_plan_entry *e;
    cg_status s = sscan_entry(ctx, kx, "sscan_fwd", p, cfg, &e);
    if (s) return s;
    if (!e->module && (s = kx->load(ctx, &e->plan, &e->module))) return s;

    const int64_t B = p->B, L = p->L, D = p->D, N = p->N, G = p->G;
    cg_staged sv[] = {
        {&p->x, {B, L, D, 1}, 0, NULL, 0},     {&p->delta, {B, L, D, 1}, 0, NULL, 0},
        {&p->A, {D, N, 1, 1}, 0, NULL, 0},     {&p->Bm, {B, L, G, N}, 0, NULL, 0},
        {&p->Cm, {B, L, G, N}, 0, NULL, 0},    {&p->Dv, {D, 1, 1, 1}, 0, NULL, 0},
        {&p->z, {B, L, D, 1}, 0, NULL, 0},     {&p->dbias, {D, 1, 1, 1}, 0, NULL, 0},
        {&p->h0, {B, D, N, 1}, 0, NULL, 0},    {&p->y, {B, L, D, 1}, 1, NULL, 0},
        {&p->hT, {B, D, N, 1}, 1, NULL, 0},
    };
    enum { NSV = sizeof sv / sizeof sv[0] };
    void *stream = ex ? ex->stream : NULL;
    float *ptr[NSV];
    int staged = 0;
    s = cg__stage_in(ctx, kx, sv, NSV, stream, ptr, &staged);

    sscan_geom g;
    sscan_geom_of(&e->plan, p, &g);
    cg_sscan_fwd_params kp;
    memset(&kp, 0, sizeof kp);
    cg_stensor *t[NSV] = {&kp.x, &kp.delta, &kp.A, &kp.Bm, &kp.Cm, &kp.Dv, &kp.z, &kp.dbias, &kp.h0, &kp.y, &kp.hT};
    for (int i = 0; i < NSV; i++) *t[i] = stensor(sv[i].v, ptr[i]);
    kp.n = sscan_dims(p, &g);
    if (!strcmp(cg__cfg_str(&e->plan.params, "strategy", "seq"), "par")) {
        kp.n.segment = CG_SSCAN_PIECE_CHUNKS * g.chunk;
        kp.n.nseg = cdiv(L, kp.n.segment);
    }
    if (s == CG_OK) {
        void *ws = NULL;
        s = cg__workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &ws);
        kp.ws = ws;
    }
    if (s == CG_OK) s = cg__launch_plan(ctx, e, &kp, sizeof kp, stream);
    if (staged) s = cg__stage_out(ctx, kx, sv, NSV, stream, s);
    if (s == CG_OK) cg__note_kernel(ctx, e, staged);
    return s;
}

cg_status cg__sscan_gen_bwd(cg_context *ctx, const cg_kexec *kx, const cg_sscan_prob *p, const cg_cfg *cfg,
                            const cg_exec *ex) {
    cg_plan_entry *e;
    cg_status s = sscan_entry(ctx, kx, "sscan_bwd", p, cfg, &e);
    if (s) return s;
    if (!e->module && (s = kx->load(ctx, &e->plan, &e->module))) return s;

    const int64_t B = p->B, L = p->L, D = p->D, N = p->N, G = p->G;
    cg_staged sv[] = {
        {&p->x, {B, L, D, 1}, 0, NULL, 0},      {&p->delta, {B, L, D, 1}, 0, NULL, 0},
        {&p->A, {D, N, 1, 1}, 0, NULL, 0},      {&p->Bm, {B, L, G, N}, 0, NULL, 0},
        {&p->Cm, {B, L, G, N}, 0, NULL, 0},     {&p->Dv, {D, 1, 1, 1}, 0, NULL, 0},
        {&p->z, {B, L, D, 1}, 0, NULL, 0},      {&p->dbias, {D, 1, 1, 1}, 0, NULL, 0},
        {&p->h0, {B, D, N, 1}, 0, NULL, 0},     {&p->dy, {B, L, D, 1}, 0, NULL, 0},
        {&p->dhT, {B, D, N, 1}, 0, NULL, 0},    {&p->dx, {B, L, D, 1}, 1, NULL, 0},
        {&p->ddelta, {B, L, D, 1}, 1, NULL, 0}, {&p->dA, {D, N, 1, 1}, 1, NULL, 0},
        {&p->dB, {B, L, G, N}, 1, NULL, 0},     {&p->dC, {B, L, G, N}, 1, NULL, 0},
        {&p->dD, {D, 1, 1, 1}, 1, NULL, 0},     {&p->dz, {B, L, D, 1}, 1, NULL, 0},
        {&p->ddbias, {D, 1, 1, 1}, 1, NULL, 0}, {&p->dh0, {B, D, N, 1}, 1, NULL, 0},
    };
    enum { NSV = sizeof sv / sizeof sv[0] };
    void *stream = ex ? ex->stream : NULL;
    float *ptr[NSV];
    int staged = 0;
    s = cg__stage_in(ctx, kx, sv, NSV, stream, ptr, &staged);

    sscan_geom g;
    sscan_geom_of(&e->plan, p, &g);
    CG_ASSERT(g.segment > 0);
    cg_sscan_bwd_params kp;
    memset(&kp, 0, sizeof kp);
    cg_stensor *t[NSV] = {&kp.x,  &kp.delta, &kp.A,      &kp.Bm, &kp.Cm, &kp.Dv, &kp.z,
                          &kp.dbias, &kp.h0, &kp.dy,     &kp.dhT, &kp.dx, &kp.ddelta, &kp.dA,
                          &kp.dB, &kp.dC,    &kp.dD,     &kp.dz, &kp.ddbias, &kp.dh0};
    for (int i = 0; i < NSV; i++) *t[i] = stensor(sv[i].v, ptr[i]);
    kp.n = sscan_dims(p, &g);
    kp.n.segment = g.segment;
    kp.n.nseg = cdiv(L, g.segment);
    const int par = !strcmp(cg__cfg_str(&e->plan.params, "strategy", "seq"), "par");

    /* Work of the grads pass, as work() of sscan_bwd.lua; its grid (the CTAs owning a
     * state buffer each) from the plan. */
    const int64_t dpg = D / G, nseg = kp.n.nseg;
    kp.gpu = g.bd / dpg > 1 ? g.bd / dpg : 1;
    kp.nunit = cdiv(G, kp.gpu);
    kp.nsplit = 1;
    if (kp.gpu == 1) {
        int64_t ns = cdiv(CG_SSCAN_SPLIT_TARGET, B * nseg * kp.nunit);
        if (ns > cdiv(dpg, g.bd)) ns = cdiv(dpg, g.bd);
        if (ns > CG_SSCAN_SPLIT_MAX) ns = CG_SSCAN_SPLIT_MAX;
        kp.nsplit = ns > 1 ? ns : 1;
    }
    kp.nwork = B * nseg * kp.nunit * kp.nsplit;
    CG_ASSERT(e->plan.nlaunch >= 3);
    const cg_launch *lg = &e->plan.launch[e->plan.nlaunch - 2];
    CG_ASSERT(!strcmp(lg->entry, "cg_sscan_bwd_grads"));
    const int64_t grads_ctas = lg->grid[0];

    /* Workspace regions, as ws_floats() of sscan_bwd.lua. */
    const int64_t bblk = B * g.nblk, per = g.npt * g.nt;
    const int64_t bc = kp.nsplit > 1 ? B * L * G * kp.nsplit * N : 0;
    const int64_t region[9] = {r4(bblk * nseg * per),   r4(bblk * nseg * per), par ? r4(bblk * nseg * g.bd) : 0,
                               r4(grads_ctas * (g.segment + 1) * per), r4(bc), r4(bc),
                               r4(B * nseg * D * N),    r4(B * nseg * D),      r4(B * nseg * D)};
    int64_t total = 0;
    for (int i = 0; i < 9; i++) total += region[i];
    if (s == CG_OK && 4 * total != e->plan.workspace_bytes)
        s = cg__err(ctx, CG_EINTERNAL, "sscan_bwd: workspace split (%lld bytes) disagrees with the plan's %lld bytes",
                    (long long)(4 * total), (long long)e->plan.workspace_bytes);
    if (s == CG_OK) {
        void *ws = NULL;
        s = cg__workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &ws);
        float *w = ws;
        float **dst[9] = {&kp.ckpt, &kp.gst, &kp.sdt, &kp.hbuf, &kp.pB, &kp.pC, &kp.pA, &kp.pD, &kp.pbias};
        for (int i = 0; i < 9 && w; i++) {
            *dst[i] = region[i] ? w : NULL;
            w += region[i];
        }
    }
    if (s == CG_OK) s = cg__launch_plan(ctx, e, &kp, sizeof kp, stream);
    if (staged) s = cg__stage_out(ctx, kx, sv, NSV, stream, s);
    if (s == CG_OK) cg__note_kernel(ctx, e, staged);
    return s;
}
