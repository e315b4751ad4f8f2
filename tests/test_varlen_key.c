/* test_varlen_key.c -- varlen calls are their own tuning-key class (docs/varlen.md):
 * bucketed by the packed total and by the longest sequence; every other key unchanged. */
#include "test_dtype_lib.h"
#include "tune_testlib.h"

#include <string.h>

/* The key text of op over a validated problem with offsets cu (NULL: a plain B = 1 call). */
static void key_of(cg_context *ctx, cg_op op, int64_t total, const int64_t *cu, int n, cg_tune_shape *s, char *text,
                   size_t cap, char *brief) {
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_B] = 1, dims[CG_SYM_G] = 1, dims[CG_SYM_H] = 2, dims[CG_SYM_DK] = 3, dims[CG_SYM_DV] = 4;
    dims[CG_SYM_T] = total;
    dtt_prob p;
    const cg_op_desc *d = cg__op_desc(op);
    dtt_new(&p, op, dims, 0, 0, CG_F32, CG_F32, 1u << cg__op_tensor(d, "h0") | 1u << cg__op_tensor(d, "hT")); /* no states */
    int64_t shape[1] = {n};
    cg_tbuf c = cg_tbuf_new(CG_I64, 1, shape);
    for (int i = 0; i < n && cu; i++) ((int64_t *)c.mem)[i] = cu[i];
    void *args = (void *)dtt_args(&p);
    if (cu) *(cg_tensor *)((char *)args + p.d->varlen->arg_off) = c.t;
    union {
        cg_ssd_prob ssd;
        cg_sscan_prob sscan;
    } pr;
    CG_CHECK_OK(ctx, cg__op_validate(ctx, p.d, args, &pr));
    cg__tune_shape_of(op, &pr, s);
    cg_tune_key k;
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", s, p.d->bwd, &k));
    cg__tune_key_text(&k, 1, text, cap);
    cg__tune_key_brief(&k, brief, 200);
    cg_tbuf_free(&c);
    dtt_free(&p);
}

CG_TEST(varlen_tune_key_class) {
    CG_TEST_CONTEXT(ctx);
    cg_tune_shape s;
    char a[1024], b[1024], c[1024], ba[200], bb[200], bc[200];
    const int64_t cu[] = {0, 1, 38, 102, 302, 302, 307}; /* lengths 1, 37, 64, 200, 0, 5 */
    key_of(ctx, CG_OP_SSD_FWD, 307, cu, 7, &s, a, sizeof a, ba);
    CG_CHECK(s.shape.longest == 200, "longest sequence %lld, expected 200", (long long)s.shape.longest);
    CG_CHECK(strstr(a, "seq=512;varlen=256;") != NULL, "varlen key text: %s", a);
    CG_CHECK(strstr(ba, "T<=512 varlen max<=256") != NULL, "varlen key brief: %s", ba);
    key_of(ctx, CG_OP_SSD_FWD, 307, NULL, 0, &s, b, sizeof b, bb);
    CG_CHECK(s.shape.longest == 0 && !strstr(b, "varlen") && !strstr(bb, "varlen"), "plain key names varlen: %s / %s", b, bb);
    CG_CHECK(strcmp(a, b) != 0, "varlen and plain calls share a key: %s", a);
    /* another length mix, same buckets: the same key; a longer longest sequence: another */
    const int64_t cu2[] = {0, 150, 307};
    key_of(ctx, CG_OP_SSD_FWD, 307, cu2, 3, &s, c, sizeof c, bc);
    CG_CHECK(!strcmp(a, c), "same buckets, different keys: %s vs %s", a, c);
    const int64_t cu3[] = {0, 300, 307};
    key_of(ctx, CG_OP_SSD_FWD, 307, cu3, 3, &s, c, sizeof c, bc);
    CG_CHECK(strstr(c, "varlen=512;") != NULL && strcmp(a, c), "longest %lld: %s", (long long)s.shape.longest, c);
    cg_context_free(ctx);
}

/* A varlen and a plain SSD forward of total tokens, both with a store entry of their own
 * key: each call takes its own entry's config, and the varlen key reads back from JSON. */
CG_TEST(varlen_tune_store_roundtrip) {
    char dir[64] = "/tmp/cg_varlen_tune_XXXXXX";
    if (!mkdtemp(dir)) abort();
    cg_context *ctx = tune_test_ctx(dir);
    const int64_t cu[] = {0, 1, 38, 102, 302, 302, 307};
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_B] = 1, dims[CG_SYM_G] = 1, dims[CG_SYM_H] = 2, dims[CG_SYM_DK] = 16, dims[CG_SYM_DV] = 8;
    dims[CG_SYM_T] = 307;
    const cg_op_desc *d = cg__op_desc(CG_OP_SSD_FWD);
    dtt_prob p;
    dtt_new(&p, CG_OP_SSD_FWD, dims, 0, 0, CG_F32, CG_F32, 1u << cg__op_tensor(d, "h0") | 1u << cg__op_tensor(d, "hT"));
    dtt_fill(&p, 4);
    int64_t shape[1] = {7};
    cg_tbuf c = cg_tbuf_new(CG_I64, 1, shape);
    memcpy(c.mem, cu, sizeof cu);
    const char *cfgs[2] = {"chunk=32,block_dv=8,threads=1", "chunk=16,block_dv=8,threads=1"};
    cg_tune_key keys[2];
    for (int varlen = 0; varlen < 2; varlen++) { /* one entry per key */
        void *args = (void *)dtt_args(&p);
        if (varlen) *(cg_tensor *)((char *)args + d->varlen->arg_off) = c.t;
        union {
            cg_ssd_prob ssd;
            cg_sscan_prob sscan;
        } pr;
        CG_CHECK_OK(ctx, cg__op_validate(ctx, d, args, &pr));
        cg_tune_entry e;
        tune_test_entry(ctx, &e, 307, 8, 0, cfgs[varlen], 0, 1.0, 0.01);
        cg__tune_shape_of(CG_OP_SSD_FWD, &pr, &e.shape);
        CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &e.shape, 0, &e.key));
        keys[varlen] = e.key;
        CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e));
        cg__tune_entry_free(&e);
    }
    cg_tune_entry back;
    CG_CHECK_OK(ctx, cg__tune_store_get(ctx, cg__tune_store_dir(ctx), &keys[1], &back));
    CG_CHECK(back.key.varlen == 256, "varlen key read back with varlen = %lld", (long long)back.key.varlen);
    cg__tune_entry_free(&back);
    for (int varlen = 0; varlen < 2; varlen++) {
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = CG_BACKEND_CPU;
        void *args = (void *)dtt_args(&p);
        if (varlen) *(cg_tensor *)((char *)args + d->varlen->arg_off) = c.t;
        CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, args, &ex));
        char want[128];
        snprintf(want, sizeof want, "config=%s source=exact", cfgs[varlen]);
        CG_CHECK(strstr(cg_last_dispatch(ctx), want) != NULL, "%s call: %s (expected %s)", varlen ? "varlen" : "plain",
                 cg_last_dispatch(ctx), want);
    }
    cg_tbuf_free(&c);
    dtt_free(&p);
    cg_context_free(ctx);
}
