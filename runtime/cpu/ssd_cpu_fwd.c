/* ssd_cpu_fwd.c -- SSD forward on the CPU by the chunked algorithm (KERNEL_MATH.md).
 *
 * One task per (b, h, dv block), or per (b, g, dv block) taking the group's heads in turn
 * (see cg__ssd_cpu_fwd), walks the chunks in order and keeps each head's state tile
 * S [dk, bdv] in per-thread scratch. Per chunk of L <= C tokens, with A the cumulative
 * sum of log_alpha from the chunk's first token (in double):
 *   P   = (Q K^T) masked by exp(A_i - A_j), i >= j           [L, L]
 *   O   = [diag(e^A) Q | P] [S; V]                           [L, bdv]  (one GEMM, causal in k)
 *   S   = e^{A_last} S + (K diag(w))^T V,  w_j = e^{A_last - A_j}
 * Tiles (per thread, 64-byte aligned, columns zero-padded to 16); q is read in place as
 * the A operand of Q K^T, and the next chunk's rows are prefetched during this one:
 *   KT [dk, ldc]          k transposed (B operand of Q K^T; then scaled by w, A operand of the state update)
 *   KTw [dk, ldc]         KT scaled by one head's w (group tasks; else KT is scaled in place)
 *   Praw [C, Cp]          Q K^T of the group (group tasks; else it goes straight into Lt)
 *   Lt [C, dk + Cp]       [e^A Q | P] (A operand of the output GEMM)
 *   R  [dk + C, ldr]      per head: [S; V] (B operand of the output GEMM; S is the state); ldr and
 *                         ldc padded off multiples of 256 bytes (cg__ssd_ld: rows 512 bytes
 *                         apart share cache sets, measured 20% slower state updates)
 *   Ot [C, bdvp]          output rows before the strided store when o is 16-bit (rounded as they
 *                         are stored; a float32 o is written in place, its w columns only)
 *   X  [2 C]              scratch of the decay mask
 *   Qw, Kw [C, ld(dk)]    q and k rows widened to float32, when they are bf16 / fp16 (cpu_half.h:
 *                         v is widened as it is copied into R; the float32 path reads q, k in place) */
#include "ssd_cpu.h"

#include <math.h>

typedef struct fwd_job {
    const cg_ssd_prob *p;
    int64_t C, Cp, bdv, nblk;
    int64_t nh; /* heads per task: 1, or the whole group (Q K^T computed once for them) */
    cg_ssd_scratch scratch;
} fwd_job;

/* Scratch floats for one task of nh heads. */
static size_t fwd_scratch_bytes(const cg_ssd_prob *p, int64_t C, int64_t bdv, int64_t nh) {
    const int qk16 = cg__dtype_half(p->q.dt) || cg__dtype_half(p->k.dt);
    const int64_t Cp = cg__ssd_pad(C), dk = CG_DIM(p, DK), wp = cg__ssd_pad(bdv);
    int64_t f = 0;
    f += cg__ssd_pad(dk * cg__ssd_ld(C));               /* KT */
    if (nh > 1) f += cg__ssd_pad(dk * cg__ssd_ld(C));   /* KTw */
    if (nh > 1) f += cg__ssd_pad(C * Cp);               /* Praw */
    f += cg__ssd_pad(C * (dk + Cp));                    /* Lt */
    f += nh * cg__ssd_pad((dk + C) * cg__ssd_ld(wp));   /* R per head */
    f += cg__ssd_pad(C * wp);                           /* Ot */
    f += 4 * cg__ssd_pad(C);                            /* eA, w, X (2 C) */
    if (qk16) f += 2 * cg__ssd_pad(C * cg__ssd_ld(dk)); /* Qw, Kw */
    return (size_t)f * sizeof(float) + (size_t)cg__ssd_pad(C) * sizeof(double) + 64;
}

static void fwd_task(void *arg, int64_t idx, int tid) {
    const fwd_job *J = arg;
    const cg_ssd_prob *p = J->p;
    const int64_t dk = CG_DIM(p, DK), T = CG_DIM(p, T), C = J->C, Cp = J->Cp, hpg = CG_DIM(p, H) / CG_DIM(p, G),
                  nh = J->nh, nset = CG_DIM(p, H) / nh;
    const int64_t b = idx / (nset * J->nblk), hf = idx / J->nblk % nset * nh, jb = idx % J->nblk, g = hf / hpg;
    const int64_t j0 = jb * J->bdv, w = cg__ssd_min(J->bdv, CG_DIM(p, DV) - j0), wp = cg__ssd_pad(w);
    const int64_t ldl = dk + Cp, ldr = cg__ssd_ld(wp), ldkt = cg__ssd_ld(C), rsz = cg__ssd_pad((dk + C) * ldr);

    float *mem = cg__ssd_scratch_at(&J->scratch, tid);
    float *restrict KT = mem;
    float *restrict KTw = nh > 1 ? KT + cg__ssd_pad(dk * ldkt) : KT; /* scaled per head; in place for one */
    float *restrict Praw = nh > 1 ? KTw + cg__ssd_pad(dk * ldkt) : NULL;
    float *restrict Lt = nh > 1 ? Praw + cg__ssd_pad(C * Cp) : KT + cg__ssd_pad(dk * ldkt);
    float *restrict R0 = Lt + cg__ssd_pad(C * ldl);
    float *restrict Ot = R0 + nh * rsz;
    float *restrict eA = Ot + cg__ssd_pad(C * wp);
    float *restrict wv = eA + cg__ssd_pad(C);
    float *restrict X = wv + cg__ssd_pad(C);
    double *restrict Ad = (double *)(X + 2 * cg__ssd_pad(C));
    const int q16 = cg__dtype_half(p->q.dt), k16 = cg__dtype_half(p->k.dt), v16 = cg__dtype_half(p->v.dt),
              o16 = cg__dtype_half(p->o.dt);
    const int64_t ldw = cg__ssd_ld(dk);
    float *restrict Qw = (float *)(Ad + cg__ssd_pad(C)), *restrict Kw = Qw + cg__ssd_pad(C * ldw);

    /* strided views of this (b, g, dv block), as element offsets (any storage dtype); per head below */
    const int64_t q = b * p->q.s[0] + g * p->q.s[2], k = b * p->k.s[0] + g * p->k.s[2];
    const int64_t v0 = b * p->v.s[0] + j0, o0 = b * p->o.s[0] + j0;
    const float *la0 = CG_F32P(p->la) + b * p->la.s[0];
    const int64_t sq = p->q.s[1], sk = p->k.s[1], sv = p->v.s[1], sl = p->la.s[1], so = p->o.s[1];
    const int64_t eq = cg__dt_bytes(p->q.dt), ek = cg__dt_bytes(p->k.dt), ev = cg__dt_bytes(p->v.dt),
                  eo = cg__dt_bytes(p->o.dt);

    for (int64_t u = 0; u < nh; u++) {
        float *S = R0 + u * rsz;
        if (p->h0.p) {
            const float *h0 = CG_F32P(p->h0) + b * p->h0.s[0] + (hf + u) * p->h0.s[1] + j0;
            cg__ssd_copy_rows(S, ldr, h0, p->h0.s[2], dk, w, wp);
        } else {
            memset(S, 0, (size_t)(dk * ldr) * sizeof(float));
        }
    }
    /* the output goes straight to o (its w columns of each row) unless it is rounded to 16 bits */
    const int direct = !o16;

    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t L = cg__ssd_min(C, T - t0);
        /* q of the chunk: in place, or widened into Qw; likewise k before its transpose */
        const float *qc = (const float *)cg__vat(&p->q, q + t0 * sq);
        int64_t sqc = sq;
        if (q16) {
            cg__cpu_ld_rows(Qw, ldw, qc, p->q.dt, sq, L, dk, dk);
            qc = Qw, sqc = ldw;
        }
        if (k16) {
            cg__cpu_ld_rows(Kw, ldw, cg__vat(&p->k, k + t0 * sk), p->k.dt, sk, L, dk, dk);
            cg__ssd_transpose(KT, ldkt, Kw, ldw, L, dk, Cp);
        } else {
            cg__ssd_transpose(KT, ldkt, CG_F32P(p->k) + k + t0 * sk, sk, L, dk, Cp);
        }
        /* Q K^T of the group (lower triangle, in 16-column steps): into Lt when one head
         * takes it, else once into Praw for all nh */
        if (nh > 1) cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dk, qc, sqc, 1, KT, ldkt, Praw, Cp, 0);
        else cg__ssd_gemm(CG_SSD_NLOWER, L, Cp, dk, qc, sqc, 1, KT, ldkt, Lt + dk, ldl, 0);
        const int64_t tn = t0 + C, Ln = cg__ssd_min(C, T - tn); /* the next chunk */
        for (int64_t i = 0; i < Ln; i++) { /* its rows are read from memory while this chunk computes */
            cg__ssd_prefetch_bytes(cg__vat(&p->q, q + (tn + i) * sq), dk * eq, 0);
            cg__ssd_prefetch_bytes(cg__vat(&p->k, k + (tn + i) * sk), dk * ek, 0);
            for (int64_t u = 0; u < nh; u++) {
                cg__ssd_prefetch_bytes(cg__vat(&p->v, v0 + (hf + u) * p->v.s[2] + (tn + i) * sv), w * ev, 0);
                cg__ssd_prefetch_bytes(cg__vat(&p->o, o0 + (hf + u) * p->o.s[2] + (tn + i) * so), w * eo, 1);
            }
        }
        for (int64_t u = 0; u < nh; u++) {
            const int64_t h = hf + u;
            const float *la = la0 + h * p->la.s[2];
            const int64_t v = v0 + h * p->v.s[2], o = o0 + h * p->o.s[2];
            float *restrict S = R0 + u * rsz, *restrict V = S + dk * ldr;
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

            /* Lt = [e^A Q | P]: P masked by this head's decays; [S; V] */
            for (int64_t i = 0; i < L; i++) {
                const float e = eA[i];
                float *restrict d = Lt + i * ldl;
                const float *restrict s = qc + i * sqc;
                for (int64_t c = 0; c < dk; c++) d[c] = e * s[c];
            }
            /* P masked (from the group's Praw, or in place); the output GEMM reads P[i, 0..i] only */
            if (nh > 1) cg__ssd_decay_mask_from(Lt + dk, ldl, Praw, Cp, L, Ad, X);
            else cg__ssd_decay_mask(Lt + dk, ldl, L, Ad, X);
            if (v16) cg__cpu_ld_rows(V, ldr, cg__vat(&p->v, v + t0 * sv), p->v.dt, sv, L, w, wp);
            else cg__ssd_copy_rows(V, ldr, CG_F32P(p->v) + v + t0 * sv, sv, L, w, wp);

            /* O = [e^A Q | P] [S; V] */
            float *Out = direct ? CG_F32P(p->o) + o + t0 * so : Ot;
            const int64_t ldo = direct ? so : wp;
            cg__ssd_gemm_nc(CG_SSD_KLOWER, L, wp, w, dk, Lt, ldl, 1, S, ldr, Out, ldo, 0, 1.0f);
            if (o16) cg__cpu_st_rows(cg__vat(&p->o, o + t0 * so), p->o.dt, so, Ot, wp, L, w);

            /* S = gamma S + (K diag(w))^T V */
            for (int64_t c = 0; c < dk; c++) {
                const float *restrict kr = KT + c * ldkt;
                float *restrict kw = KTw + c * ldkt;
                for (int64_t j = 0; j < L; j++) kw[j] = kr[j] * wv[j];
            }
            cg__ssd_gemm_beta(CG_SSD_DENSE, dk, wp, L, KTw, ldkt, 1, V, ldr, S, ldr, 1, gamma);
        }
    }
    if (p->hT.p)
        for (int64_t u = 0; u < nh; u++) {
            const float *S = R0 + u * rsz;
            float *hT = CG_F32P(p->hT) + b * p->hT.s[0] + (hf + u) * p->hT.s[1] + j0;
            for (int64_t i = 0; i < dk; i++) memcpy(hT + i * p->hT.s[2], S + i * ldr, (size_t)w * sizeof(float));
        }
}

cg_status cg__ssd_cpu_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)ex;
    /* dtypes: checked by the entry point (cpu_isa.c) */
    cg_ssd_cpu_run run;
    cg_status st = cg__ssd_cpu_resolve(ctx, p, cfg, 0, "cpu ssd forward", &run);
    if (st != CG_OK) return st;

    fwd_job J = {.p = p, .C = run.chunk, .Cp = run.chunk_pad};
    J.bdv = run.block_dv; /* the default splits dv when there are fewer (b, h) tasks than threads */
    J.nblk = (CG_DIM(p, DV) + J.bdv - 1) / J.bdv;
    /* A task takes a whole group of heads (Q K^T once per group, q and k read once) or one
     * head: the config's heads = group | each (generator/cpu/ssd_cpu.lua decides the default). */
    J.nh = run.group_heads && CG_DIM(p, H) / CG_DIM(p, G) > 1 ? CG_DIM(p, H) / CG_DIM(p, G) : 1;

    const size_t per = (fwd_scratch_bytes(p, J.C, J.bdv, J.nh) + 63) / 64 * 64;
    J.scratch.stride = per;
    J.scratch.mem = cg__aligned_alloc(per * (size_t)run.nscratch);
    if (!J.scratch.mem)
        return cg__err(ctx, CG_ENOMEM, "cpu ssd forward: out of memory for %d x %zu bytes of scratch", run.nscratch,
                       per);
    cg__pool_run(run.pool, run.threads, CG_DIM(p, B) * (CG_DIM(p, H) / J.nh) * J.nblk, fwd_task, &J);
    cg__aligned_free(J.scratch.mem);
    cg__dispatch_detail(ctx, "ssd_fwd chunk=%lld block_dv=%lld heads=%s threads=%d (%s)", (long long)J.C,
                        (long long)J.bdv, J.nh > 1 ? "group" : "each", run.threads, run.pinned ? "pinned" : "default");
    return CG_OK;
}
