/* ssd_cpu.h -- private pieces shared by the SSD CPU path (ssd_cpu*.c): a register-blocked
 * float GEMM with the causal shapes the chunked algorithm needs, a vectorizable exp, tile
 * copies and the resolved run parameters.
 *
 * Every matrix is row-major with a leading dimension in floats. B and C operands are read
 * and written 16 floats at a time, so their column counts are multiples of 16 (the tiles
 * are zero-padded to that); A is read one scalar at a time and may be any strided block,
 * even user memory. */
#ifndef CG_SSD_CPU_H
#define CG_SSD_CPU_H

#include "cpu_half.h" /* cpu_isa.h, internal.h, the per-ISA names; bf16 / fp16 rows */

#include <stdint.h>
#include <string.h>

#define CG_SSD_VL 16 /* tile padding in floats: one AVX-512 vector, two AVX2, four SSE */

static inline int64_t cg__ssd_pad(int64_t n) { return (n + CG_SSD_VL - 1) / CG_SSD_VL * CG_SSD_VL; }
static inline int64_t cg__ssd_min(int64_t a, int64_t b) { return a < b ? a : b; }
/* The leading dimension of a tile whose rows hold pad(n) floats: one vector more when that
 * is a multiple of 64 floats (256 bytes), so that the rows of a B panel (64 bytes wide,
 * K rows) spread over every L1 set instead of a quarter or an eighth of them (rows 512
 * bytes apart: 8 of 64 sets, a 128-row panel evicts itself; measured 20% slower). */
static inline int64_t cg__ssd_ld(int64_t n) {
    const int64_t w = cg__ssd_pad(n);
    return w % 64 ? w : w + CG_SSD_VL;
}

/* Which part of the (m x K) x (K x n) product a row block [i0, i0+mr) computes. */
typedef enum cg_ssd_gemm_mode {
    CG_SSD_DENSE,  /* k in [0, K), columns [0, n) */
    CG_SSD_KLOWER, /* k in [0, K + min(i0 + mr, m)): A = [X | lower-triangular L], row i reads L[i, 0..i] only */
    CG_SSD_KUPPER, /* k in [i0, K): A upper triangular, row i reads A[i, i..K) only */
    CG_SSD_NLOWER  /* columns [0, pad(min(i0 + mr, m))) of n: the lower triangle of a square C */
} cg_ssd_gemm_mode;

/* C (=, or += when acc) A B over the part of the product `mode` names. A[r, k] is at
 * A[r * ars + k * aks] (aks = 1: row-major; ars = 1: a transposed view, read in place).
 * n is a multiple of 16; B and C rows are read 16 floats at a time. */
void cg__ssd_gemm(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars, int64_t aks,
                  const float *B, int64_t ldb, float *C, int64_t ldc, int acc);
/* The same, with C = beta C + (the product) when acc (beta = 1 in cg__ssd_gemm). */
void cg__ssd_gemm_beta(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars, int64_t aks,
                       const float *B, int64_t ldb, float *C, int64_t ldc, int acc, float beta);
/* The same, reading (when acc) and writing only the columns [0, nc) of C, 1 <= nc <= n (the
 * columns [nc, n) are computed but not stored: C may be user memory with rows of nc floats). */
void cg__ssd_gemm_nc(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t nc, int64_t K, const float *A, int64_t ars,
                     int64_t aks, const float *B, int64_t ldb, float *C, int64_t ldc, int acc, float beta);

/* C = diag(rs) (the product): row i of the product scaled by rs[i] as it is stored (no
 * pass over C afterwards). */
void cg__ssd_gemm_rs(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars, int64_t aks,
                     const float *B, int64_t ldb, float *C, int64_t ldc, const float *rs);

/* dst[j, i] = src[i * ss + j] for i < rows, j < w; zero for i in [rows, cols_pad).
 * Blocks of one vector's width transposed in registers (ssd_cpu_gemm.c). */
void cg__ssd_transpose(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss, int64_t rows, int64_t w,
                       int64_t cols_pad);

/* Large workspaces: mmap'd with transparent huge pages where the system allows it. */
void *cg__ssd_big_alloc(size_t bytes);
void cg__ssd_big_free(void *p, size_t bytes);
/* Scratch of at least `bytes` kept by ctx across calls (a fresh mapping costs page
 * faults on every call), or NULL when larger than CG_HOST_WS_KEEP or out of memory:
 * the caller then allocates its own. Valid until the next call on ctx. */
#define CG_HOST_WS_KEEP ((size_t)512 << 20)
void *cg__ctx_host_ws(cg_context *ctx, size_t bytes);

/* The lines of [p, p + bytes) soon in L2, for reading (write 0) or writing (write 1: a
 * write prefetch, PREFETCHW, where the variant's flags enable it, else a read prefetch,
 * which brings a line no other core holds in exclusive state all the same), so that the
 * loads or stores do not wait for them. */
static inline void cg__ssd_prefetch_bytes(const void *p, int64_t bytes, int write) {
    const uintptr_t a = (uintptr_t)p, e = a + (uintptr_t)bytes;
    for (uintptr_t x = a & ~(uintptr_t)63; x < e; x += 64) {
        if (write) __builtin_prefetch((const char *)x, 1, 2);
        else __builtin_prefetch((const char *)x, 0, 2);
    }
}

/* e^r, |r| <= 0.347, into p: Taylor series to degree 7 (truncation < 6e-9 relative); r
 * and p a float or a float vector (cg__ssd_exp and its vector form in ssd_cpu_gemm.c). */
#define CG_SSD_EXP_POLY(p, r)                                                                                          \
    do {                                                                                                               \
        p = 0.0f * (r) + 1.0f / 5040.0f;                                                                               \
        p = p * (r) + 1.0f / 720.0f;                                                                                   \
        p = p * (r) + 1.0f / 120.0f;                                                                                   \
        p = p * (r) + 1.0f / 24.0f;                                                                                    \
        p = p * (r) + 1.0f / 6.0f;                                                                                     \
        p = p * (r) + 0.5f;                                                                                            \
        p = p * (r) + 1.0f;                                                                                            \
        p = p * (r) + 1.0f;                                                                                            \
    } while (0)

/* exp(x) in float, within 2 ulp, branch-free so that loops over it vectorize. Underflows to
 * 0 (through denormals), overflows to inf, NaN stays NaN. */
static inline float cg__ssd_exp(float x) {
    union {
        float f;
        int32_t i;
    } t, s1, s2;
    float xc = x < -104.0f ? -104.0f : x; /* comparisons are false for NaN: it passes through */
    xc = xc > 89.0f ? 89.0f : xc;
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick; r = x - n ln 2 in two parts (Cody-Waite) */
    t.f = xc * 1.44269504088896341f + 12582912.0f;
    float n = t.f - 12582912.0f;
    int32_t ni = t.i - 0x4B400000;
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723e-6f;
    float p;
    CG_SSD_EXP_POLY(p, r);
    /* 2^n as two normal factors, so n in [-150, 129] gives denormals, 0 and inf correctly */
    int32_t n1 = ni >> 1, n2 = ni - n1;
    s1.i = (int32_t)((uint32_t)(n1 + 127) << 23);
    s2.i = (int32_t)((uint32_t)(n2 + 127) << 23);
    return p * s1.f * s2.f;
}

/* P[j] *= cg__ssd_exp(X[j]) for j < n, in vectors (ssd_cpu_gemm.c). */
void cg__ssd_mul_exp(float *restrict P, const float *restrict X, int64_t n);
/* The causal decay mask in place: X[i, j] *= e^{A_i - A_j} for j <= i < L, rows ld
 * apart, from the cumulative sums Ad (double); entries above the diagonal are left as
 * they are (the causal GEMMs never read them). E: scratch of 2 L floats. */
void cg__ssd_decay_mask(float *X, int64_t ld, int64_t L, const double *restrict Ad, float *restrict E);
/* The same from a separate source: X[i, j] = Src[i, j] e^{A_i - A_j} for j <= i < L (Src rows
 * lds apart; Src == X is the in-place form; otherwise the two must not overlap). */
void cg__ssd_decay_mask_from(float *X, int64_t ld, const float *Src, int64_t lds, int64_t L, const double *restrict Ad,
                             float *restrict E);

/* log_alpha for the cumulative sums: -inf (a decay of exactly 0) becomes -1e4, so that the
 * differences A_i - A_j of two tokens after it stay finite instead of -inf - -inf = NaN;
 * e^-1e4 is 0 in float just the same. NaN passes through. */
static inline double cg__ssd_clamp_la(float x) { return x < -1.0e4f ? -1.0e4 : (double)x; }

/* dst[i, 0..w) = src[i * ss + (0..w)], zero in [w, wp), rows i < rows. */
static inline void cg__ssd_copy_rows(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss,
                                     int64_t rows, int64_t w, int64_t wp) {
    for (int64_t i = 0; i < rows; i++) {
        float *restrict d = dst + i * ldd;
        const float *restrict s = src + i * ss;
        for (int64_t j = 0; j < w; j++) d[j] = s[j];
        for (int64_t j = w; j < wp; j++) d[j] = 0.0f;
    }
}

/* Run parameters after defaults and pins. */
typedef struct cg_ssd_cpu_run {
    int64_t chunk;     /* the chunk length, at most T (1 when T is 0) */
    int64_t chunk_pad; /* chunk rounded up to the vector length (cg__ssd_pad) */
    int64_t block_dv;
    int group_heads; /* forward: a task per (b, g, dv block) taking the group's heads (heads=group) */
    int threads;     /* threads the pool will use */
    int nscratch;    /* per-thread scratch blocks to allocate (pool size) */
    cg_pool *pool;   /* NULL: serial */
    int bwd_split;   /* -1: decide by shape; 0: fused per (b, g); 1: chunk-parallel */
    int pinned_chunk, pinned_block_dv;
    int pinned; /* any key pinned */
} cg_ssd_cpu_run;

/* Resolve defaults (of the direction bwd) and pins (chunk, block_dv, heads, threads, bwd_split);
 * CG_EINVAL naming a bad pin. */
cg_status cg__ssd_cpu_resolve(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, int bwd, const char *what,
                              cg_ssd_cpu_run *run);

/* Per-thread scratch: n blocks of `bytes` each (64-byte aligned), one allocation. */
typedef struct cg_ssd_scratch {
    char *mem;
    size_t stride;
} cg_ssd_scratch;

static inline void *cg__ssd_scratch_at(const cg_ssd_scratch *s, int tid) { return s->mem + (size_t)tid * s->stride; }

#endif /* CG_SSD_CPU_H */
