/* test_cuda_gpu.c -- one small problem per generated kernel on a real GPU, against the
 * float64 reference: every op (SSD and selective scan, forward and backward) in float32,
 * bf16 and f16 storage (SSD's 16-bit calls run the mma m16n8k16 / ldmatrix kernels on
 * sm_80+), and every op packed (cu_seqlens read on the device) against its per-sequence
 * calls and the reference. Default configs, host tensors (the launcher stages them).
 *
 * Small on purpose: it is what bench/device-check.sh runs under compute-sanitizer's
 * memcheck, racecheck and synccheck (one small shape per kernel), and one of the
 * `ctest -L '^gpu$'` tests. Skipped without a GPU. */
#include "test_dtype_lib.h"
#include "varlen_testlib.h"

#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"
#include "gen.h"

#include <string.h>

/* Odd small extents: T and L not a multiple of any chunk, dk / dv / D / N not powers of
 * two, G = 1 < H = 2. */
static void small_dims(const cg_op_desc *d, int64_t dims[CG_SYM_COUNT]) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_NONE] = 1;
    dims[CG_SYM_B] = 2, dims[CG_SYM_G] = 1;
    if (!strcmp(d->family, "ssd")) dims[CG_SYM_T] = 45, dims[CG_SYM_H] = 2, dims[CG_SYM_DK] = 40, dims[CG_SYM_DV] = 24;
    else dims[CG_SYM_L] = 45, dims[CG_SYM_D] = 24, dims[CG_SYM_N] = 7;
}

/* op with its 16-bit-capable tensors in half (CG_F32: all float32) on the GPU against
 * the float64 reference on the same (rounded) inputs: every output within its target. */
static void check_op(cg_context *ctx, cg_op op, cg_dtype half, uint64_t seed) {
    const cg_op_desc *d = cg__op_desc(op);
    int64_t dims[CG_SYM_COUNT];
    small_dims(d, dims);
    dtt_prob p, r;
    dtt_new(&p, op, dims, 0, 0, half, CG_F32, 0);
    dtt_new(&r, op, dims, 0, 0, CG_F64, CG_F64, 0);
    dtt_fill(&p, seed);
    dtt_copy_inputs(&r, &p);
    for (int i = 0; i < d->nt; i++) /* outputs start as NaN: one left unwritten fails */
        if (d->t[i].role == CG_TD_OUT && p.t[i].t.data) cg_tbuf_fill(&p.t[i], &(cg_rng){seed}, NAN, NAN);
    cg_status s = dtt_run(ctx, &p, CG_BACKEND_CUDA);
    CG_CHECK(s == CG_OK, "%s %s on cuda: %s: %s", d->name, cg__dtype_name(half), cg_status_str(s), cg_errmsg(ctx));
    const char *line = cg_last_dispatch(ctx);
    CG_CHECK(s != CG_OK || strstr(line, "kernel="), "%s: the dispatch line names no kernel: %s", d->name, line);
    CG_CHECK_OK(ctx, dtt_run(ctx, &r, CG_BACKEND_REF));
    for (int i = 0; s == CG_OK && i < d->nt; i++) {
        if (d->t[i].role != CG_TD_OUT || !p.t[i].t.data) continue;
        const double err = cg_rel_err(&p.t[i], &r.t[i]), tol = cg__tol_dtype(d->t[i].tol, p.t[i].t.dtype);
        CG_CHECK(err <= tol, "%s %s on cuda: %s rel err %.3g > %.0e [%s]", d->name, cg__dtype_name(half),
                 d->t[i].name, err, tol, line);
    }
    dtt_free(&p);
    dtt_free(&r);
}

CG_TEST(cuda_gpu_each_kernel) {
    cg_devinfo dev;
    cg_context *ctx = cg_test_device_context(CG_BACKEND_CUDA, &dev);
    if (!ctx) return;
    static const cg_dtype dts[] = {CG_F32, CG_BF16, CG_F16};
    for (int op = 0; op < CG_OP_COUNT; op++) {
        for (int k = 0; k < 3; k++) check_op(ctx, (cg_op)op, dts[k], 11 + 7 * (uint64_t)op + (uint64_t)k);
        /* packed: lengths 1, 37, 64, 200, 0, 5 against the per-sequence calls and the reference */
        int64_t dims[CG_SYM_COUNT];
        small_dims(cg__op_desc((cg_op)op), dims);
        vl_check_packed((cg_op)op, dims, 0, CG_BACKEND_CUDA, CG_I32, 0, 31 + (uint64_t)op, 0);
    }
    cg_context_free(ctx);
}
