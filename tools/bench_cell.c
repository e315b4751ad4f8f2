/* bench_cell.c -- one cell of the benchmark matrix: its tensors (shapes, strides for the
 * layout, deterministic inputs), the API argument structs over host or device memory, and
 * the device copies. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const bconfig k_ssd_seed[4] = {
    {OP_SSD, "g2h8_d128", 4, 2, 8, 128, 128, 0, 0},
    {OP_SSD, "g1h24_dk128_dv64", 2, 1, 24, 128, 64, 0, 0},
    {OP_SSD, "g1h1_d128", 4, 1, 1, 128, 128, 0, 0},
    {OP_SSD, "g2h4_dk48_dv40", 4, 2, 4, 48, 40, 0, 0},
};
const bconfig k_sscan_seed[3] = {
    {OP_SSCAN, "sscan_d256", 4, 0, 0, 0, 0, 256, 16},
    {OP_SSCAN, "sscan_d512", 4, 0, 0, 0, 0, 512, 16},
    {OP_SSCAN, "sscan_d1024", 4, 0, 0, 0, 0, 1024, 16},
};
const int64_t k_seed_seqs[3] = {512, 2048, 8192};

static void tdef(btensor *t, const char *name, int nd, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int has_b,
                 int has_t, int out) {
    memset(t, 0, sizeof *t);
    t->name = name;
    t->used = 1;
    t->nd = nd;
    int64_t n[4] = {n0, n1, n2, n3};
    for (int i = 0; i < 4; i++) t->n[i] = i < nd ? n[i] : 1;
    t->has_b = has_b;
    t->has_t = has_t;
    t->out = out;
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
    const bconfig *f = c->cfg;
    const int64_t T = c->seq, B = f->B;
    btensor *t = c->t;
    if (f->op == OP_SSD) {
        const int64_t G = f->G, H = f->H, dk = f->dk, dv = f->dv;
        c->nt = S_COUNT;
        tdef(&t[S_Q], "q", 4, B, T, G, dk, 1, 1, 0);
        tdef(&t[S_K], "k", 4, B, T, G, dk, 1, 1, 0);
        tdef(&t[S_V], "v", 4, B, T, H, dv, 1, 1, 0);
        tdef(&t[S_LA], "log_alpha", 3, B, T, H, 0, 1, 1, 0);
        tdef(&t[S_H0], "h0", 4, B, H, dk, dv, 1, 0, 0);
        tdef(&t[S_O], "o", 4, B, T, H, dv, 1, 1, 1);
        tdef(&t[S_HT], "hT", 4, B, H, dk, dv, 1, 0, 1);
        tdef(&t[S_DO], "do", 4, B, T, H, dv, 1, 1, 0);
        tdef(&t[S_DQ], "q", 4, B, T, G, dk, 1, 1, 1);
        tdef(&t[S_DK], "k", 4, B, T, G, dk, 1, 1, 1);
        tdef(&t[S_DV], "v", 4, B, T, H, dv, 1, 1, 1);
        tdef(&t[S_DLA], "log_alpha", 3, B, T, H, 0, 1, 1, 1);
        tdef(&t[S_DH0], "h0", 4, B, H, dk, dv, 1, 0, 1);
        static const int head4[4] = {0, 2, 1, 3}, head3[3] = {0, 2, 1};
        for (int i = 0; i < S_COUNT; i++) {
            int permuted = c->layout == CG_LAYOUT_HEAD_MAJOR && t[i].has_t;
            t[i].head_perm = permuted;
            tlayout(&t[i], permuted ? (t[i].nd == 4 ? head4 : head3) : NULL);
        }
        if (!c->bwd)
            for (int i = S_DO; i < S_COUNT; i++) t[i].used = 0;
    } else {
        const int64_t D = f->D, N = f->N;
        c->nt = X_COUNT;
        tdef(&t[X_X], "x", 3, B, T, D, 0, 1, 1, 0);
        tdef(&t[X_DELTA], "delta", 3, B, T, D, 0, 1, 1, 0);
        tdef(&t[X_A], "A", 2, D, N, 0, 0, 0, 0, 0);
        tdef(&t[X_B], "B", 3, B, T, N, 0, 1, 1, 0);
        tdef(&t[X_C], "C", 3, B, T, N, 0, 1, 1, 0);
        tdef(&t[X_D], "D", 1, D, 0, 0, 0, 0, 0, 0);
        tdef(&t[X_Z], "z", 3, B, T, D, 0, 1, 1, 0);
        tdef(&t[X_BIAS], "delta_bias", 1, D, 0, 0, 0, 0, 0, 0);
        tdef(&t[X_Y], "y", 3, B, T, D, 0, 1, 1, 1);
        tdef(&t[X_HT], "hT", 3, B, D, N, 0, 1, 0, 1);
        tdef(&t[X_DY], "dy", 3, B, T, D, 0, 1, 1, 0);
        tdef(&t[X_DX], "x", 3, B, T, D, 0, 1, 1, 1);
        tdef(&t[X_DDELTA], "delta", 3, B, T, D, 0, 1, 1, 1);
        tdef(&t[X_DA], "A", 2, D, N, 0, 0, 0, 0, 1);
        tdef(&t[X_DB], "B", 3, B, T, N, 0, 1, 1, 1);
        tdef(&t[X_DC], "C", 3, B, T, N, 0, 1, 1, 1);
        tdef(&t[X_DD], "D", 1, D, 0, 0, 0, 0, 0, 1);
        tdef(&t[X_DZ], "z", 3, B, T, D, 0, 1, 1, 1);
        tdef(&t[X_DBIAS], "delta_bias", 1, D, 0, 0, 0, 0, 0, 1);
        for (int i = 0; i < X_COUNT; i++) tlayout(&t[i], NULL);
        if (!c->bwd)
            for (int i = X_DY; i < X_COUNT; i++) t[i].used = 0;
    }
}

/* The tensor's bytes in the call (the whole tensor). */
double bench_tbytes(const btensor *t) { return t->used ? 4.0 * (double)t->count : 0; }

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

/* Inputs' value ranges; docs/bench.md and the config block repeat them. */
const char k_inputs_ssd[] =
    "q, k, v, do, h0 ~ U(-1, 1); log_alpha ~ U(-0.5, -0.001); h0 given, hT returned, dhT absent";
const char k_inputs_sscan[] =
    "x, z, dy ~ U(-1, 1); delta ~ U(-4, -1) with delta_softplus and delta_bias ~ U(-0.5, 0.5); "
    "A[d, n] = -(n + 1); B, C [B, L, N] (ungrouped) ~ U(-1, 1); D ~ U(-1, 1); h0 absent, hT returned";

int bench_cell_alloc(cell *c, char *err, size_t errlen) {
    uint64_t seed = 0x5eedull * (uint64_t)(c->seq + 1) + (uint64_t)c->cfg->B * 131 + (uint64_t)c->cfg->dk * 7 +
                    (uint64_t)c->cfg->D * 11 + (uint64_t)c->cfg->H;
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used) continue;
        t->h = malloc((size_t)t->count * sizeof(float));
        if (!t->h) {
            snprintf(err, errlen, "out of host memory for %s (%lld floats)", t->name, (long long)t->count);
            return -1;
        }
        if (t->out) memset(t->h, 0, (size_t)t->count * sizeof(float)); /* resident before measuring */
    }
    btensor *t = c->t;
    if (c->cfg->op == OP_SSD) {
        tfill(&t[S_Q], seed + 1, -1, 1);
        tfill(&t[S_K], seed + 2, -1, 1);
        tfill(&t[S_V], seed + 3, -1, 1);
        tfill(&t[S_LA], seed + 4, -0.5, -0.001);
        tfill(&t[S_H0], seed + 5, -1, 1);
        if (c->bwd) tfill(&t[S_DO], seed + 6, -1, 1);
    } else {
        tfill(&t[X_X], seed + 1, -1, 1);
        tfill(&t[X_DELTA], seed + 2, -4, -1);
        for (int64_t d = 0; d < c->cfg->D; d++)
            for (int64_t n = 0; n < c->cfg->N; n++) t[X_A].h[d * c->cfg->N + n] = -(float)(n + 1);
        tfill(&t[X_B], seed + 3, -1, 1);
        tfill(&t[X_C], seed + 4, -1, 1);
        tfill(&t[X_D], seed + 5, -1, 1);
        tfill(&t[X_Z], seed + 6, -1, 1);
        tfill(&t[X_BIAS], seed + 7, -0.5, 0.5);
        if (c->bwd) tfill(&t[X_DY], seed + 8, -1, 1);
    }
    return 0;
}

void bench_cell_free(cell *c) {
    for (int i = 0; i < c->nt; i++) {
        free(c->t[i].h);
        free(c->t[i].ref);
        c->t[i].h = NULL;
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
    x.dtype = CG_F32;
    x.ndim = t->nd;
    for (int i = 0; i < t->nd; i++) {
        int d = (t->head_perm && (i == 1 || i == 2)) ? 3 - i : i;
        x.shape[i] = n[d];
        x.stride[i] = t->s[d];
    }
    return x;
}

void bench_ssd_args(const cell *c, const bptrs *m, cg_ssd_fwd_args *f, cg_ssd_bwd_args *g) {
    const btensor *t = c->t;
#define V(i) tview(&t[i], m->p[i], m->b, m->tt)
    if (f) {
        memset(f, 0, sizeof *f);
        f->layout = c->layout;
        f->q = V(S_Q), f->k = V(S_K), f->v = V(S_V), f->log_alpha = V(S_LA), f->h0 = V(S_H0);
        f->o = V(S_O), f->hT = V(S_HT);
    }
    if (g) {
        memset(g, 0, sizeof *g);
        g->layout = c->layout;
        g->q = V(S_Q), g->k = V(S_K), g->v = V(S_V), g->log_alpha = V(S_LA), g->h0 = V(S_H0), g->dout = V(S_DO);
        g->dq = V(S_DQ), g->dk = V(S_DK), g->dv = V(S_DV), g->dlog_alpha = V(S_DLA), g->dh0 = V(S_DH0);
    }
}

void bench_sscan_args(const cell *c, const bptrs *m, cg_sscan_fwd_args *f, cg_sscan_bwd_args *g) {
    const btensor *t = c->t;
    if (f) {
        memset(f, 0, sizeof *f);
        f->x = V(X_X), f->delta = V(X_DELTA), f->A = V(X_A), f->B = V(X_B), f->C = V(X_C), f->D = V(X_D);
        f->z = V(X_Z), f->delta_bias = V(X_BIAS), f->delta_softplus = 1;
        f->y = V(X_Y), f->hT = V(X_HT);
    }
    if (g) {
        memset(g, 0, sizeof *g);
        g->x = V(X_X), g->delta = V(X_DELTA), g->A = V(X_A), g->B = V(X_B), g->C = V(X_C), g->D = V(X_D);
        g->z = V(X_Z), g->delta_bias = V(X_BIAS), g->delta_softplus = 1, g->dy = V(X_DY);
        g->dx = V(X_DX), g->ddelta = V(X_DDELTA), g->dA = V(X_DA), g->dB = V(X_DB), g->dC = V(X_DC);
        g->dD = V(X_DD), g->dz = V(X_DZ), g->ddelta_bias = V(X_DBIAS);
    }
#undef V
}

void bench_host_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < c->nt; i++) m->p[i] = c->t[i].used ? c->t[i].h : NULL;
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
        cg_status s = bench_kx->alloc(ctx, (size_t)t->count * sizeof(float), &t->d);
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
            bench_kx->free(ctx, c->t[i].d);
            c->t[i].d = NULL;
        }
}

/* dir 0: every used tensor host -> device (outputs too: they carry the NaN fill);
 * dir 1: outputs device -> host. */
int bench_cuda_copy(cell *c, cg_context *ctx, int dir, char *err, size_t errlen) {
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used || (dir == 1 && !t->out)) continue;
        size_t bytes = (size_t)t->count * sizeof(float);
        cg_status s = dir == 0 ? bench_kx->copy(ctx, t->d, t->h, bytes, 0, NULL) : bench_kx->copy(ctx, t->h, t->d, bytes, 1, NULL);
        if (s == CG_OK) s = bench_kx->sync(ctx, NULL);
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
        if (c->t[i].used && c->t[i].out) memset(c->t[i].h, 0xff, (size_t)c->t[i].count * sizeof(float));
}
