/* test_half.c -- runtime/half.h against independent formulations: the compiler's _Float16
 * conversions for fp16, and a nearest-of-two-neighbours rule in double for bf16. */
#include "cg_test.h"
#include "half.h"
#include "internal.h"

#include <math.h>

/* bf16 reference: the two bf16 values around f (truncation and the next one up in
 * magnitude), the nearer one in exact double arithmetic, ties to the even one. */
static uint16_t ref_bf16(float f) {
    uint32_t u = cg__f32_bits(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40u);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dlo = fabs((double)cg__bf16_to_f32(lo)), dhi;
    if (((hi >> 7) & 0xffu) == 0xffu) dhi = ldexp(1.0, 128); /* the step past the largest finite: inf */
    else dhi = fabs((double)cg__bf16_to_f32(hi));
    double a = fabs((double)f);
    if (a - dlo < dhi - a) return lo;
    if (a - dlo > dhi - a) return hi;
    return (lo & 1u) ? hi : lo;
}

static int check_f32(float f, int *fails) {
    uint16_t b = cg__f32_to_bf16(f), rb = ref_bf16(f);
    _Float16 h = (_Float16)f;
    uint16_t rh;
    memcpy(&rh, &h, sizeof rh);
    uint16_t g = cg__f32_to_f16(f);
    int bad = 0;
    if (b != rb) {
        if ((*fails)++ < 8) cg_test_fail(__FILE__, __LINE__, "bf16(%a = 0x%08x) = 0x%04x, expected 0x%04x", (double)f,
                                         cg__f32_bits(f), b, rb);
        bad = 1;
    }
    if (isnan(f) ? !((g & 0x7c00u) == 0x7c00u && (g & 0x3ffu) && ((g ^ rh) & 0x8000u) == 0) : g != rh) {
        if ((*fails)++ < 8) cg_test_fail(__FILE__, __LINE__, "f16(%a = 0x%08x) = 0x%04x, expected 0x%04x", (double)f,
                                         cg__f32_bits(f), g, rh);
        bad = 1;
    }
    return bad;
}

CG_TEST(half_roundtrip_and_widening) {
    int fails = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t x = (uint16_t)i;
        float fb = cg__bf16_to_f32(x);
        if (!isnan(fb) && cg__f32_to_bf16(fb) != x && fails++ < 8)
            cg_test_fail(__FILE__, __LINE__, "bf16 0x%04x does not round-trip", x);
        _Float16 h;
        memcpy(&h, &x, sizeof h);
        float fh = cg__f16_to_f32(x), want = (float)h;
        if (!(fh == want || (isnan(fh) && isnan(want))) || (fh == 0 && signbit(fh) != signbit(want))) {
            if (fails++ < 8) cg_test_fail(__FILE__, __LINE__, "f16 0x%04x widens to %a, expected %a", x, (double)fh, (double)want);
        } else if (!isnan(fh) && cg__f32_to_f16(fh) != x && fails++ < 8) {
            cg_test_fail(__FILE__, __LINE__, "f16 0x%04x does not round-trip", x);
        }
    }
    CG_CHECK(fails == 0, "%d conversion mismatches", fails);
}

CG_TEST(half_narrowing_rounds_to_nearest_even) {
    int fails = 0;
    /* every float around each bf16 / fp16 value: the value, the midpoints, one ulp either side */
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t base = i << 16;
        const uint32_t offs[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
        for (unsigned k = 0; k < sizeof offs / sizeof offs[0]; k++) check_f32(cg__bits_f32(base + offs[k]), &fails);
        uint32_t hb = (i & 0x7fffu);
        if (hb < 0x7c00u) { /* around finite fp16 values, as float32 bits */
            uint32_t fb = cg__f32_bits(cg__f16_to_f32((uint16_t)i));
            for (int d = -2; d <= 2; d++) check_f32(cg__bits_f32(fb + (uint32_t)(d * 0x1000)), &fails);
            for (int d = -1; d <= 1; d++) check_f32(cg__bits_f32(fb + (uint32_t)d), &fails);
        }
    }
    /* a stride through all of float32 */
    for (uint64_t u = 0; u < (1ull << 32); u += 9973) check_f32(cg__bits_f32((uint32_t)u), &fails);
    CG_CHECK(fails == 0, "%d conversion mismatches", fails);
}

/* The public helpers (chunkgen.h) are the library's own: the same bits as half.h over every
 * 16-bit pattern and a sweep of floats, and the dtype words round trip. */
CG_TEST(half_public_helpers) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float b = cg_bf16_to_f32((uint16_t)h), f = cg_f16_to_f32((uint16_t)h);
        CG_CHECK(cg__f32_bits(b) == cg__f32_bits(cg__bf16_to_f32((uint16_t)h)), "bf16 %#x", h);
        CG_CHECK(cg__f32_bits(f) == cg__f32_bits(cg__f16_to_f32((uint16_t)h)), "f16 %#x", h);
    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 0x10001ull) {
        const float x = cg__bits_f32((uint32_t)u);
        CG_CHECK(cg_f32_to_bf16(x) == cg__f32_to_bf16(x) && cg_f32_to_f16(x) == cg__f32_to_f16(x), "narrowing %#llx",
                 (unsigned long long)u);
    }
    for (int dt = CG_F32; dt <= CG_I64; dt++) {
        cg_dtype back = (cg_dtype)-1;
        CG_CHECK(cg_dtype_name((cg_dtype)dt) && cg_dtype_parse(cg_dtype_name((cg_dtype)dt), &back) == CG_OK &&
                     back == (cg_dtype)dt && cg_dtype_size((cg_dtype)dt) == cg__dtype_size((cg_dtype)dt),
                 "dtype %d", dt);
    }
    CG_CHECK(!cg_dtype_name((cg_dtype)99) && cg_dtype_size((cg_dtype)99) == 0 &&
                 cg_dtype_parse("float32", &(cg_dtype){0}) == CG_EINVAL,
             "unknown dtypes");
}
