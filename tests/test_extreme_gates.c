/* test_extreme_gates.c -- issue #39 items 2 and 3: strongly negative gates and non-finite
 * inputs, on every kernel family (ssd_fwd, ssd_bwd, sscan_fwd, sscan_bwd), forward and
 * backward, under the SIMT emulator (the generated CUDA), on the CPU path and on the
 * float64 reference itself.
 *
 * Each case perturbs random inputs (the op table's ranges) in one way:
 *   SSD    log_alpha of head 0 at tokens 20 and 75 (inside a chunk for every chunk length)
 *          set to -1e3, -1e4, -1e30 or -inf (hard resets), or -1e30 at every token of
 *          head 0; a NaN or +Inf planted in v at token 40 (mid-chunk), head 1; the
 *          backward also a NaN in k, an Inf in q and a NaN in dout at token 40;
 *   sscan  A of channel 1 set to -1e3, -1e4, -1e30 (exp(dt A) underflows at every step)
 *          or -inf (a hard reset at every step; there the reference's ddelta is NaN,
 *          A exp(dt A) = -inf * 0, and every backend must agree position by position),
 *          delta of channel 2 at step 30 set to 1e4 (dt A from -2e4 to -1e3 there); a NaN
 *          or +Inf planted in x at step 42 (mid-chunk for chunks 4, 8, 16).
 * and every output is checked against the float64 reference on the same (rounded) inputs,
 * position by position: a non-finite value exactly where the reference has one, and over
 * the positions where both are finite a relative error max|x - ref| / max|ref| within the
 * tolerance, the maximum taken per head (SSD) or channel (sscan), so that one head's
 * huge or zeroed values do not hide another's error (but no finer than 1e-6 of the
 * tensor's largest value: float32 cannot follow a channel whose gradients are 1e-100 in
 * float64). The perturbed head 0 of the gate
 * cases must agree too: the exact decays there are exp(sums of log_alpha) formed without
 * cancellation (docs/dtypes.md, "NaN, Inf and extreme gates").
 * Also: dlog_alpha is exactly 0 at a token whose log_alpha is <= -1e3 (exp(log_alpha) is
 * 0 in float32 and float64: the limit, and the reference's exp(-inf) <G, S> = 0), and the
 * reference's outputs of the gate cases are all finite (no -inf - -inf inside it).
 * Configs are pinned (cg_exec.config): a sample over chunk lengths, both SSD strategies,
 * every precision (mma16 with bf16 and f16 inputs), both selective-scan strategies. */
#include "cg_test.h"

#include "ops.h"
#include "test_dtype_lib.h"

#include <math.h>
#include <string.h>

#define TOL_FWD 1e-4  /* float32 outputs (issue #39: 1e-4 where the truth is finite) */
#define TOL_BWD 1e-4
#define TOL_TF32 5e-3 /* precision=tf32, as the sweeps (test_ssd_gen.c) */

/* ------------------------------------------------------------------ shapes */

/* SSD: B=1, T=100 (chunks of 16, 32, 64 all split it; tokens 20, 40, 75 mid-chunk),
 * H=2 heads sharing one group of q, k (dq, dk sum over them), dk 24, dv 20 (padding
 * inside the tiles). Selective scan: L=100, D=6 channels in G=2 groups, N=7. Every
 * optional input and output present (h0, hT; dhT, dh0; D, z, delta_bias, softplus). */
static void dims_of(cg_op op, int64_t dims[CG_SYM_COUNT]) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_B] = 1;
    if (op == CG_OP_SSD_FWD || op == CG_OP_SSD_BWD) {
        dims[CG_SYM_T] = 100, dims[CG_SYM_G] = 1, dims[CG_SYM_H] = 2, dims[CG_SYM_DK] = 24, dims[CG_SYM_DV] = 20;
    } else {
        dims[CG_SYM_L] = 100, dims[CG_SYM_D] = 6, dims[CG_SYM_N] = 7, dims[CG_SYM_G] = 2;
    }
}

static int is_ssd(cg_op op) { return op == CG_OP_SSD_FWD || op == CG_OP_SSD_BWD; }
static int is_bwd(cg_op op) { return op == CG_OP_SSD_BWD || op == CG_OP_SSCAN_BWD; }

/* ------------------------------------------------------------------- cases */

enum { GATE_TOK0 = 20, GATE_TOK1 = 75, POISON_TOK = 40, DELTA_STEP = 30, POISON_STEP = 42 };

typedef struct xg_case {
    const char *name;
    int ssd;      /* 1: SSD, 0: selective scan */
    int bwd_only; /* a perturbation of a backward-only input, or one only the backward has more to say about */
    int gate;     /* a gate case: the truth is finite everywhere */
    const char *tensor;
    double value;
    int all; /* SSD: every token of head 0 */
} xg_case;

static const xg_case k_cases[] = {
    {"log_alpha=-1e3", 1, 0, 1, "log_alpha", -1e3, 0},
    {"log_alpha=-1e4", 1, 0, 1, "log_alpha", -1e4, 0},
    {"log_alpha=-1e30", 1, 0, 1, "log_alpha", -1e30, 0},
    {"log_alpha=-inf", 1, 0, 1, "log_alpha", -INFINITY, 0},
    {"log_alpha=-1e30 at every token", 1, 0, 1, "log_alpha", -1e30, 1},
    {"v NaN at token 40", 1, 0, 0, "v", NAN, 0},
    {"v +Inf at token 40", 1, 0, 0, "v", INFINITY, 0},
    {"k NaN at token 40", 1, 1, 0, "k", NAN, 0},
    {"q +Inf at token 40", 1, 1, 0, "q", INFINITY, 0},
    {"dout NaN at token 40", 1, 1, 0, "dout", NAN, 0},
    {"A=-1e3 (channel 1)", 0, 0, 1, "A", -1e3, 0},
    {"A=-1e4 (channel 1)", 0, 0, 1, "A", -1e4, 0},
    {"A=-1e30 (channel 1)", 0, 0, 1, "A", -1e30, 0},
    {"A=-inf (channel 1)", 0, 0, 0, "A", -INFINITY, 0},
    {"delta=1e4 at step 30 (channel 2)", 0, 0, 1, "delta", 1e4, 0},
    {"x NaN at step 42", 0, 0, 0, "x", NAN, 0},
    {"x +Inf at step 42", 0, 0, 0, "x", INFINITY, 0},
};
#define NCASES ((int)(sizeof k_cases / sizeof k_cases[0]))

static void set_at(dtt_prob *p, const char *name, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v) {
    const int64_t idx[4] = {i0, i1, i2, i3};
    cg_tbuf_set(&p->t[dtt_idx(p, name)], idx, v);
}

/* The case's perturbation of p's inputs (in p's storage dtypes). */
static void perturb(dtt_prob *p, const xg_case *c) {
    if (!strcmp(c->tensor, "log_alpha")) { /* [B, T, H], head 0 */
        if (c->all) {
            for (int64_t t = 0; t < p->dims[CG_SYM_T]; t++) set_at(p, "log_alpha", 0, t, 0, 0, c->value);
        } else {
            set_at(p, "log_alpha", 0, GATE_TOK0, 0, 0, c->value);
            set_at(p, "log_alpha", 0, GATE_TOK1, 0, 0, c->value);
        }
    } else if (!strcmp(c->tensor, "v")) { /* [B, T, H, dv]: head 1 */
        set_at(p, "v", 0, POISON_TOK, 1, 3, c->value);
    } else if (!strcmp(c->tensor, "q") || !strcmp(c->tensor, "k")) { /* [B, T, G, dk] */
        set_at(p, c->tensor, 0, POISON_TOK, 0, 5, c->value);
    } else if (!strcmp(c->tensor, "dout")) { /* [B, T, H, dv]: head 0 */
        set_at(p, "dout", 0, POISON_TOK, 0, 7, c->value);
    } else if (!strcmp(c->tensor, "A")) { /* [D, N]: every state of channel 1 */
        for (int64_t n = 0; n < p->dims[CG_SYM_N]; n++) set_at(p, "A", 1, n, 0, 0, c->value);
    } else if (!strcmp(c->tensor, "delta")) { /* [B, L, D] */
        set_at(p, "delta", 0, DELTA_STEP, 2, 0, c->value);
    } else if (!strcmp(c->tensor, "x")) {
        set_at(p, "x", 0, POISON_STEP, 3, 0, c->value);
    }
}

/* ------------------------------------------------------------- comparison */

/* The dim of tensor i of p whose index is a head (SSD: H or G) or a channel (sscan: D,
 * or G for B and C): errors are normalized per index of it. -1: none. */
static int group_dim(const dtt_prob *p, int i) {
    const cg_tdesc *t = &p->d->t[i];
    int k = 0;
    for (int e = 0; e < 4; e++) {
        const cg_sym s = t->ext[e];
        if (s == CG_SYM_NONE) continue;
        if (s == CG_SYM_H || s == CG_SYM_G || s == CG_SYM_D) return k;
        k++;
    }
    return -1;
}

static int next_index(const cg_tensor *t, int64_t *idx) {
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (++idx[i] < t->shape[i]) return 1;
        idx[i] = 0;
    }
    return 0;
}

#define MAXG 64

typedef struct xg_cmp {
    int64_t mismatch;         /* positions where exactly one of the two is non-finite */
    int64_t first[CG_MAX_DIMS]; /* the first of them */
    double first_x, first_ref;
    int64_t nonfinite_ref;    /* non-finite positions of the reference */
    double err;               /* max over groups of max|x - ref| / scale (finite positions) */
    int64_t worst[CG_MAX_DIMS]; /* where that maximum is */
    double worst_x, worst_ref;
} xg_cmp;

static xg_cmp compare(const dtt_prob *p, const dtt_prob *r, int i) {
    const cg_tbuf *a = &p->t[i], *b = &r->t[i];
    const int gd = group_dim(p, i);
    double scale[MAXG] = {0}, all = 0;
    xg_cmp c;
    memset(&c, 0, sizeof c);
    /* pass 1: the scales, max|ref| per group and over the tensor (finite positions) */
    int64_t idx[CG_MAX_DIMS] = {0};
    do {
        const double y = cg_tbuf_get(b, idx);
        const int g = gd < 0 ? 0 : (int)(idx[gd] % MAXG);
        if (isfinite(y) && fabs(y) > scale[g]) scale[g] = fabs(y);
        if (isfinite(y) && fabs(y) > all) all = fabs(y);
    } while (next_index(&b->t, idx));
    /* A group's scale, but no finer than 1e-6 of the tensor's: float32 cannot follow
     * values far below the others (a channel whose decays underflow has gradients of
     * 1e-100 in float64, 0 or subnormal in float32). */
    for (int g = 0; g < MAXG; g++)
        if (scale[g] < 1e-6 * all) scale[g] = 1e-6 * all;
    /* pass 2: the mask and the errors */
    memset(idx, 0, sizeof idx);
    do {
        const double x = cg_tbuf_get(a, idx), y = cg_tbuf_get(b, idx);
        const int g = gd < 0 ? 0 : (int)(idx[gd] % MAXG);
        if (!isfinite(y)) c.nonfinite_ref++;
        if (isfinite(x) != isfinite(y)) {
            if (!c.mismatch++) {
                memcpy(c.first, idx, sizeof idx);
                c.first_x = x, c.first_ref = y;
            }
        } else if (isfinite(y)) {
            const double e = scale[g] > 0 ? fabs(x - y) / scale[g] : fabs(x - y);
            if (e > c.err) {
                c.err = e;
                memcpy(c.worst, idx, sizeof idx);
                c.worst_x = x, c.worst_ref = y;
            }
        }
    } while (next_index(&b->t, idx));
    return c;
}

static const char *idx_str(const int64_t *idx, int n, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < n && o < len; k++) o += (size_t)snprintf(buf + o, len - o, k ? ",%lld" : "%lld", (long long)idx[k]);
    return buf;
}

/* ------------------------------------------------------------------- runs */

typedef struct xg_run {
    const char *test;   /* the test that runs it: extreme_gates_<test> */
    cg_op op;
    cg_backend be;
    const char *config; /* NULL: the default; precision=tf32 gets its looser tolerance */
    cg_dtype half;      /* storage of the 16-bit-capable tensors: CG_F32, CG_BF16 or CG_F16 */
} xg_run;

static cg_status run_op(cg_context *ctx, dtt_prob *p, cg_backend be, const char *config) {
    cg_exec ex = CG_EXEC_INIT;
    ex.backend = be;
    ex.config = config;
    return cg_run(ctx, p->d->op, dtt_args(p), &ex);
}

static double tol_of(const dtt_prob *p, int i, const xg_run *run) {
    const cg_dtype dt = p->t[i].t.dtype;
    double tol = cg__dtype_half(dt) ? cg__tol_dtype(p->d->t[i].tol, dt) : is_bwd(run->op) ? TOL_BWD : TOL_FWD;
    if (run->config && strstr(run->config, "precision=tf32"))
        tol = cg__dtype_half(dt) ? (tol > 2 * TOL_TF32 ? tol : TOL_TF32 + tol) : TOL_TF32;
    return tol;
}

/* One case of run: p in the run's dtypes (perturbed), r its float64 twin (the truth). */
static void check_case(cg_context *ctx, const xg_run *run, const xg_case *c, uint64_t seed) {
    int64_t dims[CG_SYM_COUNT];
    dims_of(run->op, dims);
    dtt_prob p, r;
    dtt_new(&p, run->op, dims, 1, 0, run->half, CG_F32, 0);
    dtt_new(&r, run->op, dims, 1, 0, CG_F64, CG_F64, 0);
    dtt_fill(&p, seed);
    perturb(&p, c);
    dtt_copy_inputs(&r, &p);
    CG_CHECK_OK(ctx, run_op(ctx, &r, CG_BACKEND_REF, NULL));
    const cg_op_desc *d = p.d;
    uint64_t ps = 7;
    for (int i = 0; i < d->nt; i++) /* poisoned: a skipped element fails */
        if (d->t[i].role == CG_TD_OUT && p.t[i].t.data) cg_tbuf_fill(&p.t[i], &(cg_rng){ps++}, 1e3, 2e3);
    const char *be = run->be == CG_BACKEND_EMULATE ? "emulate" : run->be == CG_BACKEND_CPU ? "cpu" : "ref";
    const char *cfg = run->config ? run->config : "(default)";
    const cg_status st = run_op(ctx, &p, run->be, run->config);
    CG_CHECK(st == CG_OK, "%s %s %s %s [%s]: %s", d->name, be, cfg, cg__dtype_name(run->half), c->name, cg_errmsg(ctx));
    if (st == CG_OK) {
        for (int i = 0; i < d->nt; i++) {
            if (d->t[i].role != CG_TD_OUT || !p.t[i].t.data) continue;
            const xg_cmp m = compare(&p, &r, i);
            const double tol = tol_of(&p, i, run);
            char at[64];
            CG_CHECK(m.mismatch == 0,
                     "%s.%s %s %s %s [%s]: %lld positions non-finite in one and not the other, first [%s]: %g vs "
                     "reference %g (%lld non-finite in the reference) [%s]",
                     d->name, d->t[i].name, be, cfg, cg__dtype_name(run->half), c->name, (long long)m.mismatch,
                     idx_str(m.first, p.t[i].t.ndim, at, sizeof at), m.first_x, m.first_ref,
                     (long long)m.nonfinite_ref, cg_last_dispatch(ctx));
            char wat[64];
            CG_CHECK(m.err <= tol, "%s.%s %s %s %s [%s]: rel err %.3g (tol %g), the largest at [%s]: %.8g vs %.8g [%s]",
                     d->name, d->t[i].name, be, cfg, cg__dtype_name(run->half), c->name, m.err, tol,
                     idx_str(m.worst, p.t[i].t.ndim, wat, sizeof wat), m.worst_x, m.worst_ref, cg_last_dispatch(ctx));
            /* the test means something: a gate's truth is finite everywhere */
            if (c->gate)
                CG_CHECK(m.nonfinite_ref == 0, "%s.%s reference [%s]: %lld non-finite values", d->name, d->t[i].name,
                         c->name, (long long)m.nonfinite_ref);
        }
        /* dlog_alpha at a token with log_alpha <= -1e3: exactly 0 (docs/dtypes.md) */
        if (run->op == CG_OP_SSD_BWD && c->gate) {
            const int il = dtt_idx(&p, "dlog_alpha");
            int64_t bad = 0, first = -1;
            double fx = 0, fy = 0;
            for (int64_t t = 0; t < dims[CG_SYM_T]; t++) {
                if (!c->all && t != GATE_TOK0 && t != GATE_TOK1) continue;
                const int64_t idx[3] = {0, t, 0};
                const double x = cg_tbuf_get(&p.t[il], idx), y = cg_tbuf_get(&r.t[il], idx);
                if (x != 0 || y != 0) {
                    if (!bad++) first = t, fx = x, fy = y;
                }
            }
            CG_CHECK(bad == 0, "ssd_bwd.dlog_alpha %s %s %s [%s]: %lld reset tokens with dlog_alpha != 0, first token %lld: "
                     "%g (reference %g)", be, cfg, cg__dtype_name(run->half), c->name, (long long)bad, (long long)first,
                     fx, fy);
        }
    }
    dtt_free(&p);
    dtt_free(&r);
}

/* Every case of run's op. */
static void check_run(cg_context *ctx, const xg_run *run) {
    for (int k = 0; k < NCASES; k++) {
        const xg_case *c = &k_cases[k];
        if (c->ssd != is_ssd(run->op) || (c->bwd_only && !is_bwd(run->op))) continue;
        check_case(ctx, run, c, 3900 + (uint64_t)k);
    }
}

#define EMU CG_BACKEND_EMULATE

static const xg_run k_runs[] = {
    /* The generated SSD forward: both strategies, chunks 16/32/64/128, stages 1/2, ieee, tf32 and 3xtf32. */
    {"ssd_fwd_emu", CG_OP_SSD_FWD, EMU, "chunk=16,strategy=seq,stages=1,precision=ieee", CG_F32},
    {"ssd_fwd_emu", CG_OP_SSD_FWD, EMU, "chunk=32,strategy=3phase,stages=1,precision=3xtf32", CG_F32},
    {"ssd_fwd_emu", CG_OP_SSD_FWD, EMU, "chunk=64,strategy=seq,stages=2,precision=tf32", CG_F32},
    {"ssd_fwd_emu", CG_OP_SSD_FWD, EMU, "chunk=32,block_dv=32,warps=4,strategy=seq,stages=2,precision=3xtf32", CG_F32},
    {"ssd_fwd_emu", CG_OP_SSD_FWD, EMU, "chunk=16,strategy=3phase,stages=1,precision=ieee", CG_F32},
    {"ssd_fwd_emu", CG_OP_SSD_FWD, EMU, "chunk=128,strategy=3phase,stages=1,precision=3xtf32", CG_F32},
    /* The generated SSD backward: chunks 16/32/64, heads loop/split, recompute 1/4, each precision. */
    {"ssd_bwd_emu", CG_OP_SSD_BWD, EMU, "chunk=16,precision=ieee,heads=loop,recompute=1", CG_F32},
    {"ssd_bwd_emu", CG_OP_SSD_BWD, EMU, "chunk=16,precision=3xtf32,heads=split,recompute=4", CG_F32},
    {"ssd_bwd_emu", CG_OP_SSD_BWD, EMU, "chunk=32,precision=tf32,heads=loop,recompute=1", CG_F32},
    {"ssd_bwd_emu", CG_OP_SSD_BWD, EMU, "chunk=64,warps=2,precision=3xtf32,heads=split,recompute=1", CG_F32},
    /* precision=mma16: bf16 and f16 q, k, v (and dout; o and the gradients in the same dtype). */
    {"ssd16_emu", CG_OP_SSD_FWD, EMU, "chunk=32,strategy=3phase,stages=1,precision=mma16", CG_BF16},
    {"ssd16_emu", CG_OP_SSD_FWD, EMU, "chunk=64,strategy=seq,stages=2,precision=mma16", CG_F16},
    {"ssd16_emu", CG_OP_SSD_BWD, EMU, "chunk=32,precision=mma16,heads=split,recompute=1", CG_BF16},
    {"ssd16_emu", CG_OP_SSD_BWD, EMU, "chunk=16,precision=mma16,heads=split,recompute=4", CG_F16},
    /* The generated selective scan: seq and par, forward and backward, float32 and bf16. */
    {"sscan_emu", CG_OP_SSCAN_FWD, EMU, "chunk=8,strategy=seq", CG_F32},
    {"sscan_emu", CG_OP_SSCAN_FWD, EMU, "chunk=4,strategy=par", CG_F32},
    {"sscan_emu", CG_OP_SSCAN_FWD, EMU, "chunk=16,strategy=seq", CG_BF16},
    {"sscan_emu", CG_OP_SSCAN_BWD, EMU, "chunk=4,segment=32,strategy=par", CG_F32},
    {"sscan_emu", CG_OP_SSCAN_BWD, EMU, "chunk=8,segment=64,strategy=seq", CG_F32},
    /* The CPU path (both backward schedules) and the reference against itself (its outputs of
     * the gate cases finite, dlog_alpha 0 at the resets). */
    {"cpu_ref", CG_OP_SSD_FWD, CG_BACKEND_CPU, "chunk=32", CG_F32},
    {"cpu_ref", CG_OP_SSD_FWD, CG_BACKEND_CPU, "chunk=16,heads=group,threads=1", CG_BF16},
    {"cpu_ref", CG_OP_SSD_BWD, CG_BACKEND_CPU, "chunk=32,bwd_split=0", CG_F32},
    {"cpu_ref", CG_OP_SSD_BWD, CG_BACKEND_CPU, "chunk=16,bwd_split=1", CG_F32},
    {"cpu_ref", CG_OP_SSD_BWD, CG_BACKEND_CPU, "chunk=64,bwd_split=1", CG_BF16},
    {"cpu_ref", CG_OP_SSCAN_FWD, CG_BACKEND_CPU, NULL, CG_F32},
    {"cpu_ref", CG_OP_SSCAN_BWD, CG_BACKEND_CPU, "segment=16", CG_F32},
    {"cpu_ref", CG_OP_SSD_FWD, CG_BACKEND_REF, NULL, CG_F32},
    {"cpu_ref", CG_OP_SSD_BWD, CG_BACKEND_REF, NULL, CG_F32},
    {"cpu_ref", CG_OP_SSCAN_BWD, CG_BACKEND_REF, NULL, CG_F32},
};

/* Every case of each run of `test` (its rows in k_runs). */
static void check_runs(const char *test) {
    CG_TEST_CONTEXT(ctx);
    int n = 0;
    for (size_t i = 0; i < sizeof k_runs / sizeof k_runs[0]; i++)
        if (!strcmp(k_runs[i].test, test)) check_run(ctx, &k_runs[i]), n++;
    CG_CHECK(n > 0, "no run for %s", test);
    cg_context_free(ctx);
}

CG_TEST(extreme_gates_ssd_fwd_emu) { check_runs("ssd_fwd_emu"); }
CG_TEST(extreme_gates_ssd_bwd_emu) { check_runs("ssd_bwd_emu"); }
CG_TEST(extreme_gates_ssd16_emu) { check_runs("ssd16_emu"); }
CG_TEST(extreme_gates_sscan_emu) { check_runs("sscan_emu"); }
CG_TEST(extreme_gates_cpu_ref) { check_runs("cpu_ref"); }
