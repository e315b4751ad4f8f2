/* varlen.c -- packed variable-length batches (cu_seqlens, docs/varlen.md) on the host
 * backends: each sequence runs as its own B = 1 problem over sub-views of the packed
 * tensors, so states start afresh at every sequence start and no chunk or segment ever
 * straddles a boundary. Per-token tensors are offset along T (L), states by the sequence
 * index; the gradients of the shared parameters (dA, dD, ddelta_bias) are summed over
 * the sequences in float64 and stored once. A 0-length sequence passes its state
 * through (hT = h0, dh0 = dhT; zero when absent). */
#include "backend.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

/* How tensor i of d is cut into sequences. */
typedef enum vl_kind { VL_TOKEN, VL_STATE, VL_SHARED_IN, VL_SHARED_OUT } vl_kind;

static vl_kind kind_of(const cg_op_desc *d, int i) {
    const cg_tdesc *t = &d->t[i];
    if (t->flags & CG_TD_PERSEQ) return VL_STATE;
    if (t->ext[0] == CG_SYM_B && t->ext[1] == d->seq) return VL_TOKEN;
    return t->role == CG_TD_OUT ? VL_SHARED_OUT : VL_SHARED_IN;
}

static int64_t numel(const int64_t n[4]) { return n[0] * n[1] * n[2] * n[3]; }

/* dst = src (or 0 when src is absent) over extents n. */
static void copy_state(const cg_view *dst, const cg_view *src, const int64_t n[4]) {
    for (int64_t a = 0; a < n[0]; a++)
        for (int64_t b = 0; b < n[1]; b++)
            for (int64_t c = 0; c < n[2]; c++)
                for (int64_t e = 0; e < n[3]; e++)
                    cg__vstore(dst, a, b, c, e, src->p ? cg__vload(src, a, b, c, e) : 0.0);
}

/* A 0-length sequence: its output state is its input state passed through. */
static void empty_seq(const cg_op_desc *d, const void *sub) {
    const int out = cg__op_tensor(d, d->bwd ? "dh0" : "hT"), in = cg__op_tensor(d, d->bwd ? "dhT" : "h0");
    CG_ASSERT(out >= 0 && in >= 0);
    const cg_view *o = cg__prob_view(d, sub, out);
    if (!o->p) return;
    int64_t n[4];
    cg__prob_extents(d, sub, out, n);
    copy_state(o, cg__prob_view(d, sub, in), n);
}

cg_status cg__varlen_run(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                         const cg_exec *exec) {
    const cg_op_desc *d = cg__op_desc(op);
    const cg_view *cu = cg__prob_cu(d, prob);
    const int64_t nseq = *cg__prob_nseq(d, prob);
    cg_prob_any sub;
    CG_ASSERT(d->prob_size <= sizeof sub);
    /* the offsets, read once (validated; an output can never move them under us) */
    int64_t *off = malloc((size_t)(nseq + 1) * sizeof *off);
    /* shared outputs: each sequence writes scratch[i]; acc[i] sums them in float64 */
    void *scratch[CG_OP_MAX_TENSORS] = {0};
    double *acc[CG_OP_MAX_TENSORS] = {0};
    cg_status s =
        off ? CG_OK : cg__err(ctx, CG_ENOMEM, "cu_seqlens: out of memory for %lld offsets", (long long)nseq + 1);
    for (int64_t i = 0; !s && i <= nseq; i++) off[i] = cg__cu_at(cu, i);
    for (int i = 0; !s && i < d->nt; i++) {
        const cg_view *v = cg__prob_view(d, prob, i);
        if (!v->p || kind_of(d, i) != VL_SHARED_OUT) continue;
        int64_t n[4];
        cg__prob_extents(d, prob, i, n);
        scratch[i] = calloc((size_t)numel(n), cg__dtype_size(v->dt));
        acc[i] = calloc((size_t)numel(n), sizeof(double));
        if (!scratch[i] || !acc[i])
            s = cg__err(ctx, CG_ENOMEM, "%s: out of memory for the per-sequence sums", d->t[i].name);
    }
    for (int64_t q = 0; !s && q < nseq; q++) {
        const int64_t t0 = off[q], len = off[q + 1] - off[q];
        memcpy(&sub, prob, d->prob_size);
        cg__prob_cu(d, &sub)->p = NULL;
        *cg__prob_nseq(d, &sub) = 0;
        *(int64_t *)((char *)&sub + d->dim_off[d->seq]) = len;
        for (int i = 0; i < d->nt; i++) {
            cg_view *v = cg__prob_view(d, &sub, i);
            if (!v->p) continue;
            const size_t es = cg__dtype_size(v->dt);
            switch (kind_of(d, i)) {
            case VL_TOKEN: v->p = (char *)v->p + (size_t)(t0 * v->s[1]) * es; break;
            case VL_STATE: v->p = (char *)v->p + (size_t)(q * v->s[0]) * es; break;
            case VL_SHARED_OUT: {
                int64_t n[4];
                cg__prob_extents(d, prob, i, n);
                v->p = scratch[i];
                v->s[3] = 1, v->s[2] = n[3], v->s[1] = n[3] * n[2], v->s[0] = n[3] * n[2] * n[1];
                break;
            }
            case VL_SHARED_IN: break;
            }
        }
        if (len == 0) {
            empty_seq(d, &sub);
            continue;
        }
        if ((s = cg__backend_entry(ctx, vt, op, &sub, cfg, exec)) != CG_OK) break;
        for (int i = 0; i < d->nt; i++) {
            if (!acc[i]) continue;
            const cg_view *v = cg__prob_view(d, &sub, i);
            int64_t n[4];
            cg__prob_extents(d, prob, i, n);
            for (int64_t k = 0, m = numel(n); k < m; k++)
                acc[i][k] += v->dt == CG_F64 ? ((const double *)v->p)[k] : (double)((const float *)v->p)[k];
        }
    }
    for (int i = 0; !s && i < d->nt; i++) {
        if (!acc[i]) continue;
        const cg_view *v = cg__prob_view(d, prob, i);
        int64_t n[4], k = 0;
        cg__prob_extents(d, prob, i, n);
        for (int64_t a = 0; a < n[0]; a++)
            for (int64_t b = 0; b < n[1]; b++)
                for (int64_t c = 0; c < n[2]; c++)
                    for (int64_t e = 0; e < n[3]; e++) cg__vstore(v, a, b, c, e, acc[i][k++]);
    }
    for (int i = 0; i < CG_OP_MAX_TENSORS; i++) free(scratch[i]), free(acc[i]);
    free(off);
    return s;
}
