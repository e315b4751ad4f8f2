/* ref_ckpt.h -- the checkpointed backward of the float64 references (ref_ssd.c, ref_gdr.c):
 * the state is kept at the start of every segment of ceil(sqrt(T)) tokens and recomputed
 * within a segment, so memory grows as sqrt(T) states. */
#ifndef CG_REF_CKPT_H
#define CG_REF_CKPT_H

#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* The storage of a checkpointed backward over T tokens of dk x dv states (ss doubles each),
 * in one allocation (mem: free it): ckpt[c], the state before token c*seg (nseg of them,
 * segments of seg = ceil(sqrt(T)) tokens, at least 1); st[u], the state after token t0+u-1
 * of the current segment [t0, t0 + seg) (seg + 1 of them, st[0] = ckpt[c]); then rest, the
 * caller's scratch. */
typedef struct cg_ref_ckpt {
    int64_t seg, nseg, ss;
    double *mem, *ckpt, *st, *rest;
} cg_ref_ckpt;

/* *c for the backward of op (its name in the message) with `scratch` doubles of rest;
 * CG_ENOMEM naming the sizes when the allocation fails. */
static inline cg_status cg__ref_ckpt_alloc(cg_context *ctx, const char *op, int64_t T, int64_t dk, int64_t dv,
                                           int64_t scratch, cg_ref_ckpt *c) {
    c->mem = c->ckpt = c->st = c->rest = NULL; /* also on the CG_ENOMEM return */
    c->ss = dk * dv;
    c->seg = (int64_t)ceil(sqrt((double)T));
    if (c->seg < 1) c->seg = 1;
    c->nseg = (T + c->seg - 1) / c->seg;
    const size_t n = (size_t)((c->nseg + c->seg + 1) * c->ss + scratch);
    c->mem = malloc(n * sizeof(double));
    if (!c->mem)
        return cg__err(ctx, CG_ENOMEM, "ref %s backward: out of memory (%zu doubles for T=%lld, dk=%lld, dv=%lld)", op,
                       n, (long long)T, (long long)dk, (long long)dv);
    c->ckpt = c->mem, c->st = c->ckpt + c->nseg * c->ss, c->rest = c->st + (c->seg + 1) * c->ss;
    return CG_OK;
}

#endif
