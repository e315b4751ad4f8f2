/* test_shape.c -- the op table's public view and cg_shape (include/chunkgen.h, docs/shapes.md),
 * through the public header only: describe every op, round-trip every op's shapes through
 * the text syntax (both layouts, grouped and not, varlen, 16-bit masks, optional tensors,
 * scalar options), cg_shape_of against cg_shape_tensor, one equality, and the messages of
 * bad text. */
#include "cg_test.h"

#include <stddef.h>

#define ARGS_BYTES 2048

/* Every op's description is self-consistent and its args accessors point into the struct. */
CG_TEST(shape_describe) {
    CG_CHECK(cg_op_count() >= 4, "cg_op_count %d", cg_op_count());
    CG_CHECK(cg_op_name((cg_op)cg_op_count()) == NULL, "name of an unknown op");
    cg_op o;
    CG_CHECK(cg_op_parse("nope", &o) == CG_EINVAL, "unknown op name parsed");
    for (int s = 1; s < CG_SYM_COUNT; s++) {
        cg_sym back = CG_SYM_NONE;
        CG_CHECK(cg_sym_parse(cg_sym_name((cg_sym)s), &back) == CG_OK && back == (cg_sym)s, "symbol %d", s);
    }
    CG_CHECK(cg_sym_parse("dK", &(cg_sym){0}) == CG_EINVAL && !strcmp(cg_sym_name(CG_SYM_NONE), ""), "sym names");
    for (int op = 0; op < cg_op_count(); op++) {
        cg_op_info in = {0};
        CG_CHECK(cg_op_describe(NULL, (cg_op)op, &in) == CG_OK && in.size == sizeof in, "describe %d", op);
        CG_CHECK(cg_op_parse(in.name, &o) == CG_OK && o == (cg_op)op && !strcmp(cg_op_name(o), in.name), "%s", in.name);
        CG_CHECK(in.args_size <= ARGS_BYTES && in.ntensors > 0 && in.nsyms > 0, "%s sizes", in.name);
        int has_seq = 0;
        for (int k = 0; k < in.nsyms; k++) has_seq |= in.syms[k] == in.seq;
        CG_CHECK(has_seq, "%s: seq %s not among its symbols", in.name, cg_sym_name(in.seq));
        for (int k = 0; k < in.nsyms; k++) { /* each symbol from the first required input that has it */
            const cg_sym sy = in.syms[k];
            int first = -1;
            for (int i = 0; i < in.ntensors && first < 0; i++) {
                cg_tensor_info ti = {0};
                cg_op_tensor_info(NULL, (cg_op)op, i, &ti);
                for (int e = 0; e < ti.ndim && !ti.output && !ti.optional; e++)
                    if (ti.ext[e] == sy) first = i;
            }
            CG_CHECK(first >= 0 && in.sym_from[sy] == first, "%s: %s from tensor %d, expected %d", in.name,
                     cg_sym_name(sy), in.sym_from[sy], first);
        }
        unsigned char args[ARGS_BYTES];
        size_t off_seen[64];
        for (int i = 0; i < in.ntensors + in.has_varlen; i++) {
            cg_tensor_info ti = {0};
            CG_CHECK(cg_op_tensor_info(NULL, (cg_op)op, i, &ti) == CG_OK && ti.name && ti.file, "%s tensor %d", in.name, i);
            const cg_tensor *t = cg_op_args_tensor((cg_op)op, args, i);
            const size_t off = (size_t)((const unsigned char *)t - args);
            CG_CHECK(t && off + sizeof(cg_tensor) <= in.args_size, "%s.%s outside the args struct", in.name, ti.name);
            off_seen[i] = off;
            for (int j = 0; j < i; j++) CG_CHECK(off_seen[j] != off, "%s: two tensors at one offset", in.name);
            CG_CHECK(i < in.ntensors || (ti.flags & CG_TENSOR_INDEX), "%s.%s index flag", in.name, ti.name);
            if (i == in.ntensors) CG_CHECK(!strcmp(ti.name, "cu_seqlens") && ti.optional, "cu_seqlens last");
            CG_CHECK(ti.output || (ti.flags & CG_TENSOR_INPLACE) ? ti.tol_f32 > 0 && ti.tol_bf16 > ti.tol_f32 : ti.tol_f32 == 0, "%s.%s tol", in.name, ti.name);
            for (int k = 0; k < ti.ndim && i < in.ntensors; k++) {
                int ok = 0;
                for (int m = 0; m < in.nsyms; m++) ok |= in.syms[m] == ti.ext[k];
                CG_CHECK(ok, "%s.%s: extent %d is not a symbol of the op", in.name, ti.name, k);
            }
        }
        CG_CHECK(cg_op_args_tensor((cg_op)op, args, in.ntensors + in.has_varlen) == NULL, "past the last tensor");
        CG_CHECK(cg_op_tensor_info(NULL, (cg_op)op, -1, &(cg_tensor_info){0}) == CG_EINVAL, "tensor -1");
        for (int k = 0; k < in.nscalars; k++) {
            int *p = cg_op_args_scalar((cg_op)op, args, k);
            CG_CHECK(p && (size_t)((unsigned char *)p - args) + sizeof(int) <= in.args_size, "%s scalar %s", in.name,
                     in.scalars[k]);
        }
        CG_CHECK(cg_op_args_scalar((cg_op)op, args, in.nscalars) == NULL, "past the last scalar");
        CG_CHECK((cg_op_args_layout((cg_op)op, args) != NULL) == in.has_layout, "%s layout", in.name);
    }
    /* the growth rule: an older caller's smaller struct gets its members only */
    struct {
        cg_op_info in;
        char guard[8];
    } old;
    memset(&old, 0x5a, sizeof old);
    old.in.size = offsetof(cg_op_info, family);
    CG_CHECK(cg_op_describe(NULL, CG_OP_SSD_FWD, &old.in) == CG_OK && !strcmp(old.in.name, "ssd_fwd") &&
                 old.in.size == offsetof(cg_op_info, family) && *(const unsigned char *)&old.in.family == 0x5a,
             "an older cg_op_info was written past its size");
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    CG_CHECK_REFUSED(ctx, cg_op_describe(ctx, (cg_op)99, &(cg_op_info){0}), CG_EINVAL, "99", "unknown op");
    cg_context_free(ctx);
}

/* ---------------------------------------------------------- shapes of every op */

typedef struct shape_case {
    char text[CG_SHAPE_TEXT_MAX];
    cg_op op;
} shape_case;

/* Every combination the op has: layout, grouping, varlen, dtype mask, optional tensors and
 * scalar options (all or none); *n cases into out. */
static int cases_of(cg_op op, shape_case *out, int cap) {
    cg_op_info in = {0};
    cg_op_describe(NULL, op, &in);
    const char *half1 = NULL;
    for (int i = 0; i < in.ntensors && !half1; i++) {
        cg_tensor_info ti = {0};
        cg_op_tensor_info(NULL, op, i, &ti);
        if (!ti.output && !ti.optional && (ti.flags & CG_TENSOR_HALF)) half1 = ti.name;
    }
    static const char *const dtypes[] = {"", "bf16", "f16-", "f64"};
    int n = 0;
    for (int hm = 0; hm <= in.has_layout; hm++)
        for (int g = 0; g <= in.groupable; g++)
            for (int vl = 0; vl <= in.has_varlen; vl++)
                for (int dt = 0; dt < 4; dt++)
                    for (int opt = 0; opt < 2 && n < cap; opt++) {
                        char *t = out[n].text;
                        size_t m = (size_t)snprintf(t, CG_SHAPE_TEXT_MAX, "%s:", in.name);
                        for (int k = 0; k < in.nsyms; k++) {
                            const cg_sym s = in.syms[k];
                            if (s == CG_SYM_G && in.groupable && !g) continue;
                            const int v = s == CG_SYM_B ? (vl ? 1 : 2) : s == in.seq ? 12 : s == CG_SYM_G ? 2 : s == CG_SYM_N ? 3 : 4;
                            m += (size_t)snprintf(t + m, CG_SHAPE_TEXT_MAX - m, "%s=%d,", cg_sym_name(s), v);
                        }
                        if (hm) m += (size_t)snprintf(t + m, CG_SHAPE_TEXT_MAX - m, "layout=head,");
                        if (dt) m += (size_t)snprintf(t + m, CG_SHAPE_TEXT_MAX - m, "dtype=%s%s,", dtypes[dt], dt == 2 ? half1 : "");
                        if (vl) m += (size_t)snprintf(t + m, CG_SHAPE_TEXT_MAX - m, "varlen=3,%s", opt ? "longest=5," : "");
                        for (int i = 0; opt && i < in.ntensors; i++) {
                            cg_tensor_info ti = {0};
                            cg_op_tensor_info(NULL, op, i, &ti);
                            if (ti.optional) m += (size_t)snprintf(t + m, CG_SHAPE_TEXT_MAX - m, "%s,", ti.name);
                        }
                        for (int k = 0; opt && k < in.nscalars; k++)
                            m += (size_t)snprintf(t + m, CG_SHAPE_TEXT_MAX - m, "%s,", in.scalars[k]);
                        t[m - 1] = 0; /* the last comma */
                        out[n++].op = op;
                    }
    return n;
}

/* Text -> shape -> canonical text -> shape: equal shapes, and the canonical text is a fixed point. */
CG_TEST(shape_round_trip) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    shape_case cs[64];
    int total = 0, half = 0, grouped = 0, ungrouped = 0, heads = 0, varlen = 0;
    for (int op = 0; op < cg_op_count(); op++) {
        const int n = cases_of((cg_op)op, cs, 64);
        for (int c = 0; c < n; c++, total++) {
            cg_shape a = {0}, b = {0};
            char t1[CG_SHAPE_TEXT_MAX], t2[CG_SHAPE_TEXT_MAX];
            CG_CHECK_OK(ctx, cg_shape_parse(ctx, cs[c].text, &a));
            CG_CHECK_OK(ctx, cg_shape_format(ctx, &a, t1, sizeof t1));
            CG_CHECK_OK(ctx, cg_shape_parse(ctx, t1, &b));
            CG_CHECK_OK(ctx, cg_shape_format(ctx, &b, t2, sizeof t2));
            CG_CHECK(cg_shape_equal(&a, &b) && !strcmp(t1, t2), "%s -> %s -> %s", cs[c].text, t1, t2);
            CG_CHECK(a.op == cs[c].op, "%s: op %d", cs[c].text, (int)a.op);
            half += a.half != 0;
            grouped += a.grouped;
            ungrouped += cg_op_describe(NULL, a.op, &(cg_op_info){0}) == CG_OK && !a.grouped;
            heads += a.layout == CG_LAYOUT_HEAD_MAJOR;
            varlen += a.nseq == 3;
            size_t small = strlen(t1);
            CG_CHECK_REFUSED(ctx, cg_shape_format(ctx, &a, t2, small), CG_EINVAL, "cap", "a buffer one byte short");
        }
    }
    CG_CHECK(total >= 100 && half > 0 && grouped > 0 && ungrouped > 0 && heads > 0 && varlen > 0,
             "coverage: %d cases, %d 16-bit, %d grouped, %d head-major, %d varlen", total, half, grouped, heads, varlen);
    /* the documented example (docs/shapes.md) is canonical as written */
    const char *doc = "ssd_fwd:B=2,T=512,G=2,H=8,dk=128,dv=128,layout=head,dtype=bf16,h0,hT";
    cg_shape s = {0};
    char back[CG_SHAPE_TEXT_MAX];
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, doc, &s));
    CG_CHECK_OK(ctx, cg_shape_format(ctx, &s, back, sizeof back));
    CG_CHECK(!strcmp(back, doc), "%s formats as %s", doc, back);
    CG_CHECK(s.dim[CG_SYM_DK] == 128 && s.dim[CG_SYM_H] == 8 && s.dim[CG_SYM_L] == 0 && s.dtype == CG_BF16 &&
                 s.layout == CG_LAYOUT_HEAD_MAJOR,
             "%s: the members", doc);
    /* the inputs' 16-bit mask: all of them is "bf16", some of them names them */
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "sscan_fwd:B=1,L=8,D=4,N=2,dtype=bf16-x-delta-B-C", &s));
    CG_CHECK_OK(ctx, cg_shape_format(ctx, &s, back, sizeof back));
    CG_CHECK(!strcmp(back, "sscan_fwd:B=1,L=8,D=4,N=2,dtype=bf16"), "every given 16-bit input: %s", back);
    cg_context_free(ctx);
}

/* cu_seqlens offsets for nseq sequences over total tokens, the first `longest` long. */
static void fill_offsets(cg_tensor *cu, int64_t nseq, int64_t total, int64_t longest) {
    int32_t *o = cu->data;
    o[0] = 0;
    if (!longest) longest = (total + nseq - 1) / nseq;
    const int64_t rest = nseq > 1 ? (total - longest + nseq - 2) / (nseq - 1) : 0;
    for (int64_t i = 1; i <= nseq; i++) {
        int64_t next = o[i - 1] + (i == 1 ? longest : rest);
        o[i] = (int32_t)(next > total || i == nseq ? total : next);
    }
}

/* Args for shape s with each tensor as cg_shape_tensor says (outputs left NULL when
 * no_outputs); buffers into bufs (free with cg_tbuf_free). */
static void args_of(const cg_shape *s, unsigned char *args, cg_tbuf *bufs, int no_outputs) {
    cg_op_info in = {0};
    cg_op_describe(NULL, s->op, &in);
    memset(args, 0, ARGS_BYTES);
    memset(bufs, 0, 32 * sizeof *bufs);
    if (in.has_layout) *cg_op_args_layout(s->op, args) = s->layout;
    for (int k = 0; k < in.nscalars; k++) *cg_op_args_scalar(s->op, args, k) = (s->scalars >> k) & 1;
    for (int i = 0; i < in.ntensors + in.has_varlen; i++) {
        cg_tensor t;
        cg_tensor_info ti = {0};
        memset(&bufs[i], 0, sizeof bufs[i]);
        if (cg_shape_tensor(NULL, s, i, &t) != CG_OK || cg_op_tensor_info(NULL, s->op, i, &ti) != CG_OK) {
            CG_CHECK(0, "cg_shape_tensor %d", i);
            continue;
        }
        if (!t.ndim || (no_outputs && ti.output)) continue;
        bufs[i] = cg_tbuf_new(t.dtype, t.ndim, t.shape);
        *cg_op_args_tensor(s->op, args, i) = bufs[i].t;
        if (i == in.ntensors) fill_offsets(&bufs[i].t, s->nseq, s->dim[in.seq], s->longest);
    }
}

/* cg_op_tensor_dims and cg_op_dtypes agree with cg_shape_tensor: each dimension's symbol
 * has the shape's extent, and the outputs' dtypes follow from the inputs'. */
static void check_dims_dtypes(cg_context *ctx, const cg_shape *s, const char *text) {
    cg_op_info in = {0};
    cg_op_describe(NULL, s->op, &in);
    int dt[64];
    cg_dtype want[64], real[64];
    for (int i = 0; i < in.ntensors; i++) {
        cg_tensor t;
        cg_tensor_info ti = {0};
        cg_sym syms[CG_MAX_DIMS];
        cg_shape_tensor(NULL, s, i, &t);
        cg_op_tensor_info(NULL, s->op, i, &ti);
        real[i] = t.dtype;
        dt[i] = t.ndim && !ti.output ? (int)t.dtype : -1;
        const int n = cg_op_tensor_dims(s->op, i, s->layout, s->grouped, syms);
        if (!t.ndim) continue;
        CG_CHECK(n == t.ndim, "%s: %s rank %d vs %d", text, ti.name, n, t.ndim);
        for (int k = 0; k < n && k < t.ndim; k++) {
            const int64_t e = k == 0 && s->nseq && (ti.flags & CG_TENSOR_PER_SEQ) ? s->nseq : s->dim[syms[k]];
            CG_CHECK(e == t.shape[k], "%s: %s dim %d is %s = %lld but the shape gives %lld", text, ti.name, k,
                     cg_sym_name(syms[k]), (long long)e, (long long)t.shape[k]);
        }
    }
    CG_CHECK_OK(ctx, cg_op_dtypes(ctx, s->op, dt, want));
    for (int i = 0; i < in.ntensors; i++) {
        cg_tensor t;
        cg_shape_tensor(NULL, s, i, &t);
        CG_CHECK(!t.ndim || want[i] == real[i], "%s: tensor %d: cg_op_dtypes %d, cg_shape_tensor %d", text, i,
                 (int)want[i], (int)real[i]);
    }
}

/* A call made from cg_shape_tensor's tensors has that shape (cg_shape_of), with its
 * outputs and without them (as cg_validate takes a call). */
CG_TEST(shape_of_tensors) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    shape_case cs[64];
    for (int op = 0; op < cg_op_count(); op++) {
        const int n = cases_of((cg_op)op, cs, 64);
        for (int c = 0; c < n; c++) {
            cg_shape want = {0};
            CG_CHECK_OK(ctx, cg_shape_parse(ctx, cs[c].text, &want));
            check_dims_dtypes(ctx, &want, cs[c].text);
            for (int no_out = 0; no_out < 2; no_out++) {
                unsigned char args[ARGS_BYTES] __attribute__((aligned(16)));
                cg_tbuf bufs[32];
                args_of(&want, args, bufs, no_out);
                cg_shape got = {0};
                CG_CHECK_OK(ctx, cg_shape_of(ctx, want.op, args, &got));
                cg_shape w = want;
                for (int i = 0; no_out && i < 64; i++) { /* optional outputs with no data: absent */
                    cg_tensor_info ti = {0};
                    if (cg_op_tensor_info(NULL, w.op, i, &ti) == CG_OK && ti.output && ti.optional)
                        w.given &= ~((uint64_t)1 << i), w.half &= ~((uint64_t)1 << i);
                }
                if (!w.longest && w.nseq) { /* the offsets decide the longest */
                    w.longest = got.longest;
                    CG_CHECK(got.longest >= (w.dim[CG_SYM_B] * 12 + w.nseq - 1) / w.nseq, "%s: longest %lld",
                             cs[c].text, (long long)got.longest);
                }
                char a[CG_SHAPE_TEXT_MAX] = "", b[CG_SHAPE_TEXT_MAX] = "";
                cg_shape_format(NULL, &w, a, sizeof a);
                cg_shape_format(NULL, &got, b, sizeof b);
                CG_CHECK(cg_shape_equal(&w, &got), "%s%s: cg_shape_of gives %s", a, no_out ? " (no outputs)" : "", b);
                CG_CHECK_OK(ctx, cg_validate(ctx, want.op, args, &(cg_exec){.backend = want.dtype == CG_F64 ? CG_BACKEND_REF : CG_BACKEND_AUTO}));
                for (int i = 0; i < 32; i++)
                    if (bufs[i].mem) cg_tbuf_free(&bufs[i]);
            }
        }
    }
    cg_context_free(ctx);
}

/* cg_run is the call cg_<op> makes: a CPU run of each op writes its outputs and says the op
 * on the dispatch line; an unknown op is refused naming it. */
CG_TEST(shape_run) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    cg_rng r = {7};
    for (int op = 0; op < cg_op_count(); op++) {
        cg_op_info in = {0};
        cg_op_describe(NULL, (cg_op)op, &in);
        char text[CG_SHAPE_TEXT_MAX];
        size_t m = (size_t)snprintf(text, sizeof text, "%s:", in.name);
        for (int k = 0; k < in.nsyms; k++)
            m += (size_t)snprintf(text + m, sizeof text - m, "%s%s=%d", k ? "," : "", cg_sym_name(in.syms[k]),
                                  in.syms[k] == in.seq ? 9 : 2);
        cg_shape s = {0};
        CG_CHECK_OK(ctx, cg_shape_parse(ctx, text, &s));
        unsigned char args[ARGS_BYTES] __attribute__((aligned(16)));
        cg_tbuf bufs[32];
        args_of(&s, args, bufs, 0);
        for (int i = 0; i < in.ntensors; i++) {
            cg_tensor_info ti = {0};
            cg_op_tensor_info(NULL, (cg_op)op, i, &ti);
            if (bufs[i].mem) cg_tbuf_fill(&bufs[i], &r, ti.output ? 1e30 : ti.lo, ti.output ? 2e30 : ti.hi);
            if (bufs[i].mem && (ti.flags & CG_TENSOR_INDEX)) /* a decode step's slots: distinct (B <= S here) */
                for (int64_t e = 0; e < bufs[i].count; e++) ((int32_t *)bufs[i].mem)[e] = (int32_t)e;
        }
        CG_CHECK_OK(ctx, cg_run(ctx, (cg_op)op, args, &(cg_exec){.backend = CG_BACKEND_CPU}));
        CG_CHECK(!strncmp(cg_last_dispatch(ctx), in.name, strlen(in.name)), "dispatch line %s", cg_last_dispatch(ctx));
        for (int i = 0; i < in.ntensors; i++) { /* every output written (none left at the 1e30 fill) */
            cg_tensor_info ti = {0};
            cg_op_tensor_info(NULL, (cg_op)op, i, &ti);
            if (!ti.output || !bufs[i].mem) continue;
            double mx = 0;
            for (int64_t e = 0; e < bufs[i].count; e++) {
                const double v = fabs((double)((const float *)bufs[i].mem)[e]);
                if (v > mx) mx = v;
            }
            CG_CHECK(mx < 1e29, "%s.%s not written by cg_run", in.name, ti.name);
        }
        for (int i = 0; i < 32; i++)
            if (bufs[i].mem) cg_tbuf_free(&bufs[i]);
    }
    CG_CHECK_REFUSED(ctx, cg_run(ctx, (cg_op)cg_op_count(), &(cg_exec){0}, NULL), CG_EINVAL, "op", "an unknown op");
    cg_context_free(ctx);
}

/* One equality: every member matters, and the struct's size does not. */
CG_TEST(shape_equal) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    cg_shape a = {0}, b;
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "sscan_bwd:B=1,G=2,L=12,D=4,N=3,dtype=f16-x,varlen=3,longest=5,h0,delta_softplus", &a));
    b = a;
    b.size = 0;
    CG_CHECK(cg_shape_equal(&a, &b) && cg_shape_equal(&a, &a), "a shape differs from itself");
#define DIFFERS(field, value)                                                                  \
    do {                                                                                       \
        b = a;                                                                                 \
        b.field = value;                                                                       \
        CG_CHECK(!cg_shape_equal(&a, &b) && !cg_shape_equal(&b, &a), "equal despite " #field); \
    } while (0)
    DIFFERS(op, CG_OP_SSCAN_FWD);
    DIFFERS(layout, CG_LAYOUT_HEAD_MAJOR);
    DIFFERS(dim[CG_SYM_N], 4);
    DIFFERS(dim[CG_SYM_G], 1);
    DIFFERS(dtype, CG_BF16);
    DIFFERS(half, 0);
    DIFFERS(given, 0);
    DIFFERS(scalars, 0);
    DIFFERS(grouped, 0);
    DIFFERS(nseq, 4);
    DIFFERS(longest, 6);
#undef DIFFERS
    cg_context_free(ctx);
}

/* Each bad text is refused with a message that names the offending word (and, where
 * there is a list, what was expected). */
CG_TEST(shape_errors) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
#define SSD "ssd_fwd:B=2,T=8,G=1,H=2,dk=4,dv=4"
#define SSC "sscan_bwd:B=2,L=8,D=4,N=3"
    static const struct {
        const char *text, *names[2];
    } bad[] = {
        {"B=2,T=8", {"OP:ITEM", "ssd_fwd"}},
        {"foo:B=2", {"'foo'", "sscan_bwd"}},
        {"ssd_fwd:B=2,T=8,G=1,H=2,dk=4", {"dv is missing", "dk=N"}},
        {SSD ",xyz", {"'xyz' is unknown", "h0, hT"}},
        {SSD ",B=3", {"B= given twice", NULL}},
        {"ssd_fwd:B=0,T=8,G=1,H=2,dk=4,dv=4", {"B = '0'", "1 .. 2^40"}},
        {SSD ",dtype=bf16-log_alpha", {"'log_alpha' is not a 16-bit-capable input", "q-k-v"}},
        {SSD ",dtype=f32-q", {"dtype=f32-q", "bf16"}},
        {SSD ",dtype=int8", {"dtype=int8", "f64"}},
        {SSC ",layout=head", {"'layout=head' is not a setting", "delta_softplus"}},
        {SSC ",dD", {"dD is given but D is not", NULL}},
        {SSD ",varlen=2", {"B = 2 but expected 1", NULL}},
        {SSD ",longest=3", {"longest", "varlen"}},
        {"ssd_fwd:B=1,T=8,G=3,H=4,dk=4,dv=4", {"H = 4 is not a multiple of G = 3", NULL}},
        {SSD ",q", {"'q' is a required tensor", NULL}},
        {SSC ",T=8", {"'T=8' is not a symbol", "L=N"}},
        {SSD ",h0=1", {"'h0=1' takes no value", NULL}},
        {SSD ",,h0", {"empty item", NULL}},
        {SSD ",layout=diagonal", {"layout=diagonal", "token or head"}},
        {SSD ",dtype", {"'dtype' needs a value", NULL}},
        {"ssd_fwd:B=1,T=8,G=1,H=2,dk=4,dv=4,varlen=2,longest=9", {"shape.longest", NULL}},
        {SSD ",dtype=bf16-dh0", {"'dh0' is not a 16-bit-capable input", NULL}},
        {"sscan_fwd:B=2,L=8,D=4,N=3,dtype=bf16-z", {"'z' is not given", NULL}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cg_shape s = {0};
        CG_CHECK_REFUSED(ctx, cg_shape_parse(ctx, bad[i].text, &s), CG_EINVAL, bad[i].names[0], bad[i].text);
        if (bad[i].names[1]) CG_CHECK_REFUSED(ctx, cg_shape_parse(ctx, bad[i].text, &s), CG_EINVAL, bad[i].names[1], bad[i].text);
    }
    /* the dtype rules' refusal names the tensor */
    int dt[32];
    cg_dtype want[32];
    for (int i = 0; i < 32; i++) dt[i] = -1;
    dt[0] = CG_BF16, dt[3] = CG_BF16; /* q, log_alpha */
    CG_CHECK_REFUSED(ctx, cg_op_dtypes(ctx, CG_OP_SSD_FWD, dt, want), CG_EINVAL, "log_alpha: dtype CG_BF16", "bf16 log_alpha");
    /* a made-up value is refused by every call that takes one */
    cg_shape s = {0};
    cg_tensor t;
    char buf[CG_SHAPE_TEXT_MAX];
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, SSC ",dtype=bf16", &s));
    s.half &= s.half - 1; /* the first 16-bit tensor's bit dropped */
    CG_CHECK_REFUSED(ctx, cg_shape_format(ctx, &s, buf, sizeof buf), CG_EINVAL, "shape.half", "a broken half mask");
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, SSD, &s));
    s.dim[CG_SYM_N] = 3;
    CG_CHECK_REFUSED(ctx, cg_shape_tensor(ctx, &s, 0, &t), CG_EINVAL, "has no symbol N", "a symbol the op lacks");
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, SSD, &s));
    CG_CHECK_REFUSED(ctx, cg_shape_tensor(ctx, &s, 99, &t), CG_EINVAL, "i: 99", "tensor 99");
    CG_CHECK_OK(ctx, cg_shape_tensor(ctx, &s, 4, &t)); /* h0, not given */
    CG_CHECK(t.ndim == 0 && t.data == NULL, "an absent optional tensor: ndim %d", t.ndim);
    /* shape_of refuses what cg_validate refuses, with its message */
    unsigned char args[ARGS_BYTES] __attribute__((aligned(16)));
    cg_tbuf bufs[32];
    args_of(&s, args, bufs, 1);
    cg_op_args_tensor(s.op, args, 1)->shape[3] = 5; /* k's dk */
    CG_CHECK_REFUSED(ctx, cg_shape_of(ctx, s.op, args, &s), CG_EINVAL, "k: shape", "k of the wrong dk");
    for (int i = 0; i < 32; i++)
        if (bufs[i].mem) cg_tbuf_free(&bufs[i]);
#undef SSD
#undef SSC
    cg_context_free(ctx);
}
