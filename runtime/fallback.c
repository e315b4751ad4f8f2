/* fallback.c -- the auto backend's answer to device pointers that no generated kernel
 * can take (a shape outside every config's constraints, an innermost stride the
 * kernels do not index, a library built without the CUDA executor's kernels).
 *
 * Issue 4's rule: no shape ever fails as "unsupported". So the call runs on the CPU
 * path: every present tensor is copied to host memory (the whole span its strides
 * cover, so the gaps of strided outputs go back unchanged), the CPU backend runs on
 * the host copies, and the outputs are copied back; the stream is synchronized. The
 * first such call in a process prints one warning to stderr, since this path is slow
 * and not capturable in a CUDA graph; every call says so on its dispatch line.
 *
 * Validation rejects outputs whose spans overlap anything else, so copying spans back
 * cannot clobber another tensor. */
#include "internal.h"
#include "gen.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mirror {
    cg_view *v;     /* the view in the local copy of the problem (repointed to host) */
    int64_t n[4];   /* logical extents */
    int output;
    void *dev;      /* the caller's pointer */
    void *host;
    size_t bytes;
} mirror;

#define MIRRORS_MAX 24

static void add(mirror *m, int *k, cg_view *v, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int output) {
    if (!v->p) return;
    CG_ASSERT(*k < MIRRORS_MAX);
    mirror *x = &m[(*k)++];
    memset(x, 0, sizeof *x);
    x->v = v;
    x->n[0] = n0, x->n[1] = n1, x->n[2] = n2, x->n[3] = n3;
    x->output = output;
    x->dev = v->p;
}

/* The tensors of an SSD problem with their logical extents (runtime/internal.h). */
static int ssd_mirrors(cg_ssd_prob *p, mirror *m) {
    const int64_t B = p->B, T = p->T, G = p->G, H = p->H, dk = p->dk, dv = p->dv;
    int k = 0;
    add(m, &k, &p->q, B, T, G, dk, 0);
    add(m, &k, &p->k, B, T, G, dk, 0);
    add(m, &k, &p->v, B, T, H, dv, 0);
    add(m, &k, &p->la, B, T, H, 1, 0);
    add(m, &k, &p->h0, B, H, dk, dv, 0);
    add(m, &k, &p->dout, B, T, H, dv, 0);
    add(m, &k, &p->dhT, B, H, dk, dv, 0);
    add(m, &k, &p->o, B, T, H, dv, 1);
    add(m, &k, &p->hT, B, H, dk, dv, 1);
    add(m, &k, &p->dq, B, T, G, dk, 1);
    add(m, &k, &p->dk_, B, T, G, dk, 1);
    add(m, &k, &p->dv_, B, T, H, dv, 1);
    add(m, &k, &p->dla, B, T, H, 1, 1);
    add(m, &k, &p->dh0, B, H, dk, dv, 1);
    return k;
}

static int sscan_mirrors(cg_sscan_prob *p, mirror *m) {
    const int64_t B = p->B, L = p->L, D = p->D, N = p->N, G = p->G;
    int k = 0;
    add(m, &k, &p->x, B, L, D, 1, 0);
    add(m, &k, &p->delta, B, L, D, 1, 0);
    add(m, &k, &p->A, D, N, 1, 1, 0);
    add(m, &k, &p->Bm, B, L, G, N, 0);
    add(m, &k, &p->Cm, B, L, G, N, 0);
    add(m, &k, &p->Dv, D, 1, 1, 1, 0);
    add(m, &k, &p->z, B, L, D, 1, 0);
    add(m, &k, &p->dbias, D, 1, 1, 1, 0);
    add(m, &k, &p->h0, B, D, N, 1, 0);
    add(m, &k, &p->dy, B, L, D, 1, 0);
    add(m, &k, &p->dhT, B, D, N, 1, 0);
    add(m, &k, &p->y, B, L, D, 1, 1);
    add(m, &k, &p->hT, B, D, N, 1, 1);
    add(m, &k, &p->dx, B, L, D, 1, 1);
    add(m, &k, &p->ddelta, B, L, D, 1, 1);
    add(m, &k, &p->dA, D, N, 1, 1, 1);
    add(m, &k, &p->dB, B, L, G, N, 1);
    add(m, &k, &p->dC, B, L, G, N, 1);
    add(m, &k, &p->dD, D, 1, 1, 1, 1);
    add(m, &k, &p->dz, B, L, D, 1, 1);
    add(m, &k, &p->ddbias, D, 1, 1, 1, 1);
    add(m, &k, &p->dh0, B, D, N, 1, 1);
    return k;
}

static size_t span_bytes(const mirror *x) {
    return (size_t)cg__view_span(x->v, x->n) * (x->v->dt == CG_F64 ? sizeof(double) : sizeof(float));
}

static atomic_int g_warned;

cg_status cg__host_fallback(cg_context *ctx, const cg_kexec *kx, const cg_backend_vt *cpu, cg_op op,
                            const void *prob, const cg_cfg *cfg, const cg_exec *ex, const char *why) {
    union {
        cg_ssd_prob ssd;
        cg_sscan_prob sscan;
    } local;
    mirror m[MIRRORS_MAX];
    int n;
    if (op == CG_OP_SSD_FWD || op == CG_OP_SSD_BWD) {
        local.ssd = *(const cg_ssd_prob *)prob;
        n = ssd_mirrors(&local.ssd, m);
    } else {
        local.sscan = *(const cg_sscan_prob *)prob;
        n = sscan_mirrors(&local.sscan, m);
    }
    void *stream = ex ? ex->stream : NULL;
    if (!atomic_exchange(&g_warned, 1))
        fprintf(stderr,
                "chunkgen: warning: device pointers but no CUDA kernel for this call (%s); running on the CPU "
                "through host copies (slow, synchronizes the stream; said once per process)\n",
                why && *why ? why : "no reason given");

    cg_status s = CG_OK;
    for (int i = 0; i < n && s == CG_OK; i++) {
        m[i].bytes = span_bytes(&m[i]);
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
        hx.backend = CG_BACKEND_CPU;
        hx.stream = NULL;
        hx.workspace = NULL; /* the caller's workspace is device memory */
        hx.workspace_bytes = 0;
        switch (op) {
        case CG_OP_SSD_FWD: s = cpu->ssd_fwd(ctx, &local.ssd, cfg, &hx); break;
        case CG_OP_SSD_BWD: s = cpu->ssd_bwd(ctx, &local.ssd, cfg, &hx); break;
        case CG_OP_SSCAN_FWD: s = cpu->sscan_fwd(ctx, &local.sscan, cfg, &hx); break;
        case CG_OP_SSCAN_BWD: s = cpu->sscan_bwd(ctx, &local.sscan, cfg, &hx); break;
        }
    }
    for (int i = 0; i < n && s == CG_OK; i++)
        if (m[i].output) s = kx->copy(ctx, m[i].dev, m[i].host, m[i].bytes, 0, stream);
    if (s == CG_OK) s = kx->sync(ctx, stream);
    for (int i = 0; i < n; i++) free(m[i].host);
    return s;
}
