/* sscan_cpu_tiles.h -- the selective scan's CPU path (sscan_cpu.c, its one user, built per
 * ISA variant) moving tensors in and out of its [step][channel] tiles: gathers from any
 * strides (widening bf16 / fp16), scatters back (rounding), per-channel vectors, A and
 * the states in lane-chunk layout. Uses SS_W, SS_PF_ROWS and SS_LOG2E of sscan_cpu.c. */
#ifndef CG_SSCAN_CPU_TILES_H
#define CG_SSCAN_CPU_TILES_H

/* ------------------------------------------------------------ gather/scatter */

/* Prefetch the row piece [p, p + bytes) (write: for a store). */
static inline void prefetch_row(const void *p, int64_t bytes, int write) {
    for (int64_t q = 0; q < bytes; q += 64) {
        if (write) __builtin_prefetch((const char *)p + q, 1);
        else __builtin_prefetch((const char *)p + q, 0);
    }
}

/* The [b, l, d] and [b, l, g, n] tensors (x, delta, z, dy, B, C and the outputs) may be
 * bf16 / fp16 (cpu_half.h): the gathers widen them as they copy, the scatters round. Each
 * gather / scatter is written once, inlined with a constant dtype (the switches of
 * cg__ld1 / cg__st1 then disappear) and picked per call, not per element. */
#define SS_DT_DISPATCH(dt, impl, ...)                                                                                  \
    do {                                                                                                               \
        switch (dt) {                                                                                                  \
        case CG_BF16: impl(__VA_ARGS__, CG_BF16); break;                                                               \
        case CG_F16: impl(__VA_ARGS__, CG_F16); break;                                                                 \
        default: impl(__VA_ARGS__, CG_F32); break;                                                                     \
        }                                                                                                              \
    } while (0)
#define SS_INLINE static inline __attribute__((always_inline))

/* dst[j] = src[j] for j < n: SS_W at a time, then the rest (a float32 row of a gather or
 * a scatter). */
SS_INLINE void copy_f32(float *restrict dst, const float *restrict src, int64_t n) {
    const int64_t nfull = n / SS_W * SS_W;
    for (int64_t j = 0; j < nfull; j += SS_W)
        for (int l = 0; l < SS_W; l++) dst[j + l] = src[j + l];
    for (int64_t j = nfull; j < n; j++) dst[j] = src[j];
}

/* out[i][j] = v[b, t0 + i, d0 + j] for i < len, j < nb; zero for nb <= j < ld.
 * The rows of a tile are D floats apart and short: each is a TLB and cache miss, so the
 * copy prefetches SS_PF_ROWS rows ahead to keep several misses in flight. */
SS_INLINE void gather_bl_dt(const cg_view *v, int64_t b, int64_t t0, int64_t len, int64_t d0, int64_t nb, int64_t ld,
                            float *restrict out, cg_dtype dt) {
    const char *base = cg__vat(v, b * v->s[0] + t0 * v->s[1] + d0 * v->s[2]);
    const int64_t s1 = v->s[1], s2 = v->s[2], es = cg__dt_bytes(dt);
    if (s2 != 1 && s1 == 1) { /* [B, D, L] memory: read each channel's steps in order */
        for (int64_t j = 0; j < nb; j++) {
            if (j + SS_PF_ROWS < nb) prefetch_row(base + (j + SS_PF_ROWS) * s2 * es, len * es, 0);
            const char *col = base + j * s2 * es;
            for (int64_t i = 0; i < len; i++) out[i * ld + j] = cg__ld1(col, i, dt);
        }
        for (int64_t i = 0; i < len; i++)
            for (int64_t j = nb; j < ld; j++) out[i * ld + j] = 0.0f;
        return;
    }
    for (int64_t i = 0; i < len; i++) {
        const char *row = base + i * s1 * es;
        float *o = out + i * ld;
        if (s2 == 1) {
            if (i + SS_PF_ROWS < len) prefetch_row(row + SS_PF_ROWS * s1 * es, nb * es, 0);
            if (dt == CG_F32) copy_f32(o, (const float *)row, nb);
            else cg__cpu_ld_row(o, row, dt, nb);
        } else {
            for (int64_t j = 0; j < nb; j++) o[j] = cg__ld1(row, j * s2, dt);
        }
        for (int64_t j = nb; j < ld; j++) o[j] = 0.0f;
    }
}
static void gather_bl(const cg_view *v, int64_t b, int64_t t0, int64_t len, int64_t d0, int64_t nb, int64_t ld,
                      float *restrict out) {
    SS_DT_DISPATCH(v->dt, gather_bl_dt, v, b, t0, len, d0, nb, ld, out);
}

SS_INLINE void scatter_bl_dt(const cg_view *v, int64_t b, int64_t t0, int64_t len, int64_t d0, int64_t nb, int64_t ld,
                             const float *restrict in, cg_dtype dt) {
    char *base = cg__vat(v, b * v->s[0] + t0 * v->s[1] + d0 * v->s[2]);
    const int64_t s1 = v->s[1], s2 = v->s[2], es = cg__dt_bytes(dt);
    if (s2 != 1 && s1 == 1) {
        for (int64_t j = 0; j < nb; j++) {
            if (j + SS_PF_ROWS < nb) prefetch_row(base + (j + SS_PF_ROWS) * s2 * es, len * es, 1);
            char *col = base + j * s2 * es;
            for (int64_t i = 0; i < len; i++) cg__st1(col, i, dt, in[i * ld + j]);
        }
        return;
    }
    for (int64_t i = 0; i < len; i++) {
        char *row = base + i * s1 * es;
        const float *src = in + i * ld;
        if (s2 == 1) {
            if (i + SS_PF_ROWS < len) prefetch_row(row + SS_PF_ROWS * s1 * es, nb * es, 1);
            if (dt == CG_F32) copy_f32((float *)row, src, nb);
            else cg__cpu_st_row(row, dt, src, nb);
        } else {
            for (int64_t j = 0; j < nb; j++) cg__st1(row, j * s2, dt, src[j]);
        }
    }
}
static void scatter_bl(const cg_view *v, int64_t b, int64_t t0, int64_t len, int64_t d0, int64_t nb, int64_t ld,
                       const float *restrict in) {
    SS_DT_DISPATCH(v->dt, scatter_bl_dt, v, b, t0, len, d0, nb, ld, in);
}

/* out[i][n] = v[b, t0 + i, g, n] (B or C rows of the group). */
SS_INLINE void gather_bc_dt(const cg_view *v, int64_t b, int64_t t0, int64_t len, int64_t g, int64_t N,
                            float *restrict out, cg_dtype dt) {
    const char *base = cg__vat(v, b * v->s[0] + t0 * v->s[1] + g * v->s[2]);
    const int64_t s1 = v->s[1], s3 = v->s[3], es = cg__dt_bytes(dt);
    for (int64_t i = 0; i < len; i++) {
        const char *row = base + i * s1 * es;
        float *o = out + i * N;
        for (int64_t n = 0; n < N; n++) o[n] = cg__ld1(row, n * s3, dt);
    }
}
static void gather_bc(const cg_view *v, int64_t b, int64_t t0, int64_t len, int64_t g, int64_t N, float *restrict out) {
    SS_DT_DISPATCH(v->dt, gather_bc_dt, v, b, t0, len, g, N, out);
}

/* v[b, t, g, n] = x[n] for n < N (a row of dB or dC) */
SS_INLINE void put_bc_dt(const cg_view *v, int64_t b, int64_t t, int64_t g, int64_t N, const float *restrict x,
                         cg_dtype dt) {
    char *row = cg__vat(v, b * v->s[0] + t * v->s[1] + g * v->s[2]);
    for (int64_t n = 0; n < N; n++) cg__st1(row, n * v->s[3], dt, x[n]);
}
static void put_bc(const cg_view *v, int64_t b, int64_t t, int64_t g, int64_t N, const float *restrict x) {
    SS_DT_DISPATCH(v->dt, put_bc_dt, v, b, t, g, N, x);
}

/* Per-channel vector v[d0 + j] (D, delta_bias) into out[ld]; zeros where absent. */
static void gather_d(const cg_view *v, int64_t d0, int64_t nb, int64_t ld, float *restrict out) {
    for (int64_t j = 0; j < ld; j++) out[j] = (v->p && j < nb) ? CG_F32P(*v)[(d0 + j) * v->s[0]] : 0.0f;
}

/* A block transposed to lane chunks and scaled for ss_exp2:
 * At[c][n][l] = A[d0 + c*W + l, n] * log2(e). */
static void gather_A(const cg_sscan_prob *p, int64_t d0, int64_t nb, int64_t nc, float *restrict At) {
    const int64_t N = CG_DIM(p, N);
    for (int64_t c = 0; c < nc; c++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t l = 0; l < SS_W; l++) {
                int64_t j = c * SS_W + l;
                At[(c * N + n) * SS_W + l] =
                    j < nb ? CG_F32P(p->A)[(d0 + j) * p->A.s[0] + n * p->A.s[1]] * SS_LOG2E : 0.0f;
            }
}

/* State [b, d0 + c*W + l, n] of h0/hT/dhT/dh0 <-> lane-chunk layout h[c][n][l]. */
static void gather_state(const cg_view *v, int64_t b, int64_t d0, int64_t nb, int64_t nc, int64_t N,
                         float *restrict h) {
    for (int64_t c = 0; c < nc; c++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t l = 0; l < SS_W; l++) {
                int64_t j = c * SS_W + l;
                h[(c * N + n) * SS_W + l] =
                    (v->p && j < nb) ? CG_F32P(*v)[b * v->s[0] + (d0 + j) * v->s[1] + n * v->s[2]] : 0.0f;
            }
}

static void scatter_state(const cg_view *v, int64_t b, int64_t d0, int64_t nb, int64_t nc, int64_t N,
                          const float *restrict h) {
    for (int64_t c = 0; c < nc; c++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t l = 0; l < SS_W && c * SS_W + l < nb; l++)
                CG_F32P(*v)[b * v->s[0] + (d0 + c * SS_W + l) * v->s[1] + n * v->s[2]] = h[(c * N + n) * SS_W + l];
}

#endif /* CG_SSCAN_CPU_TILES_H */
