/* test_cpu_half.c -- the CPU path's vectorized bf16 / fp16 row conversions
 * (runtime/cpu/cpu_half.c) against runtime/half.h, bit for bit, in every ISA variant this
 * machine runs: every 16-bit value widened; narrowing of every float32 whose bits 12..31
 * take all values with the low 12 bits at the rounding-relevant patterns (ties, one ulp
 * either side, NaN payloads, subnormals, overflow) -- all 2^32 floats with
 * CHUNKGEN_TEST_EXHAUSTIVE=1; rows of every length mod the vector width, unaligned;
 * and the CPU backend's refusal of dtypes it does not take. */
#include "cpu_half_testlib.h"

#include "cpu/cpu_isa.h"

#define CHT_ROW 4099 /* a row length that leaves a tail for every vector width */

static void report(int *fails, const char *isa, const char *what, uint32_t in, uint32_t got, uint32_t want) {
    if ((*fails)++ < 8)
        cg_test_fail(__FILE__, __LINE__, "%s %s(0x%08x) = 0x%08x, expected 0x%08x (half.h)", isa, what, in, got, want);
}

/* Runs fn(ops, user) in every variant this machine runs, then restores the chosen one. */
static void each_isa(void (*fn)(const cg_cpu_isa_ops *ops, void *user), void *user) {
    const cg_cpu_isa chosen = cg__cpu_isa_ops()->isa;
    int ran = 0;
    for (int isa = 0; isa < CG_ISA_COUNT; isa++) {
        if (cg__cpu_isa_set((cg_cpu_isa)isa) != CG_OK) continue;
        fn(cg__cpu_isa_ops(), user);
        ran++;
    }
    CG_CHECK(cg__cpu_isa_set(chosen) == CG_OK, "restore the ISA variant");
    CG_CHECK(ran >= 1, "no ISA variant ran");
}

static void widen_all(const cg_cpu_isa_ops *ops, void *user) {
    (void)user;
    uint16_t *src = malloc((65536 + 1) * sizeof *src);
    float *dst = malloc((65536 + 1) * sizeof *dst);
    if (!src || !dst) {
        CG_CHECK(0, "out of memory");
        free(src), free(dst);
        return;
    }
    const cg_dtype dts[] = {CG_BF16, CG_F16};
    for (int di = 0; di < 2; di++) {
        const cg_dtype dt = dts[di];
        int fails = 0;
        for (int shift = 0; shift < 2; shift++) { /* aligned, then one element off (odd length) */
            for (uint32_t i = 0; i < 65536; i++) src[i + (uint32_t)shift] = (uint16_t)i;
            ops->ld_row(dst + shift, src + shift, dt, 65536 - shift);
            for (uint32_t i = 0; i < 65536u - (uint32_t)shift; i++) {
                const uint32_t got = cg__f32_bits(dst[i + (uint32_t)shift]);
                const uint32_t want = cg__f32_bits(cht_widen((uint16_t)i, dt));
                if (got != want) report(&fails, ops->name, dt == CG_BF16 ? "bf16->f32" : "f16->f32", i, got, want);
            }
        }
        CG_CHECK(fails == 0, "%s: %d %s widenings differ from half.h", ops->name, fails, cht_name(dt));
    }
    free(src);
    free(dst);
}

CG_TEST(cpu_half_widen_every_value) { each_isa(widen_all, NULL); }

/* Narrows the floats gen(k), k < n, through the variant's rows and checks them. */
typedef uint32_t (*gen_fn)(uint64_t k);
static void narrow_range(const cg_cpu_isa_ops *ops, cg_dtype dt, gen_fn gen, uint64_t n, int *fails) {
    float *src = malloc((CHT_ROW + 1) * sizeof *src);
    uint16_t *dst = malloc((CHT_ROW + 1) * sizeof *dst);
    if (!src || !dst) {
        CG_CHECK(0, "out of memory");
        free(src), free(dst);
        return;
    }
    uint64_t row = 0;
    for (uint64_t k0 = 0; k0 < n; k0 += CHT_ROW - (row % 16), row++) {
        /* the row starts 0..15 elements off alignment and is as much shorter */
        const int64_t off = (int64_t)(row % 16), len = (int64_t)(n - k0 < (uint64_t)(CHT_ROW - off) ? n - k0 : (uint64_t)(CHT_ROW - off));
        for (int64_t i = 0; i < len; i++) src[off + i] = cg__bits_f32(gen(k0 + (uint64_t)i));
        ops->st_row(dst + off, dt, src + off, len);
        for (int64_t i = 0; i < len; i++) {
            const uint16_t want = cht_narrow(src[off + i], dt);
            if (dst[off + i] != want)
                report(fails, ops->name, dt == CG_BF16 ? "f32->bf16" : "f32->f16", cg__f32_bits(src[off + i]),
                       dst[off + i], want);
        }
    }
    free(src);
    free(dst);
}

/* bits 12..31 all values, the low 12 bits at 0, 1, just below / at / above the half, all ones */
static uint32_t gen_structured(uint64_t k) {
    static const uint32_t low[] = {0x000, 0x001, 0x7ff, 0x800, 0x801, 0xfff};
    return (uint32_t)((k / 6) << 12) | low[k % 6];
}
static uint32_t gen_all(uint64_t k) { return (uint32_t)k; }

static void narrow_all(const cg_cpu_isa_ops *ops, void *user) {
    const int exhaustive = *(const int *)user;
    const cg_dtype dts[] = {CG_BF16, CG_F16};
    for (int di = 0; di < 2; di++) {
        int fails = 0;
        if (exhaustive) narrow_range(ops, dts[di], gen_all, 1ull << 32, &fails);
        else narrow_range(ops, dts[di], gen_structured, 6ull << 20, &fails);
        CG_CHECK(fails == 0, "%s: %d %s narrowings differ from half.h", ops->name, fails, cht_name(dts[di]));
    }
}

CG_TEST(cpu_half_narrow_rounding) {
    const char *e = getenv("CHUNKGEN_TEST_EXHAUSTIVE");
    int exhaustive = e && *e && strcmp(e, "0") != 0;
    each_isa(narrow_all, &exhaustive);
}

/* Rows of every short length: the tails and a float32 row (a plain copy). */
static void short_rows(const cg_cpu_isa_ops *ops, void *user) {
    (void)user;
    float src[40], back[40];
    uint16_t h[40];
    int fails = 0;
    for (int n = 0; n <= 37; n++) {
        for (int i = 0; i < 40; i++) src[i] = (float)(i * 0.3711 - 5.0) * (i % 3 ? 1.0f : 1e-6f), h[i] = 0xdead;
        const cg_dtype dts[] = {CG_BF16, CG_F16};
        for (int di = 0; di < 2; di++) {
            ops->st_row(h + 1, dts[di], src + 1, n);
            for (int i = 0; i < 40; i++) {
                const uint16_t want = (i >= 1 && i < n + 1) ? cht_narrow(src[i], dts[di]) : 0xdead;
                if (h[i] != want) report(&fails, ops->name, "row store", (uint32_t)(n * 100 + i), h[i], want);
            }
            for (int i = 0; i < 40; i++) back[i] = -1.0f;
            ops->ld_row(back + 1, h + 1, dts[di], n);
            for (int i = 0; i < 40; i++) {
                const float want = (i >= 1 && i < n + 1) ? cht_widen(h[i], dts[di]) : -1.0f;
                if (cg__f32_bits(back[i]) != cg__f32_bits(want))
                    report(&fails, ops->name, "row load", (uint32_t)(n * 100 + i), cg__f32_bits(back[i]),
                           cg__f32_bits(want));
            }
            for (int i = 0; i < 40; i++) h[i] = 0xdead;
        }
        for (int i = 0; i < 40; i++) back[i] = -1.0f;
        ops->ld_row(back, src, CG_F32, n);
        for (int i = 0; i < 40; i++)
            if (cg__f32_bits(back[i]) != cg__f32_bits(i < n ? src[i] : -1.0f))
                report(&fails, ops->name, "float32 row", (uint32_t)i, cg__f32_bits(back[i]), cg__f32_bits(src[i]));
    }
    CG_CHECK(fails == 0, "%s: %d row conversion errors", ops->name, fails);
}

CG_TEST(cpu_half_short_rows) { each_isa(short_rows, NULL); }
