/* shape.c -- cg_shape (chunkgen.h): one value for a call's shape, its one text syntax
 * (docs/shapes.md), its one equality, and the way to and from a call's args. Every fact
 * about an op comes from the op table (runtime/ops.c). */
#include "op_info.h"
#include "gen.h"

#include <stdlib.h>
#include <string.h>

#define DIM_MAX ((int64_t)1 << 40)

/* Bit i of a 64-bit mask. */
#define BIT(i) ((uint64_t)1 << (i))

/* Every rule a shape obeys (those of validation, said of the shape), checked on s, a
 * shape of this header's layout. */
static cg_status shape_check(cg_context *ctx, const cg_shape *s, const cg_op_desc **out) {
    const cg_op_desc *d = *out = cg__op_checked(ctx, s->op);
    if (!d) return CG_EINVAL;
    for (int k = 0; k < CG_SHAPE_MAX_SYMS; k++) {
        const int has = k > 0 && k < CG_SYM_COUNT && d->dim_off[k] != (size_t)-1;
        if (has && (s->dim[k] < 1 || s->dim[k] > DIM_MAX))
            return cg__err(ctx, CG_EINVAL, "shape.dim[%s]: %lld but expected 1 .. 2^40", cg_sym_name((cg_sym)k),
                           (long long)s->dim[k]);
        if (!has && s->dim[k])
            return cg__err(ctx, CG_EINVAL, "shape.dim[%d]: %lld but expected 0 (%s has no symbol %s)", k,
                           (long long)s->dim[k], d->name, k < CG_SYM_COUNT ? cg_sym_name((cg_sym)k) : "of that number");
    }
    if (d->divisible != CG_SYM_NONE && s->dim[d->divisible] % s->dim[d->divisor])
        return cg__err(ctx, CG_EINVAL, "shape: %s = %lld is not a multiple of %s = %lld (expected %s %% %s == 0)",
                       cg_sym_name(d->divisible), (long long)s->dim[d->divisible], cg_sym_name(d->divisor),
                       (long long)s->dim[d->divisor], cg_sym_name(d->divisible), cg_sym_name(d->divisor));
    if (s->layout != CG_LAYOUT_TOKEN_MAJOR && (s->layout != CG_LAYOUT_HEAD_MAJOR || d->layout_arg_off == (size_t)-1))
        return cg__err(ctx, CG_EINVAL, "shape.layout: %d but expected %s", (int)s->layout,
                       d->layout_arg_off == (size_t)-1 ? "CG_LAYOUT_TOKEN_MAJOR (the op has no layout)"
                                                       : "CG_LAYOUT_TOKEN_MAJOR or CG_LAYOUT_HEAD_MAJOR");
    if (d->grouped_off == (size_t)-1 ? s->grouped != 0 : (s->grouped != 0 && s->grouped != 1))
        return cg__err(ctx, CG_EINVAL, "shape.grouped: %d but expected %s", s->grouped,
                       d->grouped_off == (size_t)-1 ? "0 (the op has no ungrouped form)" : "0 or 1");
    if (d->grouped_off != (size_t)-1 && !s->grouped && s->dim[CG_SYM_G] != 1)
        return cg__err(ctx, CG_EINVAL, "shape.dim[G]: %lld but expected 1 (ungrouped)", (long long)s->dim[CG_SYM_G]);
    for (int i = 0; i < 64; i++) {
        if (!(s->given & BIT(i))) continue;
        if (i >= d->nt || !d->t[i].optional)
            return cg__err(ctx, CG_EINVAL, "shape.given: bit %d but expected bits of optional tensors of %s only", i,
                           d->name);
        const int r = d->t[i].requires ? cg__op_tensor(d, d->t[i].requires) : -1;
        if (r >= 0 && !cg__shape_present(d, s, r))
            return cg__err(ctx, CG_EINVAL, "shape: %s is given but %s is not (expected %s only with %s)", d->t[i].name,
                           d->t[r].name, d->t[i].name, d->t[r].name);
    }
    if (d->nscalar < 32 && (s->scalars >> d->nscalar))
        return cg__err(ctx, CG_EINVAL, "shape.scalars: %#x but expected bits of the %d scalar options of %s",
                       s->scalars, d->nscalar, d->name);
    if (s->dtype != CG_F32 && s->dtype != CG_F64 && !cg__dtype_half(s->dtype))
        return cg__err(ctx, CG_EINVAL, "shape.dtype: %d but expected CG_F32, CG_F64, CG_BF16 or CG_F16", (int)s->dtype);
    uint64_t h = 0;
    cg_status st = cg__dtype_half(s->dtype) ? cg__shape_half_mask(ctx, d, s, &h) : CG_OK;
    if (st) return st;
    if (s->half != h || (cg__dtype_half(s->dtype) && !h))
        return cg__err(ctx, CG_EINVAL,
                       "shape.half: %#llx but expected %#llx (the 16-bit inputs, and the outputs that "
                       "follow them; dtype %s with no 16-bit tensor is not a shape)",
                       (unsigned long long)s->half, (unsigned long long)h, cg__dtype_word(s->dtype));
    if (s->nseq < 0 || s->nseq > DIM_MAX || (s->nseq && !d->varlen))
        return cg__err(ctx, CG_EINVAL, "shape.nseq: %lld but expected %s", (long long)s->nseq,
                       d->varlen ? "0 .. 2^40" : "0 (the op takes no cu_seqlens)");
    if (s->nseq && s->dim[CG_SYM_B] != 1)
        return cg__err(ctx, CG_EINVAL, "shape: B = %lld but expected 1 with varlen (the sequences are packed along %s)",
                       (long long)s->dim[CG_SYM_B], cg_sym_name(d->seq));
    const int64_t T = s->dim[d->seq];
    if (s->longest && (!s->nseq || s->longest < 0 || s->longest > T || s->longest * s->nseq < T))
        return cg__err(ctx, CG_EINVAL, "shape.longest: %lld but expected %s", (long long)s->longest,
                       s->nseq ? "0 (unknown) or between the packed length / varlen and the packed length"
                               : "0 (not varlen)");
    return CG_OK;
}

/* ---------------------------------------------------------------- parse */

/* "B=N, T=N, ..., dtype=WORD, layout=token|head, varlen=N, longest=N, h0, hT": the words of
 * d's shapes, for messages (syms_only: the symbols only). */
static const char *words_of(const cg_op_desc *d, char *buf, size_t cap, int syms_only) {
    size_t n = 0;
    buf[0] = 0;
#define ADD(...) (n += n < cap ? (size_t)snprintf(buf + n, cap - n, __VA_ARGS__) : 0)
    for (int k = 1; k < CG_SYM_COUNT; k++)
        if (d->dim_off[k] != (size_t)-1) ADD("%s%s=N", n ? ", " : "", cg_sym_name((cg_sym)k));
    if (syms_only) return buf;
    ADD(", dtype=WORD");
    if (d->layout_arg_off != (size_t)-1) ADD(", layout=token|head");
    if (d->varlen) ADD(", varlen=N, longest=N");
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].optional) ADD(", %s", d->t[i].name);
    for (int k = 0; k < d->nscalar; k++) ADD(", %s", d->scalar[k].name);
#undef ADD
    return buf;
}

/* "ssd_fwd, ssd_bwd, ..." */
static const char *op_names(char *buf, size_t cap) {
    size_t n = 0;
    for (int op = 0; op < CG_OP_COUNT && n < cap; op++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", op ? ", " : "", cg__op_desc((cg_op)op)->name);
    return buf;
}

static int parse_int(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    if (!*v || *v == '-' || *v == '+' || *v == ' ') return -1;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* dtype=WORD into s: f32, f64, bf16, f16 (every present 16-bit-capable input), or
 * bf16-NAME-NAME (those inputs). Run after the whole text is read (presence known). */
static cg_status parse_dtype(cg_context *ctx, const char *text, const cg_op_desc *d, const char *w, cg_shape *s) {
    const size_t len = strcspn(w, "-");
    char word[8];
    snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), w);
    s->dtype = CG_F32;
    int ok = 0;
    for (int x = CG_F32; x <= CG_F16; x++)
        if (len < sizeof word && !strcmp(word, cg__dtype_word((cg_dtype)x))) s->dtype = (cg_dtype)x, ok = 1;
    char names[256] = "";
    for (int i = 0, n = 0; i < d->nt; i++)
        if (d->t[i].role == CG_TD_IN && (d->t[i].flags & CG_TD_HALF))
            n += snprintf(names + n, sizeof names - (size_t)n, "%s%s", n ? "-" : "", d->t[i].name);
    if (!ok || (w[len] && !cg__dtype_half(s->dtype)))
        return cg__err(ctx, CG_EINVAL,
                       "shape \"%s\": dtype=%s: expected f32, f64, bf16, f16, or bf16-NAME-... / "
                       "f16-NAME-... naming the 16-bit inputs (of %s: %s)",
                       text, w, d->name, names);
    s->half = 0;
    if (!cg__dtype_half(s->dtype)) return CG_OK;
    for (int i = 0; i < d->nt; i++)
        if (!w[len] && d->t[i].role == CG_TD_IN && (d->t[i].flags & CG_TD_HALF) && cg__shape_present(d, s, i))
            s->half |= BIT(i);
    for (const char *p = w[len] ? w + len + 1 : ""; *p;) {
        const size_t n = strcspn(p, "-");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        const int i = cg__op_tensor(d, name);
        if (i < 0 || d->t[i].role != CG_TD_IN || !(d->t[i].flags & CG_TD_HALF))
            return cg__err(ctx, CG_EINVAL,
                           "shape \"%s\": dtype=%s: '%s' is not a 16-bit-capable input of %s "
                           "(expected some of %s)",
                           text, w, name, d->name, names);
        if (!cg__shape_present(d, s, i))
            return cg__err(ctx, CG_EINVAL, "shape \"%s\": dtype=%s: '%s' is not given (expected %s in the shape too)",
                           text, w, name, name);
        s->half |= BIT(i);
        p += n + (p[n] == '-');
    }
    if (!s->half)
        return cg__err(ctx, CG_EINVAL, "shape \"%s\": dtype=%s: no 16-bit-capable input is given (expected one of %s)",
                       text, w, names);
    uint64_t h;
    cg_status st = cg__shape_half_mask(ctx, d, s, &h);
    if (st) return st;
    s->half = h;
    return CG_OK;
}

cg_status cg_shape_parse(cg_context *ctx, const char *text, cg_shape *out) {
    if (!text)
        return cg__err(ctx, CG_EINVAL,
                       "text: null pointer (expected a shape, e.g. ssd_fwd:B=1,T=64,G=1,H=2,dk=32,dv=32)");
    char buf[CG_SHAPE_TEXT_MAX * 2], words[512], ops[128];
    const char *colon = strchr(text, ':');
    if (!colon || (size_t)(colon - text) >= 32)
        return cg__err(ctx, CG_EINVAL, "shape \"%s\": expected OP:ITEM,ITEM,... with OP one of %s (docs/shapes.md)",
                       text, op_names(ops, sizeof ops));
    char opname[32];
    snprintf(opname, sizeof opname, "%.*s", (int)(colon - text), text);
    const cg_op_desc *d = cg__op_find(opname);
    if (!d)
        return cg__err(ctx, CG_EINVAL, "shape \"%s\": op '%s' is unknown (expected one of %s)", text, opname,
                       op_names(ops, sizeof ops));
    if (strlen(colon + 1) >= sizeof buf)
        return cg__err(ctx, CG_EINVAL, "shape \"%.64s...\": too long (expected under %zu characters)", text,
                       sizeof buf);
    snprintf(buf, sizeof buf, "%s", colon + 1);
    cg_shape s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.op = d->op;
    const char *dtype_word = NULL, *seen[64];
    int nseen = 0, have_g = 0, seen_val[64];
    for (char *p = buf, *next; p; p = next) {
        next = strchr(p, ',');
        if (next) *next++ = 0;
        if (!*p)
            return cg__err(ctx, CG_EINVAL, "shape \"%s\": an empty item (expected one of %s)", text,
                           words_of(d, words, sizeof words, 0));
        char *eq = strchr(p, '=');
        const char *val = eq ? eq + 1 : NULL;
        if (eq) *eq = 0;
        for (int k = 0; k < nseen; k++) /* "D=4" (a symbol) and "D" (a tensor) are two words */
            if (!strcmp(seen[k], p) && seen_val[k] == !!val)
                return cg__err(ctx, CG_EINVAL, "shape \"%s\": %s%s given twice (expected each once)", text, p,
                               val ? "=" : "");
        if (nseen < 64) seen_val[nseen] = !!val, seen[nseen++] = p;
        cg_sym sym;
        int64_t v;
        const int ti = cg__op_tensor(d, p);
        int sc = -1;
        for (int k = 0; k < d->nscalar; k++)
            if (!strcmp(d->scalar[k].name, p)) sc = k;
        if (val && cg_sym_parse(p, &sym) == CG_OK && d->dim_off[sym] != (size_t)-1) {
            if (!val || parse_int(val, 1, DIM_MAX, &v))
                return cg__err(ctx, CG_EINVAL, "shape \"%s\": %s = '%s' (expected an integer in 1 .. 2^40)", text, p,
                               val ? val : "");
            s.dim[sym] = v;
            have_g |= sym == CG_SYM_G;
        } else if (!strcmp(p, "dtype") && val) {
            dtype_word = val;
        } else if (!strcmp(p, "layout") && val && d->layout_arg_off != (size_t)-1) {
            if (strcmp(val, "token") && strcmp(val, "head"))
                return cg__err(ctx, CG_EINVAL, "shape \"%s\": layout=%s (expected token or head)", text, val);
            s.layout = !strcmp(val, "head") ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
        } else if ((!strcmp(p, "varlen") || !strcmp(p, "longest")) && val && d->varlen) {
            if (parse_int(val, 1, DIM_MAX, &v))
                return cg__err(ctx, CG_EINVAL, "shape \"%s\": %s = '%s' (expected an integer in 1 .. 2^40)", text, p,
                               val);
            *(p[0] == 'v' ? &s.nseq : &s.longest) = v;
        } else if (!val && ti >= 0 && d->t[ti].optional) {
            s.given |= BIT(ti);
        } else if (!val && sc >= 0) {
            s.scalars |= 1u << sc;
        } else {
            const int keyword =
                !strcmp(p, "dtype") || !strcmp(p, "layout") || !strcmp(p, "varlen") || !strcmp(p, "longest");
            const char *why = ti >= 0 && !d->t[ti].optional ? "is a required tensor (name only the optional ones given)"
                              : cg_sym_parse(p, &sym) == CG_OK ? "is not a symbol of this op"
                              : keyword && !val                ? "needs a value"
                              : keyword                        ? "is not a setting of this op"
                              : ti >= 0 || sc >= 0             ? "takes no value"
                                                               : "is unknown";
            return cg__err(ctx, CG_EINVAL, "shape \"%s\": '%s%s%s' %s (expected one of %s)", text, p, val ? "=" : "",
                           val ? val : "", why, words_of(d, words, sizeof words, 0));
        }
    }
    for (int k = 1; k < CG_SYM_COUNT; k++) {
        if (d->dim_off[k] == (size_t)-1 || s.dim[k]) continue;
        if (k == CG_SYM_G && d->grouped_off != (size_t)-1) continue; /* ungrouped */
        return cg__err(ctx, CG_EINVAL, "shape \"%s\": %s is missing (expected every symbol of %s: %s)", text,
                       cg_sym_name((cg_sym)k), d->name, words_of(d, words, sizeof words, 1));
    }
    if (d->grouped_off != (size_t)-1) {
        s.grouped = have_g;
        if (!have_g) s.dim[CG_SYM_G] = 1;
    }
    if (s.longest && !s.nseq)
        return cg__err(ctx, CG_EINVAL, "shape \"%s\": longest given without varlen (expected varlen=N too)", text);
    if (dtype_word) {
        cg_status st = parse_dtype(ctx, text, d, dtype_word, &s);
        if (st) return st;
    }
    cg_status st = shape_check(ctx, &s, &d);
    if (st) {
        char why[CG_ERRMSG_CAP];
        snprintf(why, sizeof why, "%s", ctx ? ctx->errmsg : "");
        return cg__err(ctx, st, "shape \"%s\": %s", text, why);
    }
    return cg__abi_out(ctx, "shape", out, &s, sizeof s);
}

/* -------------------------------------------------------------- format */

cg_status cg_shape_format(cg_context *ctx, const cg_shape *shape, char *buf, size_t cap) {
    cg_shape s;
    const cg_op_desc *d;
    cg_status st = cg__abi_in(ctx, "shape", &s, sizeof s, shape);
    if (!st && !shape) st = cg__err(ctx, CG_EINVAL, "shape: null pointer");
    if (!st && (!buf || !cap)) st = cg__err(ctx, CG_EINVAL, "buf: null or empty (expected CG_SHAPE_TEXT_MAX bytes)");
    if (!st) st = shape_check(ctx, &s, &d);
    if (st) return st;
    char t[CG_SHAPE_TEXT_MAX];
    size_t n = (size_t)snprintf(t, sizeof t, "%s:", d->name);
#define ADD(...) (n += n < sizeof t ? (size_t)snprintf(t + n, sizeof t - n, __VA_ARGS__) : 0)
    int first = 1;
    for (int k = 1; k < CG_SYM_COUNT; k++) {
        if (d->dim_off[k] == (size_t)-1 || (k == CG_SYM_G && d->grouped_off != (size_t)-1 && !s.grouped)) continue;
        ADD("%s%s=%lld", first ? "" : ",", cg_sym_name((cg_sym)k), (long long)s.dim[k]);
        first = 0;
    }
    if (s.layout == CG_LAYOUT_HEAD_MAJOR) ADD(",layout=head");
    if (s.dtype != CG_F32) {
        int dt[CG_OP_MAX_TENSORS];
        char sig[256];
        cg__shape_input_dtypes(d, &s, dt);
        if (s.dtype == CG_F64) snprintf(sig, sizeof sig, "f64");
        else cg__op_dtype_sig(d, dt, sig, sizeof sig);
        ADD(",dtype=%s", sig);
    }
    if (s.nseq) ADD(",varlen=%lld", (long long)s.nseq);
    if (s.longest) ADD(",longest=%lld", (long long)s.longest);
    for (int i = 0; i < d->nt; i++)
        if (s.given & BIT(i)) ADD(",%s", d->t[i].name);
    for (int k = 0; k < d->nscalar; k++)
        if (s.scalars & (1u << k)) ADD(",%s", d->scalar[k].name);
#undef ADD
    if (n >= sizeof t || n >= cap)
        return cg__err(ctx, CG_EINVAL, "cap: %zu bytes but the text takes %zu (expected CG_SHAPE_TEXT_MAX)", cap,
                       n + 1);
    memcpy(buf, t, n + 1);
    return CG_OK;
}

/* ------------------------------------------------------ of args, tensor */

/* The longest sequence of a validated varlen problem (host offsets); 0 when not varlen
 * or when the offsets are device memory. */
static int64_t longest_of(cg_context *ctx, const cg_op_desc *d, const void *prob) {
    const cg_view *cu = cg__prob_cu(d, prob);
    if (!cu->p || (cg__kexec_cuda.owns_ptr && cg__kexec_cuda.owns_ptr(ctx, cu->p))) return 0;
    int64_t m = 0;
    for (int64_t i = 0, n = *cg__prob_nseq(d, prob); i < n; i++) {
        const int64_t len = cg__cu_at(cu, i + 1) - cg__cu_at(cu, i);
        if (len > m) m = len;
    }
    return m;
}

#define ARGS_MAX 4096
#define PROB_MAX 4096

cg_status cg_shape_of(cg_context *ctx, cg_op op, const void *args, cg_shape *out) {
    const cg_op_desc *d = cg__op_checked(ctx, op);
    if (!d) return CG_EINVAL;
    _Alignas(16) char a[ARGS_MAX], prob[PROB_MAX];
    CG_ASSERT(d->args_size <= sizeof a && d->prob_size <= sizeof prob);
    cg_status st = cg__abi_in(ctx, "args", a, d->args_size, args);
    if (st) return st;
    if ((st = cg__op_validate_ex(ctx, d, args ? a : NULL, prob, 1)) != CG_OK) return st;
    cg_shape s;
    cg__shape_of_prob(d, prob, &s);
    if (d->layout_arg_off != (size_t)-1) s.layout = *(const cg_layout *)(a + d->layout_arg_off);
    s.longest = longest_of(ctx, d, prob);
    return cg__abi_out(ctx, "shape", out, &s, sizeof s);
}

cg_status cg_shape_tensor(cg_context *ctx, const cg_shape *shape, int i, cg_tensor *tensor) {
    cg_shape s;
    const cg_op_desc *d;
    cg_status st = cg__abi_in(ctx, "shape", &s, sizeof s, shape);
    if (!st && !shape) st = cg__err(ctx, CG_EINVAL, "shape: null pointer");
    if (!st && !tensor) st = cg__err(ctx, CG_EINVAL, "tensor: null pointer (expected a cg_tensor to write to)");
    if (!st) st = shape_check(ctx, &s, &d);
    if (st) return st;
    const cg_tdesc *t = cg__op_tdesc(d, i);
    if (!t)
        return cg__err(ctx, CG_EINVAL, "i: %d but expected 0 .. %d (the tensors of %s%s)", i,
                       d->nt - (d->varlen == NULL), d->name, d->varlen ? ", cu_seqlens last" : "");
    memset(tensor, 0, sizeof *tensor);
    if (i == d->nt) { /* cu_seqlens [N + 1] */
        tensor->dtype = CG_I32;
        if (s.nseq) tensor->ndim = 1, tensor->shape[0] = s.nseq + 1;
        return CG_OK;
    }
    if (!cg__shape_present(d, &s, i)) return CG_OK;
    int64_t dims[CG_SYM_COUNT];
    for (int k = 0; k < CG_SYM_COUNT; k++) dims[k] = k ? s.dim[k] : 1;
    tensor->ndim = cg__op_given_shape(d, i, dims, d->grouped_off == (size_t)-1 || s.grouped,
                                      s.layout == CG_LAYOUT_HEAD_MAJOR, tensor->shape);
    if (s.nseq && (t->flags & CG_TD_PERSEQ)) tensor->shape[0] = s.nseq;
    tensor->dtype = s.dtype == CG_F64 ? CG_F64 : (s.half & BIT(i)) ? s.dtype : CG_F32;
    if (t->flags & CG_TD_INDEX) tensor->dtype = CG_I32; /* a decode step's slot indices (CG_I64 works as well) */
    return CG_OK;
}
