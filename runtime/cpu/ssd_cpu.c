/* ssd_cpu.c -- shared parts of the SSD CPU path: the register-blocked GEMM, defaults and
 * config pins. The forward is in ssd_cpu_fwd.c, the backward in ssd_cpu_bwd.c.
 *
 * GEMM micro-kernel: a block of MR = 6 rows of C by up to 4 vectors (64 columns) lives in
 * 24 of the 32 AVX-512 registers; each k step loads up to 4 vectors of B and broadcasts 6
 * scalars of A (6 x 4 FMAs per 4 loads + 6 broadcasts). The kernel is written with GCC
 * vector extensions so it compiles without intrinsics: with -march=native it becomes zmm
 * FMAs, without it the compiler splits the vectors. Plain float arrays do not stay in
 * registers (measured at a quarter of the speed). A may be any strided view (its scalars
 * are broadcast), which saves the transposes of P, dP, V and Q in the backward. */
#include "ssd_cpu.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef float cg_v16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t cg_i16 __attribute__((vector_size(64)));

#define MR 6
#define NVMAX 4

/* unit: A is row-major (aks == 1), the common case, with simpler addressing. */
static inline __attribute__((always_inline)) void micro(const int mr, const int nv, const int unit, int64_t K,
                                                        const float *restrict A, int64_t ars, int64_t aks,
                                                        const float *restrict B, int64_t ldb,
                                                        float *restrict C, int64_t ldc, int acc) {
    cg_v16 c[MR][NVMAX];
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) c[r][v] = acc ? *(const cg_v16 *)(C + r * ldc + v * 16) : (cg_v16){0};
    for (int64_t k = 0; k < K; k++) {
        cg_v16 b[NVMAX];
        for (int v = 0; v < nv; v++) b[v] = *(const cg_v16 *)(B + k * ldb + v * 16);
        const float *restrict ak = A + k * (unit ? 1 : aks);
        for (int r = 0; r < mr; r++) {
            const float a = ak[r * ars];
            for (int v = 0; v < nv; v++) c[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) *(cg_v16 *)(C + r * ldc + v * 16) = c[r][v];
}

typedef void (*micro_fn)(int64_t K, const float *restrict A, int64_t ars, int64_t aks, const float *restrict B,
                         int64_t ldb, float *restrict C, int64_t ldc, int acc);

#define MICRO_DEF(mr, nv, unit)                                                                                 \
    static void micro_##mr##_##nv##_##unit(int64_t K, const float *restrict A, int64_t ars, int64_t aks,       \
                                           const float *restrict B, int64_t ldb, float *restrict C,             \
                                           int64_t ldc, int acc) {                                              \
        micro(mr, nv, unit, K, A, ars, aks, B, ldb, C, ldc, acc);                                              \
    }
#define MICRO_ROW(mr, unit) MICRO_DEF(mr, 1, unit) MICRO_DEF(mr, 2, unit) MICRO_DEF(mr, 3, unit) MICRO_DEF(mr, 4, unit)
#define MICRO_ALL(unit) MICRO_ROW(1, unit) MICRO_ROW(2, unit) MICRO_ROW(3, unit) MICRO_ROW(4, unit) \
    MICRO_ROW(5, unit) MICRO_ROW(6, unit)
MICRO_ALL(0)
MICRO_ALL(1)

#define MICRO_REF(mr, u) {micro_##mr##_1_##u, micro_##mr##_2_##u, micro_##mr##_3_##u, micro_##mr##_4_##u}
static const micro_fn micro_tab[2][MR][NVMAX] = {
    {MICRO_REF(1, 0), MICRO_REF(2, 0), MICRO_REF(3, 0), MICRO_REF(4, 0), MICRO_REF(5, 0), MICRO_REF(6, 0)},
    {MICRO_REF(1, 1), MICRO_REF(2, 1), MICRO_REF(3, 1), MICRO_REF(4, 1), MICRO_REF(5, 1), MICRO_REF(6, 1)}};

void cg__ssd_gemm(cg_ssd_gemm_mode mode, int64_t m, int64_t n, int64_t K, const float *A, int64_t ars,
                  int64_t aks, const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
    CG_ASSERT(n % CG_SSD_VL == 0);
    const int unit = aks == 1;
    /* Column panels outside, row blocks inside: one panel of B (K x 64) is reused by every
     * row block while it is in L1/L2. */
    for (int64_t j0 = 0; j0 < n; j0 += NVMAX * CG_SSD_VL) {
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            const int mr = (int)cg__ssd_min(MR, m - i0);
            int64_t nend = n, kbeg = 0, kend = K;
            switch (mode) {
            case CG_SSD_DENSE: break;
            case CG_SSD_KLOWER: kend = K + cg__ssd_min(i0 + mr, m); break;
            case CG_SSD_KUPPER: kbeg = i0; break;
            case CG_SSD_NLOWER: nend = cg__ssd_min(n, cg__ssd_pad(cg__ssd_min(i0 + mr, m))); break;
            }
            if (j0 >= nend) continue;
            const int nv = (int)cg__ssd_min(NVMAX, (nend - j0) / CG_SSD_VL);
            const int64_t kn = kend > kbeg ? kend - kbeg : 0;
            micro_tab[unit][mr - 1][nv - 1](kn, A + i0 * ars + kbeg * aks, ars, aks, B + kbeg * ldb + j0, ldb,
                                            C + i0 * ldc + j0, ldc, acc);
        }
    }
}

/* One 16 x 16 block: four stages that swap the off-diagonal b x b sub-blocks of every
 * 2b x 2b block (b = 8, 4, 2, 1), two-register shuffles each. */
static inline void transpose16(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss) {
#if defined(__clang__) /* no __builtin_shuffle */
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) dst[j * ldd + i] = src[i * ss + j];
#else
    static const cg_i16 lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                        hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                        lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                        hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                        lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                        hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                        lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                        hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
    cg_v16 r[16];
    for (int i = 0; i < 16; i++) r[i] = *(const cg_v16 *)(src + i * ss);
#define STAGE(b, lo, hi)                                                                                       \
    for (int i = 0; i < 16; i++)                                                                               \
        if (!(i & (b))) {                                                                                      \
            cg_v16 x = r[i], y = r[i + (b)];                                                                   \
            r[i] = __builtin_shuffle(x, y, lo);                                                                \
            r[i + (b)] = __builtin_shuffle(x, y, hi);                                                          \
        }
    STAGE(8, lo8, hi8)
    STAGE(4, lo4, hi4)
    STAGE(2, lo2, hi2)
    STAGE(1, lo1, hi1)
#undef STAGE
    for (int j = 0; j < 16; j++) *(cg_v16 *)(dst + j * ldd) = r[j];
#endif
}

void cg__ssd_transpose(float *restrict dst, int64_t ldd, const float *restrict src, int64_t ss, int64_t rows,
                       int64_t w, int64_t cols_pad) {
    for (int64_t j = 0; j < w; j++)
        for (int64_t i = rows; i < cols_pad; i++) dst[j * ldd + i] = 0.0f;
    const int64_t r16 = rows / 16 * 16, w16 = w / 16 * 16;
    for (int64_t i0 = 0; i0 < r16; i0 += 16)
        for (int64_t j0 = 0; j0 < w16; j0 += 16) transpose16(dst + j0 * ldd + i0, ldd, src + i0 * ss + j0, ss);
    /* the edges */
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = (i < r16 ? w16 : 0); j < w; j++) dst[j * ldd + i] = src[i * ss + j];
}

void *cg__ssd_big_alloc(size_t bytes) {
    if (bytes < ((size_t)4 << 20)) return cg__aligned_alloc(bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* fewer page faults on a fresh workspace; advisory */
#endif
    return p;
}

void cg__ssd_big_free(void *p, size_t bytes) {
    if (!p) return;
    if (bytes < ((size_t)4 << 20)) cg__aligned_free(p);
    else munmap(p, bytes);
}

void *cg__ctx_host_ws(cg_context *ctx, size_t bytes) {
    if (bytes > CG_HOST_WS_KEEP) return NULL;
    if (ctx->host_ws_bytes < bytes) {
        cg__ssd_big_free(ctx->host_ws, ctx->host_ws_bytes);
        size_t grow = bytes < ((size_t)4 << 20) ? ((size_t)4 << 20) : bytes; /* one mapping from the start */
        ctx->host_ws = cg__ssd_big_alloc(grow);
        ctx->host_ws_bytes = ctx->host_ws ? grow : 0;
    }
    return ctx->host_ws;
}

void cg__cpu_ctx_free(cg_context *ctx) {
    cg__ssd_big_free(ctx->host_ws, ctx->host_ws_bytes);
    ctx->host_ws = NULL;
    ctx->host_ws_bytes = 0;
}

/* ------------------------------------------------------------- parameters */

void cg__ssd_cpu_params_default(const cg_ssd_prob *p, cg_ssd_cpu_params *out) {
    /* 64 tokens: the intra-chunk work (about chunk * (dk + dv) flops per token) stays
     * small next to the state work (4 dk dv per token) while the GEMMs are still tall
     * enough to run near the FMA peak. The whole dv in one task: splitting dv repeats
     * Q K^T per block; the runtime splits it only when there are too few tasks. */
    out->chunk = 64;
    out->block_dv = (int)(p->dv > 0 ? p->dv : 1);
    out->threads = 0;
}

cg_status cg__ssd_cpu_resolve(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const char *what,
                              cg_ssd_cpu_run *run) {
    static const char *const known[] = {"chunk", "block_dv", "threads", "bwd_split"};
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 4);
    if (st) return st;
    cg_ssd_cpu_params d;
    cg__ssd_cpu_params_default(p, &d);
    memset(run, 0, sizeof *run);
    int64_t chunk = d.chunk, bdv = d.block_dv, threads = d.threads, split = -1;
    int pinned_threads, pinned_split;
    if ((st = cg__cfg_pin_int(ctx, cfg, "chunk", 1, 1024, what, &chunk, &run->pinned_chunk)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "block_dv", 1, INT32_MAX, what, &bdv, &run->pinned_block_dv)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &threads, &pinned_threads)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "bwd_split", 0, 1, what, &split, &pinned_split)) != CG_OK) return st;
    run->bwd_split = (int)split;
    run->pinned = run->pinned_chunk || run->pinned_block_dv || pinned_threads || pinned_split;
    run->chunk = chunk;
    run->block_dv = cg__ssd_min(bdv, p->dv);
    run->pool = cg__ctx_pool(ctx);
    const int size = cg__pool_size(run->pool);
    run->nscratch = size;
    run->threads = (threads <= 0 || threads > size) ? size : (int)threads;
    return CG_OK;
}
