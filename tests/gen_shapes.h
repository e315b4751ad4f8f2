/* gen_shapes.h -- the generator tests' odd shapes and the CPU-space test, shared by
 * test_gen.c (rendering, pins, spaces) and test_gen_nvrtc.c (every config through NVRTC). */
#ifndef CG_TEST_GEN_SHAPES_H
#define CG_TEST_GEN_SHAPES_H
#include "cg_test.h"
#include "gen.h"

/* Odd shapes: dk/dv not powers of two, T not a multiple of any chunk. Each also
 * carries a selective-scan shape (L = T, D channels, N states) and varied flags, so
 * every kernel family gets shapes. */
static const struct { int64_t B, T, G, H, dk, dv, D, N; int flags; } k_shapes[] = {
    {1, 5, 1, 1, 7, 7, 7, 16, 0},
    {2, 100, 1, 2, 40, 48, 40, 7, CG_KS_H0 | CG_KS_SOFTPLUS | CG_KS_HAS_D},
    {1, 193, 2, 4, 48, 40, 48, 5, CG_KS_HT | CG_KS_GROUPED | CG_KS_HAS_Z | CG_KS_HAS_BIAS},
    {1, 33, 1, 3, 130, 130, 130, 32,
     CG_KS_H0 | CG_KS_HT | CG_KS_DHT | CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS},
    {1, 1, 1, 1, 96, 200, 96, 1, CG_KS_HAS_D | CG_KS_DHT},
};
#define NSHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

/* Shape i as the generator takes it: a cg_shape with every symbol set (the generator reads
 * the symbols of its kernel's op); its flags, k_shapes[i].flags, go with it as the extra
 * flags of cg__gen_plan and the like (gen.h). */
static inline cg_shape shape_of(int i) {
    cg_shape s = {.size = sizeof s};
    s.dim[CG_SYM_B] = k_shapes[i].B;
    s.dim[CG_SYM_T] = k_shapes[i].T;
    s.dim[CG_SYM_G] = k_shapes[i].G;
    s.dim[CG_SYM_H] = k_shapes[i].H;
    s.dim[CG_SYM_DK] = k_shapes[i].dk;
    s.dim[CG_SYM_DV] = k_shapes[i].dv;
    s.dim[CG_SYM_L] = k_shapes[i].T;
    s.dim[CG_SYM_D] = k_shapes[i].D;
    s.dim[CG_SYM_N] = k_shapes[i].N;
    return s;
}
#define FLAGS_OF(i) (k_shapes[i].flags)

/* A CPU space (generator/cpu/<name>.lua): core.lua holds every description there to
 * backend = "cpu" and every one in generator/kernels/ to none, so the directory says it. */
static inline int is_cpu_space(cg_context *ctx, const char *name) {
    char rel[128], *text = NULL;
    snprintf(rel, sizeof rel, "generator/cpu/%s.lua", name);
    cg_status st = cg__gen_read_file(ctx, rel, &text, NULL);
    free(text);
    if (st != CG_OK) ctx->errmsg[0] = '\0';
    return st == CG_OK;
}

#endif
