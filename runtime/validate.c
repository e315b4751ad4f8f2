/* validate.c -- the one place that checks user arguments and builds problems.
 * Every message names the argument and says what was expected. */
#include "internal.h"

#include <string.h>

typedef struct tspec {
    const char *name;     /* argument name, e.g. "q" */
    const cg_tensor *t;
    int required;
    int output;
    int ndim;
    int64_t shape[4];     /* expected, in the order given by the caller */
    const char *dims;     /* "[B, T, G, dk]" */
    int inner_contig;     /* innermost stride must be 1 */
    int perm[4];          /* logical index k takes the caller's dim perm[k]; -1: none */
} tspec;

static size_t dt_size(cg_dtype dt) { return dt == CG_F64 ? 8 : 4; }

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
    *hi = *lo + (uintptr_t)((maxoff + 1) * (int64_t)dt_size(t->dtype));
}

/* Check one tensor; fills strides (contiguous when all zero). */
static cg_status check_tensor(cg_context *ctx, const tspec *sp, int64_t *st) {
    const cg_tensor *t = sp->t;
    char want[96], got[96];
    if (!t->data) {
        if (sp->required) return cg__err(ctx, CG_EINVAL, "%s: null data pointer (required tensor %s)", sp->name, sp->dims);
        return CG_OK;
    }
    if (t->dtype != CG_F32 && t->dtype != CG_F64)
        return cg__err(ctx, CG_EINVAL, "%s: unknown dtype %d (expected CG_F32 or CG_F64)", sp->name, (int)t->dtype);
    if ((uintptr_t)t->data % dt_size(t->dtype)) /* misaligned data would be read misaligned (UB) */
        return cg__err(ctx, CG_EINVAL, "%s: data pointer %p is not aligned to %zu bytes (the size of its dtype)",
                       sp->name, t->data, dt_size(t->dtype));
    fmt_shape(want, sizeof want, sp->ndim, sp->shape);
    if (t->ndim != sp->ndim) {
        fmt_shape(got, sizeof got, t->ndim > 0 && t->ndim <= CG_MAX_DIMS ? t->ndim : 0, t->shape);
        return cg__err(ctx, CG_EINVAL, "%s: %d dimensions %s but expected %d: %s %s", sp->name, t->ndim, got,
                       sp->ndim, want, sp->dims);
    }
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] != sp->shape[i]) {
            fmt_shape(got, sizeof got, t->ndim, t->shape);
            return cg__err(ctx, CG_EINVAL, "%s: shape %s but expected %s %s", sp->name, got, want, sp->dims);
        }
    }
    int all_zero = 1;
    for (int i = 0; i < t->ndim; i++) all_zero &= t->stride[i] == 0;
    int64_t numel = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (all_zero) st[i] = numel;
        else st[i] = t->stride[i];
        if (numel > INT64_MAX / t->shape[i])
            return cg__err(ctx, CG_EINVAL, "%s: element count of shape %s overflows 64 bits", sp->name, want);
        numel *= t->shape[i];
    }
    if (numel > INT64_MAX / 8)
        return cg__err(ctx, CG_EINVAL, "%s: byte size of shape %s overflows 64 bits", sp->name, want);
    int64_t maxoff = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (st[i] < 0)
            return cg__err(ctx, CG_EINVAL, "%s: stride[%d] = %lld out of range (expected >= 0)", sp->name, i,
                           (long long)st[i]);
        if (st[i] > 0 && t->shape[i] - 1 > (INT64_MAX / 8 - maxoff) / st[i])
            return cg__err(ctx, CG_EINVAL, "%s: stride[%d] = %lld out of range (offsets overflow 64 bits)",
                           sp->name, i, (long long)st[i]);
        maxoff += (t->shape[i] - 1) * st[i];
    }
    if (sp->inner_contig && t->ndim > 0 && t->shape[t->ndim - 1] > 1 && st[t->ndim - 1] != 1)
        return cg__err(ctx, CG_EINVAL, "%s: innermost stride is %lld but expected 1 (the last dimension of %s must be contiguous)",
                       sp->name, (long long)st[t->ndim - 1], sp->dims);
    if (sp->output) {
        /* No two indices may share memory: sorted by stride, each stride must exceed the
         * extent of the dimensions inside it. */
        int order[CG_MAX_DIMS], n = 0;
        for (int i = 0; i < t->ndim; i++)
            if (t->shape[i] > 1) order[n++] = i;
        for (int a = 1; a < n; a++)
            for (int b = a; b > 0 && st[order[b]] < st[order[b - 1]]; b--) {
                int tmp = order[b]; order[b] = order[b - 1]; order[b - 1] = tmp;
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

/* Check all specs; then outputs must not overlap each other or any input; then build views. */
static cg_status check_all(cg_context *ctx, tspec *sp, int n, cg_view **views, cg_dtype *dtype) {
    int64_t st[24][CG_MAX_DIMS];
    CG_ASSERT(n <= 24);
    cg_status s;
    int have_dt = 0;
    for (int i = 0; i < n; i++) {
        if ((s = check_tensor(ctx, &sp[i], st[i])) != CG_OK) return s;
        if (!sp[i].t->data) continue;
        if (!have_dt) {
            *dtype = sp[i].t->dtype;
            have_dt = 1;
        } else if (sp[i].t->dtype != *dtype) {
            return cg__err(ctx, CG_EINVAL, "%s: dtype %s but expected %s like %s (all tensors of a call share one dtype)",
                           sp[i].name, sp[i].t->dtype == CG_F64 ? "CG_F64" : "CG_F32",
                           *dtype == CG_F64 ? "CG_F64" : "CG_F32", sp[0].name);
        }
    }
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

static cg_status positive(cg_context *ctx, const char *arg, const char *dim, int64_t v) {
    if (v <= 0) return cg__err(ctx, CG_EINVAL, "%s: dimension %s = %lld but expected >= 1", arg, dim, (long long)v);
    return CG_OK;
}

static cg_status need4(cg_context *ctx, const char *name, const cg_tensor *t, int ndim, const char *dims) {
    if (!t->data) return cg__err(ctx, CG_EINVAL, "%s: null data pointer (required tensor %s)", name, dims);
    if (t->ndim != ndim)
        return cg__err(ctx, CG_EINVAL, "%s: %d dimensions but expected %d: %s", name, t->ndim, ndim, dims);
    return CG_OK;
}

/* ------------------------------------------------------------------- SSD */

#define SET4(a, x0, x1, x2, x3) do { (a)[0] = (x0); (a)[1] = (x1); (a)[2] = (x2); (a)[3] = (x3); } while (0)

/* The shape of q and v give B, T, G, dk, H, dv. */
static cg_status ssd_dims(cg_context *ctx, cg_layout layout, const cg_tensor *q, const cg_tensor *v, cg_ssd_prob *p) {
    cg_status s;
    if (layout != CG_LAYOUT_TOKEN_MAJOR && layout != CG_LAYOUT_HEAD_MAJOR)
        return cg__err(ctx, CG_EINVAL, "layout: %d but expected CG_LAYOUT_TOKEN_MAJOR or CG_LAYOUT_HEAD_MAJOR", (int)layout);
    int hm = layout == CG_LAYOUT_HEAD_MAJOR;
    if ((s = need4(ctx, "q", q, 4, hm ? "[B, G, T, dk]" : "[B, T, G, dk]"))) return s;
    if ((s = need4(ctx, "v", v, 4, hm ? "[B, H, T, dv]" : "[B, T, H, dv]"))) return s;
    p->B = q->shape[0];
    p->T = q->shape[hm ? 2 : 1];
    p->G = q->shape[hm ? 1 : 2];
    p->dk = q->shape[3];
    p->H = v->shape[hm ? 1 : 2];
    p->dv = v->shape[3];
    if ((s = positive(ctx, "q", "B", p->B)) || (s = positive(ctx, "q", "T", p->T)) ||
        (s = positive(ctx, "q", "G", p->G)) || (s = positive(ctx, "q", "dk", p->dk)) ||
        (s = positive(ctx, "v", "H", p->H)) || (s = positive(ctx, "v", "dv", p->dv)))
        return s;
    if (p->H % p->G != 0)
        return cg__err(ctx, CG_EINVAL, "v: H = %lld heads is not a multiple of G = %lld groups of q/k (expected H %% G == 0)",
                       (long long)p->H, (long long)p->G);
    return CG_OK;
}

typedef enum { K_QK, K_V, K_LA, K_STATE } ssd_kind;

static tspec ssd_spec(const cg_ssd_prob *p, cg_layout layout, const char *name, const cg_tensor *t, ssd_kind kind,
                      int required, int output) {
    tspec sp;
    memset(&sp, 0, sizeof sp);
    sp.name = name;
    sp.t = t;
    sp.required = required;
    sp.output = output;
    int hm = layout == CG_LAYOUT_HEAD_MAJOR;
    switch (kind) {
    case K_QK:
        sp.ndim = 4;
        sp.inner_contig = 1;
        if (hm) { SET4(sp.shape, p->B, p->G, p->T, p->dk); sp.dims = "[B, G, T, dk]"; SET4(sp.perm, 0, 2, 1, 3); }
        else { SET4(sp.shape, p->B, p->T, p->G, p->dk); sp.dims = "[B, T, G, dk]"; SET4(sp.perm, 0, 1, 2, 3); }
        break;
    case K_V:
        sp.ndim = 4;
        sp.inner_contig = 1;
        if (hm) { SET4(sp.shape, p->B, p->H, p->T, p->dv); sp.dims = "[B, H, T, dv]"; SET4(sp.perm, 0, 2, 1, 3); }
        else { SET4(sp.shape, p->B, p->T, p->H, p->dv); sp.dims = "[B, T, H, dv]"; SET4(sp.perm, 0, 1, 2, 3); }
        break;
    case K_LA:
        sp.ndim = 3;
        if (hm) { SET4(sp.shape, p->B, p->H, p->T, 0); sp.dims = "[B, H, T]"; SET4(sp.perm, 0, 2, 1, -1); }
        else { SET4(sp.shape, p->B, p->T, p->H, 0); sp.dims = "[B, T, H]"; SET4(sp.perm, 0, 1, 2, -1); }
        break;
    case K_STATE:
        sp.ndim = 4;
        sp.inner_contig = 1;
        SET4(sp.shape, p->B, p->H, p->dk, p->dv);
        sp.dims = "[B, H, dk, dv]";
        SET4(sp.perm, 0, 1, 2, 3);
        break;
    }
    return sp;
}

cg_status cg__ssd_fwd_prob(cg_context *ctx, const cg_ssd_fwd_args *a, cg_ssd_prob *p) {
    memset(p, 0, sizeof *p);
    if (!a) return cg__err(ctx, CG_EINVAL, "args: null pointer (expected cg_ssd_fwd_args)");
    cg_status s = ssd_dims(ctx, a->layout, &a->q, &a->v, p);
    if (s) return s;
    tspec sp[] = {
        ssd_spec(p, a->layout, "q", &a->q, K_QK, 1, 0),
        ssd_spec(p, a->layout, "k", &a->k, K_QK, 1, 0),
        ssd_spec(p, a->layout, "v", &a->v, K_V, 1, 0),
        ssd_spec(p, a->layout, "log_alpha", &a->log_alpha, K_LA, 1, 0),
        ssd_spec(p, a->layout, "h0", &a->h0, K_STATE, 0, 0),
        ssd_spec(p, a->layout, "o", &a->o, K_V, 1, 1),
        ssd_spec(p, a->layout, "hT", &a->hT, K_STATE, 0, 1),
    };
    cg_view *v[] = {&p->q, &p->k, &p->v, &p->la, &p->h0, &p->o, &p->hT};
    return check_all(ctx, sp, (int)(sizeof sp / sizeof sp[0]), v, &p->dtype);
}

cg_status cg__ssd_bwd_prob(cg_context *ctx, const cg_ssd_bwd_args *a, cg_ssd_prob *p) {
    memset(p, 0, sizeof *p);
    if (!a) return cg__err(ctx, CG_EINVAL, "args: null pointer (expected cg_ssd_bwd_args)");
    cg_status s = ssd_dims(ctx, a->layout, &a->q, &a->v, p);
    if (s) return s;
    tspec sp[] = {
        ssd_spec(p, a->layout, "q", &a->q, K_QK, 1, 0),
        ssd_spec(p, a->layout, "k", &a->k, K_QK, 1, 0),
        ssd_spec(p, a->layout, "v", &a->v, K_V, 1, 0),
        ssd_spec(p, a->layout, "log_alpha", &a->log_alpha, K_LA, 1, 0),
        ssd_spec(p, a->layout, "h0", &a->h0, K_STATE, 0, 0),
        ssd_spec(p, a->layout, "dout", &a->dout, K_V, 1, 0),
        ssd_spec(p, a->layout, "dhT", &a->dhT, K_STATE, 0, 0),
        ssd_spec(p, a->layout, "dq", &a->dq, K_QK, 1, 1),
        ssd_spec(p, a->layout, "dk", &a->dk, K_QK, 1, 1),
        ssd_spec(p, a->layout, "dv", &a->dv, K_V, 1, 1),
        ssd_spec(p, a->layout, "dlog_alpha", &a->dlog_alpha, K_LA, 1, 1),
        ssd_spec(p, a->layout, "dh0", &a->dh0, K_STATE, 0, 1),
    };
    cg_view *v[] = {&p->q, &p->k, &p->v, &p->la, &p->h0, &p->dout, &p->dhT,
                    &p->dq, &p->dk_, &p->dv_, &p->dla, &p->dh0};
    return check_all(ctx, sp, (int)(sizeof sp / sizeof sp[0]), v, &p->dtype);
}

/* ------------------------------------------------------- selective scan */

typedef enum { S_BLD, S_DN, S_BC, S_D, S_STATE } ss_kind;

static tspec ss_spec(const cg_sscan_prob *p, const char *name, const cg_tensor *t, ss_kind kind, int required,
                     int output) {
    tspec sp;
    memset(&sp, 0, sizeof sp);
    sp.name = name;
    sp.t = t;
    sp.required = required;
    sp.output = output;
    switch (kind) {
    case S_BLD: sp.ndim = 3; SET4(sp.shape, p->B, p->L, p->D, 0); sp.dims = "[B, L, D]"; SET4(sp.perm, 0, 1, 2, -1); break;
    case S_DN: sp.ndim = 2; SET4(sp.shape, p->D, p->N, 0, 0); sp.dims = "[D, N]"; SET4(sp.perm, 0, 1, -1, -1); break;
    case S_BC:
        if (p->grouped) { sp.ndim = 4; SET4(sp.shape, p->B, p->L, p->G, p->N); sp.dims = "[B, L, G, N]"; SET4(sp.perm, 0, 1, 2, 3); }
        else { sp.ndim = 3; SET4(sp.shape, p->B, p->L, p->N, 0); sp.dims = "[B, L, N]"; SET4(sp.perm, 0, 1, -1, 2); }
        break;
    case S_D: sp.ndim = 1; SET4(sp.shape, p->D, 0, 0, 0); sp.dims = "[D]"; SET4(sp.perm, 0, -1, -1, -1); break;
    case S_STATE: sp.ndim = 3; SET4(sp.shape, p->B, p->D, p->N, 0); sp.dims = "[B, D, N]"; SET4(sp.perm, 0, 1, 2, -1); break;
    }
    return sp;
}

static cg_status ss_dims(cg_context *ctx, const cg_tensor *x, const cg_tensor *A, const cg_tensor *Bm, cg_sscan_prob *p) {
    cg_status s;
    if ((s = need4(ctx, "x", x, 3, "[B, L, D]"))) return s;
    if ((s = need4(ctx, "A", A, 2, "[D, N]"))) return s;
    if (!Bm->data) return cg__err(ctx, CG_EINVAL, "B: null data pointer (required tensor [B, L, N] or [B, L, G, N])");
    if (Bm->ndim != 3 && Bm->ndim != 4)
        return cg__err(ctx, CG_EINVAL, "B: %d dimensions but expected 3 [B, L, N] or 4 [B, L, G, N]", Bm->ndim);
    p->B = x->shape[0];
    p->L = x->shape[1];
    p->D = x->shape[2];
    p->N = A->shape[1];
    p->grouped = Bm->ndim == 4;
    p->G = p->grouped ? Bm->shape[2] : 1;
    if ((s = positive(ctx, "x", "B", p->B)) || (s = positive(ctx, "x", "L", p->L)) ||
        (s = positive(ctx, "x", "D", p->D)) || (s = positive(ctx, "A", "N", p->N)) ||
        (s = positive(ctx, "B", "G", p->G)))
        return s;
    if (p->D % p->G != 0)
        return cg__err(ctx, CG_EINVAL, "B: D = %lld channels is not a multiple of G = %lld groups (expected D %% G == 0)",
                       (long long)p->D, (long long)p->G);
    return CG_OK;
}

cg_status cg__sscan_fwd_prob(cg_context *ctx, const cg_sscan_fwd_args *a, cg_sscan_prob *p) {
    memset(p, 0, sizeof *p);
    if (!a) return cg__err(ctx, CG_EINVAL, "args: null pointer (expected cg_sscan_fwd_args)");
    cg_status s = ss_dims(ctx, &a->x, &a->A, &a->B, p);
    if (s) return s;
    p->softplus = a->delta_softplus != 0;
    tspec sp[] = {
        ss_spec(p, "x", &a->x, S_BLD, 1, 0),         ss_spec(p, "delta", &a->delta, S_BLD, 1, 0),
        ss_spec(p, "A", &a->A, S_DN, 1, 0),          ss_spec(p, "B", &a->B, S_BC, 1, 0),
        ss_spec(p, "C", &a->C, S_BC, 1, 0),          ss_spec(p, "D", &a->D, S_D, 0, 0),
        ss_spec(p, "z", &a->z, S_BLD, 0, 0),         ss_spec(p, "delta_bias", &a->delta_bias, S_D, 0, 0),
        ss_spec(p, "h0", &a->h0, S_STATE, 0, 0),     ss_spec(p, "y", &a->y, S_BLD, 1, 1),
        ss_spec(p, "hT", &a->hT, S_STATE, 0, 1),
    };
    cg_view *v[] = {&p->x, &p->delta, &p->A, &p->Bm, &p->Cm, &p->Dv, &p->z, &p->dbias, &p->h0, &p->y, &p->hT};
    return check_all(ctx, sp, (int)(sizeof sp / sizeof sp[0]), v, &p->dtype);
}

cg_status cg__sscan_bwd_prob(cg_context *ctx, const cg_sscan_bwd_args *a, cg_sscan_prob *p) {
    memset(p, 0, sizeof *p);
    if (!a) return cg__err(ctx, CG_EINVAL, "args: null pointer (expected cg_sscan_bwd_args)");
    cg_status s = ss_dims(ctx, &a->x, &a->A, &a->B, p);
    if (s) return s;
    p->softplus = a->delta_softplus != 0;
    if (a->dD.data && !a->D.data) return cg__err(ctx, CG_EINVAL, "dD: given but D is absent (expected dD only with D)");
    if (a->dz.data && !a->z.data) return cg__err(ctx, CG_EINVAL, "dz: given but z is absent (expected dz only with z)");
    if (a->ddelta_bias.data && !a->delta_bias.data)
        return cg__err(ctx, CG_EINVAL, "ddelta_bias: given but delta_bias is absent (expected ddelta_bias only with delta_bias)");
    tspec sp[] = {
        ss_spec(p, "x", &a->x, S_BLD, 1, 0),          ss_spec(p, "delta", &a->delta, S_BLD, 1, 0),
        ss_spec(p, "A", &a->A, S_DN, 1, 0),           ss_spec(p, "B", &a->B, S_BC, 1, 0),
        ss_spec(p, "C", &a->C, S_BC, 1, 0),           ss_spec(p, "D", &a->D, S_D, 0, 0),
        ss_spec(p, "z", &a->z, S_BLD, 0, 0),          ss_spec(p, "delta_bias", &a->delta_bias, S_D, 0, 0),
        ss_spec(p, "h0", &a->h0, S_STATE, 0, 0),      ss_spec(p, "dy", &a->dy, S_BLD, 1, 0),
        ss_spec(p, "dhT", &a->dhT, S_STATE, 0, 0),    ss_spec(p, "dx", &a->dx, S_BLD, 1, 1),
        ss_spec(p, "ddelta", &a->ddelta, S_BLD, 1, 1), ss_spec(p, "dA", &a->dA, S_DN, 1, 1),
        ss_spec(p, "dB", &a->dB, S_BC, 1, 1),         ss_spec(p, "dC", &a->dC, S_BC, 1, 1),
        ss_spec(p, "dD", &a->dD, S_D, 0, 1),          ss_spec(p, "dz", &a->dz, S_BLD, 0, 1),
        ss_spec(p, "ddelta_bias", &a->ddelta_bias, S_D, 0, 1), ss_spec(p, "dh0", &a->dh0, S_STATE, 0, 1),
    };
    cg_view *v[] = {&p->x, &p->delta, &p->A, &p->Bm, &p->Cm, &p->Dv, &p->z, &p->dbias, &p->h0, &p->dy,
                    &p->dhT, &p->dx, &p->ddelta, &p->dA, &p->dB, &p->dC, &p->dD, &p->dz, &p->ddbias, &p->dh0};
    return check_all(ctx, sp, (int)(sizeof sp / sizeof sp[0]), v, &p->dtype);
}
