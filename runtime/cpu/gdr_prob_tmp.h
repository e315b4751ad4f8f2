/* gdr_prob_tmp.h -- TEMPORARY: the gated delta rule's problem struct as the contract
 * (notes/gdr-contract.md) fixes it, until the gdr branch brings it into runtime/internal.h.
 * Deleted at that merge. */
#ifndef CG_GDR_PROB_TMP_H
#define CG_GDR_PROB_TMP_H
#include "internal.h"
typedef struct cg_gdr_prob {
    int64_t B, T, G, H, dk, dv;
    cg_dtype dtype;
    double scale;        /* resolved: never 0 */
    int l2norm;          /* use_qk_l2norm */
    cg_view q, k, v, g, beta, h0;                       /* inputs */
    cg_view o, hT;                                      /* forward outputs */
    cg_view dout, dhT;                                  /* backward inputs */
    cg_view grad_q, grad_k, grad_v, grad_g, grad_beta, grad_h0; /* backward outputs */
    int64_t nseq;        /* varlen: N sequences packed along T; 0: none */
    cg_view cu;          /* cu_seqlens [N + 1], p NULL when absent */
} cg_gdr_prob;
#endif
