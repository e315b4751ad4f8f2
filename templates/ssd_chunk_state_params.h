/* ssd_chunk_state_params.h -- the one argument of the ssd_chunk_state kernel.
 * C-compatible: included by host C code and inlined into the rendered kernel. */
#ifndef CG_SSD_CHUNK_STATE_PARAMS_H
#define CG_SSD_CHUNK_STATE_PARAMS_H

#if defined(__CUDACC_RTC__)
/* NVRTC has no <stdint.h>; repeating an identical typedef is legal C++. */
typedef long long int64_t;
#else
#include <stdint.h>
#endif

/* Strides in elements; the innermost dimension of every tensor has stride 1. */
typedef struct cg_ssd_chunk_state_params {
    const float *k;    /* [B, T, G, dk] keys */
    const float *v;    /* [B, T, H, dv] values */
    const float *la;   /* [B, T, H] log decay (log_alpha) */
    float *U;          /* out: [B, H, NC, dk, dv] chunk-local states (K * w)^T V */
    float *gamma;      /* out: [B, H, NC] exp(A_last) of each chunk */
    int64_t k_sb, k_st, k_sg;
    int64_t v_sb, v_st, v_sh;
    int64_t la_sb, la_st, la_sh;
    int64_t U_sb, U_sh, U_sc, U_si;
    int64_t gamma_sb, gamma_sh;
    int64_t B, T, G, H, dk, dv;
    int64_t nchunks;   /* ceil(T / chunk) */
} cg_ssd_chunk_state_params;

#endif /* CG_SSD_CHUNK_STATE_PARAMS_H */
