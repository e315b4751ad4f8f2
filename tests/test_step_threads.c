/* test_step_threads.c -- the decode steps on the cpu backend are bitwise deterministic:
 * the same call run on 1 thread, on 2, and with other task blocks (the pins `threads` and
 * `block`) gives the same bits in the outputs and the cache, for ssd_step, sscan_step and
 * gdr_step, two tokens per entry, a padding entry, shapes that leave partial blocks and
 * partial vector lanes; and each within 1e-5 of the float64 reference. Run under CHUNKGEN_CPU_ISA=baseline|avx2|avx512 for each variant. */
#include "ops.h"
#include "step_testlib.h"

enum { TB = 5, TT = 2, TS = 7 };
static const int64_t k_idx[TB] = {4, 0, -1, 6, 2};
static const char *const k_cfgs[] = {"threads=1", "threads=2", "threads=2,block=16", "threads=1,block=48"};
enum { NCFG = sizeof k_cfgs / sizeof k_cfgs[0] };

/* An op's call on a fresh copy of cache0 under config cfg: the cache and output after it. */
typedef cg_status (*step_call)(cg_context *ctx, void *data, cg_tbuf *cache, cg_tbuf *out, const cg_exec *ex);

static void same_bits(const char *op, void *data, const cg_tbuf *cache0, int out_ndim, const int64_t *out_shape,
                      step_call call) {
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 2));
    cg_tbuf c[NCFG], o[NCFG];
    for (int i = 0; i < NCFG; i++) {
        c[i] = cg_tbuf_new(cache0->t.dtype, cache0->t.ndim, cache0->t.shape);
        memcpy(c[i].mem, cache0->mem, cg_step_bytes(&c[i]));
        o[i] = cg_tbuf_new(CG_F32, out_ndim, out_shape);
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = CG_BACKEND_CPU, ex.config = k_cfgs[i];
        CG_CHECK_OK(ctx, call(ctx, data, &c[i], &o[i], &ex));
    }
    CG_CHECK(memcmp(c[0].mem, cache0->mem, cg_step_bytes(&c[0])), "%s: the cache did not change", op);
    cg_tbuf rc = cg_tbuf_new(cache0->t.dtype, cache0->t.ndim, cache0->t.shape), ro = cg_tbuf_new(CG_F32, out_ndim, out_shape);
    memcpy(rc.mem, cache0->mem, cg_step_bytes(&rc));
    cg_exec rx = CG_EXEC_INIT;
    rx.backend = CG_BACKEND_REF;
    CG_CHECK_OK(ctx, call(ctx, data, &rc, &ro, &rx));
    const double tol = cache0->t.dtype == CG_F32 ? 1e-5 : 1e-2;
    CG_CHECK(cg_rel_err(&o[0], &ro) <= tol && cg_rel_err(&c[0], &rc) <= tol, "%s: against the reference: out %.3g, cache %.3g",
             op, cg_rel_err(&o[0], &ro), cg_rel_err(&c[0], &rc));
    cg_tbuf_free(&rc), cg_tbuf_free(&ro);
    for (int i = 1; i < NCFG; i++)
        CG_CHECK(!memcmp(c[i].mem, c[0].mem, cg_step_bytes(&c[0])) && !memcmp(o[i].mem, o[0].mem, cg_step_bytes(&o[0])),
                 "%s: config %s: results differ in bits from %s", op, k_cfgs[i], k_cfgs[0]);
    for (int i = 0; i < NCFG; i++) cg_tbuf_free(&c[i]), cg_tbuf_free(&o[i]);
    cg_context_free(ctx);
}

/* ------------------------------------------------------------------- SSD / GDR */

enum { HG = 2, HH = 4, HDK = 24, HDV = 72 };

typedef struct heads_data {
    cg_tbuf q, k, v, g, beta, idx;
} heads_data;

static heads_data heads_data_new(cg_rng *r) {
    heads_data d;
    d.q = cg_step_rand(r, CG_F32, 4, (int64_t[]){TB, TT, HG, HDK}, -1, 1);
    d.k = cg_step_rand(r, CG_F32, 4, (int64_t[]){TB, TT, HG, HDK}, -1, 1);
    d.v = cg_step_rand(r, CG_F32, 4, (int64_t[]){TB, TT, HH, HDV}, -1, 1);
    d.g = cg_step_rand(r, CG_F32, 3, (int64_t[]){TB, TT, HH}, -0.3, 0);
    d.beta = cg_step_rand(r, CG_F32, 3, (int64_t[]){TB, TT, HH}, 0, 1);
    d.idx = cg_step_idx_buf(1, (int64_t[]){TB}, k_idx);
    return d;
}

static cg_status ssd_call(cg_context *ctx, void *data, cg_tbuf *cache, cg_tbuf *out, const cg_exec *ex) {
    const heads_data *d = data;
    cg_ssd_step_args a = CG_SSD_STEP_ARGS_INIT;
    a.q = d->q.t, a.k = d->k.t, a.v = d->v.t, a.log_alpha = d->g.t;
    a.cache = cache->t, a.state_indices = d->idx.t, a.o = out->t;
    return cg_ssd_step(ctx, &a, ex);
}

static cg_status gdr_call(cg_context *ctx, void *data, cg_tbuf *cache, cg_tbuf *out, const cg_exec *ex) {
    const heads_data *d = data;
    cg_gdr_step_args a = CG_GDR_STEP_ARGS_INIT;
    a.q = d->q.t, a.k = d->k.t, a.v = d->v.t, a.g = d->g.t, a.beta = d->beta.t, a.use_qk_l2norm = 1;
    a.cache = cache->t, a.state_indices = d->idx.t, a.o = out->t;
    return cg_gdr_step(ctx, &a, ex);
}

static void heads_case(const char *op, step_call call, cg_dtype cache_dt) {
    cg_rng r = {3601};
    heads_data d = heads_data_new(&r);
    cg_tbuf cache0 = cg_step_rand(&r, cache_dt, 4, (int64_t[]){TS, HH, HDK, HDV}, -1, 1);
    same_bits(op, &d, &cache0, 4, d.v.t.shape, call);
    cg_tbuf *all[] = {&d.q, &d.k, &d.v, &d.g, &d.beta, &d.idx, &cache0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

CG_TEST(step_threads_ssd) { heads_case("ssd_step", ssd_call, CG_F32); }
CG_TEST(step_threads_ssd_bf16_cache) { heads_case("ssd_step bf16 cache", ssd_call, CG_BF16); }
CG_TEST(step_threads_gdr) { heads_case("gdr_step", gdr_call, CG_F32); }

/* -------------------------------------------------------- selective scan */

enum { XD = 200, XG = 2 };

typedef struct scan_data {
    cg_tbuf x, delta, A, Bm, Cm, D, z, bias, idx;
} scan_data;

static cg_status sscan_call(cg_context *ctx, void *data, cg_tbuf *cache, cg_tbuf *out, const cg_exec *ex) {
    const scan_data *d = data;
    cg_sscan_step_args a = CG_SSCAN_STEP_ARGS_INIT;
    a.x = d->x.t, a.delta = d->delta.t, a.A = d->A.t, a.B = d->Bm.t, a.C = d->Cm.t, a.D = d->D.t, a.z = d->z.t;
    a.delta_bias = d->bias.t, a.delta_softplus = 1;
    a.cache = cache->t, a.state_indices = d->idx.t, a.y = out->t;
    return cg_sscan_step(ctx, &a, ex);
}

/* N 21: states padded to whole vectors, copied in and out; N 16 at one token: in place in the
 * cache; N 16 at two tokens: a sub-block's states in one row. */
static void scan_case(int64_t N, int64_t T) {
    cg_rng r = {3602};
    scan_data d;
    d.x = cg_step_rand(&r, CG_F32, 3, (int64_t[]){TB, T, XD}, -1, 1);
    d.delta = cg_step_rand(&r, CG_F32, 3, (int64_t[]){TB, T, XD}, -2, 1);
    d.A = cg_step_rand(&r, CG_F32, 2, (int64_t[]){XD, N}, -3, -0.1);
    d.Bm = cg_step_rand(&r, CG_F32, 4, (int64_t[]){TB, T, XG, N}, -1, 1);
    d.Cm = cg_step_rand(&r, CG_F32, 4, (int64_t[]){TB, T, XG, N}, -1, 1);
    d.D = cg_step_rand(&r, CG_F32, 1, (int64_t[]){XD}, -1, 1);
    d.z = cg_step_rand(&r, CG_F32, 3, (int64_t[]){TB, T, XD}, -3, 3);
    d.bias = cg_step_rand(&r, CG_F32, 1, (int64_t[]){XD}, -1, 0);
    d.idx = cg_step_idx_buf(1, (int64_t[]){TB}, k_idx);
    cg_tbuf cache0 = cg_step_rand(&r, CG_F32, 3, (int64_t[]){TS, XD, N}, -1, 1);
    same_bits("sscan_step", &d, &cache0, 3, d.x.t.shape, sscan_call);
    cg_tbuf *all[] = {&d.x, &d.delta, &d.A, &d.Bm, &d.Cm, &d.D, &d.z, &d.bias, &d.idx, &cache0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cg_tbuf_free(all[i]);
}

CG_TEST(step_threads_sscan) { scan_case(21, 2); }
CG_TEST(step_threads_sscan_inplace) { scan_case(16, 1); }
CG_TEST(step_threads_sscan_rows) { scan_case(16, 2); }
