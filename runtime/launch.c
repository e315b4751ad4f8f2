/* launch.c -- the one host launcher of generated kernels, and the two backends that use
 * it: "cuda" (NVRTC + the driver) and "emulate" (the same generated source run on the
 * CPU by the SIMT emulator). They differ only in the kernel executor (cg_kexec).
 *
 * Lua owns every launch fact. The kernel's plan() (generator/core.lua, "launch") gives
 * the launches (entry, grid, block, shared memory), the named workspace regions and the
 * ORDERED kernel arguments: tensors of the op by their names in the op table
 * (runtime/ops.c), workspace regions, shape symbols and integers. This file looks the
 * names up once, when the plan is made, and on every call packs the arguments into the
 * one params struct that every entry takes (a tensor: pointer and four 64-bit strides,
 * cg_ktensor of templates/cg_kernel_params.h; the rest 8 bytes each), without knowing
 * what any of them means.
 *
 * Plans (rendered source, launch facts) and their loaded modules live in the context (its CG_PART_PLANS part),
 * keyed by (executor, kernel, shape, config pins): Lua and the compiler run on the
 * first call for a key only. `supports` makes the plan of the config the call will
 * run, so a call resolves once and the run finds it; later calls fill the params and
 * launch: no Lua, no allocation, no host synchronization (the workspace comes from
 * cg_exec.workspace or from a context-owned buffer that only ever grows), so repeated
 * calls can be captured in a CUDA graph.
 *
 * Memory: the kernels address kernel memory (device memory for cuda, host memory for
 * the emulator). When a tensor is not kernel-addressable (host pointers given to the
 * cuda backend) the call stages every tensor through temporary kernel memory and
 * copies the outputs back, synchronizing: correct, but not the fast path. The auto
 * backend never takes this path; it runs the CPU path on host pointers. */
#include "gen.h"
#include "ops.h"
#include "cg_kernel_params.h"

#include <string.h>

_Static_assert(sizeof(cg_ktensor) == 5 * sizeof(int64_t) && sizeof(void *) == sizeof(int64_t),
               "kernel params are 8-byte slots");

/* ------------------------------------------------------------- plan table */

typedef struct plan_entry {
    const cg_kexec *kx;
    char kernel[32];
    cg_shape shape; /* the call's shape (cg__shape_of_prob): the key, by cg_shape_equal */
    cg_cfg pin;
    cg_status status; /* CG_OK, or why no plan exists (cached so `supports` stays cheap) */
    char why[CG_ERRMSG_CAP];
    cg_plan plan;
    int idx[CG_PLAN_MAX_ARGS]; /* per argument: tensor index, region index or symbol */
    void *module;              /* loaded lazily by the first launch; owned by the executor */
    double render_ms;          /* making the plan (Lua: resolve, launch(), render) */
    char origin[160];          /* where the module came from, for the dispatch line: set by the
                           * load, "process" after the first call reported it */
    struct plan_entry *next;
} plan_entry;

#define CG_WS_SLOTS 4
typedef struct plans_state {
    plan_entry *head;
    int64_t loads; /* modules loaded (compiled or fetched from the caches) */
    struct {
        const cg_kexec *kx;
        void *p;
        size_t bytes;
    } ws[CG_WS_SLOTS]; /* context-owned workspaces */
} plans_state;

static void plans_ctx_free(cg_context *ctx) {
    plans_state *st = ctx->part[CG_PART_PLANS].p;
    if (!st) return;
    for (plan_entry *e = st->head, *n; e; e = n) {
        n = e->next;
        if (e->status == CG_OK) cg__plan_free(&e->plan);
        free(e);
    }
    for (int i = 0; i < CG_WS_SLOTS; i++)
        if (st->ws[i].p && st->ws[i].kx->free) st->ws[i].kx->free(ctx, st->ws[i].p);
    free(st);
    ctx->part[CG_PART_PLANS].p = NULL;
}

static int cfg_equal(const cg_cfg *a, const cg_cfg *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->kv[i].key, b->kv[i].key) || strcmp(a->kv[i].val, b->kv[i].val)) return 0;
    return 1;
}

/* Look the plan's argument names up in the op table and the plan's regions. */
static cg_status bind_args(cg_context *ctx, const cg_op_desc *d, plan_entry *e) {
    const cg_plan *pl = &e->plan;
    if (strcmp(pl->op, d->name))
        return cg__err(ctx, CG_ELUA, "generator: kernel %s is for op %s, launched for %s", pl->kernel, pl->op, d->name);
    for (int i = 0; i < pl->narg; i++) {
        const cg_karg *a = &pl->arg[i];
        int k = -1;
        switch (a->kind) {
        case CG_KARG_TENSOR: k = cg__op_tensor(d, a->name); break;
        case CG_KARG_WS:
            for (int r = 0; r < pl->nregion && k < 0; r++)
                if (!strcmp(pl->region[r].name, a->name)) k = r;
            break;
        case CG_KARG_SYM: {
            cg_sym s;
            k = cg_sym_parse(a->name, &s) == CG_OK && d->dim_off[s] != (size_t)-1 ? (int)s : -1;
            break;
        }
        case CG_KARG_INT: k = 0; break;
        case CG_KARG_CU: k = !strcmp(a->name, "cu_seqlens") && d->varlen ? 0 : -1; break;
        case CG_KARG_REAL:
            for (int r = 0; r < d->nreal && k < 0; r++)
                if (!strcmp(d->real[r].name, a->name)) k = r;
            break;
        }
        if (k < 0)
            return cg__err(ctx, CG_ELUA, "generator: kernel %s: argument %d names '%s', which op %s does not have",
                           pl->kernel, i + 1, a->name, d->name);
        e->idx[i] = k;
    }
    return CG_OK;
}

/* The entry of (kx, kernel, shape, pin): found, or made now (Lua). NULL only when out of
 * memory; a plan that cannot exist is an entry with status != CG_OK. */
static plan_entry *plan_get(cg_context *ctx, const cg_kexec *kx, const cg_devinfo *dev, const cg_op_desc *d,
                            const cg_shape *shape, const cg_cfg *pin) {
    static const cg_cfg no_pin;
    if (!pin) pin = &no_pin;
    plans_state *st = ctx->part[CG_PART_PLANS].p;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return NULL;
        ctx->part[CG_PART_PLANS].p = st;
        ctx->part[CG_PART_PLANS].free = plans_ctx_free;
    }
    for (plan_entry *e = st->head; e; e = e->next)
        if (e->kx == kx && !strcmp(e->kernel, d->name) && cg_shape_equal(&e->shape, shape) && cfg_equal(&e->pin, pin))
            return e;
    plan_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->kx = kx;
    snprintf(e->kernel, sizeof e->kernel, "%s", d->name);
    e->shape = *shape;
    e->pin = *pin;
    int64_t t0 = cg__jit_now_ns();
    e->status = cg__gen_plan(ctx, d->name, shape, 0, dev, pin, &e->plan);
    e->render_ms = (double)(cg__jit_now_ns() - t0) / 1e6;
    if (e->status == CG_OK && (e->status = bind_args(ctx, d, e)) != CG_OK) cg__plan_free(&e->plan);
    if (e->status != CG_OK) snprintf(e->why, sizeof e->why, "%s", ctx->errmsg);
    e->next = st->head;
    st->head = e;
    return e;
}

/* Kernel memory of at least `bytes` for kx: the caller's workspace when large enough,
 * else a context-owned buffer (grown, never shrunk; growing waits for the stream). */
static cg_status workspace_get(cg_context *ctx, const cg_kexec *kx, const cg_exec *ex, size_t bytes, void **out) {
    *out = NULL;
    if (bytes == 0) return CG_OK;
    if (ex && ex->workspace && ex->workspace_bytes >= bytes) {
        *out = ex->workspace;
        return CG_OK;
    }
    plans_state *st = ctx->part[CG_PART_PLANS].p;
    CG_ASSERT(st); /* a plan was made before any workspace is asked for */
    int slot = -1;
    for (int i = 0; i < CG_WS_SLOTS && slot < 0; i++)
        if (st->ws[i].kx == kx || !st->ws[i].kx) slot = i;
    if (slot < 0) return cg__err(ctx, CG_EINTERNAL, "workspace: more than %d kernel executors", CG_WS_SLOTS);
    if (st->ws[slot].bytes < bytes) {
        if (kx->capturing && kx->capturing(ctx, ex ? ex->stream : NULL))
            return cg__err(ctx, CG_EUNSUPPORTED,
                           "the stream is being captured into a CUDA graph and this call would allocate (%s, %zu "
                           "bytes): call cg_prepare with the same arguments before capturing, or pass "
                           "cg_exec.workspace (cg_workspace_size)",
                           st->ws[slot].p ? "its scratch must grow" : "its scratch is not allocated yet", bytes);
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

/* ----------------------------------------------------------------- staging */

/* A tensor of the op, for staging. */
typedef struct staged {
    const cg_view *v;
    int64_t n[4];
    int output;
    void *dev; /* staging copy, or NULL */
    size_t bytes;
} staged;

/* When any present tensor is not kernel-addressable, copy every tensor into kernel
 * memory (*stage = 1). ptr[i] receives the pointer the kernel must use. */
static cg_status stage_in(cg_context *ctx, const cg_kexec *kx, staged *sv, int n, void *stream, float **ptr,
                          int *stage) {
    int any = 0;
    for (int i = 0; i < n; i++) {
        ptr[i] = sv[i].v->p;
        sv[i].dev = NULL;
        if (sv[i].v->p && !(kx->owns_ptr && kx->owns_ptr(ctx, sv[i].v->p))) any = 1;
    }
    *stage = any;
    if (!any) return CG_OK;
    cg_status s = CG_OK;
    for (int i = 0; i < n && s == CG_OK; i++) {
        if (!sv[i].v->p) continue;
        sv[i].bytes =
            (size_t)cg__view_span(sv[i].v, sv[i].n) * (sv[i].v->dt == CG_BF16 || sv[i].v->dt == CG_F16 ? 2 : 4);
        s = kx->alloc(ctx, sv[i].bytes, &sv[i].dev);
        /* outputs too: the gaps between their strided elements must survive the copy back */
        if (s == CG_OK) s = kx->copy(ctx, sv[i].dev, sv[i].v->p, sv[i].bytes, 0, stream);
        ptr[i] = sv[i].dev;
    }
    return s;
}

/* Copy staged outputs back (when s is CG_OK), synchronize, free; returns the status. */
static cg_status stage_out(cg_context *ctx, const cg_kexec *kx, staged *sv, int n, void *stream, cg_status s) {
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

/* ------------------------------------------------------------------ the op */

/* The plan entry of op for prob on kx with cfg (NULL: the default), or the reason in ctx. */
static cg_status gen_entry(cg_context *ctx, const cg_kexec *kx, const cg_op_desc *d, const void *prob,
                           const cg_cfg *cfg, plan_entry **out) {
    *out = NULL;
    if (!kx || !kx->device)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: this library was built without that kernel executor", d->name);
    /* the math class: F32 for any mix of float32 and 16-bit tensors (each tensor's
     * storage dtype is part of the kernel shape, and Lua refuses a kernel that was not
     * written for a 16-bit tensor it would get), F64 for the reference only */
    if (*(const cg_dtype *)((const char *)prob + d->dtype_off) != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: generated kernels take F32 tensors (got F64)", d->name);
    cg_devinfo dev;
    cg_status s = kx->device(ctx, &dev);
    if (s) return s;
    cg_shape shape;
    cg__shape_of_prob(d, prob, &shape);
    plan_entry *e = plan_get(ctx, kx, &dev, d, &shape, cfg);
    if (!e) return cg__err(ctx, CG_ENOMEM, "%s: out of memory for a plan", d->name);
    if (e->status != CG_OK) return cg__err(ctx, e->status, "%s", e->why);
    *out = e;
    return CG_OK;
}

/* 1 when the call can run: the plan of cfg exists, or cfg is refused but the default's
 * exists (the run then reports the refusal, and the dispatcher may take the default).
 * Either way the plan the run needs is made here, once. */
static int gen_supports(cg_context *ctx, const cg_kexec *kx, cg_op op, const void *prob, const cg_cfg *cfg) {
    const cg_op_desc *d = cg__op_desc(op);
    plan_entry *e;
    if (gen_entry(ctx, kx, d, prob, cfg, &e) == CG_OK) return 1;
    return cfg && cfg->n && gen_entry(ctx, kx, d, prob, NULL, &e) == CG_OK;
}

/* Pack the plan's arguments in order into buf (int64 slots; *n of them); cu: the
 * kernel-addressable cu_seqlens (or NULL). */
static void pack_args(const plan_entry *e, const cg_op_desc *d, const void *prob, float *const *ptr, void *ws,
                      const void *cu, int64_t *buf, size_t *n) {
    size_t k = 0;
    for (int i = 0; i < e->plan.narg; i++) {
        const cg_karg *a = &e->plan.arg[i];
        const int x = e->idx[i];
        switch (a->kind) {
        case CG_KARG_TENSOR: {
            const cg_view *v = cg__prob_view(d, prob, x);
            cg_ktensor t = {ptr[x], v->s[0], v->s[1], v->s[2], v->s[3]};
            if (d->t[x].flags & CG_TD_INDEX) t.s3 = v->dt == CG_I64; /* an index tensor (rank <= 2): its width */
            memcpy(buf + k, &t, sizeof t);
            k += sizeof t / sizeof *buf;
            break;
        }
        case CG_KARG_WS: {
            const cg_region *r = &e->plan.region[x];
            void *p = ws && r->bytes ? (char *)ws + r->offset : NULL;
            memcpy(buf + k++, &p, sizeof p);
            break;
        }
        case CG_KARG_SYM: buf[k++] = cg__prob_dim(d, prob, (cg_sym)x); break;
        case CG_KARG_INT: buf[k++] = a->value; break;
        case CG_KARG_CU: {
            const cg_view *v = cg__prob_cu(d, prob);
            cg_kcu c = {cu, v->s[0], v->dt == CG_I64};
            memcpy(buf + k, &c, sizeof c);
            k += sizeof c / sizeof *buf;
            break;
        }
        case CG_KARG_REAL: {
            double v;
            memcpy(&v, (const char *)prob + d->real[x].prob_off, sizeof v);
            memcpy(buf + k++, &v, sizeof v);
            break;
        }
        }
    }
    *n = k;
}

/* Compile (or fetch) and load e's module, once; refused under CUDA graph capture. */
static cg_status entry_load(cg_context *ctx, const cg_kexec *kx, plan_entry *e, void *stream) {
    if (e->module) return CG_OK;
    if (kx->capturing && kx->capturing(ctx, stream))
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "the stream is being captured into a CUDA graph and kernel %s is not loaded yet (compiling "
                       "and loading it would break the capture): call cg_prepare with the same arguments before "
                       "capturing",
                       e->plan.name);
    cg_jit_stats a, b;
    cg__jit_stats(&a);
    int64_t t0 = cg__jit_now_ns();
    cg_status s = kx->load(ctx, &e->plan, &e->module);
    double ms = (double)(cg__jit_now_ns() - t0) / 1e6;
    if (s != CG_OK) return s;
    ((plans_state *)ctx->part[CG_PART_PLANS].p)->loads++;
    /* Where it came from (the process-wide counters moved by this load; another thread's
     * load at the same time may blur the attribution, never the times) */
    cg__jit_stats(&b);
    if (b.compiles > a.compiles)
        snprintf(e->origin, sizeof e->origin, "compiled(render %.1f ms, nvrtc %.0f ms, load %.1f ms)", e->render_ms,
                 (double)(b.compile_ns - a.compile_ns) / 1e6, (double)(b.load_ns - a.load_ns) / 1e6);
    else if (b.disk_hits > a.disk_hits)
        snprintf(e->origin, sizeof e->origin, "%s(render %.1f ms, read %.1f ms, load %.1f ms)",
                 b.bundle_hits > a.bundle_hits ? "bundle" : "disk-cache", e->render_ms,
                 (double)(b.disk_ns - a.disk_ns) / 1e6, (double)(b.load_ns - a.load_ns) / 1e6);
    else snprintf(e->origin, sizeof e->origin, "loaded(render %.1f ms, %.1f ms)", e->render_ms, ms);
    return CG_OK;
}

int64_t cg__launch_loads(cg_context *ctx) {
    return ctx->part[CG_PART_PLANS].p ? ((plans_state *)ctx->part[CG_PART_PLANS].p)->loads : 0;
}

/* cg_prepare / cg_workspace_size: the plan (and with load its module and, when the
 * caller gives no large enough workspace, the context's scratch). */
static cg_status gen_prepare(cg_context *ctx, const cg_kexec *kx, cg_op op, const void *prob, const cg_cfg *cfg,
                             const cg_exec *ex, int load, size_t *bytes) {
    plan_entry *e;
    cg_status s = gen_entry(ctx, kx, cg__op_desc(op), prob, cfg, &e);
    if (s) return s;
    *bytes = (size_t)e->plan.workspace_bytes;
    if (!load) return CG_OK;
    void *ws;
    if ((s = entry_load(ctx, kx, e, ex ? ex->stream : NULL)) == CG_OK) s = workspace_get(ctx, kx, ex, *bytes, &ws);
    return s;
}

/* The run of both generated backends (their vtable's run): vt->kx is the executor. */
static cg_status gen_run(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                         const cg_exec *ex) {
    const cg_kexec *kx = vt->kx;
    const cg_op_desc *d = cg__op_desc(op);
    plan_entry *e;
    cg_status s = gen_entry(ctx, kx, d, prob, cfg, &e);
    if (s) return s;
    if ((s = entry_load(ctx, kx, e, ex ? ex->stream : NULL))) return s;

    /* Tensors the kernels cannot address are staged through kernel memory. */
    staged sv[CG_OP_MAX_TENSORS];
    float *ptr[CG_OP_MAX_TENSORS];
    CG_ASSERT(d->nt <= CG_OP_MAX_TENSORS);
    for (int i = 0; i < d->nt; i++) {
        memset(&sv[i], 0, sizeof sv[i]);
        sv[i].v = cg__prob_view(d, prob, i);
        cg__prob_extents(d, prob, i, sv[i].n);
        sv[i].output = d->t[i].role == CG_TD_OUT || (d->t[i].flags & CG_TD_INPLACE); /* staged back */
    }
    void *stream = ex ? ex->stream : NULL;
    int stage = 0;
    s = stage_in(ctx, kx, sv, d->nt, stream, ptr, &stage);
    /* cu_seqlens (a varlen call) stages like the tensors when the kernels cannot address it */
    const cg_view *cuv = d->varlen ? cg__prob_cu(d, prob) : NULL;
    const void *cu = cuv ? cuv->p : NULL;
    void *cu_dev = NULL;
    if (s == CG_OK && cu && !(kx->owns_ptr && kx->owns_ptr(ctx, cu))) {
        const size_t bytes = (size_t)(*cg__prob_nseq(d, prob) * cuv->s[0] + 1) * cg__dtype_size(cuv->dt);
        if ((s = kx->alloc(ctx, bytes, &cu_dev)) == CG_OK) s = kx->copy(ctx, cu_dev, cu, bytes, 0, stream);
        cu = cu_dev;
        stage = 1;
    }
    void *ws = NULL;
    if (s == CG_OK) s = workspace_get(ctx, kx, ex, (size_t)e->plan.workspace_bytes, &ws);
    if (s == CG_OK) {
        int64_t buf[CG_PLAN_MAX_ARGS * sizeof(cg_ktensor) / sizeof(int64_t)];
        size_t n = 0;
        pack_args(e, d, prob, ptr, ws, cu, buf, &n);
        for (int i = 0; i < e->plan.nlaunch && s == CG_OK; i++)
            s = kx->launch(ctx, e->module, &e->plan.launch[i], buf, n * sizeof *buf, stream);
    }
    if (stage) s = stage_out(ctx, kx, sv, d->nt, stream, s);
    if (cu_dev) kx->free(ctx, cu_dev); /* stage_out synchronized */
    if (s == CG_OK) {
        cg__dispatch_detail(ctx, "kernel=%s%s kernel_from=%s", e->plan.name,
                            stage ? " (staged through kernel memory)" : "", e->origin[0] ? e->origin : "process");
        e->origin[0] = '\0'; /* reported once: later calls find it in the process */
    }
    return s;
}

/* --------------------------------------------------------------- backends */

/* One backend per executor: the launcher over a different cg_kexec. */
#define CG_GEN_BACKEND(NAME, KX)                                                                                       \
    static int NAME##_supports(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg) {                       \
        return gen_supports(ctx, &KX, op, prob, cfg);                                                                  \
    }                                                                                                                  \
    static cg_status NAME##_prepare(cg_context *ctx, cg_op op, const void *prob, const cg_cfg *cfg, const cg_exec *ex, \
                                    int load, size_t *bytes) {                                                         \
        return gen_prepare(ctx, &KX, op, prob, cfg, ex, load, bytes);                                                  \
    }                                                                                                                  \
    const cg_backend_vt cg__backend_##NAME = {                                                                         \
        .name = #NAME,                                                                                                 \
        .supports = NAME##_supports,                                                                                   \
        .prepare = NAME##_prepare,                                                                                     \
        .run = gen_run, /* no trampoline: gen_run finds KX in the vtable */                                            \
        .kx = &KX,                                                                                                     \
        .half = CG_DTM_HALF,              /* per tensor as each kernel's Lua `half` list allows (refused there) */     \
        .varlen_kernels = CG_OP_MASK_ALL, /* every op's kernels take cu_seqlens (docs/varlen.md) */                    \
    };

CG_GEN_BACKEND(emulate, cg__kexec_emu)
CG_GEN_BACKEND(cuda, cg__kexec_cuda)
