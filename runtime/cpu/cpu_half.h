/* cpu_half.h -- bfloat16 / float16 tensors in the CPU path: widened to float32 as the
 * kernels pack their tiles, narrowed as they store their outputs (issue #15; no copies of
 * whole tensors). The math and every accumulation stay float32; an output is rounded
 * once, to nearest even, bit for bit as runtime/half.h does (the one scalar definition).
 *
 * Row converters (cpu_half.c, built per ISA variant like the kernels): vectors of the
 * variant's width -- bf16 by 16-bit shifts and integer round-to-nearest-even, fp16 by
 * F16C's vcvtph2ps / vcvtps2ph in the avx2 and avx512 variants (with signalling NaNs
 * kept signalling on the way in, as half.h does), integer code in the baseline. The
 * kernels call them once per tile row and keep their float32 code as it was: the dtype
 * is decided per row or panel, never per element in an inner loop. */
#ifndef CG_CPU_HALF_H
#define CG_CPU_HALF_H

#include "cpu_isa.h" /* internal.h; the per-variant names below */
#include "half.h"

#include <stdint.h>

/* Bytes per element of storage dtype dt (internal.h's cg__dtype_size, as int64_t). */
static inline int64_t cg__dt_bytes(cg_dtype dt) { return (int64_t)cg__dtype_size(dt); }

/* The address of element off (in elements) of view v. */
static inline void *cg__vat(const cg_view *v, int64_t off) { return (char *)v->p + off * cg__dt_bytes(v->dt); }

/* One element at p[i] of dtype dt as float / stored from float. Meant to be inlined with
 * a constant dt (a kernel specialized per dtype), where the switch disappears. */
static inline __attribute__((always_inline)) float cg__ld1(const void *p, int64_t i, cg_dtype dt) {
    switch (dt) {
    case CG_BF16: return cg__bf16_to_f32(((const uint16_t *)p)[i]);
    case CG_F16: return cg__f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
static inline __attribute__((always_inline)) void cg__st1(void *p, int64_t i, cg_dtype dt, float x) {
    switch (dt) {
    case CG_BF16: ((uint16_t *)p)[i] = cg__f32_to_bf16(x); break;
    case CG_F16: ((uint16_t *)p)[i] = cg__f32_to_f16(x); break;
    default: ((float *)p)[i] = x; break;
    }
}

/* dst[0, n) = src[0, n) widened from dtype dt (CG_F32, CG_BF16 or CG_F16). */
void cg__cpu_ld_row(float *restrict dst, const void *restrict src, cg_dtype dt, int64_t n);
/* dst[0, n) = src[0, n) rounded to dtype dt (to nearest even; NaN stays NaN). */
void cg__cpu_st_row(void *restrict dst, cg_dtype dt, const float *restrict src, int64_t n);

/* Rows: dst[i * ldd + j] = src[i * ss + j] (elements of dt) for j < w, 0 for w <= j < wp. */
void cg__cpu_ld_rows(float *restrict dst, int64_t ldd, const void *restrict src, cg_dtype dt, int64_t ss, int64_t rows,
                     int64_t w, int64_t wp);
/* Rows: dst[i * sd + j] (elements of dt) = src[i * lds + j] for j < w. */
void cg__cpu_st_rows(void *restrict dst, cg_dtype dt, int64_t sd, const float *restrict src, int64_t lds, int64_t rows,
                     int64_t w);

#endif /* CG_CPU_HALF_H */
