/* launch_common.c -- plan table, workspace and staging shared by the host launchers. */
#include "launch_common.h"

#include <string.h>

#define CG_WS_SLOTS 4
typedef struct plans_state {
    cg_plan_entry *head;
    struct { const cg_kexec *kx; void *p; size_t bytes; } ws[CG_WS_SLOTS]; /* context-owned workspaces */
} plans_state;

void cg__plans_ctx_free(cg_context *ctx) {
    plans_state *st = ctx->plans;
    if (!st) return;
    for (cg_plan_entry *e = st->head, *n; e; e = n) {
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

cg_plan_entry *cg__plan_get(cg_context *ctx, const cg_kexec *kx, const cg_devinfo *dev, const char *kernel,
                            const cg_kshape *shape, const cg_cfg *pin) {
    static const cg_cfg no_pin;
    if (!pin) pin = &no_pin;
    plans_state *st = ctx->plans;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return NULL;
        ctx->plans = st;
    }
    for (cg_plan_entry *e = st->head; e; e = e->next)
        if (e->kx == kx && !strcmp(e->kernel, kernel) && shape_equal(&e->shape, shape) && cfg_equal(&e->pin, pin))
            return e;
    cg_plan_entry *e = calloc(1, sizeof *e);
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

cg_status cg__workspace_get(cg_context *ctx, const cg_kexec *kx, const cg_exec *ex, size_t bytes, void **out) {
    *out = NULL;
    if (bytes == 0) return CG_OK;
    if (ex && ex->workspace && ex->workspace_bytes >= bytes) {
        *out = ex->workspace;
        return CG_OK;
    }
    plans_state *st = ctx->plans;
    CG_ASSERT(st); /* a plan was made before any workspace is asked for */
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

cg_status cg__stage_in(cg_context *ctx, const cg_kexec *kx, cg_staged *sv, int n, void *stream, float **ptr,
                       int *staged) {
    int stage = 0;
    for (int i = 0; i < n; i++) {
        ptr[i] = sv[i].v->p;
        sv[i].dev = NULL;
        if (sv[i].v->p && !(kx->owns_ptr && kx->owns_ptr(ctx, sv[i].v->p))) stage = 1;
    }
    *staged = stage;
    if (!stage) return CG_OK;
    cg_status s = CG_OK;
    for (int i = 0; i < n && s == CG_OK; i++) {
        if (!sv[i].v->p) continue;
        sv[i].bytes = (size_t)cg__view_span(sv[i].v, sv[i].n) * sizeof(float);
        s = kx->alloc(ctx, sv[i].bytes, &sv[i].dev);
        /* outputs too: the gaps between their strided elements must survive the copy back */
        if (s == CG_OK) s = kx->copy(ctx, sv[i].dev, sv[i].v->p, sv[i].bytes, 0, stream);
        ptr[i] = sv[i].dev;
    }
    return s;
}

cg_status cg__stage_out(cg_context *ctx, const cg_kexec *kx, cg_staged *sv, int n, void *stream, cg_status s) {
    if (s == CG_OK) s = kx->sync(ctx, stream);
    for (int i = 0; i < n; i++)
        if (sv[i].dev && sv[i].output && s == CG_OK) s = kx->copy(ctx, sv[i].v->p, sv[i].dev, sv[i].bytes, 1, stream);
    if (s == CG_OK) {
        s = kx->sync(ctx, stream);
    } else {
        /* A failed launch may follow launches still running on the staging buffers: wait
         * for the stream before freeing them, keeping the first error's message. */
        char first[CG_ERRMSG_CAP];
        snprintf(first, sizeof first, "%s", ctx->errmsg);
        (void)kx->sync(ctx, stream);
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", first);
    }
    for (int i = 0; i < n; i++)
        if (sv[i].dev) {
            kx->free(ctx, sv[i].dev);
            sv[i].dev = NULL;
        }
    return s;
}

cg_status cg__launch_plan(cg_context *ctx, cg_plan_entry *e, const void *params, size_t size, void *stream) {
    cg_status s = CG_OK;
    for (int i = 0; i < e->plan.nlaunch && s == CG_OK; i++)
        s = e->kx->launch(ctx, e->module, &e->plan.launch[i], params, size, stream);
    return s;
}

void cg__note_kernel(cg_context *ctx, const cg_plan_entry *e, int staged) {
    cg__dispatch_detail(ctx, "kernel=%s%s", e->plan.name, staged ? " (staged through kernel memory)" : "");
}
