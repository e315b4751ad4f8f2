/* gdr_cpu_chunk_fwd.c -- the gated delta rule's forward on the CPU by the chunked WY form
 * (MATH_GDN.md 2.1-2.4). Built once per ISA variant.
 *
 * One task per (b, q/k group) -- or per (b, value head) when the groups are fewer than
 * the threads -- walks the chunks in order with each head's state S [dk, dv] in
 * per-thread scratch (float32); q, k, K K^T and Q K^T are made once per group and chunk.
 * Per chunk of L <= C tokens and head (gdr_cpu_chunk_prep.c makes Q, K, A = (I + L)^{-1},
 * Wn = -W and U):
 *   Vn = U + Wn S                                              [L, dv]
 *   O  = [diag(e^G) Q | (Q K^T) . Dm] [S; Vn]                  [L, dv]  (one GEMM, causal in k)
 *   S  = e^{G_L} S + (diag(e^{G_L - G}) K)^T Vn
 * Dm_ij = e^{G_i - G_j} for j <= i. Tiles: R = [S; Vn] [dk + C, ldv] per head (the output
 * GEMM's B operand), Praw = Q K^T [C, Cp], Lt = [e^G Q | P] [C, dk + Cp], Ot [C, dvp]
 * (a 16-bit o is rounded from it; a float32 o is written in place, its dv columns only).
 * Each head's arithmetic is the same whatever the task split, so results are bitwise the
 * same on any number of threads. */
#include "gdr_cpu_chunk.h"

typedef struct fwd_job {
    const cg_gdr_prob *p;
    cg_gdr_dims d;
    int64_t nh; /* value heads per task: the q/k group's (q, k, K K^T and Q K^T once for them) or 1 */
    cg_gdr_scratch scratch;
} fwd_job;

static size_t fwd_floats(const cg_gdr_dims *d, int64_t nh) {
    const int64_t C = d->C;
    return cg__gdr_prep_floats(d) +
           (size_t)(cg__gdr_al(C * d->ldk) +                /* K */
                    cg__gdr_al(C * d->ldc) +                /* Praw */
                    nh * cg__gdr_al((d->dk + C) * d->ldv) + /* R per head */
                    cg__gdr_al(C * (d->dk + d->Cp)) +       /* Lt */
                    cg__gdr_al(C * d->dvp)) +
           16; /* Ot */
}

static void fwd_task(void *arg, int64_t idx, int tid) {
    const fwd_job *J = arg;
    const cg_gdr_prob *p = J->p;
    const cg_gdr_dims *d = &J->d;
    const int64_t nh = J->nh, nset = CG_DIM(p, H) / nh, b = idx / nset, hf = idx % nset * nh,
                  g = hf / (CG_DIM(p, H) / CG_DIM(p, G));
    const int64_t dk = d->dk, dv = d->dv, dvp = d->dvp, ldv = d->ldv, ldk = d->ldk, ldc = d->ldc, ldl = dk + d->Cp;
    const int64_t rsz = cg__gdr_al((dk + d->C) * ldv);
    cg_gdr_chunk c;
    float *f = cg__gdr_prep_layout(d, cg__gdr_scratch_at(&J->scratch, tid), &c);
    c.K = f, f += cg__gdr_al(d->C * ldk);
    float *Praw = f;
    f += cg__gdr_al(d->C * ldc);
    float *R0 = f;
    f += nh * rsz;
    float *Lt = f;
    f += cg__gdr_al(d->C * ldl);
    float *Ot = f;

    for (int64_t u = 0; u < nh; u++) {
        float *S = R0 + u * rsz;
        if (p->h0.p) {
            const float *h0 = CG_F32P(p->h0) + b * p->h0.s[0] + (hf + u) * p->h0.s[1];
            cg__ssd_copy_rows(S, ldv, h0, p->h0.s[2], dk, dv, dvp);
        } else {
            memset(S, 0, (size_t)(dk * ldv) * sizeof(float));
        }
    }
    const int o16 = cg__dtype_half(p->o.dt);
    const int64_t so = p->o.s[1];
    for (int64_t t0 = 0; t0 < CG_DIM(p, T); t0 += d->C) {
        const int64_t L = cg__ssd_min(d->C, CG_DIM(p, T) - t0), tn = t0 + d->C;
        /* the group's part: Q, K, K^T, K K^T, Q K^T */
        cg__gdr_prep_qk(p, d, b, g, t0, L, 1, 1, &c);
        cg__ssd_gemm(CG_SSD_NLOWER, L, d->Cp, dk, c.Q, ldk, 1, c.KT, ldc, Praw, ldc, 0);
        for (int64_t u = 0; u < nh && tn < CG_DIM(p, T); u++)
            cg__gdr_prefetch(p, b, hf + u, tn, cg__ssd_min(d->C, CG_DIM(p, T) - tn), 0);
        for (int64_t u = 0; u < nh; u++) {
            const int64_t h = hf + u, o0 = b * p->o.s[0] + h * p->o.s[2];
            float *R = R0 + u * rsz, *S = R, *Vn = R + dk * ldv;
            cg__gdr_prep_head(p, d, b, h, t0, 1, &c);
            cg__gdr_prep_vn(d, &c, S, Vn, ldv);
            /* Lt = [e^G Q | (Q K^T) . Dm] */
            for (int64_t i = 0; i < L; i++) {
                const float e = c.gam[i];
                const float *restrict q = c.Q + i * ldk;
                float *restrict l = Lt + i * ldl;
                for (int64_t x = 0; x < dk; x++) l[x] = e * q[x];
            }
            cg__ssd_decay_mask_from(Lt + dk, ldl, Praw, ldc, L, c.Ad, c.X);
            /* O = Lt [S; Vn] */
            float *Out = o16 ? Ot : CG_F32P(p->o) + o0 + t0 * so;
            cg__ssd_gemm_nc(CG_SSD_KLOWER, L, dvp, dv, dk, Lt, ldl, 1, R, ldv, Out, o16 ? dvp : so, 0, 1.0f);
            if (o16) cg__cpu_st_rows(cg__vat(&p->o, o0 + t0 * so), p->o.dt, so, Ot, dvp, L, dv);
            /* S = e^{G_L} S + Kw^T Vn (Kw read transposed in place) */
            cg__ssd_gemm_beta(CG_SSD_DENSE, dk, dvp, L, c.Kw, 1, ldk, Vn, ldv, S, ldv, 1, c.gamC);
        }
    }
    if (p->hT.p)
        for (int64_t u = 0; u < nh; u++) {
            const float *S = R0 + u * rsz;
            float *hT = CG_F32P(p->hT) + b * p->hT.s[0] + (hf + u) * p->hT.s[1];
            for (int64_t i = 0; i < dk; i++) memcpy(hT + i * p->hT.s[2], S + i * ldv, (size_t)dv * sizeof(float));
        }
}

cg_status cg__gdr_cpu_chunk_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    cg_gdr_run run;
    cg_status st = cg__gdr_chunk_resolve(ctx, p, cfg, 0, "cpu gdr forward (chunked)", &run);
    if (st != CG_OK || cg__gdr_chunk_empty(p)) return st; /* an error, or nothing to compute */
    fwd_job J = {.p = p, .d = cg__gdr_prep_dims(p, run.chunk)};
    /* a task per (b, q/k group) when those keep the threads busy, else per (b, value head):
     * the same arithmetic for each head either way (bitwise the same outputs) */
    J.nh = CG_DIM(p, B) * CG_DIM(p, G) >= run.threads ? CG_DIM(p, H) / CG_DIM(p, G) : 1;
    const size_t per = (fwd_floats(&J.d, J.nh) * sizeof(float) + 63) / 64 * 64, bytes = per * (size_t)run.nscratch;
    void *own;
    J.scratch.stride = per;
    if (!(J.scratch.mem = cg__gdr_ws(ctx, ex, bytes, &own)))
        return cg__err(ctx, CG_ENOMEM, "cpu gdr forward: out of memory for %d x %zu bytes of scratch", run.nscratch,
                       per);
    cg__pool_run(run.pool, run.threads, CG_DIM(p, B) * CG_DIM(p, H) / J.nh, fwd_task, &J);
    cg__ssd_big_free(own, bytes);
    cg__gdr_chunk_detail(ctx, "gdr_fwd", &run);
    return CG_OK;
}
