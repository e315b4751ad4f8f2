/* tuner.c -- `chunkgen tune`: enumerate, verify, measure, select, store.
 *
 * Per (shape, direction) -- one store key:
 *   1. the space: generator/cpu/<op>_cpu.lua for the CPU backend (cpu_space.c), the
 *      generator's kernel (cg__gen_space) for cuda/emulate, pruned by its constraints;
 *   2. a verification problem (same dk/dv/G/H or D/N/G, batch 1, a short T that still
 *      spans several chunks/segments) is run once on the float64 reference
 *      (CG_BACKEND_REF); every candidate's outputs -- forward: o and hT (y and hT); backward:
 *      every gradient -- must be within 1e-5 (forward) / 1e-4 (gradients) relative error;
 *   3. each candidate that verifies is timed on the full shape: one warm-up, then runs
 *      until a minimum time and count; median and IQR are kept. cuda/emulate: per run the
 *      L2 is flushed outside the timed region and the executor's timer (CUDA events)
 *      brackets the launches; cpu: the monotonic clock around the call. A candidate is rejected with a reason (compile, resources,
 *      launch, wrong, timeout) that is stored, so a resumed tune does not retry it;
 *   4. the fastest wins; candidates within noise of it tie and the first in the space's
 *      order wins the tie (cg__tune_select); every candidate's timing is kept;
 *   5. the entry is written after every candidate (complete = false), so an interrupted
 *      tune keeps what it measured and a rerun resumes; complete = true at the end.
 * For cuda/emulate, --jobs worker threads (own contexts, same cache directory) compile
 * the candidates ahead of the measuring thread, warming the binary cache. */
#include "autotune.h"
#include "cpu/cpu_isa.h" /* the CPU variant the candidates run */

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOL_FWD 1e-5
#define TOL_BWD 1e-4

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cg__tune_opts_default(cg_tune_opts *o) {
    memset(o, 0, sizeof *o);
    o->op_mask = 3;
    o->dir_mask = 3;
    o->progress = 0;
}

/* ------------------------------------------------------------ shape sets */

#define SSD_SHAPE(b, t, g, h, k, v, nm) {0, b, t, g, h, k, v, 0, 0, nm}
#define SSCAN_SHAPE(b, l, d, n, nm) {1, b, l, 1, 0, 0, 0, d, n, nm}

/* The seeds' four SSD configs at T = 512, 2048, 8192 and the selective scan at batch 4,
 * dim 256/512/1024, state 16. */
static const cg_tune_shape k_gpu_shapes[] = {
    SSD_SHAPE(4, 512, 2, 8, 128, 128, "g2h8_d128"),        SSD_SHAPE(4, 2048, 2, 8, 128, 128, "g2h8_d128"),
    SSD_SHAPE(4, 8192, 2, 8, 128, 128, "g2h8_d128"),       SSD_SHAPE(2, 512, 1, 24, 128, 64, "g1h24_dk128_dv64"),
    SSD_SHAPE(2, 2048, 1, 24, 128, 64, "g1h24_dk128_dv64"), SSD_SHAPE(2, 8192, 1, 24, 128, 64, "g1h24_dk128_dv64"),
    SSD_SHAPE(4, 512, 1, 1, 128, 128, "g1h1_d128"),        SSD_SHAPE(4, 2048, 1, 1, 128, 128, "g1h1_d128"),
    SSD_SHAPE(4, 8192, 1, 1, 128, 128, "g1h1_d128"),       SSD_SHAPE(4, 512, 2, 4, 48, 40, "g2h4_dk48_dv40"),
    SSD_SHAPE(4, 2048, 2, 4, 48, 40, "g2h4_dk48_dv40"),    SSD_SHAPE(4, 8192, 2, 4, 48, 40, "g2h4_dk48_dv40"),
    SSCAN_SHAPE(4, 512, 256, 16, "d256_n16"),              SSCAN_SHAPE(4, 2048, 256, 16, "d256_n16"),
    SSCAN_SHAPE(4, 8192, 256, 16, "d256_n16"),             SSCAN_SHAPE(4, 512, 512, 16, "d512_n16"),
    SSCAN_SHAPE(4, 2048, 512, 16, "d512_n16"),             SSCAN_SHAPE(4, 8192, 512, 16, "d512_n16"),
    SSCAN_SHAPE(4, 512, 1024, 16, "d1024_n16"),            SSCAN_SHAPE(4, 2048, 1024, 16, "d1024_n16"),
    SSCAN_SHAPE(4, 8192, 1024, 16, "d1024_n16"),
};

/* The CPU backend: the seeds' CPU runs (001 SSD, 004 selective scan) with their batches
 * (the key's par field tells batch x heads against the threads apart, and the best
 * config depends on it), at T = 512 and 2048 (the 8192 bucket is reached by
 * nearest-bucket lookup). */
static const cg_tune_shape k_cpu_shapes[] = {
    SSD_SHAPE(4, 512, 2, 8, 128, 128, "g2h8_d128"),        SSD_SHAPE(4, 2048, 2, 8, 128, 128, "g2h8_d128"),
    SSD_SHAPE(2, 512, 1, 24, 128, 64, "g1h24_dk128_dv64"), SSD_SHAPE(2, 2048, 1, 24, 128, 64, "g1h24_dk128_dv64"),
    SSD_SHAPE(4, 512, 1, 1, 128, 128, "g1h1_d128"),        SSD_SHAPE(4, 2048, 1, 1, 128, 128, "g1h1_d128"),
    SSD_SHAPE(4, 512, 2, 4, 48, 40, "g2h4_dk48_dv40"),     SSD_SHAPE(4, 2048, 2, 4, 48, 40, "g2h4_dk48_dv40"),
    SSCAN_SHAPE(4, 2048, 256, 16, "d256_n16"),             SSCAN_SHAPE(4, 2048, 512, 16, "d512_n16"),
    SSCAN_SHAPE(4, 2048, 1024, 16, "d1024_n16"),
};

const cg_tune_shape *cg__tune_default_shapes(const char *backend, int *n) {
    if (!strcmp(backend, "cpu")) {
        *n = (int)(sizeof k_cpu_shapes / sizeof k_cpu_shapes[0]);
        return k_cpu_shapes;
    }
    *n = (int)(sizeof k_gpu_shapes / sizeof k_gpu_shapes[0]);
    return k_gpu_shapes;
}

/* ---------------------------------------------------------------- problems
 * Every tensor of an op in one table; a problem allocates the ones its direction uses. */

typedef struct tspec {
    const char *name;
    int ndim;
    int64_t shape[4];
    double lo, hi;       /* input values uniform in [lo, hi) */
    int role;            /* 1 input, 2 output */
    int dirs;            /* 1 forward, 2 backward */
    double tol;          /* outputs: accuracy target */
} tspec;

enum { S_Q, S_K, S_V, S_LA, S_H0, S_O, S_HT, S_DO, S_DHT, S_DQ, S_DK, S_DV, S_DLA, S_DH0, S_N };
enum { C_X, C_DT, C_A, C_B, C_C, C_D, C_Z, C_BIAS, C_H0, C_Y, C_HT, C_DY, C_DHT,
       C_DX, C_DDT, C_DA, C_DB, C_DC, C_DD, C_DZ, C_DBIAS, C_DH0, C_N };
#define MAXT C_N

static int spec_ssd(const cg_tune_shape *s, int64_t B, int64_t T, tspec *t) {
    const int64_t G = s->G, H = s->H, dk = s->dk, dv = s->dv;
#define SP(i, nm, nd, a, b, c, d, l, h, r, dd, tl) t[i] = (tspec){nm, nd, {a, b, c, d}, l, h, r, dd, tl}
    SP(S_Q, "q", 4, B, T, G, dk, -1, 1, 1, 3, 0);
    SP(S_K, "k", 4, B, T, G, dk, -1, 1, 1, 3, 0);
    SP(S_V, "v", 4, B, T, H, dv, -1, 1, 1, 3, 0);
    SP(S_LA, "log_alpha", 3, B, T, H, 0, -0.3, 0, 1, 3, 0);
    SP(S_H0, "h0", 4, B, H, dk, dv, -1, 1, 1, 3, 0);
    SP(S_O, "o", 4, B, T, H, dv, 0, 0, 2, 1, TOL_FWD);
    SP(S_HT, "hT", 4, B, H, dk, dv, 0, 0, 2, 1, TOL_FWD);
    SP(S_DO, "dout", 4, B, T, H, dv, -1, 1, 1, 2, 0);
    SP(S_DHT, "dhT", 4, B, H, dk, dv, -1, 1, 1, 2, 0);
    SP(S_DQ, "dq", 4, B, T, G, dk, 0, 0, 2, 2, TOL_BWD);
    SP(S_DK, "dk", 4, B, T, G, dk, 0, 0, 2, 2, TOL_BWD);
    SP(S_DV, "dv", 4, B, T, H, dv, 0, 0, 2, 2, TOL_BWD);
    SP(S_DLA, "dlog_alpha", 3, B, T, H, 0, 0, 0, 2, 2, TOL_BWD);
    SP(S_DH0, "dh0", 4, B, H, dk, dv, 0, 0, 2, 2, TOL_BWD);
    return S_N;
}

static int spec_sscan(const cg_tune_shape *s, int64_t B, int64_t L, tspec *t) {
    const int64_t D = s->D, N = s->N, G = s->G;
    const int gr = G > 1;
    SP(C_X, "x", 3, B, L, D, 0, -1, 1, 1, 3, 0);
    SP(C_DT, "delta", 3, B, L, D, 0, -1, 1, 1, 3, 0);
    SP(C_A, "A", 2, D, N, 0, 0, -2, -0.1, 1, 3, 0);
    SP(C_B, "B", gr ? 4 : 3, B, L, gr ? G : N, gr ? N : 0, -1, 1, 1, 3, 0);
    SP(C_C, "C", gr ? 4 : 3, B, L, gr ? G : N, gr ? N : 0, -1, 1, 1, 3, 0);
    SP(C_D, "D", 1, D, 0, 0, 0, -1, 1, 1, 3, 0);
    SP(C_Z, "z", 3, B, L, D, 0, -1, 1, 1, 3, 0);
    SP(C_BIAS, "delta_bias", 1, D, 0, 0, 0, -1, 0, 1, 3, 0);
    SP(C_H0, "h0", 3, B, D, N, 0, -1, 1, 1, 3, 0);
    SP(C_Y, "y", 3, B, L, D, 0, 0, 0, 2, 1, TOL_FWD);
    SP(C_HT, "hT", 3, B, D, N, 0, 0, 0, 2, 1, TOL_FWD);
    SP(C_DY, "dy", 3, B, L, D, 0, -1, 1, 1, 2, 0);
    SP(C_DHT, "dhT", 3, B, D, N, 0, -1, 1, 1, 2, 0);
    SP(C_DX, "dx", 3, B, L, D, 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DDT, "ddelta", 3, B, L, D, 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DA, "dA", 2, D, N, 0, 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DB, "dB", gr ? 4 : 3, B, L, gr ? G : N, gr ? N : 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DC, "dC", gr ? 4 : 3, B, L, gr ? G : N, gr ? N : 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DD, "dD", 1, D, 0, 0, 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DZ, "dz", 3, B, L, D, 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DBIAS, "ddelta_bias", 1, D, 0, 0, 0, 0, 0, 2, 2, TOL_BWD);
    SP(C_DH0, "dh0", 3, B, D, N, 0, 0, 0, 2, 2, TOL_BWD);
#undef SP
    return C_N;
}

typedef struct tprob {
    int sscan, bwd, nt;
    tspec spec[MAXT];
    int used[MAXT];
    int64_t count[MAXT];
    float *host[MAXT];     /* values (inputs) / results copied back (outputs) */
    void *mem[MAXT];       /* what the backend reads: host[] for cpu, kernel memory otherwise */
    double *ref[MAXT];     /* float64 reference values (verification problems) */
    cg_ssd_prob ssd;
    cg_sscan_prob ss;
} tprob;

typedef struct tenv {
    cg_context *ctx;
    const char *backend;
    const cg_backend_vt *vt;
    const cg_kexec *kx;    /* NULL for cpu */
} tenv;

static int64_t numel(const tspec *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static cg_tensor tens(const tprob *p, int i, void *data, cg_dtype dt) {
    if (!p->used[i]) {
        cg_tensor none;
        memset(&none, 0, sizeof none);
        return none;
    }
    return cg_tensor_contiguous(data, dt, p->spec[i].ndim, p->spec[i].shape);
}

/* Build the validated problem over data[] (dtype dt). */
static cg_status tprob_bind(cg_context *ctx, tprob *p, void **data, cg_dtype dt, cg_ssd_prob *ssd, cg_sscan_prob *ss) {
#define T_(i) tens(p, i, data[i], dt)
    if (!p->sscan) {
        if (!p->bwd) {
            cg_ssd_fwd_args a = {.layout = CG_LAYOUT_TOKEN_MAJOR, .q = T_(S_Q), .k = T_(S_K), .v = T_(S_V),
                                 .log_alpha = T_(S_LA), .h0 = T_(S_H0), .o = T_(S_O), .hT = T_(S_HT)};
            return cg__ssd_fwd_prob(ctx, &a, ssd);
        }
        cg_ssd_bwd_args a = {.layout = CG_LAYOUT_TOKEN_MAJOR, .q = T_(S_Q), .k = T_(S_K), .v = T_(S_V),
                             .log_alpha = T_(S_LA), .h0 = T_(S_H0), .dout = T_(S_DO), .dhT = T_(S_DHT),
                             .dq = T_(S_DQ), .dk = T_(S_DK), .dv = T_(S_DV), .dlog_alpha = T_(S_DLA), .dh0 = T_(S_DH0)};
        return cg__ssd_bwd_prob(ctx, &a, ssd);
    }
    if (!p->bwd) {
        cg_sscan_fwd_args a = {.x = T_(C_X), .delta = T_(C_DT), .A = T_(C_A), .B = T_(C_B), .C = T_(C_C),
                               .D = T_(C_D), .z = T_(C_Z), .delta_bias = T_(C_BIAS), .h0 = T_(C_H0),
                               .delta_softplus = 1, .y = T_(C_Y), .hT = T_(C_HT)};
        return cg__sscan_fwd_prob(ctx, &a, ss);
    }
    cg_sscan_bwd_args a = {.x = T_(C_X), .delta = T_(C_DT), .A = T_(C_A), .B = T_(C_B), .C = T_(C_C), .D = T_(C_D),
                           .z = T_(C_Z), .delta_bias = T_(C_BIAS), .h0 = T_(C_H0), .dy = T_(C_DY), .dhT = T_(C_DHT),
                           .delta_softplus = 1, .dx = T_(C_DX), .ddelta = T_(C_DDT), .dA = T_(C_DA), .dB = T_(C_DB),
                           .dC = T_(C_DC), .dD = T_(C_DD), .dz = T_(C_DZ), .ddelta_bias = T_(C_DBIAS),
                           .dh0 = T_(C_DH0)};
#undef T_
    return cg__sscan_bwd_prob(ctx, &a, ss);
}

static void tprob_free(const tenv *env, tprob *p) {
    for (int i = 0; i < p->nt; i++) {
        if (env->kx && p->mem[i] && p->mem[i] != p->host[i]) env->kx->free(env->ctx, p->mem[i]);
        free(p->host[i]);
        free(p->ref[i]);
    }
    memset(p, 0, sizeof *p);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Allocate and fill a problem of shape s with batch B and length T. with_ref: also the
 * float64 copies and the reference outputs. */
static cg_status tprob_init(const tenv *env, tprob *p, const cg_tune_shape *s, int bwd, int64_t B, int64_t T,
                            int with_ref) {
    cg_context *ctx = env->ctx;
    memset(p, 0, sizeof *p);
    p->sscan = s->sscan;
    p->bwd = bwd;
    p->nt = s->sscan ? spec_sscan(s, B, T, p->spec) : spec_ssd(s, B, T, p->spec);
    uint64_t seed = 0x5eed ^ (uint64_t)T * 31 ^ (uint64_t)B;
    cg_status st = CG_OK;
    for (int i = 0; i < p->nt; i++) {
        const tspec *t = &p->spec[i];
        p->used[i] = (t->dirs & (bwd ? 2 : 1)) != 0;
        if (!p->used[i]) continue;
        int64_t n = numel(t);
        p->count[i] = n;
        p->host[i] = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!p->host[i]) {
            st = cg__err(ctx, CG_ENOMEM, "tune: out of memory for %s (%lld floats)", t->name, (long long)n);
            goto fail;
        }
        for (int64_t j = 0; j < n; j++)
            p->host[i][j] = t->role == 1 ? (float)(t->lo + (t->hi - t->lo) * (double)(rng_next(&seed) >> 11) *
                                                             (1.0 / 9007199254740992.0))
                                         : 0.0f;
        if (with_ref) {
            p->ref[i] = malloc((size_t)(n ? n : 1) * sizeof(double));
            if (!p->ref[i]) {
                st = cg__err(ctx, CG_ENOMEM, "tune: out of memory for the reference %s", t->name);
                goto fail;
            }
            for (int64_t j = 0; j < n; j++) p->ref[i][j] = (double)p->host[i][j];
        }
        if (env->kx) {
            size_t bytes = (size_t)(n ? n : 1) * sizeof(float);
            if ((st = env->kx->alloc(ctx, bytes, &p->mem[i])) != CG_OK) goto fail;
            if (t->role == 1 && (st = env->kx->copy(ctx, p->mem[i], p->host[i], bytes, 0, NULL)) != CG_OK) goto fail;
        } else {
            p->mem[i] = p->host[i];
        }
    }
    if (with_ref) {
        cg_ssd_prob rs;
        cg_sscan_prob rc;
        if ((st = tprob_bind(ctx, p, (void **)p->ref, CG_F64, &rs, &rc)) != CG_OK) goto fail;
        cg_cfg none;
        memset(&none, 0, sizeof none);
        cg_exec ex;
        memset(&ex, 0, sizeof ex);
        ex.backend = CG_BACKEND_REF;
        const cg_backend_vt *r = &cg__backend_ref;
        if (!p->sscan) st = bwd ? r->ssd_bwd(ctx, &rs, &none, &ex) : r->ssd_fwd(ctx, &rs, &none, &ex);
        else st = bwd ? r->sscan_bwd(ctx, &rc, &none, &ex) : r->sscan_fwd(ctx, &rc, &none, &ex);
        if (st != CG_OK) goto fail;
    }
    if ((st = tprob_bind(ctx, p, p->mem, CG_F32, &p->ssd, &p->ss)) != CG_OK) goto fail;
    return CG_OK;
fail:
    tprob_free(env, p);
    return st;
}

/* Fill the outputs with NaN so that an output a candidate does not write fails. */
static cg_status poison_outputs(const tenv *env, tprob *p) {
    for (int i = 0; i < p->nt; i++) {
        if (!p->used[i] || p->spec[i].role != 2) continue;
        for (int64_t j = 0; j < p->count[i]; j++) p->host[i][j] = NAN;
        if (env->kx) {
            cg_status st = env->kx->copy(env->ctx, p->mem[i], p->host[i], (size_t)p->count[i] * sizeof(float), 0, NULL);
            if (st != CG_OK) return st;
        }
    }
    return CG_OK;
}

/* Enqueue one run of cfg (asynchronous on the default stream for cuda). */
static cg_status run_launch(const tenv *env, tprob *p, const cg_cfg *cfg) {
    cg_exec ex;
    memset(&ex, 0, sizeof ex);
    const cg_backend_vt *vt = env->vt;
    env->ctx->dispatch[0] = '\0'; /* backends append to it; these calls are not dispatches */
    if (!p->sscan) return p->bwd ? vt->ssd_bwd(env->ctx, &p->ssd, cfg, &ex) : vt->ssd_fwd(env->ctx, &p->ssd, cfg, &ex);
    return p->bwd ? vt->sscan_bwd(env->ctx, &p->ss, cfg, &ex) : vt->sscan_fwd(env->ctx, &p->ss, cfg, &ex);
}

static cg_status run_once(const tenv *env, tprob *p, const cg_cfg *cfg) {
    cg_status st = run_launch(env, p, cfg);
    if (st == CG_OK && env->kx && env->kx->sync) st = env->kx->sync(env->ctx, NULL);
    return st;
}

/* One timed repetition, in seconds. On a kernel executor: L2 flushed (outside the timed
 * region), then the executor's timer (CUDA events) around the launches. On the CPU: the
 * monotonic clock around the call. */
static cg_status run_timed(const tenv *env, tprob *p, const cg_cfg *cfg, double *sec) {
    const cg_kexec *kx = env->kx;
    if (!kx || !kx->timer_start || !kx->timer_stop || !kx->flush_l2) {
        double a = now_s();
        cg_status st = run_once(env, p, cfg);
        *sec = now_s() - a;
        return st;
    }
    void *tok = NULL;
    double ms = 0;
    cg_status st = kx->flush_l2(env->ctx, NULL);
    if (st == CG_OK) st = kx->timer_start(env->ctx, NULL, &tok);
    if (st != CG_OK) return st;
    st = run_launch(env, p, cfg);
    if (st != CG_OK) {
        char msg[CG_ERRMSG_CAP];
        snprintf(msg, sizeof msg, "%s", env->ctx->errmsg);
        (void)kx->timer_stop(env->ctx, NULL, tok, &ms); /* releases the timer */
        return cg__err(env->ctx, st, "%s", msg);
    }
    st = kx->timer_stop(env->ctx, NULL, tok, &ms);
    *sec = 1e-3 * ms;
    return st;
}

static cg_tune_verdict verdict_of(cg_status st) {
    switch (st) {
    case CG_ECOMPILE: case CG_ELUA: return CG_TV_COMPILE;
    case CG_ENOMEM: case CG_EUNSUPPORTED: case CG_EINVAL: return CG_TV_RESOURCES;
    default: return CG_TV_LAUNCH;
    }
}

/* Run cfg on the verification problem and compare every output with the reference. */
static cg_tune_verdict verify(const tenv *env, tprob *v, const cg_cfg *cfg, double *worst, char *detail, size_t cap) {
    *worst = 0;
    cg_status st = poison_outputs(env, v);
    if (st == CG_OK) st = run_once(env, v, cfg);
    if (st != CG_OK) {
        snprintf(detail, cap, "%s: %.140s", cg_status_str(st), env->ctx->errmsg);
        return verdict_of(st);
    }
    cg_tune_verdict out = CG_TV_OK;
    for (int i = 0; i < v->nt; i++) {
        if (!v->used[i] || v->spec[i].role != 2) continue;
        if (env->kx &&
            (st = env->kx->copy(env->ctx, v->host[i], v->mem[i], (size_t)v->count[i] * sizeof(float), 1, NULL)) != CG_OK) {
            snprintf(detail, cap, "copying %s back: %.120s", v->spec[i].name, env->ctx->errmsg);
            return CG_TV_LAUNCH;
        }
        double maxd = 0, maxr = 0;
        for (int64_t j = 0; j < v->count[i]; j++) {
            double d = fabs((double)v->host[i][j] - v->ref[i][j]);
            if (!(d <= maxd)) maxd = d; /* NaN propagates */
            if (fabs(v->ref[i][j]) > maxr) maxr = fabs(v->ref[i][j]);
        }
        double err = maxr > 0 ? maxd / maxr : maxd;
        if (isnan(err)) err = INFINITY;
        if (err > *worst) *worst = err;
        if (!(err <= v->spec[i].tol) && out == CG_TV_OK) {
            snprintf(detail, cap, "%s: rel err %.3g > %.0e", v->spec[i].name, err, v->spec[i].tol);
            out = CG_TV_WRONG;
        }
    }
    return out;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

typedef struct mparams {
    double min_time, timeout;
    int min_reps, max_reps;
} mparams;

/* Time cfg on the full problem. */
static cg_tune_verdict measure(const tenv *env, tprob *p, const cg_cfg *cfg, const mparams *mp, cg_tune_cand *c) {
    double t0 = now_s();
    cg_status st = run_once(env, p, cfg); /* warm-up: loads, first-touch, caches */
    double warm = now_s() - t0;
    if (st != CG_OK) {
        snprintf(c->detail, sizeof c->detail, "%s: %.140s", cg_status_str(st), env->ctx->errmsg);
        return verdict_of(st);
    }
    if (warm > mp->timeout) {
        snprintf(c->detail, sizeof c->detail, "one run took %.3g s (limit %.3g s)", warm, mp->timeout);
        return CG_TV_TIMEOUT;
    }
    double *t = malloc((size_t)mp->max_reps * sizeof *t);
    if (!t) {
        snprintf(c->detail, sizeof c->detail, "out of memory");
        return CG_TV_RESOURCES;
    }
    int n = 0;
    double total = 0;
    while (n < mp->max_reps && (n < mp->min_reps || total < mp->min_time)) {
        double dt = 0;
        st = run_timed(env, p, cfg, &dt);
        if (st != CG_OK) {
            free(t);
            snprintf(c->detail, sizeof c->detail, "%s: %.140s", cg_status_str(st), env->ctx->errmsg);
            return verdict_of(st);
        }
        t[n++] = dt;
        total += dt;
        if (dt > mp->timeout) {
            free(t);
            snprintf(c->detail, sizeof c->detail, "one run took %.3g s (limit %.3g s)", dt, mp->timeout);
            return CG_TV_TIMEOUT;
        }
    }
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    c->median_ms = 1e3 * quantile(t, n, 0.5);
    c->iqr_ms = 1e3 * (quantile(t, n, 0.75) - quantile(t, n, 0.25));
    c->reps = n;
    free(t);
    if (!(c->median_ms > 0)) c->median_ms = 1e-6; /* below the clock's resolution */
    return CG_TV_OK;
}

/* ------------------------------------------------------------ compile ahead
 * Generated backends: worker threads, each with its own context on the same cache
 * directory, instantiate and load every candidate once, so that the binary cache is warm
 * when the measuring thread gets to it. Their results are only a warm-up: the measuring
 * thread's own load decides (and records) a compile failure. */

typedef struct ahead {
    const cg_kexec *kx;
    const char *kernel;
    cg_kshape shape;
    cg_devinfo dev;
    const cg_cfg *cfgs;
    int n;
    char cache_dir[4096];
    int threads;
    atomic_int next;
    atomic_int stop;
    pthread_t th[64];
    int started;
} ahead;

static void *ahead_main(void *arg) {
    ahead *a = arg;
    cg_context *w = NULL;
    if (cg_context_create(&w) != CG_OK) return NULL;
    cg_context_set_cache_dir(w, a->cache_dir);
    cg_context_set_threads(w, 1);
    for (;;) {
        int i = atomic_fetch_add(&a->next, 1);
        if (i >= a->n || atomic_load(&a->stop)) break;
        cg_plan plan;
        if (cg__gen_plan(w, a->kernel, &a->shape, &a->dev, &a->cfgs[i], &plan) == CG_OK) {
            void *mod = NULL;
            a->kx->load(w, &plan, &mod);
            cg__plan_free(&plan);
        }
    }
    cg_context_free(w);
    return NULL;
}

static void ahead_start(ahead *a, int jobs) {
    a->started = 0;
    int n = jobs < 64 ? jobs : 64;
    for (int i = 0; i < n; i++)
        if (pthread_create(&a->th[i], NULL, ahead_main, a) == 0) a->started++;
}

static void ahead_stop(ahead *a) {
    atomic_store(&a->stop, 1);
    for (int i = 0; i < a->started; i++) pthread_join(a->th[i], NULL);
    a->started = 0;
}

/* ------------------------------------------------------------------ output */

typedef struct tui {
    FILE *f;
    int mode;        /* 1 bar, 0 lines, -1 quiet */
    int ikey, nkeys;
    char what[200];
} tui;

static void ui_line(tui *u, const char *fmt, ...) CG_PRINTF(2, 3);
static void ui_line(tui *u, const char *fmt, ...) {
    if (u->mode < 0) return;
    if (u->mode == 1) fputs("\r\033[K", u->f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(u->f, fmt, ap);
    va_end(ap);
    fputc('\n', u->f);
    fflush(u->f);
}

static void ui_bar(tui *u, int done, int total, const cg_tune_entry *e) {
    if (u->mode != 1) return;
    char bar[21];
    int fill = total > 0 ? done * 20 / total : 0;
    for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
    bar[20] = '\0';
    char best[CG_TUNE_CFG_TEXT + 40] = "";
    int b = cg__tune_select(e->cand, e->ncand, CG_TUNE_TIE_REL, NULL);
    if (b >= 0)
        snprintf(best, sizeof best, "  best %.3f ms %s", e->cand[b].median_ms,
                 e->cand[b].cfg[0] ? e->cand[b].cfg : "(default)");
    fprintf(u->f, "\r\033[K[%d/%d] %s [%s] %d/%d%s", u->ikey, u->nkeys, u->what, bar, done, total, best);
    fflush(u->f);
}

#define CONFIRM_TOP 3

/* Time the candidates top[0..n) of e round-robin, one run each per round, until each has
 * the minimum time and count; their medians and IQRs are replaced by these. */
static cg_status confirm(const tenv *env, tprob *p, cg_tune_entry *e, const int *top, int n, const mparams *mp) {
    double *t = malloc((size_t)n * (size_t)mp->max_reps * sizeof *t);
    double *total = calloc((size_t)n, sizeof *total);
    cg_cfg *cfgs = calloc((size_t)n, sizeof *cfgs);
    cg_status st = (t && total && cfgs) ? CG_OK : CG_ENOMEM;
    for (int i = 0; st == CG_OK && i < n; i++) st = cg__cfg_parse(env->ctx, e->cand[top[i]].cfg, &cfgs[i]);
    int reps = 0;
    while (st == CG_OK && reps < mp->max_reps) {
        int enough = reps >= mp->min_reps;
        for (int i = 0; i < n; i++) enough &= total[i] >= mp->min_time;
        if (enough) break;
        for (int i = 0; st == CG_OK && i < n; i++) {
            double dt = 0;
            st = run_timed(env, p, &cfgs[i], &dt);
            t[i * mp->max_reps + reps] = dt;
            total[i] += dt;
        }
        reps++;
    }
    for (int i = 0; st == CG_OK && i < n; i++) {
        double *x = t + i * mp->max_reps;
        qsort(x, (size_t)reps, sizeof *x, cmp_dbl);
        cg_tune_cand *c = &e->cand[top[i]];
        c->median_ms = 1e3 * quantile(x, reps, 0.5);
        c->iqr_ms = 1e3 * (quantile(x, reps, 0.75) - quantile(x, reps, 0.25));
        c->reps = reps;
        if (!(c->median_ms > 0)) c->median_ms = 1e-6;
    }
    free(t);
    free(total);
    free(cfgs);
    return st;
}

/* ---------------------------------------------------------------- one key */

static void cfg_text(const cg_cfg *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s=%s", i ? "," : "", c->kv[i].key, c->kv[i].val);
}

static void stamp(cg_tune_entry *e) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(e->created, sizeof e->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char h[64] = "";
    gethostname(h, sizeof h - 1);
    snprintf(e->host, sizeof e->host, "%s", h);
}

static const char *space_kernel(const char *backend, int sscan, int bwd) {
    if (!strcmp(backend, "cpu")) return sscan ? "sscan_cpu" : "ssd_cpu";
    if (sscan) return bwd ? "sscan_bwd" : "sscan_fwd";
    return bwd ? "ssd_bwd" : "ssd_fwd";
}

/* Candidates of a precision class: fp32 admits ieee and 3xtf32, not plain tf32. */
static int precision_ok(const cg_tune_key *k, const cg_cfg *c) {
    const char *p = cg__cfg_str(c, "precision", NULL);
    if (!p || strcmp(k->precision, "fp32")) return 1;
    return strcmp(p, "tf32") != 0 && strcmp(p, "bf16") != 0 && strcmp(p, "fp16") != 0;
}

/* Parameters that trade memory for time (ssd_bwd's recompute: chunks per stored
 * state) stay at the default's choice, which follows a memory rule: a tuner that only
 * measures time would always buy speed with memory. */
static const char *const k_memory_keys[] = {"recompute"};

static int memory_ok(const cg_cfg *def, const cg_cfg *c) {
    for (size_t i = 0; i < sizeof k_memory_keys / sizeof k_memory_keys[0]; i++) {
        const char *d = cg__cfg_str(def, k_memory_keys[i], NULL), *v = cg__cfg_str(c, k_memory_keys[i], NULL);
        if (d && v && strcmp(d, v)) return 0;
    }
    return 1;
}

typedef struct tstate {
    const tenv *env;
    const cg_tune_opts *o;
    tui *ui;
    const char *dir;
    double deadline;          /* whole tune; 0: none */
    cg_tune_summary *sum;
} tstate;

static cg_status tune_key(tstate *ts, const cg_tune_shape *s, int bwd, int keys_left) {
    const tenv *env = ts->env;
    cg_context *ctx = env->ctx;
    const cg_tune_opts *o = ts->o;
    cg_tune_key key;
    cg_status st = cg__tune_key_make(ctx, env->backend, s, bwd, &key);
    if (st != CG_OK) return st;
    char brief[200];
    cg__tune_key_brief(&key, brief, sizeof brief);
    snprintf(ts->ui->what, sizeof ts->ui->what, "%s %s %s %s=%lld", env->backend, s->sscan ? "sscan" : "ssd",
             bwd ? "bwd" : "fwd", s->sscan ? "L" : "T", (long long)s->T);

    cg_tune_entry e;
    int resumed = 0;
    st = cg__tune_store_get(ctx, ts->dir, &key, &e);
    if (st == CG_OK) {
        if (e.complete && !e.truncated && !o->force) {
            ui_line(ts->ui, "tune: [%d/%d] %s (%s): already tuned, %s", ts->ui->ikey, ts->ui->nkeys, ts->ui->what,
                    s->name, e.best >= 0 && e.cand[e.best].cfg[0] ? e.cand[e.best].cfg : "(default)");
            cg__tune_entry_free(&e);
            ts->sum->cached++;
            return CG_OK;
        }
        if (o->force) {
            cg__tune_entry_free(&e);
            memset(&e, 0, sizeof e);
        } else {
            resumed = 1;
        }
    } else if (st == CG_EIO) {
        cg__tune_warn_once(ts->dir, ctx->errmsg);
        memset(&e, 0, sizeof e);
    } else {
        memset(&e, 0, sizeof e);
    }
    ctx->errmsg[0] = '\0';
    e.key = key;
    e.shape = *s;
    e.best = -1;
    e.complete = 0;
    e.truncated = 0;
    snprintf(e.kernel, sizeof e.kernel, "%s", space_kernel(env->backend, s->sscan, bwd));

    /* The space */
    cg_kshape ks;
    memset(&ks, 0, sizeof ks);
    ks.B = s->B, ks.G = s->G;
    if (s->sscan) {
        ks.L = s->T, ks.D = s->D, ks.N = s->N;
        ks.flags = CG_KS_H0 | CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS | (s->G > 1 ? CG_KS_GROUPED : 0);
    } else {
        ks.T = s->T, ks.H = s->H, ks.dk = s->dk, ks.dv = s->dv;
        ks.flags = CG_KS_H0;
    }
    ks.flags |= bwd ? (CG_KS_DHT | CG_KS_BWD) : CG_KS_HT;
    cg_devinfo dev;
    memset(&dev, 0, sizeof dev);
    cg_cfg *cfgs = NULL, def;
    int ncfg = 0;
    memset(&def, 0, sizeof def);
    if (!env->kx) {
        snprintf(dev.name, sizeof dev.name, "%s", key.device);
        dev.sm_count = key.threads;
        snprintf(dev.isa, sizeof dev.isa, "%s", cg__cpu_isa_ops()->name); /* the variant the candidates run */
        st = cg__tune_cpu_space(ctx, e.kernel, &ks, &dev, &cfgs, &ncfg, &def);
    } else {
        if ((st = env->kx->device(ctx, &dev)) == CG_OK) st = cg__gen_space(ctx, e.kernel, &ks, &dev, &cfgs, &ncfg);
        cg_plan plan;
        if (st == CG_OK) {
            if (cg__gen_plan(ctx, e.kernel, &ks, &dev, NULL, &plan) == CG_OK) {
                def = plan.params;
                cg__plan_free(&plan);
            }
            ctx->errmsg[0] = '\0';
        }
    }
    if (st == CG_ENOTFOUND && env->kx) { /* no generated kernel for this op (yet) */
        ui_line(ts->ui, "tune: [%d/%d] %s (%s): skipped: %s", ts->ui->ikey, ts->ui->nkeys, ts->ui->what, s->name,
                ctx->errmsg);
        ctx->errmsg[0] = '\0';
        ts->sum->unsupported++;
        cg__tune_entry_free(&e);
        return CG_OK;
    }
    if (st != CG_OK) {
        cg__tune_entry_free(&e);
        return st;
    }
    int m = 0;
    for (int i = 0; i < ncfg; i++)
        if (precision_ok(&key, &cfgs[i]) && memory_ok(&def, &cfgs[i])) cfgs[m++] = cfgs[i];
    ncfg = m;
    if (o->max_candidates > 0 && ncfg > o->max_candidates) ncfg = o->max_candidates;
    e.space_size = ncfg;

    /* Problems: verification (batch 1, short T, with the reference) and the full one. */
    int64_t maxc = 0;
    for (int i = 0; i < ncfg; i++) {
        int64_t c = cg__cfg_int(&cfgs[i], s->sscan ? "segment" : "chunk", 0);
        if (c > maxc) maxc = c;
    }
    int64_t vT = o->verify_T > 0 ? o->verify_T : (2 * maxc + 3 > 67 ? 2 * maxc + 3 : 67);
    if (vT > s->T) vT = s->T;
    e.verify_T = vT;
    tprob full, ver;
    double t_setup = now_s();
    if ((st = tprob_init(env, &ver, s, bwd, 1, vT, 1)) != CG_OK) {
        free(cfgs);
        cg__tune_entry_free(&e);
        return st;
    }
    /* A backend without a kernel for this op (yet) skips the key. */
    if (!env->vt->supports(ctx, s->sscan ? (bwd ? CG_OP_SSCAN_BWD : CG_OP_SSCAN_FWD) : (bwd ? CG_OP_SSD_BWD : CG_OP_SSD_FWD),
                           s->sscan ? (const void *)&ver.ss : (const void *)&ver.ssd)) {
        ui_line(ts->ui, "tune: [%d/%d] %s (%s): skipped: %s", ts->ui->ikey, ts->ui->nkeys, ts->ui->what, s->name,
                ctx->errmsg[0] ? ctx->errmsg : "the backend cannot run it");
        ctx->errmsg[0] = '\0';
        ts->sum->unsupported++;
        tprob_free(env, &ver);
        free(cfgs);
        cg__tune_entry_free(&e);
        return CG_OK;
    }
    if ((st = tprob_init(env, &full, s, bwd, s->B, s->T, 0)) != CG_OK) {
        tprob_free(env, &ver);
        free(cfgs);
        cg__tune_entry_free(&e);
        return st;
    }
    t_setup = now_s() - t_setup;

    ahead ah;
    memset(&ah, 0, sizeof ah);
    if (env->kx && ncfg > 0) {
        ah.kx = env->kx;
        ah.kernel = e.kernel;
        ah.shape = ks;
        ah.dev = dev;
        ah.cfgs = cfgs;
        ah.n = ncfg;
        snprintf(ah.cache_dir, sizeof ah.cache_dir, "%s", cg__cache_dir(ctx));
        ahead_start(&ah, o->jobs > 0 ? o->jobs : cg__online_cores());
    }

    /* Budget: this key's share of what is left. */
    double key_start = now_s(), key_deadline = 0;
    if (ts->deadline > 0) key_deadline = key_start + (ts->deadline - key_start) / (keys_left > 0 ? keys_left : 1);
    mparams mp;
    mp.min_time = o->min_time_s > 0 ? o->min_time_s : (env->kx && strcmp(env->backend, "emulate") ? 0.1 : 0.03);
    mp.min_reps = o->min_reps > 0 ? o->min_reps : 5;
    mp.max_reps = o->max_reps > 0 ? o->max_reps : 200;
    mp.timeout = 60;

    /* Slot 0 is the default config (empty: what an untuned call runs), the baseline of
     * `chunkgen show`'s speed-up; it comes first in the order, so it wins ties. Slots
     * 1..ncfg are the space's configs in its order. */
    cg_cfg none;
    memset(&none, 0, sizeof none);
    cfg_text(&def, e.default_cfg, sizeof e.default_cfg);
    int done = 0, rejected = 0, measured = 0;
    for (int j = 0; resumed && j <= ncfg; j++) {
        char t[CG_TUNE_CFG_TEXT] = "";
        if (j) cfg_text(&cfgs[j - 1], t, sizeof t);
        if (cg__tune_entry_find(&e, t)) done++;
    }
    if (resumed)
        ui_line(ts->ui, "tune: [%d/%d] %s (%s): resuming, %d of %d candidates done", ts->ui->ikey, ts->ui->nkeys,
                ts->ui->what, s->name, done, ncfg + 1);
    int truncated = 0, adopted = 0;
    for (int j = 0; j <= ncfg; j++) {
        const cg_cfg *cfg = j ? &cfgs[j - 1] : &none;
        char text[CG_TUNE_CFG_TEXT] = "";
        if (j) cfg_text(cfg, text, sizeof text);
        cg_tune_cand *have = cg__tune_entry_find(&e, text);
        if (have) {
            have->order = j; /* the space's order may have changed with the version */
            continue;
        }
        if (j && key_deadline > 0 && now_s() > key_deadline) {
            truncated = 1;
            break;
        }
        cg_tune_cand c;
        memset(&c, 0, sizeof c);
        snprintf(c.cfg, sizeof c.cfg, "%s", text);
        c.order = j;
        /* A candidate 20x slower than the best so far is not worth its time. */
        int b = cg__tune_select(e.cand, e.ncand, CG_TUNE_TIE_REL, NULL);
        mp.timeout = b >= 0 ? fmax(20e-3 * e.cand[b].median_ms, 0.5) : 60;
        c.verdict = verify(env, &ver, cfg, &c.err, c.detail, sizeof c.detail);
        if (c.verdict == CG_TV_OK) c.verdict = measure(env, &full, cfg, &mp, &c);
        ctx->errmsg[0] = '\0';
        if (c.verdict != CG_TV_OK) {
            rejected++;
            if (!j)
                ui_line(ts->ui, "tune: warning: %s: the default config is rejected (%s: %s)", brief,
                        cg__tune_verdict_name(c.verdict), c.detail);
        }
        measured++;
        if ((st = cg__tune_entry_add(&e, &c)) != CG_OK) break;
        done++;
        stamp(&e);
        /* Another process may have finished this key meanwhile: then adopt its entry
         * rather than overwrite it with an unfinished one. */
        cg_tune_entry other;
        if (cg__tune_store_get(ctx, ts->dir, &key, &other) == CG_OK) {
            int finished = other.complete && !other.truncated;
            cg__tune_entry_free(&other);
            if (finished) {
                adopted = 1;
                break;
            }
        }
        ctx->errmsg[0] = '\0';
        if ((st = cg__tune_store_put(ctx, ts->dir, &e)) != CG_OK) break;
        ui_bar(ts->ui, done, ncfg + 1, &e);
    }
    if (st == CG_OK && adopted) {
        if (ah.started) ahead_stop(&ah);
        tprob_free(env, &full);
        tprob_free(env, &ver);
        free(cfgs);
        cg__tune_entry_free(&e);
        ui_line(ts->ui, "tune: [%d/%d] %s (%s): finished by another process meanwhile", ts->ui->ikey, ts->ui->nkeys,
                ts->ui->what, s->name);
        ts->sum->cached++;
        return CG_OK;
    }
    /* Confirmation: the fastest few and the default again, interleaved, so that a change
     * in machine load during the sweep does not decide the winner. */
    if (st == CG_OK) {
        int top[CONFIRM_TOP + 1], nt = 0;
        cg_tune_cand *dc = cg__tune_entry_find(&e, "");
        if (dc && dc->verdict == CG_TV_OK) top[nt++] = (int)(dc - e.cand);
        for (int r = 0; r < CONFIRM_TOP; r++) {
            int b = -1;
            for (int i = 0; i < e.ncand; i++) {
                int used = 0;
                for (int t = 0; t < nt; t++) used |= top[t] == i;
                if (!used && e.cand[i].verdict == CG_TV_OK && (b < 0 || e.cand[i].median_ms < e.cand[b].median_ms)) b = i;
            }
            if (b >= 0) top[nt++] = b;
        }
        if (nt > 1) {
            mparams mc = mp;
            mc.min_time = 2 * mp.min_time;
            mc.timeout = 1e9;
            if ((st = confirm(env, &full, &e, top, nt, &mc)) != CG_OK) ctx->errmsg[0] = '\0';
            st = CG_OK; /* a failure keeps the sweep's timings */
        }
    }
    cg_tune_cand *dc = cg__tune_entry_find(&e, "");
    if (dc && dc->verdict == CG_TV_OK) {
        e.default_ms = dc->median_ms;
        e.default_iqr_ms = dc->iqr_ms;
    }
    if (ah.started) ahead_stop(&ah);
    tprob_free(env, &full);
    tprob_free(env, &ver);
    free(cfgs);
    if (st != CG_OK) {
        cg__tune_entry_free(&e);
        return st;
    }
    int ru = -1;
    e.best = cg__tune_select(e.cand, e.ncand, CG_TUNE_TIE_REL, &ru);
    e.complete = 1;
    e.truncated = truncated;
    stamp(&e);
    st = cg__tune_store_put(ctx, ts->dir, &e);
    ts->sum->candidates += measured;
    ts->sum->rejected += rejected;
    if (resumed) ts->sum->resumed++;
    if (st == CG_OK) {
        ts->sum->tuned++;
        char speed[64] = "";
        if (e.best >= 0 && e.default_ms > 0)
            snprintf(speed, sizeof speed, ", default %.3f ms: %.2fx", e.default_ms, e.default_ms / e.cand[e.best].median_ms);
        if (e.best >= 0)
            ui_line(ts->ui, "tune: [%d/%d] %s (%s): %d candidates, %d rejected%s; best %s %.3f ms%s%s", ts->ui->ikey,
                    ts->ui->nkeys, ts->ui->what, s->name, e.ncand, rejected, truncated ? " (budget: truncated)" : "",
                    e.cand[e.best].cfg[0] ? e.cand[e.best].cfg : "(default)", e.cand[e.best].median_ms, speed,
                    t_setup > 5 ? " [slow reference setup]" : "");
        else
            ui_line(ts->ui, "tune: [%d/%d] %s (%s): no candidate passed (%d rejected); the default config stays",
                    ts->ui->ikey, ts->ui->nkeys, ts->ui->what, s->name, rejected);
    }
    cg__tune_entry_free(&e);
    return st;
}

/* ------------------------------------------------------------------- run */

cg_status cg__tune_run(cg_context *ctx, const char *backend, const cg_tune_shape *shapes, int nshapes,
                       const cg_tune_opts *o, cg_tune_summary *sum) {
    memset(sum, 0, sizeof *sum);
    tenv env;
    memset(&env, 0, sizeof env);
    env.ctx = ctx;
    env.backend = backend;
    if (!strcmp(backend, "cpu")) {
        env.vt = &cg__backend_cpu;
    } else if (!strcmp(backend, "cuda")) {
        env.vt = &cg__backend_cuda;
        env.kx = &cg__kexec_cuda;
    } else if (!strcmp(backend, "emulate")) {
        env.vt = &cg__backend_emulate;
        env.kx = &cg__kexec_emu;
    } else {
        return cg__err(ctx, CG_EINVAL, "tune: backend \"%s\": expected cpu, cuda or emulate", backend);
    }
    if (!env.vt || (strcmp(backend, "cpu") && !env.kx))
        return cg__err(ctx, CG_EUNSUPPORTED, "tune: backend %s is not built into this library", backend);
    if (env.kx) {
        cg_devinfo dev;
        cg_status st = env.kx->device(ctx, &dev);
        if (st != CG_OK) return st;
    }
    tui ui;
    memset(&ui, 0, sizeof ui);
    ui.f = o->out ? o->out : stderr;
    ui.mode = o->progress;
    tstate ts = {.env = &env, .o = o, .ui = &ui, .dir = cg__tune_store_dir(ctx), .sum = sum};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ts.dir);
    ts.dir = dir;
    if (cg__tune_mkdirs(dir) != 0)
        return cg__err(ctx, CG_EIO, "tune: cannot create the config store %s", dir);
    double t0 = now_s();
    if (o->budget_s > 0) ts.deadline = t0 + o->budget_s;
    for (int i = 0; i < nshapes; i++)
        for (int d = 0; d < 2; d++)
            if ((o->dir_mask >> d & 1) && (o->op_mask >> shapes[i].sscan & 1)) sum->keys++;
    cg_status first_err = CG_OK;
    char first_msg[CG_ERRMSG_CAP] = "";
    int k = 0;
    for (int i = 0; i < nshapes; i++) {
        for (int d = 0; d < 2; d++) {
            if (!(o->dir_mask >> d & 1) || !(o->op_mask >> shapes[i].sscan & 1)) continue;
            k++;
            ui.ikey = k;
            ui.nkeys = sum->keys;
            if (ts.deadline > 0 && now_s() >= ts.deadline) {
                sum->skipped_budget++;
                continue;
            }
            cg_status st = tune_key(&ts, &shapes[i], d, sum->keys - k + 1);
            if (st != CG_OK) {
                sum->failed++;
                ui_line(&ui, "tune: [%d/%d] %s %s %s: failed: %s", k, sum->keys, backend, shapes[i].name,
                        d ? "bwd" : "fwd", ctx->errmsg);
                if (first_err == CG_OK) {
                    first_err = st;
                    snprintf(first_msg, sizeof first_msg, "%s", ctx->errmsg);
                }
                if (st == CG_EIO || st == CG_ENODEV) break; /* the store or the device is gone */
            }
        }
    }
    sum->seconds = now_s() - t0;
    if (sum->skipped_budget)
        ui_line(&ui, "tune: the budget ran out: %d key(s) not tuned; rerun to continue", sum->skipped_budget);
    if (first_err != CG_OK) return cg__err(ctx, first_err, "%s", first_msg);
    return CG_OK;
}
