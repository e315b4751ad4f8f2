/* cpu_vmath.h -- branch-free float functions (e^x, 2^x, log1p, softplus, sigmoid) for the
 * files built per ISA variant (cpu_isa.h), so that loops calling them vectorize at the
 * variant's width (libm calls do not without -ffast-math). Used by the selective scan's
 * chunked path (sscan_cpu.c) and the decode steps (step_cpu.c). Static inline: each
 * variant's file gets its own copy, compiled with its flags. */
#ifndef CG_CPU_VMATH_H
#define CG_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Clamp range of ss_exp's argument. It reaches the kernels as run-time values (through
 * the plan) on purpose: with literal constants GCC splits the clamp into a constant path
 * and a masked blend; with opaque values each clamp is one vminps/vmaxps. */
typedef struct ss_lim {
    float lo, hi;   /* of ss_exp */
    float lo2, hi2; /* of ss_exp2 */
} ss_lim;
#define SS_EXP_LO (-86.5f)
#define SS_EXP_HI 88.8f
#define SS_EXP2_LO (-124.5f)
#define SS_EXP2_HI 128.1f
#define SS_LOG2E 1.44269504088896341f
#define SS_LN2 0.693147180559945309f

/* q * 2^(n-1), where nbits are the bits of the float n + 1.5 * 2^23 (the magic-number
 * rounding of ss_exp, ss_exp2). */
static inline float ss_times_pow2(float q, uint32_t nbits) {
    uint32_t sbits = (nbits - 0x4B400000u + 126u) << 23; /* 2^(n-1) */
    float s;
    memcpy(&s, &sbits, sizeof s);
    return q * s;
}

/* e^x: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-6 Taylor polynomial of
 * 2 e^r (truncation < 1.3e-7 relative), times 2^(n-1), so that n = 128 stays finite.
 * x is first clamped to [SS_EXP_LO, SS_EXP_HI]: above the float range the product
 * overflows to +Inf by itself, and below e^-86.5 (2.7e-38) the result stays 2.7e-38
 * instead of going subnormal, a difference that no state or gate can see. The clamps
 * are written so NaN passes through them (comparisons with NaN are false). No branches
 * or selects: 14 vector operations per 16 lanes. */
static inline float ss_exp(float x, ss_lim k) {
    float xc = x > k.hi ? k.hi : x;
    xc = xc < k.lo ? k.lo : xc;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float nf = xc * SS_LOG2E + magic;
    uint32_t nbits;
    memcpy(&nbits, &nf, sizeof nbits);
    float n = nf - magic;
    float r = xc - n * 0.693359375f; /* ln2 split in a short high part and the rest */
    r = r - n * -2.12194440e-4f;
    float q = 2.0f / 720.0f;
    q = q * r + 2.0f / 120.0f;
    q = q * r + 2.0f / 24.0f;
    q = q * r + 2.0f / 6.0f;
    q = q * r + 1.0f;
    q = q * r + 2.0f;
    q = q * r + 2.0f;
    return ss_times_pow2(q, nbits);
}

/* 2^t for the decays exp(dt A) = 2^(dt A log2(e)) of the state updates, the hot loop:
 * n = round(t), f = t - n in [-1/2, 1/2] exactly, 2 * 2^f by its degree-6 Taylor
 * polynomial in f ln2 (coefficients 2 ln2^k / k!; truncation < 1.3e-7 at |f| = 1/2 and
 * nearly zero for small |f|, so errors do not add up in long products of decays the
 * way an equioscillating fit's would), times 2^(n-1). Clamped to
 * [SS_EXP2_LO, SS_EXP2_HI] with the same NaN, overflow and underflow behaviour as
 * ss_exp. 14 vector operations per 16 lanes. */
static inline float ss_exp2(float t, ss_lim k) {
    float tc = t > k.hi2 ? k.hi2 : t;
    tc = tc < k.lo2 ? k.lo2 : tc;
    const float magic = 12582912.0f;
    float nf = tc + magic;
    uint32_t nbits;
    memcpy(&nbits, &nf, sizeof nbits);
    float f = tc - (nf - magic);
    float q = 0.0003080706078676321f;
    q = q * f + 0.0026667116292856882f;
    q = q * f + 0.019236258215256954f;
    q = q * f + 0.11100821732964315f;
    q = q * f + 0.4804530139182014f;
    q = q * f + 1.3862943611198906f;
    q = q * f + 2.0f;
    return ss_times_pow2(q, nbits);
}

/* log(1 + u) for u in [0, 1]: 2 atanh(s), s = u / (2 + u) <= 1/3, odd series to s^13. */
static inline float ss_log1p01(float u) {
    float s = u / (2.0f + u), s2 = s * s;
    float q = 2.0f / 13.0f;
    q = q * s2 + 2.0f / 11.0f;
    q = q * s2 + 2.0f / 9.0f;
    q = q * s2 + 2.0f / 7.0f;
    q = q * s2 + 2.0f / 5.0f;
    q = q * s2 + 2.0f / 3.0f;
    q = q * s2 + 2.0f;
    return q * s;
}

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow; NaN propagates. */
static inline float ss_softplus(float x, ss_lim k) {
    float pos = x > 0.0f ? x : 0.0f;
    return pos + ss_log1p01(ss_exp(-fabsf(x), k));
}

static inline float ss_sigmoid(float x, ss_lim k) { return 1.0f / (1.0f + ss_exp(-x, k)); }

/* ------------------------------------------------- native vectors (the decode step)
 * sv_f: the variant's widest float vector (SV lanes: 16 with AVX-512, 8 with AVX, else 4),
 * for loops GCC's vectorizer handles badly (a 16-lane loop nested in a loop over channels
 * is vectorized across the channels on AVX2 and SSE). sv_exp2 is ss_exp2 lane for lane (the
 * same operations in the same order): its clamps are the variant's min / max instructions,
 * operands ordered so that NaN passes through, as in ss_exp2. */
#if defined(__AVX512F__)
#define SV 16
#elif defined(__AVX__)
#define SV 8
#else
#define SV 4
#endif
typedef float sv_f __attribute__((vector_size(SV * 4), aligned(4), may_alias));
typedef uint32_t sv_u __attribute__((vector_size(SV * 4)));

#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif
/* max(lo, min(hi, x)) of each lane (ss_exp2's clamp); x when x is NaN. */
static inline sv_f sv_clamp(sv_f x, float lo, float hi) {
#if defined(__AVX512F__)
    return (sv_f)_mm512_max_ps(_mm512_set1_ps(lo), _mm512_min_ps(_mm512_set1_ps(hi), (__m512)x));
#elif defined(__AVX__)
    return (sv_f)_mm256_max_ps(_mm256_set1_ps(lo), _mm256_min_ps(_mm256_set1_ps(hi), (__m256)x));
#elif defined(__SSE2__)
    return (sv_f)_mm_max_ps(_mm_set1_ps(lo), _mm_min_ps(_mm_set1_ps(hi), (__m128)x));
#else
    for (int l = 0; l < SV; l++) {
        const float v = x[l] > hi ? hi : x[l];
        x[l] = v < lo ? lo : v;
    }
    return x;
#endif
}

/* ss_exp2 of each lane. */
static inline sv_f sv_exp2(sv_f t, ss_lim k) {
    const sv_f tc = sv_clamp(t, k.lo2, k.hi2);
    const float magic = 12582912.0f;
    const sv_f nf = tc + magic, f = tc - (nf - magic);
    sv_f q = f * 0.0003080706078676321f + 0.0026667116292856882f;
    q = q * f + 0.019236258215256954f;
    q = q * f + 0.11100821732964315f;
    q = q * f + 0.4804530139182014f;
    q = q * f + 1.3862943611198906f;
    q = q * f + 2.0f;
    const sv_u sbits = ((sv_u)nf - 0x4B400000u + 126u) << 23; /* 2^(n-1), as ss_times_pow2 */
    return q * (sv_f)sbits;
}

#endif /* CG_CPU_VMATH_H */
