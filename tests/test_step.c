/* test_step.c -- the decode steps (issue #36): cg_ssd_step and cg_sscan_step over a state
 * cache, on the cpu and ref backends.
 *   - consistency: T calls of one token each from the cache equal the chunked forward
 *     (cg_ssd_fwd / cg_sscan_fwd, h0 = the slots' states, hT) over the same T tokens, with
 *     a padding entry in the batch (its outputs zero, no slot touched), on odd shapes;
 *     one call of T tokens equals the T calls, and with dst_indices each token's state
 *     lands in its own slot;
 *   - a bfloat16 cache against the float64 reference on the same cache;
 *   - bad input (indices out of range, two writes to a slot, a slot read by one entry and
 *     written by another, a cache of the wrong shape or dtype, float indices): a status, a
 *     message naming the argument, and the cache bit-identical afterwards. */
#include "ops.h"
#include "step_testlib.h"

#define MAXB 8

/* ------------------------------------------------------------------- SSD */

enum { SB = CG_STEP_BAD_B, ST = 5, SG = 2, SH = 6, SDK = 48, SDV = 40, SS = CG_STEP_BAD_S };
static const int64_t k_slots[SB] = {3, -1, 0, 7}; /* entry 1 is padding */

typedef struct ssd_data {
    cg_tbuf q, k, v, la, cache0;
} ssd_data;

static ssd_data ssd_data_new(cg_rng *r, cg_dtype cache_dt) {
    ssd_data d;
    d.q = cg_step_rand(r, CG_F32, 4, (int64_t[]){SB, ST, SG, SDK}, -1, 1);
    d.k = cg_step_rand(r, CG_F32, 4, (int64_t[]){SB, ST, SG, SDK}, -1, 1);
    d.v = cg_step_rand(r, CG_F32, 4, (int64_t[]){SB, ST, SH, SDV}, -1, 1);
    d.la = cg_step_rand(r, CG_F32, 3, (int64_t[]){SB, ST, SH}, -0.3, 0);
    d.cache0 = cg_step_rand(r, cache_dt, 4, (int64_t[]){SS, SH, SDK, SDV}, -1, 1);
    return d;
}
static void ssd_data_free(ssd_data *d) {
    cg_tbuf_free(&d->q), cg_tbuf_free(&d->k), cg_tbuf_free(&d->v), cg_tbuf_free(&d->la), cg_tbuf_free(&d->cache0);
}

/* Tokens t0 .. t0+n-1 of d into one step call. */
static cg_ssd_step_args ssd_args(const ssd_data *d, int64_t t0, int64_t n, cg_tbuf *cache, cg_tbuf *idx, cg_tbuf *dst,
                                 cg_tbuf *o) {
    cg_ssd_step_args a = CG_SSD_STEP_ARGS_INIT;
    a.q = cg_step_token(&d->q, t0), a.k = cg_step_token(&d->k, t0), a.v = cg_step_token(&d->v, t0), a.log_alpha = cg_step_token(&d->la, t0);
    a.q.shape[1] = a.k.shape[1] = a.v.shape[1] = a.log_alpha.shape[1] = n;
    a.cache = cache->t;
    a.state_indices = idx->t;
    if (dst) a.dst_indices = dst->t;
    a.o = o->t;
    return a;
}

static void ssd_consistency(cg_backend be) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {36};
    ssd_data d = ssd_data_new(&r, CG_F32);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){SB}, k_slots);
    /* T calls of one token */
    cg_tbuf cache = cg_tbuf_new(CG_F32, 4, d.cache0.t.shape);
    memcpy(cache.mem, d.cache0.mem, cg_step_bytes(&cache));
    cg_tbuf o = cg_tbuf_new(CG_F32, 4, (int64_t[]){SB, ST, SH, SDV});
    cg_tbuf_fill(&o, &r, NAN, NAN); /* an element not written fails */
    cg_tbuf prefix[ST]; /* the cache after each token */
    for (int64_t t = 0; t < ST; t++) {
        cg_tbuf ot = o;
        ot.t = cg_step_token(&o, t);
        cg_ssd_step_args a = ssd_args(&d, t, 1, &cache, &idx, NULL, &ot);
        CG_CHECK_OK(ctx, cg_ssd_step(ctx, &a, &ex));
        prefix[t] = cg_tbuf_new(CG_F32, 4, cache.t.shape);
        memcpy(prefix[t].mem, cache.mem, cg_step_bytes(&cache));
    }
    /* the chunked forward from h0 = the slots' states (zero for the padding entry) */
    cg_tbuf h0 = cg_step_gather(&d.cache0, SB, k_slots), hT = cg_tbuf_new(CG_F32, 4, h0.t.shape);
    cg_tbuf of = cg_tbuf_new(CG_F32, 4, o.t.shape);
    cg_ssd_fwd_args f = CG_SSD_FWD_ARGS_INIT;
    f.q = d.q.t, f.k = d.k.t, f.v = d.v.t, f.log_alpha = d.la.t, f.h0 = h0.t, f.o = of.t, f.hT = hT.t;
    cg_exec fx = CG_EXEC_INIT;
    fx.backend = CG_BACKEND_CPU;
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &f, &fx));
    cg_step_check_slots(cg_backend_name(be), SB, k_slots, &o, &of, &cache, &hT, &d.cache0, 1e-5);
    /* one call of T tokens: the same outputs and final states */
    cg_tbuf cache2 = cg_tbuf_new(CG_F32, 4, d.cache0.t.shape), o2 = cg_tbuf_new(CG_F32, 4, o.t.shape);
    memcpy(cache2.mem, d.cache0.mem, cg_step_bytes(&cache2));
    cg_ssd_step_args a2 = ssd_args(&d, 0, ST, &cache2, &idx, NULL, &o2);
    CG_CHECK_OK(ctx, cg_ssd_step(ctx, &a2, &ex));
    CG_CHECK(cg_rel_err(&o2, &o) <= 1e-6 && cg_rel_err(&cache2, &cache) <= 1e-6, "%s: T tokens in one call: o %.3g, cache %.3g",
             cg_backend_name(be), cg_rel_err(&o2, &o), cg_rel_err(&cache2, &cache));
    /* dst_indices [B, T]: the state after token t of entry b in its own slot (entry 2 writes
     * only tokens 1 and 3; the padding entry's row is ignored) */
    const int64_t dv[SB * ST] = {1, 2, 4, 5, 6, 0, 0, 0, 0, 0, -1, 8, -1, 3, -1, 7, -1, -1, -1, -1};
    const int64_t src[SB] = {0, -1, 3, 7};
    cg_tbuf dst = cg_step_idx_buf(2, (int64_t[]){SB, ST}, dv), isrc = cg_step_idx_buf(1, (int64_t[]){SB}, src);
    cg_tbuf cache3 = cg_tbuf_new(CG_F32, 4, d.cache0.t.shape), o3 = cg_tbuf_new(CG_F32, 4, o.t.shape);
    /* slots 0, 3, 7 hold the states entries 0, 2, 3 start from above (3, 0, 7) */
    memcpy(cache3.mem, d.cache0.mem, cg_step_bytes(&cache3));
    const int64_t from[SB] = {3, -1, 0, 7};
    const size_t state = (size_t)SH * SDK * SDV * sizeof(float);
    for (int b = 0; b < SB; b++)
        if (src[b] >= 0) memcpy((float *)cache3.mem + src[b] * SH * SDK * SDV, (float *)d.cache0.mem + from[b] * SH * SDK * SDV, state);
    cg_ssd_step_args a3 = ssd_args(&d, 0, ST, &cache3, &isrc, &dst, &o3);
    CG_CHECK_OK(ctx, cg_ssd_step(ctx, &a3, &ex));
    CG_CHECK(cg_rel_err(&o3, &o) <= 1e-6, "%s: dst_indices: o %.3g", cg_backend_name(be), cg_rel_err(&o3, &o));
    for (int b = 0; b < SB; b++)
        for (int t = 0; t < ST; t++) {
            const int64_t y = dv[b * ST + t];
            if (src[b] < 0 || y < 0) continue;
            double e = cg_step_rows_err(&cache3, y, &prefix[t], from[b]);
            CG_CHECK(e <= 1e-6, "%s: dst_indices[%d, %d] = %lld: state err %.3g", cg_backend_name(be), b, t, (long long)y, e);
        }
    for (int t = 0; t < ST; t++) cg_tbuf_free(&prefix[t]);
    cg_tbuf *all[] = {&idx, &cache, &o, &h0, &hT, &of, &cache2, &o2, &dst, &isrc, &cache3, &o3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
    ssd_data_free(&d);
    cg_context_free(ctx);
}

CG_TEST(step_ssd_consistency_cpu) { ssd_consistency(CG_BACKEND_CPU); }
CG_TEST(step_ssd_consistency_ref) { ssd_consistency(CG_BACKEND_REF); }
/* the generated kernel (templates/ssd_step.cu) under the SIMT emulator */
CG_TEST(step_ssd_consistency_emulate) { ssd_consistency(CG_BACKEND_EMULATE); }

/* The first n tokens of d (cg_step_check_bf16, cg_step_check_bad_indices). */
CG_STEP_CALL(ssd_call, cg_ssd_step_args, ssd_args, cg_ssd_step, o)

/* A bfloat16 cache (and bf16 q, k, v, o) on the cpu and emulated against the reference. */
CG_TEST(step_ssd_bf16_cache) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {7};
    ssd_data d = ssd_data_new(&r, CG_BF16);
    cg_step_check_bf16(ctx, ssd_call, &d, ST, &d.cache0, SB, k_slots, (cg_tbuf *const[]){&d.q, &d.v}, 2, 4,
                       (int64_t[]){SB, ST, SH, SDV}, "ssd bf16");
    ssd_data_free(&d);
    cg_context_free(ctx);
}

/* Bad input: refused before anything is written. */
CG_TEST(step_ssd_bad_input) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {5};
    ssd_data d = ssd_data_new(&r, CG_F32);
    cg_tbuf cache = cg_tbuf_new(CG_F32, 4, d.cache0.t.shape), o = cg_tbuf_new(CG_F32, 4, (int64_t[]){SB, 1, SH, SDV});
    memcpy(cache.mem, d.cache0.mem, cg_step_bytes(&cache));
    cg_step_check_bad_indices(ctx, ssd_call, &d, &cache, &d.cache0, &o);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = CG_BACKEND_REF;
    /* the cache's shape and dtype, the indices' dtype */
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){SB}, k_slots);
    cg_ssd_step_args a = ssd_args(&d, 0, 1, &cache, &idx, NULL, &o);
    cg_ssd_step_args bad = a;
    bad.cache.shape[2] = SDK - 1;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "cache: shape", "cache of the wrong shape");
    bad = a;
    bad.cache.ndim = 3;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "cache", "cache of the wrong rank");
    bad = a;
    bad.cache.dtype = CG_I32;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "cache: dtype", "an integer cache");
    bad = a;
    bad.cache.dtype = CG_F64;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "cache: dtype", "a float64 cache in a float32 call");
    bad = a;
    bad.state_indices.dtype = CG_F32;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "state_indices: dtype", "float indices");
    bad = a;
    bad.state_indices.shape[0] = SB + 1;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "state_indices: shape", "indices of the wrong length");
    bad = a;
    bad.o.data = (float *)cache.mem + 8; /* an output over the cache */
    bad.o.stride[0] = bad.o.stride[1] = bad.o.stride[2] = bad.o.stride[3] = 0;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "overlaps", "an output over the cache");
    CG_CHECK(!memcmp(cache.mem, d.cache0.mem, cg_step_bytes(&cache)), "the cache changed");
    /* the generated kernel on device indices reads any index; a host one is checked first */
    ex.backend = CG_BACKEND_EMULATE;
    bad = a;
    cg_tbuf far = cg_step_idx_buf(1, (int64_t[]){SB}, (int64_t[]){0, SS, 1, 2});
    bad.state_indices = far.t;
    CG_CHECK_REFUSED(ctx, cg_ssd_step(ctx, &bad, &ex), CG_EINVAL, "state_indices[1] = 9", "emulate: index = S");
    CG_CHECK(!memcmp(cache.mem, d.cache0.mem, cg_step_bytes(&cache)), "the cache changed");
    cg_tbuf_free(&far);
    cg_tbuf_free(&idx), cg_tbuf_free(&cache), cg_tbuf_free(&o);
    ssd_data_free(&d);
    cg_context_free(ctx);
}

/* The op table's slot rows name the index tensors; every symbol an op keeps in its problem
 * is an extent of one of its tensors (a DIMS row that misses a new symbol's NONE_OFF would
 * put it at offset 0). */
CG_TEST(step_op_table) {
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        const cg_slot_desc *sd = cg__op_slots(d);
        if (sd) {
            CG_CHECK(!strcmp(d->t[sd->src].name, "state_indices") && (d->t[sd->src].flags & CG_TD_INDEX) &&
                         !d->t[sd->src].optional, "%s: slot src", d->name);
            CG_CHECK(!strcmp(d->t[sd->dst].name, "dst_indices") && (d->t[sd->dst].flags & CG_TD_INDEX) &&
                         d->t[sd->dst].optional, "%s: slot dst", d->name);
            int cache = 0;
            for (int i = 0; i < d->nt; i++) cache += (d->t[i].flags & CG_TD_INPLACE) && d->t[i].ext[0] == sd->slots;
            CG_CHECK(cache == 1 && !d->varlen, "%s: one cache [%s, ...], no cu_seqlens", d->name, cg_sym_name(sd->slots));
        }
        for (int s = 1; s < CG_SYM_COUNT; s++) {
            if (d->dim_off[s] == (size_t)-1) continue;
            int used = 0;
            for (int i = 0; i < d->nt; i++)
                for (int k = 0; k < 4; k++) used |= d->t[i].ext[k] == (cg_sym)s;
            CG_CHECK(used, "%s: symbol %s in the problem but in no tensor", d->name, cg_sym_name((cg_sym)s));
        }
    }
}

/* -------------------------------------------------------- selective scan */

enum { XB = 4, XL = 5, XD = 6, XN = 5, XG = 2, XS = 9 };

typedef struct sscan_data {
    cg_tbuf x, delta, A, Bm, Cm, D, z, bias, cache0;
} sscan_data;

static sscan_data sscan_data_new(cg_rng *r, cg_dtype cache_dt) {
    sscan_data d;
    d.x = cg_step_rand(r, CG_F32, 3, (int64_t[]){XB, XL, XD}, -1, 1);
    d.delta = cg_step_rand(r, CG_F32, 3, (int64_t[]){XB, XL, XD}, -1, 1);
    d.A = cg_step_rand(r, CG_F32, 2, (int64_t[]){XD, XN}, -2, -0.1);
    d.Bm = cg_step_rand(r, CG_F32, 4, (int64_t[]){XB, XL, XG, XN}, -1, 1);
    d.Cm = cg_step_rand(r, CG_F32, 4, (int64_t[]){XB, XL, XG, XN}, -1, 1);
    d.D = cg_step_rand(r, CG_F32, 1, (int64_t[]){XD}, -1, 1);
    d.z = cg_step_rand(r, CG_F32, 3, (int64_t[]){XB, XL, XD}, -1, 1);
    d.bias = cg_step_rand(r, CG_F32, 1, (int64_t[]){XD}, -1, 0);
    d.cache0 = cg_step_rand(r, cache_dt, 3, (int64_t[]){XS, XD, XN}, -1, 1);
    return d;
}
static void sscan_data_free(sscan_data *d) {
    cg_tbuf *all[] = {&d->x, &d->delta, &d->A, &d->Bm, &d->Cm, &d->D, &d->z, &d->bias, &d->cache0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

static cg_sscan_step_args sscan_args(const sscan_data *d, int64_t t0, int64_t n, cg_tbuf *cache, cg_tbuf *idx,
                                     cg_tbuf *dst, cg_tensor y) {
    cg_sscan_step_args a = CG_SSCAN_STEP_ARGS_INIT;
    a.x = cg_step_token(&d->x, t0), a.delta = cg_step_token(&d->delta, t0), a.B = cg_step_token(&d->Bm, t0), a.C = cg_step_token(&d->Cm, t0);
    a.z = cg_step_token(&d->z, t0);
    a.x.shape[1] = a.delta.shape[1] = a.B.shape[1] = a.C.shape[1] = a.z.shape[1] = n;
    a.A = d->A.t, a.D = d->D.t, a.delta_bias = d->bias.t, a.delta_softplus = 1;
    a.cache = cache->t;
    a.state_indices = idx->t;
    if (dst) a.dst_indices = dst->t;
    a.y = y;
    return a;
}

static void sscan_consistency(cg_backend be) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {361};
    sscan_data d = sscan_data_new(&r, CG_F32);
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    cg_tbuf idx = cg_step_idx_buf(1, (int64_t[]){XB}, k_slots);
    cg_tbuf cache = cg_tbuf_new(CG_F32, 3, d.cache0.t.shape), y = cg_tbuf_new(CG_F32, 3, d.x.t.shape);
    memcpy(cache.mem, d.cache0.mem, cg_step_bytes(&cache));
    cg_tbuf_fill(&y, &r, NAN, NAN);
    for (int64_t t = 0; t < XL; t++) {
        cg_sscan_step_args a = sscan_args(&d, t, 1, &cache, &idx, NULL, cg_step_token(&y, t));
        CG_CHECK_OK(ctx, cg_sscan_step(ctx, &a, &ex));
    }
    /* the chunked forward from h0 = the slots' states */
    cg_tbuf h0 = cg_step_gather(&d.cache0, XB, k_slots), hT = cg_tbuf_new(CG_F32, 3, h0.t.shape);
    cg_tbuf yf = cg_tbuf_new(CG_F32, 3, y.t.shape);
    cg_sscan_fwd_args f = CG_SSCAN_FWD_ARGS_INIT;
    f.x = d.x.t, f.delta = d.delta.t, f.A = d.A.t, f.B = d.Bm.t, f.C = d.Cm.t, f.D = d.D.t, f.z = d.z.t;
    f.delta_bias = d.bias.t, f.delta_softplus = 1, f.h0 = h0.t, f.y = yf.t, f.hT = hT.t;
    cg_exec fx = CG_EXEC_INIT;
    fx.backend = CG_BACKEND_CPU;
    CG_CHECK_OK(ctx, cg_sscan_fwd(ctx, &f, &fx));
    cg_step_check_slots(cg_backend_name(be), XB, k_slots, &y, &yf, &cache, &hT, &d.cache0, 1e-5);
    /* one call of L tokens, each token's state to its own slot: the last ones equal the above */
    const int64_t dv[XB * XL] = {-1, -1, -1, -1, 1, 0, 0, 0, 0, 0, -1, -1, 2, -1, 4, -1, -1, -1, -1, 7};
    cg_tbuf dst = cg_step_idx_buf(2, (int64_t[]){XB, XL}, dv);
    cg_tbuf cache2 = cg_tbuf_new(CG_F32, 3, d.cache0.t.shape), y2 = cg_tbuf_new(CG_F32, 3, y.t.shape);
    memcpy(cache2.mem, d.cache0.mem, cg_step_bytes(&cache2));
    cg_sscan_step_args a2 = sscan_args(&d, 0, XL, &cache2, &idx, &dst, y2.t);
    CG_CHECK_OK(ctx, cg_sscan_step(ctx, &a2, &ex));
    CG_CHECK(cg_rel_err(&y2, &y) <= 1e-6, "%s: L tokens in one call: y %.3g", cg_backend_name(be), cg_rel_err(&y2, &y));
    const int64_t last[XB][2] = {{3, 1}, {-1, 0}, {0, 4}, {7, 7}}; /* (the slot it read, the slot of its last state) */
    for (int b = 0; b < XB; b++)
        if (last[b][0] >= 0)
            CG_CHECK(cg_step_rows_err(&cache2, last[b][1], &cache, last[b][0]) <= 1e-6, "%s: entry %d: dst state", cg_backend_name(be), b);
    const size_t state = (size_t)XD * XN * sizeof(float);
    CG_CHECK(!memcmp((float *)cache2.mem + 3 * XD * XN, (float *)d.cache0.mem + 3 * XD * XN, state),
             "%s: a slot read but not in dst_indices was written", cg_backend_name(be));
    /* bad input: a slot written twice, a cache of another dtype: refused, the cache untouched */
    memcpy(cache2.mem, d.cache0.mem, cg_step_bytes(&cache2));
    const int64_t twice[XB] = {2, -1, 2, 5};
    cg_tbuf idx2 = cg_step_idx_buf(1, (int64_t[]){XB}, twice);
    cg_sscan_step_args bad = sscan_args(&d, 0, 1, &cache2, &idx2, NULL, cg_step_token(&y2, 0));
    CG_CHECK_REFUSED(ctx, cg_sscan_step(ctx, &bad, &ex), CG_EINVAL, "state_indices[2] = 2", "a slot written twice");
    bad = sscan_args(&d, 0, 1, &cache2, &idx, NULL, cg_step_token(&y2, 0));
    bad.cache.dtype = CG_F64;
    CG_CHECK_REFUSED(ctx, cg_sscan_step(ctx, &bad, &ex), CG_EINVAL, "cache: dtype", "a float64 cache");
    bad.cache.dtype = CG_F32, bad.cache.shape[2] = XN + 1;
    CG_CHECK_REFUSED(ctx, cg_sscan_step(ctx, &bad, &ex), CG_EINVAL, "cache: shape", "a cache of another N");
    CG_CHECK(!memcmp(cache2.mem, d.cache0.mem, cg_step_bytes(&cache2)), "%s: a refused call changed the cache", cg_backend_name(be));

    cg_tbuf *all[] = {&idx, &cache, &y, &h0, &hT, &yf, &dst, &cache2, &y2, &idx2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
    sscan_data_free(&d);
    cg_context_free(ctx);
}

CG_TEST(step_sscan_consistency_cpu) { sscan_consistency(CG_BACKEND_CPU); }
CG_TEST(step_sscan_consistency_ref) { sscan_consistency(CG_BACKEND_REF); }
CG_TEST(step_sscan_consistency_emulate) { sscan_consistency(CG_BACKEND_EMULATE); }

/* The first n tokens of d (cg_step_check_bf16). */
CG_STEP_CALL(sscan_call, cg_sscan_step_args, sscan_args, cg_sscan_step, o->t)

/* A bfloat16 cache with bf16 x, delta, B, C, z, y on the cpu and emulated against the reference. */
CG_TEST(step_sscan_bf16_cache) {
    CG_TEST_CONTEXT(ctx);
    cg_rng r = {8};
    sscan_data d = sscan_data_new(&r, CG_BF16);
    cg_step_check_bf16(ctx, sscan_call, &d, XL, &d.cache0, XB, k_slots,
                       (cg_tbuf *const[]){&d.x, &d.delta, &d.Bm, &d.Cm, &d.z}, 5, 3, d.x.t.shape, "sscan bf16");
    sscan_data_free(&d);
    cg_context_free(ctx);
}
