/* varlen_testlib.c -- packed variable-length problems (cu_seqlens, docs/varlen.md) for
 * the varlen tests: a packed call against the per-sequence calls concatenated. */
#include "varlen_testlib.h"

#include <string.h>

/* The lengths of issue #16: a length 1, T not a multiple of any chunk, a 0-length gap. */
const int64_t vl_lens[VL_NLENS] = {1, 37, 64, 200, 0, 5};

static int is_state(const cg_op_desc *d, int i) { return (d->t[i].flags & CG_TD_PERSEQ) != 0; }
static int is_token(const cg_op_desc *d, int i) { return d->t[i].ext[0] == CG_SYM_B && d->t[i].ext[1] == d->seq; }

/* Position of logical dimension 1 (T / L) in tensor i's given order. */
static int seq_pos(const dtt_prob *p, int i) {
    int order[4], n = cg__op_given_order(p->d, i, p->grouped, p->hm, order);
    for (int j = 0; j < n; j++)
        if (order[j] == 1) return j;
    return -1;
}

/* The packed problem: dims with B = 1 and the seq symbol = sum of lens; states [N, ...]. */
void vl_packed_new(dtt_prob *p, cg_op op, int64_t dims[CG_SYM_COUNT], int hm, const int64_t *lens, int n,
                   unsigned omit, int flags) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    dims[cg__op_desc(op)->seq] = total;
    dtt_new(p, op, dims, !(flags & VL_UNGROUPED), hm, flags & VL_BF16 ? CG_BF16 : CG_F32, CG_F32, omit);
    for (int i = 0; i < p->d->nt; i++) {
        if ((flags & VL_SEQ_MAJOR) && is_token(p->d, i) && p->t[i].t.data && p->t[i].t.ndim == 3 &&
            p->d->t[i].ext[2] == CG_SYM_D) { /* sscan [B, D, L] memory (mamba's) */
            static const int perm[3] = {0, 2, 1};
            const cg_tensor old = p->t[i].t;
            cg_tbuf_free(&p->t[i]);
            p->t[i] = cg_tbuf_new_perm(old.dtype, 3, old.shape, perm);
            continue;
        }
        if (!is_state(p->d, i) || !p->t[i].t.data) continue;
        int64_t shape[4];
        int nd = cg__op_given_shape(p->d, i, p->dims, 1, hm, shape);
        shape[0] = n;
        cg_tbuf_free(&p->t[i]);
        p->t[i] = cg_tbuf_new(CG_F32, nd, shape);
    }
}

/* Element idx of sequence q's tensor i in the packed tensor: the seq index moved by t0
 * (per-token tensors) or the sequence index in dim 0 (states). */
static void packed_index(const dtt_prob *p, int i, int q, int64_t t0, const int64_t *idx, int64_t *pidx) {
    memcpy(pidx, idx, 4 * sizeof *idx);
    if (is_token(p->d, i)) pidx[seq_pos(p, i)] += t0;
    else if (is_state(p->d, i)) pidx[0] = q;
}

/* Visit every element index of tbuf b (ndim <= 4). */
#define FOR_EACH_INDEX(b, idx)                                                                                 \
    for (int64_t idx[4] = {0, 0, 0, 0}, done_ = (b)->count == 0; !done_;                                      \
         done_ = next_index(idx, (b)->t.ndim, (b)->t.shape))
static int next_index(int64_t *idx, int nd, const int64_t *shape) {
    for (int k = nd - 1; k >= 0; k--) {
        if (++idx[k] < shape[k]) return 0;
        idx[k] = 0;
    }
    return 1;
}

cg_status vl_run_packed(cg_context *ctx, dtt_prob *p, cg_backend be, const cg_tbuf *cu, const char *config) {
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    ex.config = config;
    void *args = (void *)dtt_args(p);
    if (cu) *(cg_tensor *)((char *)args + p->d->varlen->arg_off) = cu->t;
    return cg_run(ctx, p->d->op, args, &ex);
}

cg_tbuf vl_cu_new(cg_dtype dt, const int64_t *lens, int n) {
    int64_t shape[1] = {n + 1}, off = 0;
    cg_tbuf cu = cg_tbuf_new(dt, 1, shape);
    for (int i = 0; i <= n; i++) {
        if (dt == CG_I64) ((int64_t *)cu.mem)[i] = off;
        else ((int32_t *)cu.mem)[i] = (int32_t)off;
        if (i < n) off += lens[i];
    }
    return cu;
}

/* One packed call of op on backend be against its per-sequence calls; config: pinned for
 * every call (then the per-sequence calls must agree exactly), NULL: the defaults. */
static void check_packed(cg_op op, const int64_t dims_in[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt,
                         unsigned omit, uint64_t seed, int flags, const int64_t *lens, int nlens, const char *config) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    int64_t dims[CG_SYM_COUNT];
    memcpy(dims, dims_in, sizeof dims);
    dtt_prob pk;
    vl_packed_new(&pk, op, dims, hm, lens, nlens, omit, flags);
    dtt_fill(&pk, seed);
    cg_tbuf cu = vl_cu_new(cudt, lens, nlens);
    CG_CHECK_OK(ctx, vl_run_packed(ctx, &pk, be, &cu, config));
    const cg_op_desc *d = pk.d;
    if (be == CG_BACKEND_EMULATE || be == CG_BACKEND_CUDA) /* one packed call of the generated kernels */
        CG_CHECK(strstr(cg_last_dispatch(ctx), "kernel=") && strstr(cg_last_dispatch(ctx), " varlen="),
                 "%s: dispatch line %s", d->name, cg_last_dispatch(ctx));
    /* the sums of the shared gradients (dA, dD, ddelta_bias) over the sequences */
    cg_tbuf sum[CG_OP_MAX_TENSORS];
    memset(sum, 0, sizeof sum);
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].role == CG_TD_OUT && pk.t[i].t.data && !is_token(d, i) && !is_state(d, i))
            sum[i] = cg_tbuf_new(CG_F64, pk.t[i].t.ndim, pk.t[i].t.shape);
    char what[160];
    int64_t t0 = 0;
    for (int q = 0; q < nlens; t0 += lens[q], q++) {
        const int64_t len = lens[q];
        if (len == 0) { /* passes its state through: hT = h0, dh0 = dhT (0 when absent) */
            const int o = cg__op_tensor(d, d->bwd ? "dh0" : "hT"), in = cg__op_tensor(d, d->bwd ? "dhT" : "h0");
            if (!pk.t[o].t.data) continue;
            FOR_EACH_INDEX(&pk.t[o], idx) {
                if (idx[0] != q) continue;
                double want = pk.t[in].t.data ? cg_tbuf_get(&pk.t[in], idx) : 0.0;
                CG_CHECK(cg_tbuf_get(&pk.t[o], idx) == want, "%s: empty sequence %d: %s not passed through", d->name,
                         q, d->t[o].name);
            }
            continue;
        }
        int64_t sd[CG_SYM_COUNT];
        memcpy(sd, dims, sizeof sd);
        sd[d->seq] = len;
        dtt_prob one;
        dtt_new(&one, op, sd, !(flags & VL_UNGROUPED), hm, flags & VL_BF16 ? CG_BF16 : CG_F32, CG_F32, omit);
        for (int i = 0; i < d->nt; i++) {
            if (d->t[i].role != CG_TD_IN || !one.t[i].t.data) continue;
            FOR_EACH_INDEX(&one.t[i], idx) {
                int64_t pidx[4];
                packed_index(&pk, i, q, t0, idx, pidx);
                cg_tbuf_set(&one.t[i], idx, cg_tbuf_get(&pk.t[i], pidx));
            }
        }
        CG_CHECK_OK(ctx, vl_run_packed(ctx, &one, be, NULL, config));
        if (config) /* the same kernels on the same chunks */
            CG_CHECK(strstr(cg_last_dispatch(ctx), "source=pinned"), "%s: %s", d->name, cg_last_dispatch(ctx));
        for (int i = 0; i < d->nt; i++) {
            if (d->t[i].role != CG_TD_OUT || !one.t[i].t.data) continue;
            if (sum[i].t.data) {
                FOR_EACH_INDEX(&one.t[i], idx) cg_tbuf_set(&sum[i], idx, cg_tbuf_get(&sum[i], idx) + cg_tbuf_get(&one.t[i], idx));
                continue;
            }
            cg_erracc e = {0};
            FOR_EACH_INDEX(&one.t[i], idx) {
                int64_t pidx[4];
                packed_index(&pk, i, q, t0, idx, pidx);
                cg__erracc_add(&e, cg_tbuf_get(&pk.t[i], pidx), cg_tbuf_get(&one.t[i], idx));
            }
            snprintf(what, sizeof what, "%s %s %s cu %s: sequence %d (length %lld) %s", d->name, cg_backend_name(be),
                     hm ? "head-major" : "token-major", cudt == CG_I64 ? "int64" : "int32", q, (long long)len,
                     d->t[i].name);
            const double tol = config ? 0.0 : 1e-6;
            CG_CHECK(cg__erracc_value(&e) <= tol, "%s: packed differs from the sequence's own call by %.3g", what,
                     cg__erracc_value(&e));
        }
        dtt_free(&one);
    }
    for (int i = 0; i < d->nt; i++) {
        if (!sum[i].t.data) continue;
        double err = cg_rel_err(&pk.t[i], &sum[i]);
        CG_CHECK(err <= 1e-5, "%s %s: %s differs from the sum over the sequences' calls by %.3g", d->name,
                 cg_backend_name(be), d->t[i].name, err);
        cg_tbuf_free(&sum[i]);
    }
    if (be != CG_BACKEND_REF && !(flags & VL_BF16)) { /* and the packed call agrees with the float64 reference's */
        dtt_prob rf;
        vl_packed_new(&rf, op, dims, hm, lens, nlens, omit, flags);
        dtt_copy_inputs(&rf, &pk);
        CG_CHECK_OK(ctx, vl_run_packed(ctx, &rf, CG_BACKEND_REF, &cu, NULL));
        for (int i = 0; i < d->nt; i++) {
            if (d->t[i].role != CG_TD_OUT || !pk.t[i].t.data) continue;
            double err = cg_rel_err(&pk.t[i], &rf.t[i]);
            CG_CHECK(err <= cg__tol(d->t[i].tol), "%s %s packed: %s differs from ref's packed call by %.3g (target %g)",
                     d->name, cg_backend_name(be), d->t[i].name, err, cg__tol(d->t[i].tol));
        }
        dtt_free(&rf);
    }
    cg_tbuf_free(&cu);
    dtt_free(&pk);
    cg_context_free(ctx);
}


void vl_check_packed_lens(cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt,
                          unsigned omit, uint64_t seed, int flags, const int64_t *lens, int nlens) {
    check_packed(op, dims, hm, be, cudt, omit, seed, flags, lens, nlens, NULL);
}

void vl_check_packed_cfg(cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt,
                         unsigned omit, uint64_t seed, int flags, const char *config) {
    check_packed(op, dims, hm, be, cudt, omit, seed, flags, vl_lens, VL_NLENS, config);
}

void vl_check_packed(cg_op op, const int64_t dims[CG_SYM_COUNT], int hm, cg_backend be, cg_dtype cudt, unsigned omit,
                     uint64_t seed, int flags) {
    vl_check_packed_lens(op, dims, hm, be, cudt, omit, seed, flags, vl_lens, VL_NLENS);
}
