/* test_varlen_bad.c -- a bad cu_seqlens (docs/varlen.md) is refused with a message naming
 * the first bad entry; states must be per sequence; the generated-kernel backends refuse
 * variable-length batches until their kernels take them. */
#include "test_dtype_lib.h"
#include "gen.h"

#include <string.h>

/* A problem of op with B = b and T (L) = total; states with `rows` rows; cu [n] of vals. */
typedef struct bad_case {
    dtt_prob p;
    cg_tbuf cu;
} bad_case;

static void bad_dims(const cg_op_desc *d, int64_t b, int64_t total, int64_t dims[CG_SYM_COUNT]) {
    memset(dims, 0, CG_SYM_COUNT * sizeof *dims);
    if (d->seq == CG_SYM_T) dims[CG_SYM_G] = 1, dims[CG_SYM_H] = 2, dims[CG_SYM_DK] = 3, dims[CG_SYM_DV] = 4;
    else dims[CG_SYM_D] = 4, dims[CG_SYM_N] = 3, dims[CG_SYM_G] = 1;
    dims[CG_SYM_B] = b;
    dims[d->seq] = total;
}

/* "h0: shape (1, 2, 3, 4) but expected (2, 2, 3, 4)": the message for h0 given with `rows`
 * rows where `want` sequences need one each (the op table's extents). */
static void h0_rows_msg(const cg_op_desc *d, int64_t rows, int64_t want, char *buf, size_t cap) {
    int64_t dims[CG_SYM_COUNT], shape[4];
    bad_dims(d, 1, 10, dims);
    const int nd = cg__op_given_shape(d, cg__op_tensor(d, "h0"), dims, 0, 0, shape);
    size_t m = (size_t)snprintf(buf, cap, "h0: shape (");
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < nd && m < cap; k++)
            m += (size_t)snprintf(buf + m, cap - m, "%s%lld", k ? ", " : "", (long long)(k ? shape[k] : pass ? want : rows));
        if (m < cap) m += (size_t)snprintf(buf + m, cap - m, pass ? ")" : ") but expected (");
    }
}

static void bad_new(bad_case *c, cg_op op, int64_t b, int64_t total, int64_t rows, cg_dtype cudt, int ndim,
                    const int64_t *vals, int n) {
    int64_t dims[CG_SYM_COUNT];
    const cg_op_desc *d = cg__op_desc(op);
    bad_dims(d, b, total, dims);
    dtt_new(&c->p, op, dims, 0, 0, CG_F32, CG_F32, 0);
    for (int i = 0; i < d->nt; i++) {
        if (!(d->t[i].flags & CG_TD_PERSEQ)) continue;
        int64_t shape[4];
        int nd = cg__op_given_shape(d, i, c->p.dims, 0, 0, shape);
        shape[0] = rows;
        cg_tbuf_free(&c->p.t[i]);
        c->p.t[i] = cg_tbuf_new(CG_F32, nd, shape);
    }
    dtt_fill(&c->p, 3);
    int64_t shape[2] = {n, 1};
    if (ndim == 2) shape[0] = 1, shape[1] = n;
    c->cu = cg_tbuf_new(cudt, ndim, shape);
    for (int i = 0; i < n; i++) {
        if (cudt == CG_I64) ((int64_t *)c->cu.mem)[i] = vals[i];
        else if (cudt == CG_I32) ((int32_t *)c->cu.mem)[i] = (int32_t)vals[i];
        else ((float *)c->cu.mem)[i] = (float)vals[i];
    }
}

/* The op on c with backend be, config (NULL: none) and the offsets cu (NULL: c's own). */
static cg_status bad_call(cg_context *ctx, bad_case *c, cg_backend be, const char *config, const cg_tensor *cu) {
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    ex.config = config;
    void *args = (void *)dtt_args(&c->p);
    *(cg_tensor *)((char *)args + c->p.d->varlen->arg_off) = cu ? *cu : c->cu.t;
    return cg_run(ctx, c->p.d->op, args, &ex);
}
static cg_status bad_run(cg_context *ctx, bad_case *c, cg_backend be) { return bad_call(ctx, c, be, NULL, NULL); }

static void bad_free(bad_case *c) {
    dtt_free(&c->p);
    cg_tbuf_free(&c->cu);
}

/* A new context and the case c as bad_new makes it; bad_close frees both. */
static cg_context *bad_open(bad_case *c, cg_op op, int64_t b, int64_t total, int64_t rows, cg_dtype cudt, int ndim,
                            const int64_t *vals, int n) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    bad_new(c, op, b, total, rows, cudt, ndim, vals, n);
    return ctx;
}
static void bad_close(cg_context *ctx, bad_case *c) {
    bad_free(c);
    cg_context_free(ctx);
}

/* The call with cu vals is refused with want and a message containing msg. */
static void expect(cg_op op, int64_t b, int64_t total, int64_t rows, cg_dtype cudt, int ndim, const int64_t *vals,
                   int n, cg_backend be, cg_status want, const char *msg) {
    bad_case c;
    cg_context *ctx = bad_open(&c, op, b, total, rows, cudt, ndim, vals, n);
    char what[320];
    snprintf(what, sizeof what, "%s on %s, expecting \"%s\"", cg__op_desc(op)->name, cg_backend_name(be), msg);
    CG_CHECK_REFUSED(ctx, bad_run(ctx, &c, be), want, msg, what);
    bad_close(ctx, &c);
}

#define V(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

CG_TEST(varlen_bad_offsets) {
    for (int op = 0; op < CG_OP_COUNT; op++) {
        if (!cg__op_desc((cg_op)op)->varlen) continue; /* an op without cu_seqlens (the decode steps) */
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        const int ssd = d->seq == CG_SYM_T; /* ssd and gdr: T, H, dk, dv */
        const cg_backend be = op % 2 ? CG_BACKEND_REF : CG_BACKEND_CPU;
        /* the offsets themselves, int32 and int64 */
        for (cg_dtype dt = CG_I32; dt <= CG_I64; dt = (cg_dtype)(dt + 1)) {
            expect((cg_op)op, 1, 10, 2, dt, 1, V(2, 4, 10), be, CG_EINVAL, "cu_seqlens[0] = 2 but expected 0 (the first offset)");
            expect((cg_op)op, 1, 10, 3, dt, 1, V(0, 6, 5, 10), be, CG_EINVAL,
                   "cu_seqlens[2] = 5 but expected >= cu_seqlens[1] = 6 (offsets are non-decreasing)");
            expect((cg_op)op, 1, 10, 2, dt, 1, V(0, 11, 10), be, CG_EINVAL,
                   ssd ? "cu_seqlens[1] = 11 but expected <= T = 10" : "cu_seqlens[1] = 11 but expected <= L = 10");
            expect((cg_op)op, 1, 10, 3, dt, 1, V(0, 4, 4, 9), be, CG_EINVAL,
                   ssd ? "cu_seqlens[3] = 9 but expected T = 10 (the last offset is the packed length)"
                       : "cu_seqlens[3] = 9 but expected L = 10 (the last offset is the packed length)");
            expect((cg_op)op, 1, 10, 1, dt, 1, V(0, -1), be, CG_EINVAL, "cu_seqlens[1] = -1 but expected >= cu_seqlens[0] = 0");
        }
        /* the tensor */
        expect((cg_op)op, 1, 10, 1, CG_F32, 1, V(0, 10), be, CG_EINVAL, "cu_seqlens: dtype CG_F32 but expected CG_I32 or CG_I64");
        expect((cg_op)op, 1, 10, 1, CG_I32, 2, V(0, 10), be, CG_EINVAL, "cu_seqlens: 2 dimensions but expected 1: [N + 1]");
        expect((cg_op)op, 1, 10, 1, CG_I32, 1, V(0), be, CG_EINVAL, "cu_seqlens: shape (1) but expected at least 2 offsets");
        /* B = 1, states per sequence */
        char msg[160]; /* the first input (q, x, a) gives B; h0 has the op's extents */
        snprintf(msg, sizeof msg, "%s: B = 2 but expected 1 with cu_seqlens (the sequences are packed along %s)",
                 d->t[0].name, cg_sym_name(d->seq));
        expect((cg_op)op, 2, 10, 2, CG_I32, 1, V(0, 4, 10), be, CG_EINVAL, msg);
        h0_rows_msg(d, 1, 2, msg, sizeof msg);
        expect((cg_op)op, 1, 10, 1, CG_I32, 1, V(0, 4, 10), be, CG_EINVAL, msg);
        /* a good call passes (the same builder) */
        bad_case c;
        cg_context *ctx = bad_open(&c, (cg_op)op, 1, 10, 3, CG_I64, 1, V(0, 4, 4, 10));
        CG_CHECK_OK(ctx, bad_run(ctx, &c, be));
        bad_close(ctx, &c);
    }
}

CG_TEST(varlen_output_overlaps_offsets) {
    /* an output over the offsets' memory would move them under a running call */
    for (int op = 0; op < CG_OP_COUNT; op++) {
        if (!cg__op_desc((cg_op)op)->varlen) continue; /* an op without cu_seqlens (the decode steps) */
        bad_case c;
        cg_context *ctx = bad_open(&c, (cg_op)op, 1, 10, 2, CG_I32, 1, V(0, 4, 10));
        const cg_op_desc *d = c.p.d;
        int o = -1;
        for (int i = 0; i < d->nt && o < 0; i++)
            if (d->t[i].role == CG_TD_OUT && !(d->t[i].flags & CG_TD_PERSEQ) && c.p.t[i].t.data) o = i;
        memset(c.p.t[o].mem, 0, (size_t)c.p.t[o].count * 4);
        ((int32_t *)c.p.t[o].mem)[1] = 4, ((int32_t *)c.p.t[o].mem)[2] = 10; /* valid offsets, in the output */
        cg_tensor cu = c.cu.t;
        cu.data = c.p.t[o].mem;
        char msg[96];
        snprintf(msg, sizeof msg, "%s: output memory overlaps input cu_seqlens", d->t[o].name);
        CG_CHECK_REFUSED(ctx, bad_call(ctx, &c, CG_BACKEND_CPU, NULL, &cu), CG_EINVAL, msg, d->name);
        bad_close(ctx, &c);
    }
}

CG_TEST(varlen_index_dtype_elsewhere) {
    /* integer dtypes belong to cu_seqlens only */
    bad_case c;
    cg_context *ctx = bad_open(&c, CG_OP_SSD_FWD, 1, 10, 2, CG_I32, 1, V(0, 4, 10));
    int q = dtt_idx(&c.p, "q");
    c.p.t[q].t.dtype = CG_I32;
    CG_CHECK_REFUSED(ctx, bad_run(ctx, &c, CG_BACKEND_CPU), CG_EINVAL,
                     "q: dtype CG_I32 but expected CG_F32, CG_F64, CG_BF16 or CG_F16 (integer tensors are for cu_seqlens only)",
                     "q as CG_I32");
    bad_close(ctx, &c);
}

CG_TEST(varlen_gen_backends_refuse) {
    /* (every op's generated kernels take cu_seqlens now: tests/test_varlen_gpu.c; the
     * refusal of a backend without varlen is varlen_gpu's concern no more.) auto on host
     * tensors runs a varlen call on the CPU path */
    bad_case c;
    cg_context *ctx = bad_open(&c, CG_OP_SSD_BWD, 1, 10, 2, CG_I32, 1, V(0, 4, 10));
    CG_CHECK_OK(ctx, bad_run(ctx, &c, CG_BACKEND_AUTO));
    CG_CHECK(strstr(cg_last_dispatch(ctx), "backend=cpu") != NULL, "auto did not pick cpu: %s", cg_last_dispatch(ctx));
    CG_CHECK(strstr(cg_last_dispatch(ctx), " varlen=2 sequences") != NULL, "dispatch line: %s", cg_last_dispatch(ctx));
    bad_close(ctx, &c);
}

CG_TEST(varlen_host_fallback) {
    /* auto's path for device tensors (q ... on the device, cu_seqlens on the host): the CPU
     * runner on host copies (runtime/fallback.c, through the emulator's executor, whose
     * kernel memory is host memory) equals the CPU backend on the tensors themselves */
    for (int op = 0; op < CG_OP_COUNT; op++) {
        if (!cg__op_desc((cg_op)op)->varlen) continue; /* an op without cu_seqlens (the decode steps) */
        cg_context *ctx = NULL;
        CG_CHECK_OK(ctx, cg_context_create(&ctx));
        bad_case a, b;
        bad_new(&a, (cg_op)op, 1, 43, 4, CG_I32, 1, V(0, 1, 1, 37, 43));
        bad_new(&b, (cg_op)op, 1, 43, 4, CG_I32, 1, V(0, 1, 1, 37, 43));
        CG_CHECK_OK(ctx, bad_run(ctx, &b, CG_BACKEND_CPU));
        union {
            cg_ssd_prob ssd;
            cg_sscan_prob sscan;
        } p;
        void *args = (void *)dtt_args(&a.p);
        *(cg_tensor *)((char *)args + a.p.d->varlen->arg_off) = a.cu.t;
        CG_CHECK_OK(ctx, cg__op_validate(ctx, a.p.d, args, &p));
        cg_cfg cfg;
        memset(&cfg, 0, sizeof cfg);
        CG_CHECK_OK(ctx, cg__host_fallback(ctx, &cg__kexec_emu, &cg__backend_cpu, (cg_op)op, &p, &cfg, NULL, "test"));
        const char *diff = dtt_first_diff(&a.p, &b.p);
        CG_CHECK(diff == NULL, "%s: %s through host copies differs from the CPU backend", a.p.d->name, diff ? diff : "");
        bad_free(&a);
        bad_free(&b);
        cg_context_free(ctx);
    }
}

CG_TEST(varlen_pinned_config_every_sequence) {
    /* a pinned config applies to every sequence, the shortest (1) and the 0-length ones too */
    for (int op = 0; op < CG_OP_COUNT; op++) {
        if (!cg__op_desc((cg_op)op)->varlen) continue; /* an op without cu_seqlens (the decode steps) */
        bad_case c;
        cg_context *ctx = bad_open(&c, (cg_op)op, 1, 200, 5, CG_I32, 1, V(0, 0, 1, 1, 137, 200));
        const char *fam = c.p.d->family;
        const char *config = !strcmp(fam, "ssd") ? "chunk=64,block_dv=4" : !strcmp(fam, "sscan") ? "segment=64,block_d=2" : "threads=2";
        CG_CHECK_OK(ctx, bad_call(ctx, &c, CG_BACKEND_CPU, config, NULL));
        CG_CHECK(strstr(cg_last_dispatch(ctx), config) && strstr(cg_last_dispatch(ctx), "source=pinned"),
                 "%s: %s", c.p.d->name, cg_last_dispatch(ctx));
        bad_close(ctx, &c);
    }
}
