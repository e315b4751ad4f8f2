/* bench_cell.c -- one cell of the benchmark matrix: its tensors (shapes, strides for the
 * layout, deterministic inputs), the API argument structs over host or device memory, and
 * the device copies. */
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int64_t k_seed_seqs[3] = {512, 2048, 8192};

void bench_die(const char *file, int line, const char *what) {
    fprintf(stderr, "chunkgen bench: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

/* Every op's public description, read once (before any thread of the reference runs). */
#define BENCH_MAX_OPS 32
static bop k_ops[BENCH_MAX_OPS];
static int k_nops;
static pthread_once_t k_ops_once = PTHREAD_ONCE_INIT;

static void ops_load(void) {
    k_nops = cg_op_count();
    BENCH_CHECK(k_nops > 0 && k_nops <= BENCH_MAX_OPS);
    for (int o = 0; o < k_nops; o++) {
        bop *d = &k_ops[o];
        BENCH_CHECK(cli_op_load((cg_op)o, &d->o) == 0 && d->o.in.ntensors <= MAX_T);
        for (int i = 0; i < d->o.in.ntensors; i++)
            d->nd[i] = cg_op_tensor_dims(d->o.op, i, CG_LAYOUT_TOKEN_MAJOR, 0, d->dims[i]);
    }
}

/* The op of family fam, forward (bwd 0) or backward. */
static const bop *op_of(const char *fam, int bwd) {
    pthread_once(&k_ops_once, ops_load);
    for (int o = 0; o < k_nops; o++)
        if (!strcmp(k_ops[o].o.in.family, fam) && k_ops[o].o.in.bwd == bwd) return &k_ops[o];
    bench_die(__FILE__, __LINE__, "no such op");
}

const bop *bench_cell_op(const cell *c, int bwd) { return op_of(c->cfg->family, bwd); }

cg_status bench_cell_shape(const cell *c, int bwd, cg_context *ctx, cg_shape *s) {
    const bop *d = bench_cell_op(c, bwd);
    char text[CG_SHAPE_TEXT_MAX];
    size_t n = (size_t)snprintf(text, sizeof text, "%s:", d->o.in.name);
    for (int k = 0; k < d->o.in.nsyms && n < sizeof text; k++)
        if (c->dims[d->o.in.syms[k]] > 0)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s=%lld", text[n - 1] == ':' ? "" : ",",
                                  cg_sym_name(d->o.in.syms[k]), (long long)c->dims[d->o.in.syms[k]]);
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    return cg_shape_parse(ctx, text, s);
}

/* The seeds' input distributions where they differ from the op table's range of generated
 * data (cg_tensor_info lo, hi), by tensor name, kept so that results stay comparable with
 * bench/results; ramp: -(i + 1) along the last extent. docs/bench.md and the config
 * block's "inputs" (bench_json.c) say the same. */
static const struct {
    const char *name;
    double lo, hi;
    int ramp;
} k_seed_ranges[] = {
    {"log_alpha", -0.5, -0.001, 0}, {"delta", -4, -1, 0}, {"delta_bias", -0.5, 0.5, 0}, {"A", 0, 0, 1}};

/* Which optional tensors a cell gives (the config block's "inputs"): the initial state
 * when the shape says so (bconfig.states); the other optional inputs of the forward (sscan
 * D, z, delta_bias) always; no optional input of the backward alone (dhT); every optional
 * output whose input is given (hT; dh0 when h0 is, dD when D is ...). */
static int cell_uses(const cell *c, int bwd, const cg_tensor_info *td) {
    if (bwd && !c->bwd) return 0;
    if (!td->optional) return 1;
    const bop *d = bench_cell_op(c, bwd);
    if (!td->output) {
        if (bwd) return 0;
        int state = td->ext[0] == CG_SYM_B && td->ext[1] != d->o.in.seq;
        return !state || c->cfg->states;
    }
    const char *in = td->requires ? td->requires : td->grad_of;
    if (!in) return 1;
    int j = cli_op_tensor(&d->o, in);
    return j >= 0 && c->t[c->map[bwd][j]].used;
}

/* Tensor i of the op as a cell tensor (logical dims: SSD token-major, sscan B, C
 * ungrouped); its name the one of `chunkgen run` (a gradient: its input's name). */
static void tdef(cell *c, btensor *t, int bwd, int i, const int64_t dims[CG_SHAPE_MAX_SYMS]) {
    const bop *d = bench_cell_op(c, bwd);
    const cg_tensor_info *td = &d->o.t[i];
    memset(t, 0, sizeof *t);
    t->name = td->grad_of ? td->grad_of : td->file ? td->file : td->name;
    t->used = cell_uses(c, bwd, td);
    t->nd = d->nd[i];
    for (int k = 0; k < 4; k++) t->n[k] = k < t->nd ? dims[d->dims[i][k]] : 1;
    t->has_b = td->ext[0] == CG_SYM_B;
    t->has_t = td->ext[1] == d->o.in.seq;
    t->out = td->output;
    t->grad = td->grad_of != NULL;
    t->head_perm = c->layout == CG_LAYOUT_HEAD_MAJOR && (td->flags & CG_TENSOR_LAYOUT);
    t->dt = (td->flags & CG_TENSOR_HALF) ? c->dtype : CG_F32;
    t->lo = td->lo, t->hi = td->hi;
    for (size_t k = 0; k < sizeof k_seed_ranges / sizeof *k_seed_ranges; k++)
        if (!strcmp(td->name, k_seed_ranges[k].name))
            t->lo = k_seed_ranges[k].lo, t->hi = k_seed_ranges[k].hi, t->ramp = k_seed_ranges[k].ramp;
}

/* Strides for a memory order: perm[0] outermost (logical dims). */
static void tlayout(btensor *t, const int *perm) {
    int64_t c = 1;
    for (int k = t->nd - 1; k >= 0; k--) {
        int d = perm ? perm[k] : k;
        t->s[d] = c;
        c *= t->n[d];
    }
    for (int k = t->nd; k < 4; k++) t->s[k] = 0;
    t->count = c;
}

void bench_cell_define(cell *c) {
    int64_t *dims = c->dims;
    memcpy(dims, c->cfg->dims, sizeof c->dims);
    dims[CG_SYM_NONE] = 1;
    dims[bench_cell_op(c, 0)->o.in.seq] = c->seq;
    c->nt = 0;
    for (int bwd = 0; bwd < 2; bwd++) {
        const bop *d = bench_cell_op(c, bwd);
        for (int i = 0; i < d->o.in.ntensors; i++) {
            int j = bwd ? cli_op_tensor(&bench_cell_op(c, 0)->o, d->o.t[i].name) : -1;
            if (j >= 0) {
                c->map[1][i] = c->map[0][j];
                continue;
            }
            BENCH_CHECK(c->nt < MAX_T);
            c->map[bwd][i] = c->nt;
            tdef(c, &c->t[c->nt], bwd, i, dims);
            c->nt++;
        }
    }
    static const int head4[4] = {0, 2, 1, 3}, head3[3] = {0, 2, 1};
    for (int i = 0; i < c->nt; i++) tlayout(&c->t[i], c->t[i].head_perm ? (c->t[i].nd == 4 ? head4 : head3) : NULL);
}

/* The tensor's bytes in the call (the whole tensor). */
double bench_tbytes(const btensor *t) { return t->used ? (double)cg_dtype_size(t->dt) * (double)t->count : 0; }

double bench_tval(const btensor *t, int64_t off) {
    if (!t->st) return t->h[off];
    return t->dt == CG_BF16 ? cg_bf16_to_f32(t->st[off]) : cg_f16_to_f32(t->st[off]);
}

/* h into st (16-bit tensors), narrowed once; h then holds the stored values. */
static void tpack(btensor *t) {
    if (!t->st) return;
    for (int64_t i = 0; i < t->count; i++) {
        t->st[i] = t->dt == CG_BF16 ? cg_f32_to_bf16(t->h[i]) : cg_f32_to_f16(t->h[i]);
        t->h[i] = (float)bench_tval(t, i);
    }
}

/* Deterministic inputs (splitmix64), one stream per tensor and cell. */
static uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void tfill(btensor *t, uint64_t seed, double lo, double hi) {
    uint64_t s = seed;
    for (int64_t i = 0; i < t->count; i++) t->h[i] = (float)(lo + (hi - lo) * ((double)(mix64(&s) >> 11) * 0x1p-53));
}

int bench_cell_alloc(cell *c, char *err, size_t errlen) {
    const int64_t *x = c->dims;
    uint64_t seed = 0x5eedull * (uint64_t)(c->seq + 1) + (uint64_t)x[CG_SYM_B] * 131 + (uint64_t)x[CG_SYM_DK] * 7 +
                    (uint64_t)x[CG_SYM_D] * 11 + (uint64_t)x[CG_SYM_H];
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used) continue;
        t->h = malloc((size_t)t->count * sizeof(float));
        if ((t->dt == CG_BF16 || t->dt == CG_F16)) t->st = calloc((size_t)t->count, sizeof *t->st);
        if (!t->h || ((t->dt == CG_BF16 || t->dt == CG_F16) && !t->st)) {
            snprintf(err, errlen, "out of host memory for %s (%lld floats)", t->name, (long long)t->count);
            return -1;
        }
        if (t->out) memset(t->h, 0, (size_t)t->count * sizeof(float)); /* resident before measuring */
    }
    /* every used input in the cell's order: its own stream (seed + 1, + 2, ...) over its
     * range, or the ramp */
    uint64_t k = 0;
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used || t->out) continue;
        if (t->ramp)
            for (int64_t j = 0; j < t->count; j++) t->h[j] = -(float)(j % t->n[t->nd - 1] + 1);
        else tfill(t, seed + ++k, t->lo, t->hi);
    }
    for (int i = 0; i < c->nt; i++)
        if (c->t[i].used && !c->t[i].out) tpack(&c->t[i]); /* the reference sees the rounded inputs */
    return 0;
}

void bench_cell_free(cell *c) {
    for (int i = 0; i < c->nt; i++) {
        free(c->t[i].h);
        free(c->t[i].st);
        free(c->t[i].ref);
        c->t[i].h = NULL;
        c->t[i].st = NULL;
        c->t[i].ref = NULL;
    }
}

/* The API descriptor of t over base (host or device memory), shape cut to `b` batch
 * elements and `tt` tokens where the tensor has those dims (0: full). */
static cg_tensor tview(const btensor *t, void *base, int64_t b, int64_t tt) {
    cg_tensor x;
    memset(&x, 0, sizeof x);
    if (!t->used || !base) return x;
    int64_t n[4];
    memcpy(n, t->n, sizeof n);
    if (t->has_b && b) n[0] = b;
    if (t->has_t && tt) n[1] = tt;
    x.data = base;
    x.dtype = t->dt;
    x.ndim = t->nd;
    for (int i = 0; i < t->nd; i++) {
        int d = (t->head_perm && (i == 1 || i == 2)) ? 3 - i : i;
        x.shape[i] = n[d];
        x.stride[i] = t->s[d];
    }
    return x;
}

void bench_cell_args(const cell *c, const bptrs *m, int bwd, void *args) {
    const bop *d = bench_cell_op(c, bwd);
    memset(args, 0, d->o.in.args_size);
    cg_layout *layout = cg_op_args_layout(d->o.op, args);
    if (layout) *layout = c->layout;
    for (int i = 0; i < d->o.in.ntensors; i++) {
        int j = c->map[bwd][i];
        *cg_op_args_tensor(d->o.op, args, i) = tview(&c->t[j], m->p[j], m->b, m->tt);
    }
    for (int k = 0; k < d->o.in.nscalars; k++) *cg_op_args_scalar(d->o.op, args, k) = 1;
}

void bench_host_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < c->nt; i++)
        m->p[i] = !c->t[i].used ? NULL : c->t[i].st ? (void *)c->t[i].st : (void *)c->t[i].h;
    m->b = b;
    m->tt = tt;
}

void bench_device_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < c->nt; i++) m->p[i] = c->t[i].used ? c->t[i].d : NULL;
    m->b = b;
    m->tt = tt;
}

int bench_cuda_cell_alloc(cell *c, cg_context *ctx, char *err, size_t errlen) {
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used) continue;
        cg_status s = cg_device_alloc(ctx, bench_cuda_backend, (size_t)bench_tbytes(t), &t->d);
        if (s != CG_OK) {
            snprintf(err, errlen, "device alloc of %s (%lld floats): %s: %s", t->name, (long long)t->count,
                     cg_status_str(s), cg_errmsg(ctx));
            return -1;
        }
    }
    return 0;
}

void bench_cuda_cell_free(cell *c, cg_context *ctx) {
    for (int i = 0; i < c->nt; i++)
        if (c->t[i].d) {
            cg_device_free(ctx, bench_cuda_backend, c->t[i].d);
            c->t[i].d = NULL;
        }
}

/* dir 0: every used tensor host -> device (outputs too: they carry the NaN fill);
 * dir 1: outputs device -> host. */
int bench_cuda_copy(cell *c, cg_context *ctx, int dir, char *err, size_t errlen) {
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used || (dir == 1 && !t->out)) continue;
        size_t bytes = (size_t)bench_tbytes(t);
        void *host = t->st ? (void *)t->st : (void *)t->h;
        cg_status s = dir == 0 ? cg_device_copy(ctx, bench_cuda_backend, t->d, host, bytes, 0, NULL)
                               : cg_device_copy(ctx, bench_cuda_backend, host, t->d, bytes, 1, NULL);
        if (s == CG_OK) s = cg_device_sync(ctx, bench_cuda_backend, NULL);
        if (s != CG_OK) {
            snprintf(err, errlen, "copy of %s %s: %s: %s", t->name, dir ? "to the host" : "to the device",
                     cg_status_str(s), cg_errmsg(ctx));
            return -1;
        }
    }
    return 0;
}

/* Outputs filled with NaN before each impl, so an output it never writes shows. */
void bench_poison_outputs(cell *c) {
    for (int i = 0; i < c->nt; i++)
        if (c->t[i].used && c->t[i].out) {
            memset(c->t[i].h, 0xff, (size_t)c->t[i].count * sizeof(float));
            if (c->t[i].st) memset(c->t[i].st, 0xff, (size_t)c->t[i].count * sizeof *c->t[i].st); /* NaN too */
        }
}
