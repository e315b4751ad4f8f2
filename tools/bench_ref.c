/* bench_ref.c -- the float64 reference of a cell: the sequential scan (ref backend) on
 * batch element 0 and at most --ref-seq tokens, one call per slice of the op's divisible
 * symbol (heads, channels) on all threads; and the relative error of an impl's outputs
 * against it. */
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cut shape of t: batch 1, cut_t tokens. */
static void cut_shape(const cell *c, const btensor *t, int64_t *rn) {
    for (int i = 0; i < 4; i++) rn[i] = t->n[i];
    if (t->has_b) rn[0] = 1;
    if (t->has_t) rn[1] = c->cut_t;
}

static int64_t prod4(const int64_t *n) { return n[0] * n[1] * n[2] * n[3]; }

/* Contiguous float64 copy of the cut of a float32 tensor (logical order). */
static double *copy_cut_f64(const cell *c, const btensor *t) {
    int64_t rn[4];
    cut_shape(c, t, rn);
    double *d = malloc((size_t)prod4(rn) * sizeof(double));
    if (!d) return NULL;
    int64_t k = 0;
    for (int64_t a = 0; a < rn[0]; a++)
        for (int64_t b = 0; b < rn[1]; b++)
            for (int64_t e = 0; e < rn[2]; e++)
                for (int64_t f = 0; f < rn[3]; f++)
                    d[k++] = t->h[a * t->s[0] + b * t->s[1] + e * t->s[2] + f * t->s[3]];
    return d;
}

static cg_tensor f64_view(double *p, int nd, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t s0, int64_t s1,
                          int64_t s2, int64_t s3) {
    cg_tensor x;
    memset(&x, 0, sizeof x);
    x.data = p;
    x.dtype = CG_F64;
    x.ndim = nd;
    int64_t n[4] = {n0, n1, n2, n3}, s[4] = {s0, s1, s2, s3};
    for (int i = 0; i < nd; i++) x.shape[i] = n[i], x.stride[i] = s[i];
    return x;
}

/* One slice of a cut: the op's divisible symbol (SSD's H, the selective scan's D) fixed at
 * h and its divisor (G) at g = h / (divisible / divisor), each of extent 1. An output
 * without the divisible symbol (SSD's dq, dk; the ungrouped scan's dB, dC: the sum over
 * the group's slices is taken afterwards) goes to its per-slice partial part[i] + h x
 * (the slice's elements). */
typedef struct ref_slice {
    int64_t g, h;
    double *const *part;
} ref_slice;

/* The float64 args of the cell's forward (bwd 0) or backward op over the cut (sl: one
 * slice of it; NULL: all), token-major: inputs from in[], outputs into their references;
 * every scalar flag on (bench_cell_args). */
static void ref_args(const cell *c, int bwd, double *const *in, const ref_slice *sl, void *args) {
    const bop *d = bench_cell_op(c, bwd);
    memset(args, 0, d->o.in.args_size);
    cg_layout *layout = cg_op_args_layout(d->o.op, args);
    if (layout) *layout = CG_LAYOUT_TOKEN_MAJOR;
    for (int i = 0; i < d->o.in.ntensors; i++) {
        const int j = c->map[bwd][i];
        const btensor *t = &c->t[j];
        if (!t->used) continue;
        int64_t rn[4], st[4] = {0, 0, 0, 0}, e = 1, off = 0;
        cut_shape(c, t, rn);
        const int nd = d->nd[i];
        for (int k = nd - 1; k >= 0; k--) st[k] = e, e *= rn[k];
        for (int k = 0; sl && k < nd; k++) {
            const cg_sym sym = d->dims[i][k];
            if (sym != d->o.in.divisor && sym != d->o.in.divisible) continue;
            off += (sym == d->o.in.divisor ? sl->g : sl->h) * st[k];
            rn[k] = 1;
        }
        double *base = t->out ? t->ref : in[j];
        if (t->out && sl && sl->part[j]) { /* contiguous per-slice partial of the slice's shape */
            e = 1;
            for (int k = nd - 1; k >= 0; k--) st[k] = e, e *= rn[k];
            base = sl->part[j] + sl->h * e, off = 0;
        }
        *cg_op_args_tensor(d->o.op, args, i) =
            f64_view(base + off, nd, rn[0], rn[1], rn[2], rn[3], st[0], st[1], st[2], st[3]);
    }
    for (int k = 0; k < d->o.in.nscalars; k++) *cg_op_args_scalar(d->o.op, args, k) = 1;
}

/* The op's calls (forward, and backward for fwd_bwd) on one slice. */
static cg_status ref_calls(cg_context *ctx, const cell *c, double *const *in, const ref_slice *sl) {
    cg_exec ex = {.backend = CG_BACKEND_REF};
    cli_args args;
    cg_status s = CG_OK;
    for (int bwd = 0; bwd <= c->bwd && s == CG_OK; bwd++) {
        ref_args(c, bwd, in, sl, &args);
        s = cg_run(ctx, bench_cell_op(c, bwd)->o.op, &args, &ex);
    }
    return s;
}

typedef struct ref_job {
    cell *c;
    cg_sym sym;          /* the sliced symbol (the op's divisible one) */
    int64_t n, groups;   /* its extent; the divisor's (1 when the call is ungrouped) */
    double *in[MAX_T];   /* float64 cut copies of the inputs */
    double *part[MAX_T]; /* outputs without sym: per-slice partials [n][slice elements] */
    cg_context *ctx[64]; /* one per worker thread */
    atomic_long next;    /* the next head to run */
    atomic_int failed;
    char err[512];
    pthread_mutex_t mu;
} ref_job;

/* Slice h of the cut on worker tid's context. */
static void ref_slice_run(ref_job *j, int64_t h, int tid) {
    if (atomic_load(&j->failed)) return;
    const ref_slice sl = {h / (j->n / j->groups), h, j->part};
    cg_status s = ref_calls(j->ctx[tid], j->c, j->in, &sl);
    if (s != CG_OK) {
        pthread_mutex_lock(&j->mu);
        if (!atomic_load(&j->failed))
            snprintf(j->err, sizeof j->err, "reference failed on slice %s=%lld: %s: %s", cg_sym_name(j->sym),
                     (long long)h, cg_status_str(s), cg_errmsg(j->ctx[tid]));
        atomic_store(&j->failed, 1);
        pthread_mutex_unlock(&j->mu);
    }
}

typedef struct ref_worker {
    ref_job *j;
    int tid;
} ref_worker;

/* Worker tid: the next head not taken yet, until none is left. */
static void *ref_worker_main(void *arg) {
    const ref_worker *w = arg;
    for (int64_t h; (h = atomic_fetch_add(&w->j->next, 1)) < w->j->n;) ref_slice_run(w->j, h, w->tid);
    return NULL;
}

/* Every slice of the cut on nt workers (the caller's thread is worker 0); returns the
 * number of workers that ran (a thread that cannot start leaves its heads to the others). */
static int ref_workers(ref_job *j, int nt) {
    pthread_t th[64];
    ref_worker w[64];
    int started = 1;
    atomic_store(&j->next, 0);
    for (int i = 1; i < nt; i++) {
        w[started] = (ref_worker){j, started};
        if (pthread_create(&th[started], NULL, ref_worker_main, &w[started]) == 0) started++;
    }
    w[0] = (ref_worker){j, 0};
    ref_worker_main(&w[0]);
    for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
    return started;
}

/* The cut of every used tensor of c: a float64 copy of each input into in[i], a zeroed
 * float64 buffer for each output's reference (t->ref, shape t->rn). 0, or -1 when out of
 * memory (what was allocated stays for the caller to free). */
static int cut_buffers(cell *c, double **in) {
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used) continue;
        if (!t->out) {
            if (!(in[i] = copy_cut_f64(c, t))) return -1;
            continue;
        }
        cut_shape(c, t, t->rn);
        if (!(t->ref = calloc((size_t)prod4(t->rn), sizeof(double)))) return -1;
    }
    return 0;
}

static int ref_oom(cell *c) {
    snprintf(c->ref_err, sizeof c->ref_err, "out of host memory for the float64 reference");
    return -1;
}

/* Elements of output x's slice (the divisor's and sym's extents 1) and the position of the
 * divisor (G) in its dims (-1: none). */
static int64_t slice_elems(const cell *c, const bop *d, int i, int x, int *gpos) {
    int64_t e = 1;
    *gpos = -1;
    for (int k = 0; k < d->nd[i]; k++)
        if (d->dims[i][k] == d->o.in.divisor) *gpos = k;
        else if (d->dims[i][k] != d->o.in.divisible) e *= c->t[x].rn[k];
    return e;
}

int bench_reference(cell *c, int threads) {
    const bop *d0 = bench_cell_op(c, 0);
    ref_job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.sym = d0->o.in.divisible;
    j.n = c->dims[j.sym];
    j.groups = c->dims[d0->o.in.divisor] > 0 ? c->dims[d0->o.in.divisor] : 1;
    pthread_mutex_init(&j.mu, NULL);
    int rc = -1;
    if (cut_buffers(c, j.in)) goto oom;
    int gpos[MAX_T]; /* the divisor's position in each output with a partial, else -1 */
    for (int bwd = 0; bwd <= c->bwd; bwd++) {
        const bop *d = bench_cell_op(c, bwd);
        for (int i = 0; i < d->o.in.ntensors; i++) {
            const int x = c->map[bwd][i];
            int has = 0;
            for (int k = 0; k < d->nd[i]; k++) has |= d->dims[i][k] == j.sym;
            if (!c->t[x].used || !c->t[x].out || has || j.part[x]) continue;
            const int64_t e = slice_elems(c, d, i, x, &gpos[x]);
            if (!(j.part[x] = calloc((size_t)(e * j.n), sizeof(double)))) goto oom;
        }
    }
    {
        int nt = threads < j.n ? threads : (int)j.n;
        if (nt < 1) nt = 1;
        if (nt > 64) nt = 64;
        for (int i = 0; i < nt; i++)
            if (cg_context_create(&j.ctx[i]) != CG_OK) atomic_store(&j.failed, 1);
        double t0 = bench_now_s();
        if (!atomic_load(&j.failed)) nt = ref_workers(&j, nt);
        double wall = bench_now_s() - t0;
        c->ref_s_per_bt = wall * nt / (double)c->cut_t; /* the work is linear in batch x tokens */
        for (int i = 0; i < 64; i++) cg_context_free(j.ctx[i]);
    }
    if (atomic_load(&j.failed)) {
        snprintf(c->ref_err, sizeof c->ref_err, "%s", j.err[0] ? j.err : "reference failed (context creation)");
        goto out;
    }
    /* an output with partials (dq, dk of a group; dB, dC): the sum over the group's slices
     * in order, in float64 */
    const int64_t per = j.n / j.groups;
    for (int x = 0; x < c->nt; x++) {
        if (!j.part[x]) continue;
        int64_t outer = 1, inner = 1, G = gpos[x] >= 0 ? j.groups : 1;
        for (int k = 0; k < c->t[x].nd; k++)
            if (k < gpos[x]) outer *= c->t[x].rn[k];
            else if (k > gpos[x]) inner *= c->t[x].rn[k];
        double *ref = c->t[x].ref;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t g = 0; g < G; g++)
                for (int64_t i = 0; i < inner; i++) {
                    double sum = 0;
                    for (int64_t h = g * per; h < (g + 1) * per; h++) sum += j.part[x][(h * outer + o) * inner + i];
                    ref[(o * G + g) * inner + i] = sum;
                }
    }
    c->have_ref = 1;
    rc = 0;
    goto out;
oom:
    ref_oom(c);
out:
    for (int i = 0; i < MAX_T; i++) free(j.in[i]), free(j.part[i]);
    pthread_mutex_destroy(&j.mu);
    return rc;
}

/* max |a - ref| / max |ref| over the cut of t (a read from host memory with t's strides).
 * NaN when a holds a NaN. ref max 0: the absolute error. */
double bench_rel_err_cut(const btensor *t) {
    const int64_t *rn = t->rn;
    double emax = 0, rmax = 0;
    int nan = 0;
    int64_t k = 0;
    for (int64_t a = 0; a < rn[0]; a++)
        for (int64_t b = 0; b < rn[1]; b++)
            for (int64_t e = 0; e < rn[2]; e++)
                for (int64_t f = 0; f < rn[3]; f++) {
                    double x = bench_tval(t, a * t->s[0] + b * t->s[1] + e * t->s[2] + f * t->s[3]), r = t->ref[k++];
                    double d = fabs(x - r);
                    if (d != d) nan = 1;
                    if (d > emax) emax = d;
                    if (fabs(r) > rmax) rmax = fabs(r);
                }
    if (nan) return NAN;
    return rmax > 0 ? emax / rmax : emax;
}
