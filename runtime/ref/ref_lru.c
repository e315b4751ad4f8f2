/* ref_lru.c -- float64 sequential reference of the diagonal linear recurrence (LRU, the
 * form RG-LRU and Griffin use; docs/lru.md), forward and hand-written backward.
 *
 * Per (b, channel d), h = h0 (or 0) before token 0:
 *   h_t = a_t h_{t-1} + b_t x_t,   y_t = h_t;   hT = h_{L-1}.
 * Backward, with g the gradient of h_t (dhT or 0 after the last token), t = L-1 .. 0:
 *   g = dy_t + g;  da_t = g h_{t-1};  db_t = g x_t;  dx_t = g b_t;  g = a_t g.
 * Then dh0 = g (= a_0 times the gradient of h_0). That is g_t = dy_t + a_{t+1} g_{t+1}.
 * h_{t-1} comes from a forward pass kept per channel (L + 1 doubles). Plain loops, all
 * math in double; views of any dtype and strides through cg__vload / cg__vstore. */
#include "internal.h"

#include <stdlib.h>

static double state_at(const cg_view *v, int64_t b, int64_t d) { return v->p ? cg__vload(v, b, d, 0, 0) : 0; }

cg_status cg__lru_ref_fwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ctx;
    (void)cfg;
    (void)ex;
    for (int64_t b = 0; b < CG_DIM(p, B); b++)
        for (int64_t d = 0; d < CG_DIM(p, D); d++) {
            double h = state_at(&p->h0, b, d);
            for (int64_t t = 0; t < CG_DIM(p, L); t++) {
                h = cg__vload(&p->a, b, t, d, 0) * h + cg__vload(&p->b, b, t, d, 0) * cg__vload(&p->x, b, t, d, 0);
                cg__vstore(&p->y, b, t, d, 0, h);
            }
            if (p->hT.p) cg__vstore(&p->hT, b, d, 0, 0, h);
        }
    return CG_OK;
}

cg_status cg__lru_ref_bwd(cg_context *ctx, const cg_lru_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    double *hs = malloc((size_t)(CG_DIM(p, L) + 1) * sizeof *hs); /* hs[t] = h_{t-1} */
    if (!hs)
        return cg__err(ctx, CG_ENOMEM, "ref lru backward: out of memory for %lld states", (long long)CG_DIM(p, L) + 1);
    for (int64_t b = 0; b < CG_DIM(p, B); b++)
        for (int64_t d = 0; d < CG_DIM(p, D); d++) {
            hs[0] = state_at(&p->h0, b, d);
            for (int64_t t = 0; t < CG_DIM(p, L); t++)
                hs[t + 1] =
                    cg__vload(&p->a, b, t, d, 0) * hs[t] + cg__vload(&p->b, b, t, d, 0) * cg__vload(&p->x, b, t, d, 0);
            double g = state_at(&p->dhT, b, d);
            for (int64_t t = CG_DIM(p, L) - 1; t >= 0; t--) {
                g += cg__vload(&p->dy, b, t, d, 0);
                cg__vstore(&p->grad_a, b, t, d, 0, g * hs[t]);
                cg__vstore(&p->grad_b, b, t, d, 0, g * cg__vload(&p->x, b, t, d, 0));
                cg__vstore(&p->grad_x, b, t, d, 0, g * cg__vload(&p->b, b, t, d, 0));
                g *= cg__vload(&p->a, b, t, d, 0);
            }
            if (p->grad_h0.p) cg__vstore(&p->grad_h0, b, d, 0, 0, g);
        }
    free(hs);
    return CG_OK;
}

CG_HOST_OP_ENTRY(ref, lru_fwd, cg_lru_prob, cg__lru_ref_fwd)
CG_HOST_OP_ENTRY(ref, lru_bwd, cg_lru_prob, cg__lru_ref_bwd)
