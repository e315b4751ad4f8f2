/* ssd_cpu_fwd.c -- SSD forward on the CPU by the chunked algorithm (KERNEL_MATH.md).
 *
 * One task per (b, h, dv block) walks the chunks in order and keeps the state tile
 * S [dk, bdv] in per-thread scratch. Per chunk of L <= C tokens, with A the cumulative
 * sum of log_alpha from the chunk's first token (in double):
 *   P   = (Q K^T) masked by exp(A_i - A_j), i >= j           [L, L]
 *   O   = [diag(e^A) Q | P] [S; V]                           [L, bdv]  (one GEMM, causal in k)
 *   S   = e^{A_last} S + (K diag(w))^T V,  w_j = e^{A_last - A_j}
 * Tiles (per thread, 64-byte aligned, columns zero-padded to 16); q is read in place as
 * the A operand of Q K^T, and the next chunk's rows are prefetched during this one:
 *   KT [dk, ldc]          k transposed (B operand of Q K^T; then scaled by w, A operand of the state update)
 *   Lt [C, dk + Cp]       [e^A Q | P] (A operand of the output GEMM)
 *   R  [dk + C, ldr]      [S; V] (B operand of the output GEMM; S is the state); ldr and
 *                         ldc padded off multiples of 256 bytes (cg__ssd_ld: rows 512 bytes
 *                         apart share cache sets, measured 20% slower state updates)
 *   Ot [C, bdvp]          output rows before the strided store (when bdv is not a multiple of 16)
 *   X  [2 C]              scratch of the decay mask */
#include "ssd_cpu.h"

#include <math.h>

typedef struct fwd_job {
    const cg_ssd_prob *p;
    int64_t C, Cp, bdv, nblk;
    cg_ssd_scratch scratch;
} fwd_job;

/* Scratch floats for one task. */
static size_t fwd_scratch_bytes(const cg_ssd_prob *p, int64_t C, int64_t bdv) {
    const int64_t Cp = cg__ssd_pad(C), dk = p->dk, wp = cg__ssd_pad(bdv);
    int64_t f = 0;
    f += cg__ssd_pad(dk * cg__ssd_ld(C)); /* KT */
    f += cg__ssd_pad(C * (dk + Cp));     /* Lt */
    f += cg__ssd_pad((dk + C) * cg__ssd_ld(wp)); /* R */
    f += cg__ssd_pad(C * wp);            /* Ot */
    f += 4 * cg__ssd_pad(C);             /* eA, w, X (2 C) */
    return (size_t)f * sizeof(float) + (size_t)cg__ssd_pad(C) * sizeof(double) + 64;
}

static void fwd_task(void *arg, int64_t idx, int tid) {
    const fwd_job *J = arg;
    const cg_ssd_prob *p = J->p;
    const int64_t dk = p->dk, T = p->T, C = J->C, Cp = J->Cp, hpg = p->H / p->G;
    const int64_t b = idx / (p->H * J->nblk), h = idx / J->nblk % p->H, jb = idx % J->nblk, g = h / hpg;
    const int64_t j0 = jb * J->bdv, w = cg__ssd_min(J->bdv, p->dv - j0), wp = cg__ssd_pad(w);
    const int64_t ldl = dk + Cp, ldr = cg__ssd_ld(wp), ldkt = cg__ssd_ld(C);

    float *mem = cg__ssd_scratch_at(&J->scratch, tid);
    float *restrict KT = mem;
    float *restrict Lt = KT + cg__ssd_pad(dk * ldkt);
    float *restrict R = Lt + cg__ssd_pad(C * ldl);
    float *restrict Ot = R + cg__ssd_pad((dk + C) * ldr);
    float *restrict eA = Ot + cg__ssd_pad(C * wp);
    float *restrict wv = eA + cg__ssd_pad(C);
    float *restrict X = wv + cg__ssd_pad(C);
    double *restrict Ad = (double *)(X + 2 * cg__ssd_pad(C));
    float *restrict S = R, *restrict V = R + dk * ldr;

    /* strided views of this (b, h, g, dv block) */
    const float *q = CG_F32P(p->q) + b * p->q.s[0] + g * p->q.s[2];
    const float *k = CG_F32P(p->k) + b * p->k.s[0] + g * p->k.s[2];
    const float *v = CG_F32P(p->v) + b * p->v.s[0] + h * p->v.s[2] + j0;
    const float *la = CG_F32P(p->la) + b * p->la.s[0] + h * p->la.s[2];
    float *o = CG_F32P(p->o) + b * p->o.s[0] + h * p->o.s[2] + j0;
    const int64_t sq = p->q.s[1], sk = p->k.s[1], sv = p->v.s[1], sl = p->la.s[1], so = p->o.s[1];

    if (p->h0.p) {
        const float *h0 = CG_F32P(p->h0) + b * p->h0.s[0] + h * p->h0.s[1] + j0;
        cg__ssd_copy_rows(S, ldr, h0, p->h0.s[2], dk, w, wp);
    } else {
        memset(S, 0, (size_t)(dk * ldr) * sizeof(float));
    }
    /* the output goes straight to o when its rows need no padding */
    const int direct = (w == wp);

    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t L = cg__ssd_min(C, T - t0);
        double acc = 0;
        for (int64_t i = 0; i < L; i++) {
            acc += cg__ssd_clamp_la(la[(t0 + i) * sl]);
            Ad[i] = acc;
        }
        const double Alast = Ad[L - 1];
        for (int64_t i = 0; i < L; i++) {
            eA[i] = cg__ssd_exp((float)Ad[i]);
            wv[i] = cg__ssd_exp((float)(Alast - Ad[i]));
        }
        const float gamma = eA[L - 1];

        /* tiles of this chunk */
        const float *qc = q + t0 * sq;
        for (int64_t i = 0; i < L; i++) {
            const float e = eA[i];
            float *restrict d = Lt + i * ldl;
            const float *restrict s = qc + i * sq;
            for (int64_t c = 0; c < dk; c++) d[c] = e * s[c];
        }
        cg__ssd_transpose(KT, ldkt, k + t0 * sk, sk, L, dk, Cp);
        cg__ssd_copy_rows(V, ldr, v + t0 * sv, sv, L, w, wp);

        /* P = Q K^T (lower triangle, in 16-column steps), then the decay mask */
        cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dk, qc, sq, 1, KT, ldkt, Lt + dk, ldl, 0);
        const int64_t tn = t0 + C, Ln = cg__ssd_min(C, T - tn); /* the next chunk */
        for (int64_t i = 0; i < Ln; i++) { /* its rows are read from memory while this chunk computes */
            cg__ssd_prefetch_rows(q + (tn + i) * sq, 0, 1, dk * 4);
            cg__ssd_prefetch_rows(k + (tn + i) * sk, 0, 1, dk * 4);
            cg__ssd_prefetch_rows(v + (tn + i) * sv, 0, 1, w * 4);
            cg__ssd_prefetchw_rows(o + (tn + i) * so, 0, 1, w * 4);
        }
        cg__ssd_decay_mask(Lt + dk, ldl, L, Ad, X); /* the output GEMM reads P[i, 0..i] only */
        /* O = [e^A Q | P] [S; V] */
        float *Out = direct ? o + t0 * so : Ot;
        const int64_t ldo = direct ? so : wp;
        cg__ssd_gemm(CG_SSD_KLOWER, L, wp, dk, Lt, ldl, 1, R, ldr, Out, ldo, 0);
        if (!direct)
            for (int64_t i = 0; i < L; i++) memcpy(o + (t0 + i) * so, Ot + i * wp, (size_t)w * sizeof(float));

        /* S = gamma S + (K diag(w))^T V */
        for (int64_t c = 0; c < dk; c++) {
            float *restrict kr = KT + c * ldkt;
            for (int64_t j = 0; j < L; j++) kr[j] *= wv[j];
        }
        cg__ssd_gemm_beta(CG_SSD_DENSE, dk, wp, L, KT, ldkt, 1, V, ldr, S, ldr, 1, gamma);
    }
    if (p->hT.p) {
        float *hT = CG_F32P(p->hT) + b * p->hT.s[0] + h * p->hT.s[1] + j0;
        for (int64_t i = 0; i < dk; i++) memcpy(hT + i * p->hT.s[2], S + i * ldr, (size_t)w * sizeof(float));
    }
}

cg_status cg__ssd_cpu_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    if (p->dtype != CG_F32) return cg__err(ctx, CG_EUNSUPPORTED, "cpu ssd forward: float32 tensors only");
    cg_ssd_cpu_run run;
    cg_status st = cg__ssd_cpu_resolve(ctx, p, cfg, 0, "cpu ssd forward", &run);
    if (st != CG_OK) return st;

    fwd_job J;
    memset(&J, 0, sizeof J);
    J.p = p;
    J.C = cg__ssd_min(run.chunk, p->T > 0 ? p->T : 1);
    J.Cp = cg__ssd_pad(J.C);
    J.bdv = run.block_dv; /* the default splits dv when there are fewer (b, h) tasks than threads */
    J.nblk = (p->dv + J.bdv - 1) / J.bdv;

    const size_t per = (fwd_scratch_bytes(p, J.C, J.bdv) + 63) / 64 * 64;
    J.scratch.stride = per;
    J.scratch.mem = cg__aligned_alloc(per * (size_t)run.nscratch);
    if (!J.scratch.mem)
        return cg__err(ctx, CG_ENOMEM, "cpu ssd forward: out of memory for %d x %zu bytes of scratch", run.nscratch,
                       per);
    cg__pool_run(run.pool, run.threads, p->B * p->H * J.nblk, fwd_task, &J);
    cg__aligned_free(J.scratch.mem);
    cg__dispatch_detail(ctx, "ssd_fwd chunk=%lld block_dv=%lld threads=%d (%s)", (long long)J.C, (long long)J.bdv,
                     run.threads, run.pinned ? "pinned" : "default");
    return CG_OK;
}
