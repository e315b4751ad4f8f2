/* validate.c -- the one place that checks user arguments and builds problems.
 * Every message names the argument and says what was expected. */
#include "ops.h"
#include "gen.h"

#include <string.h>

typedef struct tspec {
    const char *name; /* argument name, e.g. "q" */
    const cg_tensor *t;
    int required;
    int output;
    int ndim;
    int64_t shape[4];     /* expected, in the order given by the caller */
    const cg_op_desc *d;  /* for the "[B, T, G, dk]" text of messages (tdims): */
    int idx, grouped, hm; /* formatted only when a message needs it (no snprintf per call) */
    int inner_contig;     /* innermost stride must be 1 */
    int index;            /* an index tensor (CG_TD_INDEX): CG_I32 or CG_I64 */
    int perm[4];          /* logical index k takes the caller's dim perm[k]; -1: none */
} tspec;

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
}

/* Span in bytes of tensor memory: [lo, hi). Strides are already checked. */
static void span(const cg_tensor *t, const int64_t *st, uintptr_t *lo, uintptr_t *hi) {
    int64_t maxoff = 0;
    for (int i = 0; i < t->ndim; i++) maxoff += (t->shape[i] - 1) * st[i];
    *lo = (uintptr_t)t->data;
    *hi = *lo + (uintptr_t)((maxoff + 1) * (int64_t)cg__dtype_size(t->dtype));
}

/* Message texts, formatted only when a check fails (validation runs for every tensor of
 * every call): tensor i's symbolic dims ("[B, T, G, dk]") into buf (64 bytes), and the
 * shape sp expects ("[2, 37, 4, 48]") into buf (96 bytes). */
static const char *dims_text(const cg_op_desc *d, int i, int grouped, int hm, char *buf) {
    cg__op_dims_text(d, i, grouped, hm, buf, 64);
    return buf;
}
static const char *tdims(const tspec *sp, char *buf) { return dims_text(sp->d, sp->idx, sp->grouped, sp->hm, buf); }
static const char *twant(const tspec *sp, char *buf) {
    fmt_shape(buf, 96, sp->ndim, sp->shape);
    return buf;
}

/* Check one tensor; fills strides (contiguous when all zero). */
static cg_status check_tensor(cg_context *ctx, const tspec *sp, int64_t *st) {
    const cg_tensor *t = sp->t;
    char want[96], got[96], db[64];
    if (!t->data) {
        if (sp->required)
            return cg__err(ctx, CG_EINVAL, "%s: null data pointer (required tensor %s)", sp->name, tdims(sp, db));
        return CG_OK;
    }
    if (sp->index && !cg__dtype_index(t->dtype))
        return cg__err(ctx, CG_EINVAL, "%s: dtype %s but expected CG_I32 or CG_I64 (an index tensor %s)", sp->name,
                       cg__dtype_name(t->dtype), tdims(sp, db));
    if (cg__dtype_index(t->dtype) && !sp->index) /* integer dtypes are cu_seqlens' and the index tensors' only */
        return cg__err(
            ctx, CG_EINVAL,
            "%s: dtype %s but expected CG_F32, CG_F64, CG_BF16 or CG_F16 (integer tensors are for cu_seqlens only)",
            sp->name, t->dtype == CG_I32 ? "CG_I32" : "CG_I64");
    if (!sp->index && !cg__dtype_known(t->dtype))
        return cg__err(ctx, CG_EINVAL, "%s: unknown dtype %d (expected CG_F32, CG_F64, CG_BF16 or CG_F16)", sp->name,
                       (int)t->dtype);
    if ((uintptr_t)t->data % cg__dtype_size(t->dtype)) /* misaligned data would be read misaligned (UB) */
        return cg__err(ctx, CG_EINVAL, "%s: data pointer %p is not aligned to %zu bytes (the size of its dtype)",
                       sp->name, t->data, cg__dtype_size(t->dtype));
    if (t->ndim != sp->ndim) {
        fmt_shape(got, sizeof got, t->ndim > 0 && t->ndim <= CG_MAX_DIMS ? t->ndim : 0, t->shape);
        return cg__err(ctx, CG_EINVAL, "%s: %d dimensions %s but expected %d: %s %s", sp->name, t->ndim, got, sp->ndim,
                       twant(sp, want), tdims(sp, db));
    }
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] != sp->shape[i]) {
            fmt_shape(got, sizeof got, t->ndim, t->shape);
            return cg__err(ctx, CG_EINVAL, "%s: shape %s but expected %s %s", sp->name, got, twant(sp, want),
                           tdims(sp, db));
        }
    }
    int all_zero = 1;
    for (int i = 0; i < t->ndim; i++) all_zero &= t->stride[i] == 0;
    int64_t numel = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (all_zero) st[i] = numel;
        else st[i] = t->stride[i];
        if (numel > INT64_MAX / t->shape[i])
            return cg__err(ctx, CG_EINVAL, "%s: element count of shape %s overflows 64 bits", sp->name,
                           twant(sp, want));
        numel *= t->shape[i];
    }
    if (numel > INT64_MAX / 8)
        return cg__err(ctx, CG_EINVAL, "%s: byte size of shape %s overflows 64 bits", sp->name, twant(sp, want));
    int64_t maxoff = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (st[i] < 0)
            return cg__err(ctx, CG_EINVAL, "%s: stride[%d] = %lld out of range (expected >= 0)", sp->name, i,
                           (long long)st[i]);
        if (st[i] > 0 && t->shape[i] - 1 > (INT64_MAX / 8 - maxoff) / st[i])
            return cg__err(ctx, CG_EINVAL, "%s: stride[%d] = %lld out of range (offsets overflow 64 bits)", sp->name, i,
                           (long long)st[i]);
        maxoff += (t->shape[i] - 1) * st[i];
    }
    if (sp->inner_contig && t->ndim > 0 && t->shape[t->ndim - 1] > 1 && st[t->ndim - 1] != 1)
        return cg__err(ctx, CG_EINVAL,
                       "%s: innermost stride is %lld but expected 1 (the last dimension of %s must be contiguous)",
                       sp->name, (long long)st[t->ndim - 1], tdims(sp, db));
    if (sp->output) {
        /* No two indices may share memory: sorted by stride, each stride must exceed the
         * extent of the dimensions inside it. */
        int order[CG_MAX_DIMS], n = 0;
        for (int i = 0; i < t->ndim; i++)
            if (t->shape[i] > 1) order[n++] = i;
        for (int a = 1; a < n; a++)
            for (int b = a; b > 0 && st[order[b]] < st[order[b - 1]]; b--) {
                int tmp = order[b];
                order[b] = order[b - 1];
                order[b - 1] = tmp;
            }
        int64_t extent = 0;
        for (int a = 0; a < n; a++) {
            if (st[order[a]] <= extent)
                return cg__err(ctx, CG_EINVAL, "%s: strides make the output overlap itself (stride[%d] = %lld)",
                               sp->name, order[a], (long long)st[order[a]]);
            extent += (t->shape[order[a]] - 1) * st[order[a]];
        }
    }
    return CG_OK;
}

/* Check all specs and the dtype rules (cg__op_dtypes); then outputs must not overlap each
 * other or any input; then build views (each with its tensor's storage dtype). */
static cg_status check_all(cg_context *ctx, const cg_op_desc *d, tspec *sp, int n, cg_view **views, cg_dtype *dtype) {
    int64_t st[CG_OP_MAX_TENSORS][CG_MAX_DIMS];
    CG_ASSERT(n <= CG_OP_MAX_TENSORS && n == d->nt);
    cg_status s;
    int dt[CG_OP_MAX_TENSORS];
    cg_dtype want[CG_OP_MAX_TENSORS];
    for (int i = 0; i < n; i++) {
        if ((s = check_tensor(ctx, &sp[i], st[i])) != CG_OK) return s;
        dt[i] = sp[i].t->data ? (int)sp[i].t->dtype : -1;
    }
    if ((s = cg__op_dtypes(ctx, d, dt, want, dtype)) != CG_OK) return s;
    for (int i = 0; i < n; i++) {
        if (!sp[i].output || !sp[i].t->data) continue;
        uintptr_t lo, hi;
        span(sp[i].t, st[i], &lo, &hi);
        for (int j = 0; j < n; j++) {
            if (j == i || !sp[j].t->data || (sp[j].output && j < i)) continue;
            uintptr_t lo2, hi2;
            span(sp[j].t, st[j], &lo2, &hi2);
            if (lo < hi2 && lo2 < hi)
                return cg__err(ctx, CG_EINVAL, "%s: output memory overlaps %s %s", sp[i].name,
                               sp[j].output ? "output" : "input", sp[j].name);
        }
    }
    for (int i = 0; i < n; i++) {
        cg_view *v = views[i];
        memset(v, 0, sizeof *v);
        if (!sp[i].t->data) continue;
        v->p = sp[i].t->data;
        v->dt = sp[i].t->dtype;
        for (int k = 0; k < 4; k++) v->s[k] = sp[i].perm[k] >= 0 ? st[i][sp[i].perm[k]] : 0;
    }
    return CG_OK;
}

cg_status cg__op_derive_dims(cg_context *ctx, const cg_op_desc *d, const void *args, int hm, int64_t dims[CG_SYM_COUNT],
                             int src[CG_SYM_COUNT], int *grouped) {
    for (int s = 0; s < CG_SYM_COUNT; s++) dims[s] = 0, src[s] = -1;
    dims[CG_SYM_NONE] = 1;
    *grouped = 1;
    int order_of[CG_SYM_COUNT], nord = 0;
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *td = &d->t[i];
        if (td->role != CG_TD_IN || td->optional) continue;
        int news = 0;
        for (int k = 0; k < 4; k++)
            news |= td->ext[k] != CG_SYM_NONE && src[td->ext[k]] < 0 && d->dim_off[td->ext[k]] != (size_t)-1;
        if (!news) continue;
        const cg_tensor *t = cg__args_tensor(d, args, i);
        char full[64], part[64]; /* dims texts, formatted for a message only */
        if (!t->data)
            return cg__err(ctx, CG_EINVAL, "%s: null data pointer (required tensor %s)", td->name,
                           dims_text(d, i, 1, hm, full));
        int64_t shape[4];
        int nfull = cg__op_given_shape(d, i, dims, 1, hm, shape);
        int g = 1;
        if (td->flags & CG_TD_GROUPABLE) {
            if (t->ndim != nfull && t->ndim != nfull - 1)
                return cg__err(ctx, CG_EINVAL, "%s: %d dimensions but expected %d %s or %d %s", td->name, t->ndim,
                               nfull - 1, dims_text(d, i, 0, hm, part), nfull, dims_text(d, i, 1, hm, full));
            g = t->ndim == nfull;
            *grouped = g;
        } else if (t->ndim != nfull) {
            return cg__err(ctx, CG_EINVAL, "%s: %d dimensions but expected %d: %s", td->name, t->ndim, nfull,
                           dims_text(d, i, 1, hm, full));
        }
        int order[4], n = cg__op_given_order(d, i, g, hm, order);
        for (int j = 0; j < n; j++) {
            cg_sym s = td->ext[order[j]];
            if (src[s] >= 0 || d->dim_off[s] == (size_t)-1) continue;
            dims[s] = t->shape[j];
            src[s] = i;
            order_of[nord++] = s;
        }
        if ((td->flags & CG_TD_GROUPABLE) && !g && src[CG_SYM_G] < 0) {
            dims[CG_SYM_G] = 1;
            src[CG_SYM_G] = i;
            order_of[nord++] = CG_SYM_G;
        }
    }
    for (int j = 0; j < nord; j++) {
        cg_sym s = (cg_sym)order_of[j];
        if (dims[s] <= 0)
            return cg__err(ctx, CG_EINVAL, "%s: dimension %s = %lld but expected >= 1", d->t[src[s]].name,
                           cg_sym_name(s), (long long)dims[s]);
    }
    if (d->divisible != CG_SYM_NONE) {
        cg_sym a = d->divisible, b = d->divisor;
        if (dims[a] % dims[b] != 0) {
            /* name the tensor that supplied the later of the two */
            int later = src[a] > src[b] ? src[a] : src[b];
            return cg__err(ctx, CG_EINVAL, "%s: %s = %lld is not a multiple of %s = %lld (expected %s %% %s == 0)",
                           d->t[later].name, cg_sym_name(a), (long long)dims[a], cg_sym_name(b), (long long)dims[b],
                           cg_sym_name(a), cg_sym_name(b));
        }
    }
    return CG_OK;
}

static cg_status varlen_views(cg_context *ctx, const cg_op_desc *d, const void *args, int64_t nseq, void *prob);

cg_status cg__op_validate(cg_context *ctx, const cg_op_desc *d, const void *args, void *prob) {
    return cg__op_validate_ex(ctx, d, args, prob, 0);
}

cg_status cg__op_validate_ex(cg_context *ctx, const cg_op_desc *d, const void *args, void *prob, int outputs_optional) {
    memset(prob, 0, d->prob_size);
    if (!args) return cg__err(ctx, CG_EINVAL, "args: null pointer (expected %s)", d->args_type);
    int hm = 0;
    if (d->layout_arg_off != (size_t)-1) {
        cg_layout layout = *(const cg_layout *)((const char *)args + d->layout_arg_off);
        if (layout != CG_LAYOUT_TOKEN_MAJOR && layout != CG_LAYOUT_HEAD_MAJOR)
            return cg__err(ctx, CG_EINVAL, "layout: %d but expected CG_LAYOUT_TOKEN_MAJOR or CG_LAYOUT_HEAD_MAJOR",
                           (int)layout);
        hm = layout == CG_LAYOUT_HEAD_MAJOR;
    }
    int64_t dims[CG_SYM_COUNT];
    int src[CG_SYM_COUNT], grouped;
    cg_status s = cg__op_derive_dims(ctx, d, args, hm, dims, src, &grouped);
    if (s) return s;
    for (int k = 1; k < CG_SYM_COUNT; k++)
        if (d->dim_off[k] != (size_t)-1) *(int64_t *)((char *)prob + d->dim_off[k]) = dims[k];
    cg_shape *shape = prob; /* the problem's first member (internal.h): the call's shape */
    shape->size = sizeof *shape, shape->op = d->op;
    int64_t nseq = 0;
    if ((s = cg__varlen_dims(ctx, d, args, dims, src, &nseq)) != CG_OK) return s;
    if (d->grouped_off != (size_t)-1) *(int *)((char *)prob + d->grouped_off) = grouped;
    for (int k = 0; k < d->nscalar; k++)
        *(int *)((char *)prob + d->scalar[k].prob_off) = *(const int *)((const char *)args + d->scalar[k].arg_off) != 0;
    for (int k = 0; k < d->nreal; k++) { /* real scalars: finite, in range; 0 is the default */
        const cg_real_desc *r = &d->real[k];
        double x = *(const double *)((const char *)args + r->arg_off);
        if (!(x >= r->lo && x <= r->hi && x - x == 0)) {
            char range[64];
            if (r->hi - r->hi != 0) snprintf(range, sizeof range, ">= %g", r->lo);
            else snprintf(range, sizeof range, "in [%g, %g]", r->lo, r->hi);
            return cg__err(ctx, CG_EINVAL, "%s: %g but expected a finite value %s%s%s%s", r->name, x, range,
                           r->dflt ? " (0: " : "", r->dflt ? r->dflt_text : "", r->dflt ? ")" : "");
        }
        if (x == 0 && r->dflt) x = r->dflt(dims);
        *(double *)((char *)prob + r->prob_off) = x;
    }
    /* optional outputs allowed only with their input */
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *td = &d->t[i];
        if (!td->requires || !cg__args_tensor(d, args, i)->data) continue;
        int r = cg__op_tensor(d, td->requires);
        CG_ASSERT(r >= 0);
        if (!cg__args_tensor(d, args, r)->data)
            return cg__err(ctx, CG_EINVAL, "%s: given but %s is absent (expected %s only with %s)", td->name,
                           td->requires, td->name, td->requires);
    }
    tspec sp[CG_OP_MAX_TENSORS];
    cg_view *views[CG_OP_MAX_TENSORS];
    CG_ASSERT(d->nt <= CG_OP_MAX_TENSORS);
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *td = &d->t[i];
        tspec *p = &sp[i];
        memset(p, 0, sizeof *p);
        p->name = td->name;
        p->t = cg__args_tensor(d, args, i);
        p->required = !td->optional && !(outputs_optional && td->role == CG_TD_OUT);
        p->output = td->role == CG_TD_OUT || (td->flags & CG_TD_INPLACE); /* written: no overlaps */
        p->index = (td->flags & CG_TD_INDEX) != 0;
        p->inner_contig = (td->flags & CG_TD_CONTIG) != 0;
        int order[4];
        p->ndim = cg__op_given_shape(d, i, dims, grouped, hm, p->shape);
        p->d = d;
        p->idx = i;
        p->grouped = grouped;
        p->hm = hm;
        /* perm: logical index k takes the caller's dimension perm[k] */
        int n = cg__op_given_order(d, i, grouped, hm, order);
        for (int k = 0; k < 4; k++) p->perm[k] = -1;
        for (int j = 0; j < n; j++) p->perm[order[j]] = j;
        views[i] = cg__prob_view(d, prob, i);
        if (nseq && (td->flags & CG_TD_PERSEQ)) p->shape[0] = nseq; /* states: one per sequence */
    }
    s = check_all(ctx, d, sp, d->nt, views, (cg_dtype *)((char *)prob + d->dtype_off));
    if (!s && cg__op_slots(d) && !outputs_optional) s = cg__slots_check(ctx, d, prob); /* values: the call's */
    if (s || !nseq) return s;
    return varlen_views(ctx, d, args, nseq, prob);
}

cg_status cg__ssd_fwd_prob(cg_context *ctx, const cg_ssd_fwd_args *a, cg_ssd_prob *p) {
    return cg__op_validate(ctx, cg__op_desc(CG_OP_SSD_FWD), a, p);
}
cg_status cg__ssd_bwd_prob(cg_context *ctx, const cg_ssd_bwd_args *a, cg_ssd_prob *p) {
    return cg__op_validate(ctx, cg__op_desc(CG_OP_SSD_BWD), a, p);
}
cg_status cg__sscan_fwd_prob(cg_context *ctx, const cg_sscan_fwd_args *a, cg_sscan_prob *p) {
    return cg__op_validate(ctx, cg__op_desc(CG_OP_SSCAN_FWD), a, p);
}
cg_status cg__sscan_bwd_prob(cg_context *ctx, const cg_sscan_bwd_args *a, cg_sscan_prob *p) {
    return cg__op_validate(ctx, cg__op_desc(CG_OP_SSCAN_BWD), a, p);
}

/* ---------------------------------------------------------------- varlen
 * cu_seqlens (docs/varlen.md): the op's `varlen` row, checked apart from the float tensors. */

cg_status cg__varlen_dims(cg_context *ctx, const cg_op_desc *d, const void *args, const int64_t dims[CG_SYM_COUNT],
                          const int src[CG_SYM_COUNT], int64_t *nseq) {
    *nseq = 0;
    if (!d->varlen) return CG_OK; /* an op without cu_seqlens */
    const cg_tensor *t = (const cg_tensor *)((const char *)args + d->varlen->arg_off);
    if (!t->data) return CG_OK;
    const char *seq = cg_sym_name(d->seq);
    if (!cg__dtype_index(t->dtype))
        return cg__err(ctx, CG_EINVAL, "cu_seqlens: dtype %s but expected CG_I32 or CG_I64 (the offsets [N + 1])",
                       cg__dtype_known(t->dtype) ? cg__dtype_name(t->dtype) : "unknown");
    if ((uintptr_t)t->data % cg__dtype_size(t->dtype))
        return cg__err(ctx, CG_EINVAL,
                       "cu_seqlens: data pointer %p is not aligned to %zu bytes (the size of its dtype)", t->data,
                       cg__dtype_size(t->dtype));
    if (t->ndim != 1) return cg__err(ctx, CG_EINVAL, "cu_seqlens: %d dimensions but expected 1: [N + 1]", t->ndim);
    if (t->shape[0] < 2)
        return cg__err(ctx, CG_EINVAL,
                       "cu_seqlens: shape (%lld) but expected at least 2 offsets: [N + 1] with N >= 1 sequences",
                       (long long)t->shape[0]);
    if (t->stride[0] < 0 || t->stride[0] > INT64_MAX / 8 / t->shape[0])
        return cg__err(ctx, CG_EINVAL, "cu_seqlens: stride[0] = %lld out of range (expected >= 0)",
                       (long long)t->stride[0]);
    if (dims[CG_SYM_B] != 1)
        return cg__err(ctx, CG_EINVAL,
                       "%s: B = %lld but expected 1 with cu_seqlens (the sequences are packed along %s)",
                       d->t[src[CG_SYM_B]].name, (long long)dims[CG_SYM_B], seq);
    *nseq = t->shape[0] - 1;
    return CG_OK;
}

static cg_status varlen_views(cg_context *ctx, const cg_op_desc *d, const void *args, int64_t nseq, void *prob) {
    const cg_tensor *t = (const cg_tensor *)((const char *)args + d->varlen->arg_off);
    cg_view *cu = cg__prob_cu(d, prob);
    cu->p = t->data;
    cu->dt = t->dtype;
    cu->s[0] = t->stride[0] ? t->stride[0] : 1;
    *cg__prob_nseq(d, prob) = nseq;
    const uintptr_t lo = (uintptr_t)t->data,
                    hi = lo + (uintptr_t)((nseq * cu->s[0] + 1) * (int64_t)cg__dtype_size(t->dtype));
    for (int i = 0; i < d->nt; i++) { /* outputs must not overlap the offsets (like any input) */
        const cg_view *v = cg__prob_view(d, prob, i);
        if (d->t[i].role != CG_TD_OUT || !v->p) continue;
        int64_t n[4];
        cg__prob_extents(d, prob, i, n);
        const uintptr_t vlo = (uintptr_t)v->p, vhi = vlo + (uintptr_t)cg__view_span(v, n) * cg__dtype_size(v->dt);
        if (vlo < hi && lo < vhi)
            return cg__err(ctx, CG_EINVAL, "%s: output memory overlaps input cu_seqlens", d->t[i].name);
    }
    /* Device offsets are not read here (a device-to-host copy would break graph capture):
     * the kernels clamp them (docs/varlen.md); dispatch keeps them from the host paths. */
    if (cg__kexec_cuda.owns_ptr(ctx, t->data)) return CG_OK;
    return cg__varlen_check(ctx, d, prob);
}

cg_status cg__varlen_check(cg_context *ctx, const cg_op_desc *d, const void *prob) {
    const cg_view *cu = cg__prob_cu(d, prob);
    const int64_t n1 = *cg__prob_nseq(d, prob) + 1;
    const int64_t T = cg__prob_dim(d, prob, d->seq);
    const char *seq = cg_sym_name(d->seq);
    int64_t prev = 0;
    for (int64_t i = 0; i < n1; i++) {
        const int64_t x = cg__cu_at(cu, i);
        if (i == 0 && x != 0)
            return cg__err(ctx, CG_EINVAL, "cu_seqlens[0] = %lld but expected 0 (the first offset)", (long long)x);
        if (x < prev)
            return cg__err(
                ctx, CG_EINVAL,
                "cu_seqlens[%lld] = %lld but expected >= cu_seqlens[%lld] = %lld (offsets are non-decreasing)",
                (long long)i, (long long)x, (long long)(i - 1), (long long)prev);
        if (x > T)
            return cg__err(ctx, CG_EINVAL, "cu_seqlens[%lld] = %lld but expected <= %s = %lld (the packed length)",
                           (long long)i, (long long)x, seq, (long long)T);
        if (i == n1 - 1 && x != T)
            return cg__err(ctx, CG_EINVAL,
                           "cu_seqlens[%lld] = %lld but expected %s = %lld (the last offset is the packed length)",
                           (long long)i, (long long)x, seq, (long long)T);
        prev = x;
    }
    return CG_OK;
}

/* ------------------------------------------------------------------ slots
 * A decode step's slot indices (ops.h, cg_slot_desc): checked on the host before anything
 * is written. Device indices are not read (no copy that would synchronize): the kernels
 * skip an index out of range. */

/* "state_indices[3]" or "dst_indices[3, 1]" into buf. */
static const char *slot_name(const cg_op_desc *d, int i, int64_t b, int64_t t, int two, char *buf, size_t cap) {
    if (two) snprintf(buf, cap, "%s[%lld, %lld]", d->t[i].name, (long long)b, (long long)t);
    else snprintf(buf, cap, "%s[%lld]", d->t[i].name, (long long)b);
    return buf;
}

/* The entry (b, t) of the destination list that writes slot x, the first one; 0 when none. */
static int slot_writer(const cg_view *src, const cg_view *dst, int64_t B, int64_t T, int64_t x, int64_t *wb,
                       int64_t *wt) {
    for (int64_t b = 0; b < B; b++) {
        if (cg__idx_at(src, b, 0) < 0) continue;
        for (int64_t t = 0; t < (dst->p ? T : 1); t++)
            if ((dst->p ? cg__idx_at(dst, b, t) : cg__idx_at(src, b, 0)) == x) return *wb = b, *wt = t, 1;
    }
    return 0;
}

cg_status cg__slots_check(cg_context *ctx, const cg_op_desc *d, const void *prob) {
    const cg_slot_desc *sd = cg__op_slots(d);
    const cg_view *src = cg__prob_view(d, prob, sd->src), *dst = cg__prob_view(d, prob, sd->dst);
    if (!src->p || cg__kexec_cuda.owns_ptr(ctx, src->p) || (dst->p && cg__kexec_cuda.owns_ptr(ctx, dst->p)))
        return CG_OK;
    const int64_t S = cg__prob_dim(d, prob, sd->slots), B = cg__prob_dim(d, prob, CG_SYM_B);
    const int64_t T = dst->p ? cg__prob_dim(d, prob, d->seq) : 1;
    const char *sn = cg_sym_name(sd->slots);
    char at[96], other[96];
    for (int64_t b = 0; b < B; b++) { /* the range of every index */
        const int64_t x = cg__idx_at(src, b, 0);
        if (x < -1 || x >= S)
            return cg__err(ctx, CG_EINVAL,
                           "%s = %lld but expected -1 (padding) or a slot 0 .. %s-1 = %lld (the cache's first extent)",
                           slot_name(d, sd->src, b, 0, 0, at, sizeof at), (long long)x, sn, (long long)(S - 1));
        for (int64_t t = 0; dst->p && t < T; t++) {
            const int64_t y = cg__idx_at(dst, b, t);
            if (y < -1 || y >= S)
                return cg__err(
                    ctx, CG_EINVAL,
                    "%s = %lld but expected -1 (no write) or a slot 0 .. %s-1 = %lld (the cache's first extent)",
                    slot_name(d, sd->dst, b, t, 1, at, sizeof at), (long long)y, sn, (long long)(S - 1));
        }
    }
    /* one bit per slot: written by this call */
    uint64_t local[512], *bits = local;
    const size_t words = (size_t)((S + 63) / 64);
    if (words > sizeof local / sizeof local[0] && !(bits = calloc(words, sizeof *bits)))
        return cg__err(ctx, CG_ENOMEM, "%s: out of memory for the check of %lld slots", d->name, (long long)S);
    if (bits == local) memset(local, 0, words * sizeof *bits);
    cg_status s = CG_OK;
    const int wi = dst->p ? sd->dst : sd->src;
    for (int64_t b = 0; b < B && !s; b++) {
        if (cg__idx_at(src, b, 0) < 0) continue; /* padding: nothing read or written */
        for (int64_t t = 0; t < T && !s; t++) {
            const int64_t x = dst->p ? cg__idx_at(dst, b, t) : cg__idx_at(src, b, 0);
            if (x < 0) continue;
            if (bits[x / 64] >> (x % 64) & 1) {
                int64_t ob = 0, ot = 0;
                slot_writer(src, dst, B, T, x, &ob, &ot);
                s = cg__err(ctx, CG_EINVAL,
                            "%s = %lld but %s = %lld too: a slot written twice in one call (expected distinct slots)",
                            slot_name(d, wi, b, t, dst->p != NULL, at, sizeof at), (long long)x,
                            slot_name(d, wi, ob, ot, dst->p != NULL, other, sizeof other), (long long)x);
            }
            bits[x / 64] |= 1ull << (x % 64);
        }
    }
    for (int64_t b = 0; b < B && !s && dst->p; b++) { /* a slot read by one entry and written by another */
        const int64_t x = cg__idx_at(src, b, 0);
        if (x < 0 || !(bits[x / 64] >> (x % 64) & 1)) continue;
        int64_t wb = 0, wt = 0;
        slot_writer(src, dst, B, T, x, &wb, &wt);
        if (wb != b)
            s = cg__err(ctx, CG_EINVAL,
                        "%s = %lld but %s = %lld: a slot read by one entry and written by another "
                        "(the result would depend on their order; expected distinct slots)",
                        slot_name(d, sd->src, b, 0, 0, at, sizeof at), (long long)x,
                        slot_name(d, sd->dst, wb, wt, 1, other, sizeof other), (long long)x);
    }
    if (bits != local) free(bits);
    return s;
}
