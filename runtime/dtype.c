/* dtype.c -- the dtypes' words and sizes and the 16-bit conversions, public (chunkgen.h):
 * the same helpers the library uses (internal.h, half.h), for callers. */
#include "internal.h"
#include "half.h"

#include <string.h>

static const char *const k_words[] = {"f32", "f64", "bf16", "f16", "i32", "i64"};
#define NWORDS ((int)(sizeof k_words / sizeof k_words[0]))
_Static_assert(CG_I64 == NWORDS - 1, "a word for every cg_dtype");

const char *cg_dtype_name(cg_dtype dt) { return (unsigned)dt < (unsigned)NWORDS ? k_words[dt] : NULL; }

cg_status cg_dtype_parse(const char *name, cg_dtype *dt) {
    for (int k = 0; name && k < NWORDS; k++)
        if (!strcmp(name, k_words[k])) {
            if (dt) *dt = (cg_dtype)k;
            return CG_OK;
        }
    return CG_EINVAL;
}

size_t cg_dtype_size(cg_dtype dt) { return (unsigned)dt < (unsigned)NWORDS ? cg__dtype_size(dt) : 0; }

float cg_bf16_to_f32(uint16_t h) { return cg__bf16_to_f32(h); }
uint16_t cg_f32_to_bf16(float x) { return cg__f32_to_bf16(x); }
float cg_f16_to_f32(uint16_t h) { return cg__f16_to_f32(h); }
uint16_t cg_f32_to_f16(float x) { return cg__f32_to_f16(x); }
