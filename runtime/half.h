/* half.h -- scalar bfloat16 / IEEE half <-> float32 conversions, the one definition every
 * host backend and test uses (vectorized CPU kernels must agree with these bit for bit).
 *
 * Narrowing rounds to nearest, ties to even; NaN stays a (quiet) NaN with its sign;
 * overflow gives +-inf; fp16 subnormals are produced and read exactly. Widening is exact. */
#ifndef CG_HALF_H
#define CG_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t cg__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float cg__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float cg__bf16_to_f32(uint16_t h) { return cg__bits_f32((uint32_t)h << 16); }

static inline uint16_t cg__f32_to_bf16(float f) {
    uint32_t u = cg__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; carries into the exponent (to inf) */
    return (uint16_t)(u >> 16);
}

static inline float cg__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return cg__bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
    if (exp == 0) {                                                          /* zero, subnormal */
        float m = (float)man * (1.0f / 16777216.0f);                         /* man * 2^-24, exact */
        return sign ? -m : m;
    }
    return cg__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t cg__f32_to_f16(float f) {
    uint32_t u = cg__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65536 (or is inf): inf */
    if (a < 0x38800000u) {                                   /* below 2^-14: fp16 subnormal or zero */
        if (a < 0x33000000u) return sign;                    /* below 2^-25: rounds to zero */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* value = m * 2^(e-150); fp16 subnormal unit 2^-24: m >> (126-e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    a += 0xfffu + ((a >> 13) & 1u) - (112u << 23); /* rebias and round to nearest even */
    return (uint16_t)(sign | (a >> 13));
}

#endif
