/* test_varlen.c -- packed variable-length batches (cu_seqlens, docs/varlen.md) on the
 * host backends: a packed call equals the per-sequence calls concatenated, forward and
 * every gradient, states per sequence (0-length sequences pass their state through). */
#include "varlen_testlib.h"

#include <string.h>

static void ssd_dims(int64_t dims[CG_SYM_COUNT]) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_B] = 1, dims[CG_SYM_G] = 2, dims[CG_SYM_H] = 4, dims[CG_SYM_DK] = 5, dims[CG_SYM_DV] = 7;
}
static void sscan_dims(int64_t dims[CG_SYM_COUNT]) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_B] = 1, dims[CG_SYM_D] = 6, dims[CG_SYM_N] = 5, dims[CG_SYM_G] = 2;
}

/* Both layouts, int32 and int64 offsets, states given and (bit 4: h0 / bit of dhT) absent. */
static void check_ssd(cg_backend be) {
    int64_t dims[CG_SYM_COUNT];
    ssd_dims(dims);
    for (int op = CG_OP_SSD_FWD; op <= CG_OP_SSD_BWD; op++)
        for (int hm = 0; hm < 2; hm++) {
            vl_check_packed((cg_op)op, dims, hm, be, hm ? CG_I64 : CG_I32, 0, 16 + (uint64_t)op * 2 + (uint64_t)hm, 0);
            const cg_op_desc *d = cg__op_desc((cg_op)op);
            unsigned omit = 1u << cg__op_tensor(d, "h0");
            if (d->bwd) omit |= 1u << cg__op_tensor(d, "dhT");
            vl_check_packed((cg_op)op, dims, hm, be, CG_I32, omit, 99, 0);
        }
}
static void check_sscan(cg_backend be) {
    int64_t dims[CG_SYM_COUNT];
    sscan_dims(dims);
    for (int op = CG_OP_SSCAN_FWD; op <= CG_OP_SSCAN_BWD; op++) {
        vl_check_packed((cg_op)op, dims, 0, be, CG_I64, 0, 7 + (uint64_t)op, 0);
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        unsigned omit = 1u << cg__op_tensor(d, "h0");
        if (d->bwd) omit |= 1u << cg__op_tensor(d, "dhT");
        vl_check_packed((cg_op)op, dims, 0, be, CG_I32, omit, 5, 0);
    }
}

CG_TEST(varlen_ssd_ref) { check_ssd(CG_BACKEND_REF); }
CG_TEST(varlen_ssd_cpu) { check_ssd(CG_BACKEND_CPU); }
CG_TEST(varlen_sscan_ref) { check_sscan(CG_BACKEND_REF); }
CG_TEST(varlen_sscan_cpu) { check_sscan(CG_BACKEND_CPU); }
