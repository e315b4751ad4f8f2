/* ref_ckpt.h -- the checkpointed backward of the float64 references (ref_ssd.c, ref_gdr.c):
 * the state is kept at the start of every segment of ceil(sqrt(T)) tokens and recomputed
 * within a segment, so memory grows as sqrt(T) states. */
#ifndef CG_REF_CKPT_H
#define CG_REF_CKPT_H

#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* The segment length for T tokens (at least 1); *nseg: how many segments. */
static inline int64_t cg__ref_ckpt_seg(int64_t T, int64_t *nseg) {
    int64_t seg = (int64_t)ceil(sqrt((double)T));
    if (seg < 1) seg = 1;
    *nseg = (T + seg - 1) / seg;
    return seg;
}

/* n doubles for the backward of op (its name in the message), or NULL after a CG_ENOMEM
 * naming the sizes. */
static inline double *cg__ref_ckpt_mem(cg_context *ctx, const char *op, size_t n, int64_t T, int64_t dk,
                                       int64_t dv) {
    double *mem = malloc(n * sizeof(double));
    if (!mem)
        (void)cg__err(ctx, CG_ENOMEM, "ref %s backward: out of memory (%zu doubles for T=%lld, dk=%lld, dv=%lld)", op,
                      n, (long long)T, (long long)dk, (long long)dv);
    return mem;
}

#endif
