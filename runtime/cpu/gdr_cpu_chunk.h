/* gdr_cpu_chunk.h -- private pieces of the gated delta rule's chunked CPU path
 * (gdr_cpu_chunk*.c; the math: MATH_GDN.md sections 2-3 of the brief, the WY / UT
 * form; the entry points cg__gdr_cpu_chunk_fwd / _bwd are declared in internal.h).
 *
 * Files, one job each:
 *   gdr_cpu_chunk.c       compiled once: the config pins (chunk, threads), the dispatch line
 *   gdr_cpu_chunk_prep.c  per ISA: one chunk's quantities that do not depend on the state
 *                         (q, k normalised, the decays, K K^T, the triangular solve
 *                         A = (I + L)^{-1}, W, U, Vn), the q/k group's part apart
 *   gdr_cpu_chunk_fwd.c   per ISA: the forward (a task per (b, q/k group) or (b, value head))
 *   gdr_cpu_chunk_bwd.c   per ISA: the backward (likewise)
 * The per-ISA entry points are reached through cpu_isa.c's variant table (cpu_isa.h
 * renames the per-ISA symbols, these files' helpers included).
 *
 * Tiles are row-major floats, columns zero-padded to 16 (ssd_cpu.h), leading dimensions
 * from cg__ssd_ld. Everything is float32 but the chunk-local cumulative sums of g, kept
 * in double and rounded once per exponential (as the SSD path does). */
#ifndef CG_GDR_CPU_CHUNK_H
#define CG_GDR_CPU_CHUNK_H

#include "ssd_cpu.h" /* GEMM tiles, pads, exp, decay masks, cpu_half.h, internal.h (cg_gdr_prob) */

/* Resolved run parameters (gdr_cpu_chunk.c). */
typedef struct cg_gdr_run {
    int64_t chunk; /* chunk length, min(config chunk, T) */
    int threads;   /* threads the pool runs */
    int nscratch;  /* per-thread scratch blocks (the pool's size) */
    cg_pool *pool;
} cg_gdr_run;

/* Tile dimensions of one problem and chunk length. */
typedef struct cg_gdr_dims {
    int64_t C, Cp; /* chunk, padded */
    int64_t dk, dv, dkp, dvp;
    int64_t ldk, ldv, ldc; /* leading dims of [., dkp], [., dvp], [., Cp] tiles */
    int64_t ldwu;          /* of [., dkp + dvp] tiles (RHS, dW|dU) */
} cg_gdr_dims;

/* One chunk of one (b, value head), filled by cg__gdr_prep_chunk. Pointers are into the
 * caller's scratch (cg__gdr_prep_floats floats at `base`), except K, which the caller
 * places (the backward stacks it under S0^T). */
typedef struct cg_gdr_chunk {
    int64_t L;                /* tokens of this chunk, 1..C */
    float *Q;                 /* [C, ldk]  s * l2norm(q) (NULL: not loaded) */
    float *K;                 /* [C, ldk]  l2norm(k) (placed by the caller) */
    float *KT;                /* [dk, ldc] K transposed, columns L..Cp zero */
    float *Kw;                /* [C, ldk]  exp(G_L - G_r) k_r */
    float *KK;                /* [C, ldc]  K K^T, lower triangle with the diagonal */
    float *Lm;                /* [C, ldc]  L_ij = beta_i (k_i.k_j) e^{G_i - G_j}, j < i */
    float *A;                 /* [C, ldc]  (I + L)^{-1}, unit lower, zero above up to Cp */
    float *Vr;                /* [C, ldv]  v rows (float32, zero-padded) */
    float *RHS;               /* [C, ldwu] [-diag(beta gam) K | diag(beta) V] at columns 0 and dkp */
    float *Wn;                /* [C, ldk]  -W = A (-diag(beta gam) K) */
    float *gam, *wdec, *beta; /* [C] e^{G_r}, e^{G_L - G_r}, beta_r */
    float *X;                 /* [2 C] decay-mask scratch */
    double *Ad;               /* [C] G_r, chunk-local cumulative sum of g (double) */
    float gamC;               /* e^{G_L} */
} cg_gdr_chunk;

/* The tile dimensions of p at chunk C. */
cg_gdr_dims cg__gdr_prep_dims(const cg_gdr_prob *p, int64_t C);
/* Floats of scratch cg__gdr_prep_chunk needs (all tiles above but K). */
size_t cg__gdr_prep_floats(const cg_gdr_dims *d);
/* Lay the tiles out from base (64-byte aligned; returns the float after them). */
float *cg__gdr_prep_layout(const cg_gdr_dims *d, float *base, cg_gdr_chunk *c);

/* Rows [t0, t0 + L) of q (or k) of (b, group g), widened, L2-normalised when p->l2norm,
 * times mul, into dst [L, ld] (columns dk..ld-ish zero up to dkp). */
void cg__gdr_load_qk(const cg_gdr_prob *p, const cg_view *x, int64_t b, int64_t g, int64_t t0, int64_t L, float mul,
                     float *dst, int64_t ld, const cg_gdr_dims *d);
/* The q/k group g's part of the chunk [t0, t0 + L) (shared by its value heads): Q (when
 * want_q), K (into c->K, set by the caller), KT, and KK (when want_kk). */
void cg__gdr_prep_qk(const cg_gdr_prob *p, const cg_gdr_dims *d, int64_t b, int64_t g, int64_t t0, int64_t L,
                     int want_q, int want_kk, cg_gdr_chunk *c);
/* Value head h's part, after cg__gdr_prep_qk of its group: the decays, Kw, Vr, RHS, and
 * when solve Lm, A and Wn. */
void cg__gdr_prep_head(const cg_gdr_prob *p, const cg_gdr_dims *d, int64_t b, int64_t h, int64_t t0, int solve,
                       cg_gdr_chunk *c);
/* Both, for one head: everything of the chunk [t0, t0 + L) of (b, value head h) that does not depend on the
 * entering state: Q (when want_q), K (into c->K, set by the caller), KT, Kw, Vr, RHS, the
 * decays, and when solve KK, Lm, A and Wn (solve 0: the caller points KK, A, Wn at those
 * of an earlier call on the same chunk). */
void cg__gdr_prep_chunk(const cg_gdr_prob *p, const cg_gdr_dims *d, int64_t b, int64_t h, int64_t t0, int64_t L,
                        int want_q, int solve, cg_gdr_chunk *c);
/* Vn = U + Wn S0 = A diag(beta) V - W S0 into Vn [L, ldvn] (columns dv..dvp zero);
 * S0 [dk, ldv]. */
void cg__gdr_prep_vn(const cg_gdr_dims *d, const cg_gdr_chunk *c, const float *S0, float *Vn, int64_t ldvn);

/* A scalar of g or beta (any storage dtype) at element off. */
static inline float cg__gdr_ld(const cg_view *v, int64_t off) {
    switch (v->dt) {
    case CG_BF16: return cg__bf16_to_f32(((const uint16_t *)v->p)[off]);
    case CG_F16: return cg__f16_to_f32(((const uint16_t *)v->p)[off]);
    default: return ((const float *)v->p)[off];
    }
}
static inline void cg__gdr_st(const cg_view *v, int64_t off, float x) { cg__st1(v->p, off, v->dt, x); }

/* sum_{x < n} a[x] b[x], n a multiple of 16 (zero-padded tile rows): element x in lane
 * x mod 16, the lanes added pairwise (8 + 8, 4 + 4, ...): a fixed order on every ISA, and
 * independent chains instead of one of n dependent adds. */
typedef float cg_gdr_l16 __attribute__((vector_size(64), aligned(4), may_alias));
static inline float cg__gdr_dot16(const float *a, const float *b, int64_t n) {
    cg_gdr_l16 s = {0};
    for (int64_t x = 0; x < n; x += 16) s += *(const cg_gdr_l16 *)(a + x) * *(const cg_gdr_l16 *)(b + x);
    float r[16];
    memcpy(r, &s, sizeof r);
    for (int w = 8; w > 0; w >>= 1)
        for (int l = 0; l < w; l++) r[l] += r[l + w];
    return r[0];
}

/* Rows [t0, t0 + L) of the chunk a task reads next (q, k of head h's group, v, and dout
 * when bwd), soon in L2, so that its loads do not wait on memory. */
static inline void cg__gdr_prefetch(const cg_gdr_prob *p, int64_t b, int64_t h, int64_t t0, int64_t L, int bwd) {
    const int64_t g = h / (CG_DIM(p, H) / CG_DIM(p, G));
    for (int64_t i = t0; i < t0 + L; i++) {
        cg__ssd_prefetch_bytes(cg__vat(&p->q, b * p->q.s[0] + i * p->q.s[1] + g * p->q.s[2]),
                               CG_DIM(p, DK) * cg__dt_bytes(p->q.dt), 0);
        cg__ssd_prefetch_bytes(cg__vat(&p->k, b * p->k.s[0] + i * p->k.s[1] + g * p->k.s[2]),
                               CG_DIM(p, DK) * cg__dt_bytes(p->k.dt), 0);
        cg__ssd_prefetch_bytes(cg__vat(&p->v, b * p->v.s[0] + i * p->v.s[1] + h * p->v.s[2]),
                               CG_DIM(p, DV) * cg__dt_bytes(p->v.dt), 0);
        if (bwd)
            cg__ssd_prefetch_bytes(cg__vat(&p->dout, b * p->dout.s[0] + i * p->dout.s[1] + h * p->dout.s[2]),
                                   CG_DIM(p, DV) * cg__dt_bytes(p->dout.dt), 0);
    }
}

/* Per-thread scratch blocks. */
typedef struct cg_gdr_scratch {
    char *mem;
    size_t stride;
} cg_gdr_scratch;
static inline float *cg__gdr_scratch_at(const cg_gdr_scratch *s, int tid) {
    return (float *)(s->mem + (size_t)tid * s->stride);
}
static inline int64_t cg__gdr_al(int64_t n) { return (n + 15) / 16 * 16; } /* floats, to 64 bytes */

/* Scratch of `bytes` (64-byte aligned): the caller's workspace (ex) when large enough, else
 * the context's kept one (cg__ctx_host_ws: no page faults on every call), else a mapping
 * of its own (*own; cg__ssd_big_free it after). NULL when out of memory. */
static inline void *cg__gdr_ws(cg_context *ctx, const cg_exec *ex, size_t bytes, void **own) {
    *own = NULL;
    if (ex && ex->workspace && ex->workspace_bytes >= bytes + 64)
        return (void *)(((uintptr_t)ex->workspace + 63) / 64 * 64);
    void *w = cg__ctx_host_ws(ctx, bytes);
    return w ? w : (*own = cg__ssd_big_alloc(bytes));
}

/* Nothing to compute: no batch entry, no token or no head (the chunked kernels' early return). */
static inline int cg__gdr_chunk_empty(const cg_gdr_prob *p) {
    return CG_DIM(p, B) < 1 || CG_DIM(p, T) < 1 || CG_DIM(p, H) < 1;
}
/* Config pins (chunk, threads) into run, over generator/cpu/gdr_cpu.lua's default for the
 * direction (bwd); CG_EINVAL naming a bad one (gdr_cpu_chunk.c, compiled once; the kernels
 * of every variant call it). */
cg_status cg__gdr_chunk_resolve(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, int bwd, const char *what,
                                cg_gdr_run *run);
/* The kernels' dispatch line (backend detail of cg_last_dispatch). */
void cg__gdr_chunk_detail(cg_context *ctx, const char *op, const cg_gdr_run *run);

#endif /* CG_GDR_CPU_CHUNK_H */
