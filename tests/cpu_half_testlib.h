/* cpu_half_testlib.h -- what the CPU path's bf16 / fp16 tests share (test_cpu_half.c,
 * test_ssd_cpu.c, test_sscan_cpu.c): rounding a float32 test tensor to a 16-bit copy,
 * and comparing a 16-bit output with a float32 one rounded once (runtime/half.h). */
#ifndef CPU_HALF_TESTLIB_H
#define CPU_HALF_TESTLIB_H

#include "cg_test.h"
#include "half.h"

static inline uint16_t cht_narrow(float x, cg_dtype dt) { return dt == CG_BF16 ? cg__f32_to_bf16(x) : cg__f32_to_f16(x); }
static inline float cht_widen(uint16_t h, cg_dtype dt) { return dt == CG_BF16 ? cg__bf16_to_f32(h) : cg__f16_to_f32(h); }
static inline const char *cht_name(cg_dtype dt) { return dt == CG_BF16 ? "bf16" : "f16"; }

/* The float32 elements of b rounded to dt in place (a float32 run then sees exactly the
 * 16-bit values), and returned as a 16-bit copy in the same memory order (free it). */
static inline uint16_t *cht_round(cg_tbuf *b, cg_dtype dt) {
    float *x = b->mem;
    uint16_t *h = malloc((size_t)(b->count ? b->count : 1) * sizeof *h);
    if (!h) return NULL;
    for (int64_t i = 0; i < b->count; i++) {
        h[i] = cht_narrow(x[i], dt);
        x[i] = cht_widen(h[i], dt);
    }
    return h;
}

/* A zeroed 16-bit buffer for an output of b's size. */
static inline uint16_t *cht_out(const cg_tbuf *b) {
    return calloc((size_t)(b->count ? b->count : 1), sizeof(uint16_t));
}

/* Elements where h differs from ref (float32) rounded to dt; the first few reported. */
static inline int64_t cht_check_rounded(const uint16_t *h, const cg_tbuf *ref, cg_dtype dt, const char *what,
                                        const char *desc) {
    const float *r = ref->mem;
    int64_t bad = 0;
    for (int64_t i = 0; i < ref->count; i++) {
        const uint16_t want = cht_narrow(r[i], dt);
        if (h[i] == want) continue;
        if (bad++ < 3)
            CG_CHECK(0, "%s[%lld] (%s) = 0x%04x, expected 0x%04x (float32 %a rounded) [%s]", what, (long long)i,
                     cht_name(dt), h[i], want, (double)r[i], desc);
    }
    CG_CHECK(bad == 0, "%s: %lld of %lld %s elements differ from the float32 result rounded once [%s]", what,
             (long long)bad, (long long)ref->count, cht_name(dt), desc);
    return bad;
}

/* A float32 output that must equal ref bit for bit. */
static inline void cht_check_same(const cg_tbuf *got, const cg_tbuf *ref, const char *what, const char *desc) {
    CG_CHECK(got->count == ref->count && memcmp(got->mem, ref->mem, (size_t)ref->count * sizeof(float)) == 0,
             "%s (float32) differs from the float32 run's [%s]", what, desc);
}

/* The 16-bit output h (in like's memory order) widened, against the float64 reference
 * ref on the rounded inputs: the bounds, bf16 1e-2 and fp16 2e-3. */
static inline void cht_check_ref(const uint16_t *h, const cg_tbuf *like, const cg_tbuf *ref, cg_dtype dt,
                                 const char *what, const char *desc) {
    cg_tbuf w = *like; /* like's shape and strides, memory of its own */
    w.mem = w.t.data = malloc((size_t)(like->count ? like->count : 1) * sizeof(float));
    if (!w.mem) return;
    float *x = w.mem;
    for (int64_t i = 0; i < w.count; i++) x[i] = cht_widen(h[i], dt);
    const double err = cg_rel_err(&w, ref), tol = dt == CG_BF16 ? 1e-2 : 2e-3;
    CG_CHECK(err <= tol, "%s (%s) rel err %.3g against the float64 reference > %.0e [%s]", what, cht_name(dt), err, tol,
             desc);
    if (getenv("CHT_VERBOSE")) fprintf(stderr, "    %-8s %s rel err %.3g\n", what, cht_name(dt), err);
    free(w.mem);
}

#endif /* CPU_HALF_TESTLIB_H */
