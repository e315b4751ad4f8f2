/* test_gdr_cpu_half.c -- the gated delta rule's chunked CPU path (cg__gdr_cpu_chunk_fwd /
 * _bwd, runtime/cpu/gdr_cpu_chunk*.c) on problems built and validated through the op
 * table, against the op's float64 reference (runtime/ref/ref_gdr.c) on the same rounded
 * inputs, with float32, bfloat16 and float16 storage: every output within the table's
 * tolerance for its dtype (fla's own for 16-bit), both layouts, odd shapes, a given scale,
 * the L2 norm and the states on and off. (test_gdr_cpu.c checks float32 against a loop of
 * its own at 1e-4 and the bits across thread counts.) */
#include "gdr_testlib.h"

#include <math.h>
#include <string.h>

typedef struct hcase {
    gdr_case c;
    int chunk; /* 0: the default */
} hcase;

static const hcase k_hcases[] = {
    {{"t1", 2, 1, 2, 6, 48, 40, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}}, 0},
    {{"t65_head", 1, 65, 2, 6, 48, 40, 1, 1, 1, 0, 0, 0, 0, 0, 0, {0}}, 0},
    {{"t130_dk7_dv5_bare", 1, 130, 1, 3, 7, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}}, 0},
    {{"t100_beta_near2", 1, 100, 2, 4, 32, 24, 0, 1, 1, 1.9, 1.999, 0, 0, 0, 0, {0}}, 0},
    {{"t90_scale_chunk16_head", 2, 90, 1, 2, 24, 40, 1, 0, 1, 0, 0, 0, 0, 0.3, 0, {0}}, 16},
    {{"t150_d128", 1, 150, 1, 2, 128, 128, 0, 1, 1, 0, 0, 0, 0, 0, 0, {0}}, 0},
};

/* p's args with the case's scalars. */
static cg_args_any hargs(dtt_prob *p, const hcase *c) {
    cg_args_any a;
    memcpy(&a, gdr_case_args(p, NULL, &c->c), sizeof a);
    return a;
}

static void check_case(const hcase *c, cg_op op, cg_dtype half) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return;
    const uint64_t seed = 77 + (uint64_t)(c - k_hcases) * 13 + (uint64_t)op;
    dtt_prob p, r;
    cg_tbuf cu; /* (no varlen case) */
    gdr_case_new(&p, &cu, op, &c->c, half, CG_F32, seed, 0x51);
    gdr_case_new(&r, &cu, op, &c->c, CG_F64, CG_F64, seed, 0x51);
    dtt_copy_inputs(&r, &p); /* the rounded inputs */
    const char *dn = cg_dtype_name(half);
    cg_args_any a = hargs(&p, c), ar = hargs(&r, c);
    cg_gdr_prob prob;
    cg_cfg cfg;
    char pins[32] = "";
    if (c->chunk) snprintf(pins, sizeof pins, "chunk=%d", c->chunk);
    cg_status st = cg__op_validate(ctx, p.d, &a, &prob);
    if (st == CG_OK) st = cg__cfg_parse(ctx, pins, &cfg);
    if (st == CG_OK)
        st = op == CG_OP_GDR_FWD ? cg__gdr_cpu_chunk_fwd(ctx, &prob, &cfg, NULL) : cg__gdr_cpu_chunk_bwd(ctx, &prob, &cfg, NULL);
    CG_CHECK(st == CG_OK, "%s %s %s: chunked cpu: %s", p.d->name, c->c.name, dn, cg_errmsg(ctx));
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = CG_BACKEND_REF;
    st = cg_run(ctx, op, &ar, &ex);
    CG_CHECK(st == CG_OK, "%s %s %s: ref: %s", p.d->name, c->c.name, dn, cg_errmsg(ctx));
    char what[128];
    snprintf(what, sizeof what, "%s %s %s", p.d->name, c->c.name, dn);
    dtt_check_outputs(&p, &r, what);
    dtt_free(&p), dtt_free(&r);
    cg_context_free(ctx);
}

static void check_all(cg_dtype half) {
    for (size_t k = 0; k < sizeof k_hcases / sizeof k_hcases[0]; k++)
        for (int op = CG_OP_GDR_FWD; op <= CG_OP_GDR_BWD; op++) check_case(&k_hcases[k], (cg_op)op, half);
}

CG_TEST(gdr_cpu_chunk_table_f32) { check_all(CG_F32); }
CG_TEST(gdr_cpu_chunk_table_bf16) { check_all(CG_BF16); }
CG_TEST(gdr_cpu_chunk_table_f16) { check_all(CG_F16); }
