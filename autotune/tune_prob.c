/* tune_prob.c -- the tuner's problems: built from the op table (runtime/ops.h), run on
 * the backend under test, verified against the float64 reference, timed. */
#include "tune_prob.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double cg__tune_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- problems
 * A problem holds every tensor of its op (ops.h), contiguous, in the caller's
 * token-major order, with the values' ranges and the outputs' accuracy targets from the
 * op table. Every option is on (h0, dhT, D, z, delta_bias, delta_softplus). */

int64_t cg__tprob_mix(int64_t T, int64_t maxlen, int64_t *cu) {
    const int64_t m = maxlen < T ? maxlen : T;
    int64_t n = 0, at = 0;
    if (cu) cu[0] = 0;
    while (at < T) {
        at += m < T - at ? m : T - at;
        if (cu) cu[n + 1] = at;
        n++;
    }
    return n ? n : 1; /* T = 0 cannot happen (shapes have T >= 1) */
}

/* The op's tensors at batch B and length T (nseq > 0: the states per sequence). */
static int spec_of(const cg_op_desc *d, const cg_tune_shape *s, int64_t B, int64_t T, int64_t nseq, tspec *t) {
    int64_t dims[CG_SYM_COUNT] = {0};
    for (int i = 1; i < CG_SYM_COUNT; i++) /* the op's symbols; B and the sequence as asked */
        if (d->dim_off[i] != (size_t)-1) dims[i] = cg__tune_shape_dim(s, (cg_sym)i);
    dims[CG_SYM_NONE] = 1;
    dims[CG_SYM_B] = B;
    dims[d->seq] = T;
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *td = &d->t[i];
        memset(&t[i], 0, sizeof t[i]);
        t[i].name = td->name;
        t[i].ndim = cg__op_given_shape(d, i, dims, s->shape.dim[CG_SYM_G] > 1, 0, t[i].shape);
        if (nseq && (td->flags & CG_TD_PERSEQ)) t[i].shape[0] = nseq;
        t[i].lo = td->lo, t[i].hi = td->hi;
        t[i].role = td->role;
        t[i].tol = cg__tol(td->tol);
    }
    return d->nt;
}

static int64_t numel(const tspec *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Build the validated problem over data[] (each tensor's dtype dt[i]; NULL: all CG_F64). */
static cg_status tprob_bind(cg_context *ctx, tprob *p, void **data, const int *dt, cg_prob_any *prob) {
    const cg_op_desc *d = cg__op_desc(p->op);
    cg_args_any a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < p->nt; i++)
        if (p->used[i])
            *cg__args_tensor(d, &a, i) =
                cg_tensor_contiguous(data[i], dt ? (cg_dtype)dt[i] : CG_F64, p->spec[i].ndim, p->spec[i].shape);
    for (int k = 0; k < d->nscalar; k++) *(int *)((char *)&a + d->scalar[k].arg_off) = 1;
    if (p->cu)
        *(cg_tensor *)((char *)&a + d->varlen->arg_off) =
            cg_tensor_contiguous(p->cu, CG_I64, 1, (int64_t[]){p->nseq + 1});
    return cg__op_validate(ctx, d, &a, prob);
}

void cg__tprob_free(const tenv *env, tprob *p) {
    for (int i = 0; i < p->nt; i++) {
        if (env->kx && p->mem[i] && p->mem[i] != p->host[i]) env->kx->free(env->ctx, p->mem[i]);
        free(p->host[i]);
        free(p->stage[i]);
        free(p->ref[i]);
    }
    free(p->cu);
    memset(p, 0, sizeof *p);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* x as stored in dt (rounded once, to nearest even, for the 16-bit dtypes). */
static float stored(cg_dtype dt, float x) {
    return dt == CG_BF16 ? cg__bf16_to_f32(cg__f32_to_bf16(x)) : dt == CG_F16 ? cg__f16_to_f32(cg__f32_to_f16(x)) : x;
}

/* Bytes of tensor i in its storage dtype. */
static size_t tbytes(const tprob *p, int i) {
    return (size_t)(p->count[i] ? p->count[i] : 1) * cg__dtype_size((cg_dtype)p->dt[i]);
}

/* host[i] in tensor i's storage form: host[i] itself, or (16-bit) stage[i] refreshed. */
static void *packed(tprob *p, int i) {
    if (!p->stage[i]) return p->host[i];
    uint16_t *h = p->stage[i];
    for (int64_t j = 0; j < p->count[i]; j++)
        h[j] = p->dt[i] == CG_BF16 ? cg__f32_to_bf16(p->host[i][j]) : cg__f32_to_f16(p->host[i][j]);
    return h;
}

/* Where tensor i's bytes come back to (before unpack). */
static void *landing(tprob *p, int i) { return p->stage[i] ? p->stage[i] : (void *)p->host[i]; }

/* stage[i] (16-bit) widened into host[i]. */
static void unpack(tprob *p, int i) {
    if (!p->stage[i]) return;
    const uint16_t *h = p->stage[i];
    for (int64_t j = 0; j < p->count[i]; j++)
        p->host[i][j] = p->dt[i] == CG_BF16 ? cg__bf16_to_f32(h[j]) : cg__f16_to_f32(h[j]);
}

/* Allocate and fill a problem of shape s with batch B and length T. with_ref: also the
 * float64 copies and the reference outputs. */
cg_status cg__tprob_init(const tenv *env, tprob *p, const cg_tune_shape *s, int bwd, int64_t B, int64_t T,
                         int with_ref) {
    cg_context *ctx = env->ctx;
    memset(p, 0, sizeof *p);
    p->bwd = bwd;
    p->op = cg__tune_op(s, bwd)->op;
    const cg_op_desc *d = cg__op_desc(p->op);
    const int64_t longest = s->shape.longest;
    if (longest > 0) { /* the varlen class: B = 1, the length mix packed along T */
        T *= B;
        B = 1;
        /* the (short) verification problem still holds several sequences */
        const int64_t m = with_ref && longest > (T + 2) / 3 ? (T + 2) / 3 : longest;
        p->nseq = cg__tprob_mix(T, m, NULL);
        if (!(p->cu = malloc((size_t)(p->nseq + 1) * sizeof *p->cu)))
            return cg__err(ctx, CG_ENOMEM, "tune: out of memory for cu_seqlens");
        cg__tprob_mix(T, m, p->cu);
    }
    p->nt = spec_of(d, s, B, T, p->nseq, p->spec);
    char sig[32];
    cg__tune_shape_sig(s, sig, sizeof sig);
    cg_status st = cg__op_dtype_unsig(ctx, d, sig, p->dt);
    if (st != CG_OK) {
        free(p->cu);
        p->cu = NULL;
        return st;
    }
    uint64_t seed = 0x5eed ^ (uint64_t)T * 31 ^ (uint64_t)B;
    for (int i = 0; i < p->nt; i++) {
        tspec *t = &p->spec[i];
        const cg_dtype dt = (cg_dtype)p->dt[i];
        t->tol = cg__tol_dtype(d->t[i].tol, dt); /* a 16-bit output: its dtype's target */
        p->used[i] = 1;
        int64_t n = numel(t);
        p->count[i] = n;
        p->host[i] = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (cg__dtype_half(dt)) p->stage[i] = malloc(tbytes(p, i));
        if (!p->host[i] || (cg__dtype_half(dt) && !p->stage[i])) {
            st = cg__err(ctx, CG_ENOMEM, "tune: out of memory for %s (%lld floats)", t->name, (long long)n);
            goto fail;
        }
        for (int64_t j = 0; j < n; j++)
            p->host[i][j] = t->role == CG_TD_IN
                                ? stored(dt, (float)(t->lo + (t->hi - t->lo) * (double)(rng_next(&seed) >> 11) *
                                                                 (1.0 / 9007199254740992.0)))
                                : 0.0f;
        if (with_ref) {
            p->ref[i] = malloc((size_t)(n ? n : 1) * sizeof(double));
            if (!p->ref[i]) {
                st = cg__err(ctx, CG_ENOMEM, "tune: out of memory for the reference %s", t->name);
                goto fail;
            }
            for (int64_t j = 0; j < n; j++) p->ref[i][j] = (double)p->host[i][j];
        }
        void *src = packed(p, i);
        if (env->kx) {
            size_t bytes = tbytes(p, i);
            if ((st = env->kx->alloc(ctx, bytes, &p->mem[i])) != CG_OK) goto fail;
            if (t->role == CG_TD_IN && (st = env->kx->copy(ctx, p->mem[i], src, bytes, 0, NULL)) != CG_OK) goto fail;
        } else {
            p->mem[i] = src;
        }
    }
    if (with_ref) {
        cg_prob_any rp;
        if ((st = tprob_bind(ctx, p, (void **)p->ref, NULL, &rp)) != CG_OK) goto fail;
        cg_cfg none;
        memset(&none, 0, sizeof none);
        cg_exec ex;
        memset(&ex, 0, sizeof ex);
        ex.backend = CG_BACKEND_REF;
        st = cg__backend_run(ctx, &cg__backend_ref, p->op, &rp, &none, &ex);
        if (st != CG_OK) goto fail;
    }
    if ((st = tprob_bind(ctx, p, p->mem, p->dt, &p->prob)) != CG_OK) goto fail;
    return CG_OK;
fail:
    cg__tprob_free(env, p);
    return st;
}

/* Fill the outputs with NaN so that an output a candidate does not write fails. */
static cg_status poison_outputs(const tenv *env, tprob *p) {
    for (int i = 0; i < p->nt; i++) {
        if (!p->used[i] || p->spec[i].role != CG_TD_OUT) continue;
        for (int64_t j = 0; j < p->count[i]; j++) p->host[i][j] = NAN;
        void *src = packed(p, i);
        if (env->kx) {
            cg_status st = env->kx->copy(env->ctx, p->mem[i], src, tbytes(p, i), 0, NULL);
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
    return cg__backend_run(env->ctx, vt, p->op, &p->prob, cfg, &ex);
}

static cg_status run_once(const tenv *env, tprob *p, const cg_cfg *cfg) {
    cg_status st = run_launch(env, p, cfg);
    if (st == CG_OK && env->kx && env->kx->sync) st = env->kx->sync(env->ctx, NULL);
    return st;
}

/* One timed repetition, in seconds. On a kernel executor: L2 flushed (outside the timed
 * region), then the executor's timer (CUDA events) around the launches. On the CPU: the
 * monotonic clock around the call. */
cg_status cg__tprob_run_timed(const tenv *env, tprob *p, const cg_cfg *cfg, double *sec) {
    const cg_kexec *kx = env->kx;
    if (!kx || !kx->timer_start || !kx->timer_stop || !kx->flush_l2) {
        double a = cg__tune_now_s();
        cg_status st = run_once(env, p, cfg);
        *sec = cg__tune_now_s() - a;
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
    case CG_ECOMPILE:
    case CG_ELUA: return CG_TV_COMPILE;
    case CG_ENOMEM:
    case CG_EUNSUPPORTED:
    case CG_EINVAL: return CG_TV_RESOURCES;
    default: return CG_TV_LAUNCH;
    }
}

/* Run cfg on the verification problem and compare every output with the reference. */
cg_tune_verdict cg__tprob_verify(const tenv *env, tprob *v, const cg_cfg *cfg, double *worst, char *detail,
                                 size_t cap) {
    *worst = 0;
    cg_status st = poison_outputs(env, v);
    if (st == CG_OK) st = run_once(env, v, cfg);
    if (st != CG_OK) {
        snprintf(detail, cap, "%s: %.140s", cg_status_str(st), env->ctx->errmsg);
        return verdict_of(st);
    }
    cg_tune_verdict out = CG_TV_OK;
    for (int i = 0; i < v->nt; i++) {
        if (!v->used[i] || v->spec[i].role != CG_TD_OUT) continue;
        if (env->kx && (st = env->kx->copy(env->ctx, landing(v, i), v->mem[i], tbytes(v, i), 1, NULL)) != CG_OK) {
            snprintf(detail, cap, "copying %s back: %.120s", v->spec[i].name, env->ctx->errmsg);
            return CG_TV_LAUNCH;
        }
        unpack(v, i);
        cg_erracc acc = {0};
        for (int64_t j = 0; j < v->count[i]; j++) cg__erracc_add(&acc, (double)v->host[i][j], v->ref[i][j]);
        double err = cg__erracc_value(&acc);
        if (err > *worst) *worst = err;
        if (!(err <= v->spec[i].tol) && out == CG_TV_OK) {
            snprintf(detail, cap, "%s: rel err %.3g > %.0e", v->spec[i].name, err, v->spec[i].tol);
            out = CG_TV_WRONG;
        }
    }
    return out;
}

int cg__tune_cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double cg__tune_quantile(const double *sorted, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

/* Time cfg on the full problem. */
cg_tune_verdict cg__tprob_measure(const tenv *env, tprob *p, const cg_cfg *cfg, const mparams *mp, cg_tune_cand *c) {
    double t0 = cg__tune_now_s();
    cg_status st = run_once(env, p, cfg); /* warm-up: loads, first-touch, caches */
    double warm = cg__tune_now_s() - t0;
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
        st = cg__tprob_run_timed(env, p, cfg, &dt);
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
    qsort(t, (size_t)n, sizeof *t, cg__tune_cmp_dbl);
    c->median_ms = 1e3 * cg__tune_quantile(t, n, 0.5);
    c->iqr_ms = 1e3 * (cg__tune_quantile(t, n, 0.75) - cg__tune_quantile(t, n, 0.25));
    c->reps = n;
    free(t);
    if (!(c->median_ms > 0)) c->median_ms = 1e-6; /* below the clock's resolution */
    return CG_TV_OK;
}
