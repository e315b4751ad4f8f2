/* launch_ssd.c -- host side of the generated SSD kernels: plans, workspace, launches.
 *
 * A plan (rendered source, launch geometry, workspace size) and its loaded module are
 * looked up in ctx->plans, keyed by (kernel executor, kernel, shape, config pins). The
 * first call for a key asks the generator (Lua) and loads the module (NVRTC or the
 * emulator's compiler); later calls find the entry and only fill the params struct and
 * launch: no Lua, no allocation, no host synchronization (the workspace comes from
 * cg_exec.workspace or from a context-owned buffer that only ever grows). That keeps
 * repeated launches capturable in a CUDA graph.
 *
 * Memory: the kernels address kernel memory (device memory for cuda, host memory for
 * the emulator). When a tensor is not kernel-addressable (host pointers given to the
 * cuda backend) the call stages every tensor through temporary kernel memory and
 * copies the outputs back, synchronizing: correct, but not the fast path. The auto
 * backend never takes this path; it runs the CPU path on host pointers. */
#include "internal.h"
#include "gen.h"
#include "cg_kernel_params.h"

#include <string.h>

typedef struct plan_entry {
    const cg_kexec *kx;
    char kernel[32];
    cg_kshape shape;
    cg_cfg pin;
    cg_status status;     /* CG_OK, or why no plan exists (cached so `supports` stays cheap) */
    char why[CG_ERRMSG_CAP];
    cg_plan plan;
    void *module;         /* loaded lazily by the first launch; owned by the executor */
    struct plan_entry *next;
} plan_entry;

#define CG_WS_SLOTS 4
typedef struct plans_state {
    plan_entry *head;
    struct { const cg_kexec *kx; void *p; size_t bytes; } ws[CG_WS_SLOTS]; /* context-owned workspaces */
} plans_state;

void cg__plans_ctx_free(cg_context *ctx) {
    plans_state *st = ctx->plans;
    if (!st) return;
    for (plan_entry *e = st->head, *n; e; e = n) {
        n = e->next;
        if (e->status == CG_OK) cg__plan_free(&e->plan);
        free(e);
    }
    for (int i = 0; i < CG_WS_SLOTS; i++)
        if (st->ws[i].p && st->ws[i].kx->free) st->ws[i].kx->free(ctx, st->ws[i].p);
    free(st);
    ctx->plans = NULL;
}

static int cfg_equal(const cg_cfg *a, const cg_cfg *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->kv[i].key, b->kv[i].key) || strcmp(a->kv[i].val, b->kv[i].val)) return 0;
    return 1;
}

static int shape_equal(const cg_kshape *a, const cg_kshape *b) {
    return a->B == b->B && a->T == b->T && a->G == b->G && a->H == b->H && a->dk == b->dk && a->dv == b->dv &&
           a->L == b->L && a->D == b->D && a->N == b->N && a->flags == b->flags;
}

/* The plan entry of (kx, kernel, shape, pin): found, or made now (Lua). Never NULL
 * unless out of memory; a plan that cannot exist is an entry with status != CG_OK. */
static plan_entry *plan_get(cg_context *ctx, const cg_kexec *kx, const cg_devinfo *dev, const char *kernel,
                            const cg_kshape *shape, const cg_cfg *pin) {
    static const cg_cfg no_pin;
    if (!pin) pin = &no_pin;
    plans_state *st = ctx->plans;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return NULL;
        ctx->plans = st;
    }
    for (plan_entry *e = st->head; e; e = e->next)
        if (e->kx == kx && !strcmp(e->kernel, kernel) && shape_equal(&e->shape, shape) && cfg_equal(&e->pin, pin))
            return e;
    plan_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->kx = kx;
    snprintf(e->kernel, sizeof e->kernel, "%s", kernel);
    e->shape = *shape;
    e->pin = *pin;
    e->status = cg__gen_plan(ctx, kernel, shape, dev, pin, &e->plan);
    if (e->status != CG_OK) snprintf(e->why, sizeof e->why, "%s", ctx->errmsg);
    e->next = st->head;
    st->head = e;
    return e;
}

/* Kernel memory of at least `bytes` for kx: the caller's workspace when large enough,
 * else a context-owned buffer (grown, never shrunk; growing waits for `stream`). */
static cg_status workspace_get(cg_context *ctx, const cg_kexec *kx, const cg_exec *ex, size_t bytes, void **out) {
    *out = NULL;
    if (bytes == 0) return CG_OK;
    if (ex && ex->workspace && ex->workspace_bytes >= bytes) {
        *out = ex->workspace;
        return CG_OK;
    }
    plans_state *st = ctx->plans;
    int slot = -1;
    for (int i = 0; i < CG_WS_SLOTS && slot < 0; i++)
        if (st->ws[i].kx == kx || !st->ws[i].kx) slot = i;
    if (slot < 0) return cg__err(ctx, CG_EINTERNAL, "workspace: more than %d kernel executors", CG_WS_SLOTS);
    if (st->ws[slot].bytes < bytes) {
        if (st->ws[slot].p) {
            cg_status s = kx->sync(ctx, ex ? ex->stream : NULL); /* kernels in flight may still use it */
            if (s) return s;
            kx->free(ctx, st->ws[slot].p);
            st->ws[slot].p = NULL;
            st->ws[slot].bytes = 0;
        }
        void *p = NULL;
        cg_status s = kx->alloc(ctx, bytes, &p);
        if (s) return s;
        st->ws[slot].kx = kx;
        st->ws[slot].p = p;
        st->ws[slot].bytes = bytes;
    }
    *out = st->ws[slot].p;
    return CG_OK;
}

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

/* Elements spanned by view v over logical extents n[4] (1 for unused dims). */
static int64_t view_span(const cg_view *v, const int64_t n[4]) {
    int64_t last = 0;
    for (int d = 0; d < 4; d++) last += (n[d] - 1) * v->s[d];
    return last + 1;
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

typedef struct staged {
    const cg_view *v;
    int64_t n[4];
    int output;
    void *dev;
    size_t bytes;
} staged;

int cg__ssd_gen_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p) {
    if (!kx || !kx->device) {
        cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: this library was built without that kernel executor");
        return 0;
    }
    if (p->dtype != CG_F32) {
        cg__err(ctx, CG_EUNSUPPORTED, "ssd_fwd: generated kernels take F32 tensors");
        return 0;
    }
    cg_devinfo dev;
    if (kx->device(ctx, &dev) != CG_OK) return 0;
    cg_kshape ks;
    ssd_kshape(p, &ks);
    plan_entry *e = plan_get(ctx, kx, &dev, "ssd_fwd", &ks, NULL);
    if (!e) {
        cg__err(ctx, CG_ENOMEM, "ssd_fwd: out of memory for a plan");
        return 0;
    }
    if (e->status != CG_OK) {
        cg__err(ctx, e->status, "%s", e->why);
        return 0;
    }
    return 1;
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
    plan_entry *e = plan_get(ctx, kx, &dev, "ssd_fwd", &ks, cfg);
    if (!e) return cg__err(ctx, CG_ENOMEM, "ssd_fwd: out of memory for a plan");
    if (e->status != CG_OK) return cg__err(ctx, e->status, "%s", e->why);
    if (!e->module && (s = kx->load(ctx, &e->plan, &e->module))) return s;

    /* Tensors the kernels cannot address are staged through kernel memory. */
    const int64_t B = p->B, T = p->T, G = p->G, H = p->H, dk = p->dk, dv = p->dv;
    staged sv[] = {
        {&p->q, {B, T, G, dk}, 0, NULL, 0},  {&p->k, {B, T, G, dk}, 0, NULL, 0},
        {&p->v, {B, T, H, dv}, 0, NULL, 0},  {&p->la, {B, T, H, 1}, 0, NULL, 0},
        {&p->h0, {B, H, dk, dv}, 0, NULL, 0}, {&p->o, {B, T, H, dv}, 1, NULL, 0},
        {&p->hT, {B, H, dk, dv}, 1, NULL, 0},
    };
    enum { NSV = sizeof sv / sizeof sv[0] };
    int stage = 0;
    for (int i = 0; i < NSV; i++)
        if (sv[i].v->p && !(kx->owns_ptr && kx->owns_ptr(ctx, sv[i].v->p))) stage = 1;
    void *stream = ex ? ex->stream : NULL;
    float *ptr[NSV];
    for (int i = 0; i < NSV; i++) ptr[i] = sv[i].v->p;
    if (stage) {
        for (int i = 0; i < NSV && s == CG_OK; i++) {
            if (!sv[i].v->p) continue;
            sv[i].bytes = (size_t)view_span(sv[i].v, sv[i].n) * sizeof(float);
            s = kx->alloc(ctx, sv[i].bytes, &sv[i].dev);
            /* outputs too: the gaps between their strided elements must survive the copy back */
            if (s == CG_OK) s = kx->copy(ctx, sv[i].dev, sv[i].v->p, sv[i].bytes, 0, stream);
            ptr[i] = sv[i].dev;
        }
    }

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
        s = workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &ws);
        kp.ws = ws;
    }
    for (int i = 0; i < e->plan.nlaunch && s == CG_OK; i++)
        s = kx->launch(ctx, e->module, &e->plan.launch[i], &kp, sizeof kp, stream);

    if (stage) {
        if (s == CG_OK) s = kx->sync(ctx, stream);
        for (int i = 0; i < NSV; i++) {
            if (!sv[i].dev) continue;
            if (s == CG_OK && sv[i].output) s = kx->copy(ctx, sv[i].v->p, sv[i].dev, sv[i].bytes, 1, stream);
        }
        if (s == CG_OK) s = kx->sync(ctx, stream);
        for (int i = 0; i < NSV; i++)
            if (sv[i].dev) kx->free(ctx, sv[i].dev);
    }
    if (s == CG_OK) {
        size_t len = strlen(ctx->dispatch);
        snprintf(ctx->dispatch + len, sizeof ctx->dispatch - len, " kernel=%s%s", e->plan.name,
                 stage ? " (staged through kernel memory)" : "");
    }
    return s;
}
