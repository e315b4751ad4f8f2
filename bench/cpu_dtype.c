/* cpu_dtype.c -- the CPU backend with bf16 / fp16 tensors beside float32, on the seeds'
 * matrix cells (SSD presets g2h8_d128, g1h24_dk128_dv64, g1h1_d128, g2h4_dk48_dv40;
 * selective scan sscan_d256/512/1024, N = 16; the contiguous layouts of `chunkgen bench`;
 * modes fwd and fwd_bwd), interleaved: each repetition times the float32 call and the
 * 16-bit call back to back (alternating which goes first), so that a shared, loaded
 * machine slows both alike; the ratio of the medians is the row's `ratio_vs_f32`. Bytes:
 * every tensor of the call(s) in its storage dtype (the 16-bit-capable ones 2 bytes, the
 * float32-only ones -- log_alpha, states, A, D, delta_bias, their gradients -- 4).
 * Also records process CPU time per call (cpu_ms), the ISA variant and the load average.
 * Usage: cg_bench_cpu_dtype [--json FILE] [--seq LIST] [--dtype bf16|f16] [--reps N]
 *        [--threads N] [--op ssd|sscan] [--mode fwd|fwd_bwd]   (bench/run_cpu.sh --dtype) */
#include "chunkgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct preset {
    const char *name;
    int ssd;
    int64_t B, G, H, dk, dv, D, N;
} preset;
static const preset k_presets[] = {
    {"g2h8_d128", 1, 4, 2, 8, 128, 128, 0, 0},  {"g1h24_dk128_dv64", 1, 2, 1, 24, 128, 64, 0, 0},
    {"g1h1_d128", 1, 4, 1, 1, 128, 128, 0, 0},  {"g2h4_dk48_dv40", 1, 4, 2, 4, 48, 40, 0, 0},
    {"sscan_d256", 0, 4, 0, 0, 0, 0, 256, 16},  {"sscan_d512", 0, 4, 0, 0, 0, 0, 512, 16},
    {"sscan_d1024", 0, 4, 0, 0, 0, 0, 1024, 16},
};

/* One tensor of a call set: its shape, whether 16-bit-capable, its memory per dtype. */
typedef struct btens {
    int ndim, half, used;
    int64_t shape[4], n;
    void *f32, *h16; /* the float32 set's and the 16-bit set's memory (h16 == f32 when not half) */
} btens;

enum { MAXT = 24 };
typedef struct bset {
    btens t[MAXT];
    int nt;
    cg_dtype H;
} bset;

/* 16-bit storage of a finite float, rounded to nearest even, and back (this program uses
 * the public API only: it does its own conversions). */
static uint16_t to16(cg_dtype dt, float x) {
    if (dt == CG_F16) {
        _Float16 h = (_Float16)x;
        uint16_t u;
        memcpy(&u, &h, 2);
        return u;
    }
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float from16(cg_dtype dt, uint16_t v) {
    if (dt == CG_F16) {
        _Float16 h;
        memcpy(&h, &v, 2);
        return (float)h;
    }
    uint32_t u = (uint32_t)v << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A tensor; inputs uniform in [lo, hi) (rounded to the 16-bit dtype in both sets, so
 * both compute on the same values), outputs zero. */
static int mk(bset *s, int half, int in, double lo, double hi, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    btens *t = &s->t[s->nt];
    memset(t, 0, sizeof *t);
    t->ndim = ndim, t->half = half, t->used = 1;
    const int64_t sh[4] = {a, b, c, d};
    t->n = 1;
    for (int i = 0; i < ndim; i++) t->shape[i] = sh[i], t->n *= sh[i];
    t->f32 = calloc((size_t)t->n, 4);
    t->h16 = half ? calloc((size_t)t->n, 2) : t->f32;
    if (!t->f32 || !t->h16) return -1;
    if (in) {
        uint64_t st = 0x1234u + (uint64_t)s->nt * 7919u;
        float *f = t->f32;
        uint16_t *h = t->h16;
        for (int64_t i = 0; i < t->n; i++) {
            float x = (float)(lo + (hi - lo) * ((double)(rng_next(&st) >> 11) * 0x1p-53));
            if (half) {
                h[i] = to16(s->H, x);
                x = from16(s->H, h[i]);
            }
            f[i] = x;
        }
    }
    return s->nt++;
}

static cg_tensor view(const bset *s, int i, int h16) {
    const btens *t = &s->t[i];
    return cg_tensor_contiguous(h16 && t->half ? t->h16 : t->f32, h16 && t->half ? s->H : CG_F32, t->ndim, t->shape);
}

static void set_free(bset *s) {
    for (int i = 0; i < s->nt; i++) {
        if (s->t[i].h16 != s->t[i].f32) free(s->t[i].h16);
        free(s->t[i].f32);
    }
    s->nt = 0;
}

/* The tensors of a cell: fwd (and bwd) args of both sets in a[0] (float32) and a[1] (16-bit). */
typedef struct cellargs {
    cg_ssd_fwd_args sf[2];
    cg_ssd_bwd_args sb[2];
    cg_sscan_fwd_args xf[2];
    cg_sscan_bwd_args xb[2];
    double bytes[2][2]; /* [16-bit?][bwd?] */
} cellargs;

static int build(bset *s, const preset *p, int64_t T, cellargs *ca) {
    memset(ca, 0, sizeof *ca);
    if (p->ssd) {
        const int64_t B = p->B, G = p->G, H = p->H, dk = p->dk, dv = p->dv;
        int q = mk(s, 1, 1, -1, 1, 4, B, T, G, dk), k = mk(s, 1, 1, -1, 1, 4, B, T, G, dk);
        int v = mk(s, 1, 1, -1, 1, 4, B, T, H, dv), la = mk(s, 0, 1, -0.5, -0.001, 3, B, T, H, 0);
        int h0 = mk(s, 0, 1, -1, 1, 4, B, H, dk, dv), o = mk(s, 1, 0, 0, 0, 4, B, T, H, dv);
        int hT = mk(s, 0, 0, 0, 0, 4, B, H, dk, dv), dout = mk(s, 1, 1, -1, 1, 4, B, T, H, dv);
        int dq = mk(s, 1, 0, 0, 0, 4, B, T, G, dk), dkk = mk(s, 1, 0, 0, 0, 4, B, T, G, dk);
        int dvv = mk(s, 1, 0, 0, 0, 4, B, T, H, dv), dla = mk(s, 0, 0, 0, 0, 3, B, T, H, 0);
        int dh0 = mk(s, 0, 0, 0, 0, 4, B, H, dk, dv);
        if (dh0 < 0) return -1;
        const int fw[] = {q, k, v, la, h0, o, hT}, bw[] = {q, k, v, la, h0, dout, dq, dkk, dvv, dla, dh0};
        for (int u = 0; u < 2; u++) {
            ca->sf[u] = (cg_ssd_fwd_args){.q = view(s, q, u), .k = view(s, k, u), .v = view(s, v, u),
                                          .log_alpha = view(s, la, u), .h0 = view(s, h0, u), .o = view(s, o, u),
                                          .hT = view(s, hT, u)};
            ca->sb[u] = (cg_ssd_bwd_args){.q = view(s, q, u), .k = view(s, k, u), .v = view(s, v, u),
                                          .log_alpha = view(s, la, u), .h0 = view(s, h0, u), .dout = view(s, dout, u),
                                          .dq = view(s, dq, u), .dk = view(s, dkk, u), .dv = view(s, dvv, u),
                                          .dlog_alpha = view(s, dla, u), .dh0 = view(s, dh0, u)};
            for (unsigned i = 0; i < sizeof fw / sizeof fw[0]; i++)
                ca->bytes[u][0] += (double)s->t[fw[i]].n * (u && s->t[fw[i]].half ? 2 : 4);
            for (unsigned i = 0; i < sizeof bw / sizeof bw[0]; i++)
                ca->bytes[u][1] += (double)s->t[bw[i]].n * (u && s->t[bw[i]].half ? 2 : 4);
        }
        return 0;
    }
    const int64_t B = p->B, D = p->D, N = p->N;
    int x = mk(s, 1, 1, -1, 1, 3, B, T, D, 0), dl = mk(s, 1, 1, -4, -1, 3, B, T, D, 0);
    int A = mk(s, 0, 1, -2, -0.5, 2, D, N, 0, 0), Bm = mk(s, 1, 1, -1, 1, 3, B, T, N, 0);
    int Cm = mk(s, 1, 1, -1, 1, 3, B, T, N, 0), Dv = mk(s, 0, 1, -1, 1, 1, D, 0, 0, 0);
    int z = mk(s, 1, 1, -1, 1, 3, B, T, D, 0), bias = mk(s, 0, 1, -0.5, 0.5, 1, D, 0, 0, 0);
    int y = mk(s, 1, 0, 0, 0, 3, B, T, D, 0), hT = mk(s, 0, 0, 0, 0, 3, B, D, N, 0);
    int dy = mk(s, 1, 1, -1, 1, 3, B, T, D, 0), dx = mk(s, 1, 0, 0, 0, 3, B, T, D, 0);
    int ddl = mk(s, 1, 0, 0, 0, 3, B, T, D, 0), dA = mk(s, 0, 0, 0, 0, 2, D, N, 0, 0);
    int dB = mk(s, 1, 0, 0, 0, 3, B, T, N, 0), dC = mk(s, 1, 0, 0, 0, 3, B, T, N, 0);
    int dD = mk(s, 0, 0, 0, 0, 1, D, 0, 0, 0), dz = mk(s, 1, 0, 0, 0, 3, B, T, D, 0);
    int dbias = mk(s, 0, 0, 0, 0, 1, D, 0, 0, 0);
    if (dbias < 0) return -1;
    const int fw[] = {x, dl, A, Bm, Cm, Dv, z, bias, y, hT},
              bw[] = {x, dl, A, Bm, Cm, Dv, z, bias, dy, dx, ddl, dA, dB, dC, dD, dz, dbias};
    for (int u = 0; u < 2; u++) {
        ca->xf[u] = (cg_sscan_fwd_args){.x = view(s, x, u), .delta = view(s, dl, u), .A = view(s, A, u),
                                        .B = view(s, Bm, u), .C = view(s, Cm, u), .D = view(s, Dv, u),
                                        .z = view(s, z, u), .delta_bias = view(s, bias, u), .delta_softplus = 1,
                                        .y = view(s, y, u), .hT = view(s, hT, u)};
        ca->xb[u] = (cg_sscan_bwd_args){.x = view(s, x, u), .delta = view(s, dl, u), .A = view(s, A, u),
                                        .B = view(s, Bm, u), .C = view(s, Cm, u), .D = view(s, Dv, u),
                                        .z = view(s, z, u), .delta_bias = view(s, bias, u), .dy = view(s, dy, u),
                                        .delta_softplus = 1, .dx = view(s, dx, u), .ddelta = view(s, ddl, u),
                                        .dA = view(s, dA, u), .dB = view(s, dB, u), .dC = view(s, dC, u),
                                        .dD = view(s, dD, u), .dz = view(s, dz, u), .ddelta_bias = view(s, dbias, u)};
        for (unsigned i = 0; i < sizeof fw / sizeof fw[0]; i++)
            ca->bytes[u][0] += (double)s->t[fw[i]].n * (u && s->t[fw[i]].half ? 2 : 4);
        for (unsigned i = 0; i < sizeof bw / sizeof bw[0]; i++)
            ca->bytes[u][1] += (double)s->t[bw[i]].n * (u && s->t[bw[i]].half ? 2 : 4);
    }
    return 0;
}

static double clk(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One call of the cell's mode with set u (0: float32, 1: 16-bit); wall and CPU ms. */
static cg_status run(cg_context *ctx, const preset *p, cellargs *ca, int u, int bwd, double *wall, double *cpu) {
    const cg_exec ex = {.backend = CG_BACKEND_CPU};
    const double w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
    cg_status st = p->ssd ? cg_ssd_fwd(ctx, &ca->sf[u], &ex) : cg_sscan_fwd(ctx, &ca->xf[u], &ex);
    if (st == CG_OK && bwd) st = p->ssd ? cg_ssd_bwd(ctx, &ca->sb[u], &ex) : cg_sscan_bwd(ctx, &ca->xb[u], &ex);
    *wall = clk(CLOCK_MONOTONIC) - w0, *cpu = clk(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return st;
}

static int cmpd(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* /proc/loadavg's three numbers; -1 where unreadable. */
static void loadavg(double l[3]) {
    l[0] = l[1] = l[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = -1;
    fclose(f);
}

int main(int argc, char **argv) {
    const char *json = NULL, *op = NULL, *mode = NULL;
    int64_t seqs[8] = {512, 2048};
    int nseq = 2, reps = 5, threads = 1;
    cg_dtype H = CG_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return fprintf(stderr, "cpu_dtype: %s needs a value\n", a), 2;
        if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--op")) op = v;
        else if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--dtype") && (!strcmp(v, "bf16") || !strcmp(v, "f16"))) H = v[0] == 'b' ? CG_BF16 : CG_F16;
        else if (!strcmp(a, "--seq")) {
            nseq = 0;
            for (char *s = (char *)v; *s && nseq < 8; s++) {
                seqs[nseq++] = strtoll(s, &s, 10);
                if (!*s) break;
            }
        } else {
            return fprintf(stderr, "cpu_dtype: unknown option %s %s (see the header of bench/cpu_dtype.c)\n", a, v), 2;
        }
        i++;
    }
    if (reps < 1 || reps > 1000 || threads < 0) return fprintf(stderr, "cpu_dtype: --reps 1..1000, --threads >= 0\n"), 2;
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK || cg_context_set_threads(ctx, threads) != CG_OK) return 1;
    FILE *out = json ? fopen(json, "w") : stdout;
    if (!out) return fprintf(stderr, "cpu_dtype: cannot write %s\n", json), 1;
    double load[3];
    loadavg(load);
    cg_device_info dev = CG_DEVICE_INFO_INIT;
    if (cg_device_query(ctx, CG_BACKEND_CPU, &dev) != CG_OK)
        return fprintf(stderr, "cpu_dtype: %s\n", cg_errmsg(ctx)), 1;
    const char *isa = dev.cpu_isa, *hn = H == CG_BF16 ? "bf16" : "f16";
    fprintf(out, "{\"device\": {\"cpu_model\": \"%s\", \"cpu_isa\": \"%s\", \"simd\": \"%s\", \"threads\": %d,\n"
                 " \"loadavg_start\": [%.2f, %.2f, %.2f]},\n \"method\": \"interleaved: per repetition the float32 "
                 "call then the %s call (order alternating), medians of %d; ratio_vs_f32 = median %s / median f32\",\n"
                 " \"rows\": [\n",
            dev.cpu_model, isa, isa, threads, load[0], load[1], load[2], hn, reps, hn);
    int first = 1, status = 0;
    for (unsigned pi = 0; pi < sizeof k_presets / sizeof k_presets[0]; pi++) {
        const preset *p = &k_presets[pi];
        if (op && strcmp(op, p->ssd ? "ssd" : "sscan")) continue;
        for (int si = 0; si < nseq; si++)
            for (int bwd = 0; bwd < 2; bwd++) {
                if (mode && strcmp(mode, bwd ? "fwd_bwd" : "fwd")) continue;
                bset s = {.H = H};
                cellargs ca;
                if (build(&s, p, seqs[si], &ca)) {
                    fprintf(stderr, "cpu_dtype: out of memory for %s seq %lld\n", p->name, (long long)seqs[si]);
                    set_free(&s);
                    status = 1;
                    continue;
                }
                double w[2][1000], c[2][1000], dw, dc;
                cg_status st = CG_OK;
                for (int u = 0; u < 2 && st == CG_OK; u++) st = run(ctx, p, &ca, u, bwd, &dw, &dc); /* warm-up */
                for (int r = 0; r < reps && st == CG_OK; r++)
                    for (int k = 0; k < 2 && st == CG_OK; k++) {
                        const int u = (r + k) % 2;
                        st = run(ctx, p, &ca, u, bwd, &w[u][r], &c[u][r]);
                    }
                if (st != CG_OK) {
                    fprintf(stderr, "cpu_dtype: %s seq %lld: %s: %s\n", p->name, (long long)seqs[si], cg_status_str(st),
                            cg_errmsg(ctx));
                    set_free(&s);
                    status = 1;
                    continue;
                }
                double mw[2], mc[2];
                for (int u = 0; u < 2; u++) mw[u] = median(w[u], reps), mc[u] = median(c[u], reps);
                for (int u = 0; u < 2; u++) {
                    const double bytes = ca.bytes[u][bwd] + (bwd ? ca.bytes[u][0] : 0);
                    fprintf(out,
                            "%s  {\"impl\": \"chunkgen_cpu\", \"op\": \"%s\", \"preset\": \"%s\", \"seq\": %lld, "
                            "\"mode\": \"%s\", \"dtype\": \"%s\", \"median_ms\": %.3f, \"cpu_ms\": %.3f, \"bytes\": "
                            "%.0f, \"gbs\": %.3f, \"ratio_vs_f32\": %.3f, \"cpu_ratio_vs_f32\": %.3f, \"bytes_ratio_vs_f32\": "
                            "%.3f, \"reps\": %d}",
                            first ? "" : ",\n", p->ssd ? "ssd" : "sscan", p->name, (long long)seqs[si],
                            bwd ? "fwd_bwd" : "fwd", u ? hn : "f32", mw[u], mc[u], bytes, bytes / (mw[u] * 1e-3) * 1e-9,
                            mw[u] / mw[0], mc[u] / mc[0],
                            bytes / (ca.bytes[0][bwd] + (bwd ? ca.bytes[0][0] : 0)), reps);
                    first = 0;
                }
                fflush(out);
                fprintf(stderr, "%-18s seq %5lld %-7s f32 %9.2f ms  %s %9.2f ms  ratio %.3f (cpu %.3f)\n", p->name,
                        (long long)seqs[si], bwd ? "fwd_bwd" : "fwd", mw[0], hn, mw[1], mw[1] / mw[0], mc[1] / mc[0]);
                set_free(&s);
            }
    }
    loadavg(load);
    fprintf(out, "\n ], \"loadavg_end\": [%.2f, %.2f, %.2f]}\n", load[0], load[1], load[2]);
    if (json) fclose(out);
    cg_context_free(ctx);
    return status;
}
