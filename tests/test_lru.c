/* test_lru.c -- the LRU's CPU path (runtime/cpu/lru_cpu.c) on problems built from the op
 * table, against the op's float64 reference (runtime/ref/ref_lru.c) on the same rounded
 * inputs: float32, bfloat16 and float16 storage, both layouts, L = 1, odd L and D, more
 * channels than a block, the states on and off, a packed variable-length batch; and its
 * bits across thread counts and block widths. (tests/test_ref.c checks the reference's
 * gradients against finite differences; tests/test_conformance.c runs it on every backend.) */
#include "test_dtype_lib.h"

#include <string.h>

typedef struct lcase {
    const char *name;
    int64_t B, L, D;
    int hm, states;
    const char *config; /* pins, or NULL */
} lcase;

static const lcase k_lcases[] = {
    {"l1_d4", 2, 1, 4, 0, 1, NULL},
    {"l37_d37_head", 2, 37, 37, 1, 1, NULL},
    {"l130_d5_bare", 1, 130, 5, 0, 0, NULL},
    {"l333_d200_blocks", 3, 333, 200, 0, 1, NULL},
    {"l99_d70_block16_threads2", 2, 99, 70, 0, 1, "block=16,threads=2"},
    {"l64_d9_head_bare", 1, 64, 9, 1, 0, NULL},
};

static void lnew(dtt_prob *p, cg_op op, const lcase *c, cg_dtype half, cg_dtype other, uint64_t seed) {
    const cg_op_desc *d = cg__op_desc(op);
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_B] = c->B, dims[CG_SYM_L] = c->L, dims[CG_SYM_D] = c->D;
    unsigned omit = 0;
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].optional && !c->states) omit |= 1u << i;
    dtt_new(p, op, dims, 0, c->hm, half, other, omit);
    dtt_fill(p, seed);
}

/* Every output of p (run on the cpu with config) within the table's tolerance of r (the
 * reference on the same inputs, float64). */
static void compare(cg_context *ctx, dtt_prob *p, dtt_prob *r, const void *a, const void *ar, const char *config,
                    const char *what) {
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = CG_BACKEND_CPU;
    ex.config = config;
    cg_status st = cg_run(ctx, p->d->op, a, &ex);
    CG_CHECK(st == CG_OK, "%s: cpu: %s", what, cg_errmsg(ctx));
    ex.backend = CG_BACKEND_REF;
    ex.config = NULL;
    st = cg_run(ctx, p->d->op, ar, &ex);
    CG_CHECK(st == CG_OK, "%s: ref: %s", what, cg_errmsg(ctx));
    dtt_check_outputs(p, r, what);
}

static void check_all(cg_dtype half) {
    CG_TEST_CONTEXT(ctx);
    for (size_t k = 0; k < sizeof k_lcases / sizeof k_lcases[0]; k++)
        for (int op = CG_OP_LRU_FWD; op <= CG_OP_LRU_BWD; op++) {
            const lcase *c = &k_lcases[k];
            const uint64_t seed = 91 + k * 7 + (uint64_t)op;
            dtt_prob p, r;
            lnew(&p, (cg_op)op, c, half, CG_F32, seed);
            lnew(&r, (cg_op)op, c, CG_F64, CG_F64, seed);
            dtt_copy_inputs(&r, &p); /* the rounded inputs */
            char what[128];
            snprintf(what, sizeof what, "%s %s %s", p.d->name, c->name, cg_dtype_name(half));
            cg_args_any a, ar;
            memcpy(&a, dtt_args(&p), sizeof a);
            memcpy(&ar, dtt_args(&r), sizeof ar);
            compare(ctx, &p, &r, &a, &ar, c->config, what);
            dtt_free(&p), dtt_free(&r);
        }
    cg_context_free(ctx);
}

CG_TEST(lru_cpu_vs_ref_f32) { check_all(CG_F32); }
CG_TEST(lru_cpu_vs_ref_bf16) { check_all(CG_BF16); }
CG_TEST(lru_cpu_vs_ref_f16) { check_all(CG_F16); }

/* A packed batch: sequences of 1, 39, 0 and 60 tokens, states per sequence, both layouts. */
CG_TEST(lru_cpu_varlen) {
    CG_TEST_CONTEXT(ctx);
    const int32_t offs[] = {0, 1, 40, 40, 100};
    int64_t n = 5;
    cg_tbuf cu = cg_tbuf_new(CG_I32, 1, &n);
    memcpy(cu.mem, offs, sizeof offs);
    for (int hm = 0; hm < 2; hm++)
        for (int op = CG_OP_LRU_FWD; op <= CG_OP_LRU_BWD; op++) {
            const lcase c = {"varlen", 1, 100, 37, hm, 1, NULL};
            dtt_prob p, r;
            lnew(&p, (cg_op)op, &c, CG_F32, CG_F32, 5 + (uint64_t)op);
            lnew(&r, (cg_op)op, &c, CG_F64, CG_F64, 5 + (uint64_t)op);
            for (dtt_prob *x = &p; x; x = x == &p ? &r : NULL) /* states: one row per sequence */
                for (int i = 0; i < x->d->nt; i++) {
                    if (!(x->d->t[i].flags & CG_TD_PERSEQ)) continue;
                    int64_t sh[2] = {4, 37};
                    cg_dtype dt = x->t[i].t.dtype;
                    cg_tbuf_free(&x->t[i]);
                    x->t[i] = cg_tbuf_new(dt, 2, sh);
                }
            dtt_fill(&p, 17 + (uint64_t)op);
            dtt_copy_inputs(&r, &p);
            cg_args_any a, ar;
            memcpy(&a, dtt_args(&p), sizeof a);
            memcpy(&ar, dtt_args(&r), sizeof ar);
            *(cg_tensor *)((char *)&a + p.d->varlen->arg_off) = cu.t;
            *(cg_tensor *)((char *)&ar + p.d->varlen->arg_off) = cu.t;
            char what[64];
            snprintf(what, sizeof what, "%s varlen hm=%d", p.d->name, hm);
            compare(ctx, &p, &r, &a, &ar, NULL, what);
            dtt_free(&p), dtt_free(&r);
        }
    cg_tbuf_free(&cu);
    cg_context_free(ctx);
}

/* The same bits for any thread count and block width (each channel's arithmetic is the same). */
CG_TEST(lru_cpu_bits_across_threads) {
    CG_TEST_CONTEXT(ctx);
    const char *configs[] = {"threads=1,block=64", "threads=2,block=64", "threads=4,block=16", "threads=3,block=256",
                             "threads=2,block=1"};
    for (int op = CG_OP_LRU_FWD; op <= CG_OP_LRU_BWD; op++)
        for (cg_dtype half = CG_F32; half <= CG_F16; half = (cg_dtype)(half == CG_F32 ? CG_BF16 : half + 1)) {
            const lcase c = {"bits", 3, 301, 203, 0, 1, NULL};
            dtt_prob first;
            lnew(&first, (cg_op)op, &c, half, CG_F32, 3);
            cg_exec ex = CG_EXEC_INIT;
            ex.backend = CG_BACKEND_CPU;
            ex.config = configs[0];
            CG_CHECK_OK(ctx, dtt_run(ctx, &first, CG_BACKEND_CPU));
            for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
                dtt_prob p;
                lnew(&p, (cg_op)op, &c, half, CG_F32, 3);
                ex.config = configs[k];
                CG_CHECK_OK(ctx, cg_run(ctx, p.d->op, dtt_args(&p), &ex));
                const char *diff = dtt_first_diff(&first, &p);
                CG_CHECK(!diff, "%s %s %s: %s differs from the default config's", p.d->name, cg_dtype_name(half),
                         configs[k], diff ? diff : "");
                dtt_free(&p);
            }
            dtt_free(&first);
        }
    cg_context_free(ctx);
}

/* No generated kernel yet: auto runs host tensors on the cpu; emulate refuses by name; a
 * bad pin on the cpu is refused naming it. */
CG_TEST(lru_auto_cpu_and_refusals) {
    CG_TEST_CONTEXT(ctx);
    const lcase c = {"auto", 2, 9, 5, 0, 1, NULL};
    for (int op = CG_OP_LRU_FWD; op <= CG_OP_LRU_BWD; op++) {
        dtt_prob p;
        lnew(&p, (cg_op)op, &c, CG_F32, CG_F32, 21);
        CG_CHECK_OK(ctx, dtt_run(ctx, &p, CG_BACKEND_AUTO));
        CG_CHECK(strstr(cg_last_dispatch(ctx), "backend=cpu (auto: host pointers)") != NULL, "%s",
                 cg_last_dispatch(ctx));
        CG_CHECK_REFUSED(ctx, dtt_run(ctx, &p, CG_BACKEND_EMULATE), CG_EUNSUPPORTED, "no kernel", p.d->name);
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = CG_BACKEND_CPU;
        ex.config = "block=2000";
        CG_CHECK(cg_run(ctx, p.d->op, dtt_args(&p), &ex) != CG_OK && strstr(cg_errmsg(ctx), "block"),
                 "%s: block=2000 (above 1024): %s", p.d->name, cg_errmsg(ctx));
        dtt_free(&p);
    }
    cg_context_free(ctx);
}
