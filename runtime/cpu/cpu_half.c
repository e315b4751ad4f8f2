/* cpu_half.c -- the CPU path's bf16 / fp16 row conversions (cpu_half.h), one build per
 * ISA variant (cpu_isa.h). Every result equals runtime/half.h's, bit for bit
 * (tests/test_cpu_half.c checks each variant against it):
 *   bf16 -> f32   a 16-bit shift;
 *   f32 -> bf16   integer round to nearest even (u + 0x7fff + lsb) >> 16, NaN made quiet
 *                 (| 0x40) with its sign and payload -- not AVX512-BF16's vcvtneps2bf16,
 *                 which flushes float32 subnormals to zero;
 *   f16 -> f32    F16C's vcvtph2ps (avx2, avx512), then signalling NaNs put back (the
 *                 instruction quiets them, half.h keeps the bits); the baseline rebuilds
 *                 the exponent in integers (subnormals through one exact subtraction);
 *   f32 -> f16    F16C's vcvtps2ph with round to nearest even (avx2, avx512): it rounds
 *                 subnormals and overflows as half.h, and quiets NaN the same way
 *                 (0x7e00 | the high payload bits); half.h's scalar code in the baseline.
 * Vectors are GCC vector extensions of the variant's width (VW floats). */
#include "cpu_half.h"

#include <string.h>

#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX2__)
#define VW 8
#else
#define VW 4
#endif
#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#define HAVE_F16C 1
#else
#define HAVE_F16C 0
#endif

typedef uint32_t cg_hu __attribute__((vector_size(VW * 4)));
typedef uint16_t cg_hh __attribute__((vector_size(VW * 2)));
typedef float cg_hf __attribute__((vector_size(VW * 4)));

static inline cg_hh ld_h(const uint16_t *p) {
    cg_hh h;
    memcpy(&h, p, sizeof h);
    return h;
}
static inline void st_u(float *p, cg_hu u) { memcpy(p, &u, sizeof u); }
static inline cg_hu ld_u(const float *p) {
    cg_hu u;
    memcpy(&u, p, sizeof u);
    return u;
}

static inline cg_hu bf16_widen(cg_hh h) { return __builtin_convertvector(h, cg_hu) << 16; }

static inline cg_hh bf16_narrow(cg_hu u) {
    const cg_hu nan = (cg_hu)((u & 0x7fffffffu) > 0x7f800000u);
    const cg_hu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const cg_hu quiet = (u >> 16) | 0x40u;
    return __builtin_convertvector((r & ~nan) | (quiet & nan), cg_hh);
}

/* The bits half.h gives an fp16 NaN or inf (exponent 31), for lanes where x has it. */
static inline cg_hu f16_special(cg_hu x) { return ((x & 0x8000u) << 16) | 0x7f800000u | ((x & 0x3ffu) << 13); }

#if HAVE_F16C
static inline cg_hu f16_widen(cg_hh h) {
#if VW == 16
    __m256i hv;
    memcpy(&hv, &h, sizeof hv);
    const __m512 f = _mm512_cvtph_ps(hv);
#else
    __m128i hv;
    memcpy(&hv, &h, sizeof hv);
    const __m256 f = _mm256_cvtph_ps(hv);
#endif
    cg_hu o;
    memcpy(&o, &f, sizeof o);
    const cg_hu x = __builtin_convertvector(h, cg_hu);
    const cg_hu nan = (cg_hu)((x & 0x7fffu) > 0x7c00u);
    return (o & ~nan) | (f16_special(x) & nan);
}
static inline cg_hh f16_narrow(cg_hu u) {
    cg_hh h;
#if VW == 16
    __m512 f;
    memcpy(&f, &u, sizeof f);
    const __m256i r = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
#else
    __m256 f;
    memcpy(&f, &u, sizeof f);
    const __m128i r = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
#endif
    memcpy(&h, &r, sizeof h);
    return h;
}
#else
/* Exponent rebiased by 112 (inf/NaN: to 255); exponent 0 (zero, subnormal) as
 * 2^-14 (1 + m / 1024) - 2^-14 = m 2^-24, exact. */
static inline cg_hu f16_widen(cg_hh h) {
    const cg_hu x = __builtin_convertvector(h, cg_hu);
    const cg_hu m = (x & 0x7fffu) << 13, e = m & 0x0f800000u;
    const cg_hu inf = (cg_hu)(e == 0x0f800000u), sub = (cg_hu)(e == 0u);
    const cg_hu normal = m + (112u << 23);
    const cg_hf two_m14 = (cg_hf){0} + 6.103515625e-05f;
    const cg_hu small = (cg_hu)((cg_hf)(normal + (1u << 23)) - two_m14);
    const cg_hu o = (normal & ~(inf | sub)) | (small & sub) | (f16_special(x) & inf);
    return o | ((x & 0x8000u) << 16);
}
#endif

void cg__cpu_ld_row(float *restrict dst, const void *restrict src, cg_dtype dt, int64_t n) {
    const uint16_t *s = src;
    int64_t j = 0;
    switch (dt) {
    case CG_BF16:
        for (; j + VW <= n; j += VW) st_u(dst + j, bf16_widen(ld_h(s + j)));
        for (; j < n; j++) dst[j] = cg__bf16_to_f32(s[j]);
        return;
    case CG_F16:
        for (; j + VW <= n; j += VW) st_u(dst + j, f16_widen(ld_h(s + j)));
        for (; j < n; j++) dst[j] = cg__f16_to_f32(s[j]);
        return;
    default: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    }
}

void cg__cpu_st_row(void *restrict dst, cg_dtype dt, const float *restrict src, int64_t n) {
    uint16_t *d = dst;
    int64_t j = 0;
    switch (dt) {
    case CG_BF16:
        for (; j + VW <= n; j += VW) {
            const cg_hh h = bf16_narrow(ld_u(src + j));
            memcpy(d + j, &h, sizeof h);
        }
        for (; j < n; j++) d[j] = cg__f32_to_bf16(src[j]);
        return;
    case CG_F16:
#if HAVE_F16C
        for (; j + VW <= n; j += VW) {
            const cg_hh h = f16_narrow(ld_u(src + j));
            memcpy(d + j, &h, sizeof h);
        }
#endif
        for (; j < n; j++) d[j] = cg__f32_to_f16(src[j]);
        return;
    default: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    }
}

void cg__cpu_ld_rows(float *restrict dst, int64_t ldd, const void *restrict src, cg_dtype dt, int64_t ss, int64_t rows,
                     int64_t w, int64_t wp) {
    const int64_t es = cg__dt_bytes(dt);
    for (int64_t i = 0; i < rows; i++) {
        float *d = dst + i * ldd;
        cg__cpu_ld_row(d, (const char *)src + i * ss * es, dt, w);
        for (int64_t j = w; j < wp; j++) d[j] = 0.0f;
    }
}

void cg__cpu_st_rows(void *restrict dst, cg_dtype dt, int64_t sd, const float *restrict src, int64_t lds, int64_t rows,
                     int64_t w) {
    const int64_t es = cg__dt_bytes(dt);
    for (int64_t i = 0; i < rows; i++) cg__cpu_st_row((char *)dst + i * sd * es, dt, src + i * lds, w);
}
