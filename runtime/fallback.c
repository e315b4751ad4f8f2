/* fallback.c -- the auto backend's answer to device pointers that no generated kernel
 * can take (a shape outside every config's constraints, an innermost stride the
 * kernels do not index, a library built without the CUDA executor's kernels).
 *
 * Issue 4's rule: no shape ever fails as "unsupported". So the call runs on a host
 * backend (cpu; ref for float64 calls): every present tensor is copied to host memory
 * (the whole span its strides cover, so the gaps of strided outputs go back unchanged),
 * that backend runs on the host copies, and the outputs are copied back; the stream is synchronized. The
 * first such call in a process prints one warning to stderr, since this path is slow
 * and not capturable in a CUDA graph; every call says so on its dispatch line.
 *
 * Validation rejects outputs whose spans overlap anything else, so copying spans back
 * cannot clobber another tensor. */
#include "ops.h"
#include "gen.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mirror {
    cg_view *v; /* the view in the local copy of the problem (repointed to host) */
    int output;
    void *dev; /* the caller's pointer */
    void *host;
    size_t bytes;
} mirror;

/* Every present tensor of the problem (ops.h), with the bytes its strides span. */
static int mirrors(const cg_op_desc *d, void *prob, mirror *m) {
    int k = 0;
    for (int i = 0; i < d->nt; i++) {
        cg_view *v = cg__prob_view(d, prob, i);
        if (!v->p) continue;
        int64_t n[4];
        cg__prob_extents(d, prob, i, n);
        mirror *x = &m[k++];
        memset(x, 0, sizeof *x);
        x->v = v;
        x->output = d->t[i].role == CG_TD_OUT || (d->t[i].flags & CG_TD_INPLACE); /* copied back */
        x->dev = v->p;
        x->bytes = (size_t)cg__view_span(v, n) * cg__dtype_size(v->dt); /* the storage dtype's bytes */
    }
    return k;
}

static atomic_int g_warned;

cg_status cg__host_fallback(cg_context *ctx, const cg_kexec *kx, const cg_backend_vt *host, cg_op op, const void *prob,
                            const cg_cfg *cfg, const cg_exec *ex, const char *why) {
    const cg_op_desc *d = cg__op_desc(op);
    cg_prob_any local;
    CG_ASSERT(d->prob_size <= sizeof local);
    memcpy(&local, prob, d->prob_size);
    mirror m[CG_OP_MAX_TENSORS];
    int n = mirrors(d, &local, m);
    void *stream = ex ? ex->stream : NULL;
    if (!atomic_exchange(&g_warned, 1))
        cg__log(CG_LOG_WARN,
                "device pointers but no CUDA kernel for this call (%s); running on host backend %s through "
                "host copies (slow, synchronizes the stream; said once per process)",
                why && *why ? why : "no reason given", host->name);

    cg_status s = CG_OK;
    for (int i = 0; i < n && s == CG_OK; i++) {
        m[i].host = malloc(m[i].bytes ? m[i].bytes : 1);
        if (!m[i].host) {
            s = cg__err(ctx, CG_ENOMEM, "out of host memory for a %zu-byte copy of a device tensor", m[i].bytes);
            break;
        }
        /* outputs too: the gaps between their strided elements go back unchanged */
        s = kx->copy(ctx, m[i].host, m[i].dev, m[i].bytes, 1, stream);
        m[i].v->p = m[i].host;
    }
    if (s == CG_OK) s = kx->sync(ctx, stream);
    if (s == CG_OK) {
        cg_exec hx;
        memset(&hx, 0, sizeof hx);
        if (ex) hx = *ex;
        hx.backend = strcmp(host->name, "ref") == 0 ? CG_BACKEND_REF : CG_BACKEND_CPU;
        hx.stream = NULL;
        hx.workspace = NULL; /* the caller's workspace is device memory */
        hx.workspace_bytes = 0;
        s = cg__backend_run(ctx, host, op, &local, cfg, &hx);
    }
    for (int i = 0; i < n && s == CG_OK; i++)
        if (m[i].output) s = kx->copy(ctx, m[i].dev, m[i].host, m[i].bytes, 0, stream);
    if (s == CG_OK) s = kx->sync(ctx, stream);
    for (int i = 0; i < n; i++) free(m[i].host);
    return s;
}
