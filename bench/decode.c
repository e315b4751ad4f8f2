/* decode.c -- the decode steps (issue #36 item 6) on the CPU backend: ssd_step, sscan_step
 * and gdr_step at batch 1, 16 and 256 (one token per entry, slot b for entry b), their
 * throughput in bytes of state moved (each state read and written once per call, plus the
 * token's inputs and outputs) against a STREAM-style copy measured in the same run at the
 * same thread count (bytes read + written / s); whether the call's states fit the last-level
 * cache. Wall and process CPU time per call (the machine may be shared: CPU time / wall
 * time above the thread count's share shows other load). A product benchmark: the public
 * header only. The host overhead of a warm call is tests/perf/dispatch_overhead.sh's
 * (its step rows); the PyTorch peers are bench/decode_peers.py's (bench/decode.sh runs all).
 * Cells (serving layers): ssd_step Mamba-2 style H 64, G 1, dk 128 (d_state), dv 64
 * (headdim); sscan_step Mamba-1 style D 5120, N 16 (also at batch 1024: 256 fits 260 MiB
 * of L3); gdr_step Qwen3-Next's layer G 16, H 32, dk = dv = 128.
 * Usage: cg_bench_decode [--json FILE] [--threads LIST] [--min-time S] [--quick] [--op NAME]
 * (--op: that op's cells only). */
#include "chunkgen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *fill(int64_t n, uint64_t *s, float lo, float hi) {
    void *m = NULL; /* 64-byte aligned, as PyTorch's CPU allocator and JAX's give tensors */
    float *x = posix_memalign(&m, 64, (size_t)n * sizeof(float)) ? NULL : m;
    if (!x) {
        fprintf(stderr, "decode: out of memory (%lld floats)\n", (long long)n);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (float)((*s >> 40) & 0xffffff) / 16777216.0f;
    }
    return x;
}

/* ------------------------------------------------------- STREAM-style copy */

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
} copy_part;

static void *copy_run(void *arg) {
    copy_part *p = arg;
    memcpy(p->dst, p->src, p->n);
    return NULL;
}

/* Bytes read + written per second of one copy of `bytes` from a to b by `threads` threads;
 * *cpu_bw: the same bytes per second of the process's CPU time (all threads). */
static double copy_bw(char *b, const char *a, size_t bytes, int threads, double *cpu_bw) {
    pthread_t th[64];
    copy_part parts[64];
    const size_t per = bytes / (size_t)threads;
    const double t0 = clock_s(CLOCK_MONOTONIC), u0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < threads; i++) {
        parts[i] = (copy_part){b + (size_t)i * per, a + (size_t)i * per, i == threads - 1 ? bytes - (size_t)i * per : per};
        if (i) pthread_create(&th[i], NULL, copy_run, &parts[i]);
    }
    copy_run(&parts[0]);
    for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
    *cpu_bw = 2.0 * (double)bytes / (clock_s(CLOCK_PROCESS_CPUTIME_ID) - u0);
    return 2.0 * (double)bytes / (clock_s(CLOCK_MONOTONIC) - t0);
}

/* The last-level cache's bytes (sysfs), 0 when unknown. */
static long long llc_bytes(void) {
    long long best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *e;
            long long v = strtoll(buf, &e, 10);
            v *= *e == 'K' ? 1024 : *e == 'M' ? 1024 * 1024 : 1;
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best;
}

/* --------------------------------------------------------------- a cell */

typedef struct cell {
    const char *op, *name;
    int64_t H, G, dk, dv; /* ssd, gdr */
    int64_t D, N;         /* sscan */
} cell;
static const cell k_cells[] = {
    {"ssd_step", "mamba2_h64_dk128_dv64", 64, 1, 128, 64, 0, 0},
    {"sscan_step", "mamba1_d5120_n16", 0, 0, 0, 0, 5120, 16},
    {"gdr_step", "qwen3next_g16_h32_d128", 32, 16, 128, 128, 0, 0},
};

typedef struct call {
    cg_op op;
    cg_ssd_step_args ssd;
    cg_sscan_step_args scan;
    cg_gdr_step_args gdr;
    float *mem[16];
    int32_t *idx;
    int nmem;
    double state_bytes, io_bytes;
} call;

static cg_tensor ten(call *c, uint64_t *s, int ndim, const int64_t *shape, float lo, float hi, int io) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *p = fill(n, s, lo, hi);
    c->mem[c->nmem++] = p;
    if (io) c->io_bytes += 4.0 * (double)n;
    return cg_tensor_contiguous(p, CG_F32, ndim, shape);
}

static void call_new(call *c, const cell *e, int64_t B) {
    memset(c, 0, sizeof *c);
    uint64_t s = 36;
    c->idx = malloc((size_t)B * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) c->idx[b] = (int32_t)b;
    const int64_t ib[1] = {B};
    const cg_tensor idx = cg_tensor_contiguous(c->idx, CG_I32, 1, ib);
    if (!strcmp(e->op, "sscan_step")) {
        c->op = CG_OP_SSCAN_STEP;
        cg_sscan_step_args a = CG_SSCAN_STEP_ARGS_INIT;
        const int64_t x[3] = {B, 1, e->D}, A[2] = {e->D, e->N}, bn[3] = {B, 1, e->N}, d1[1] = {e->D};
        const int64_t cs[3] = {B, e->D, e->N};
        a.x = ten(c, &s, 3, x, -1, 1, 1), a.delta = ten(c, &s, 3, x, -1, 1, 1), a.z = ten(c, &s, 3, x, -1, 1, 1);
        a.A = ten(c, &s, 2, A, -2, -0.1f, 1), a.B = ten(c, &s, 3, bn, -1, 1, 1), a.C = ten(c, &s, 3, bn, -1, 1, 1);
        a.D = ten(c, &s, 1, d1, -1, 1, 1), a.delta_bias = ten(c, &s, 1, d1, -1, 0, 1), a.delta_softplus = 1;
        a.cache = ten(c, &s, 3, cs, -1, 1, 0), a.y = ten(c, &s, 3, x, 0, 0, 1), a.state_indices = idx;
        c->state_bytes = 4.0 * (double)(B * e->D * e->N);
        c->scan = a;
        return;
    }
    const int64_t qk[4] = {B, 1, e->G, e->dk}, v[4] = {B, 1, e->H, e->dv}, gh[3] = {B, 1, e->H};
    const int64_t cs[4] = {B, e->H, e->dk, e->dv};
    c->state_bytes = 4.0 * (double)(B * e->H * e->dk * e->dv);
    if (!strcmp(e->op, "ssd_step")) {
        c->op = CG_OP_SSD_STEP;
        cg_ssd_step_args a = CG_SSD_STEP_ARGS_INIT;
        a.q = ten(c, &s, 4, qk, -1, 1, 1), a.k = ten(c, &s, 4, qk, -1, 1, 1), a.v = ten(c, &s, 4, v, -1, 1, 1);
        a.log_alpha = ten(c, &s, 3, gh, -0.3f, 0, 1), a.cache = ten(c, &s, 4, cs, -1, 1, 0);
        a.o = ten(c, &s, 4, v, 0, 0, 1), a.state_indices = idx;
        c->ssd = a;
    } else {
        c->op = CG_OP_GDR_STEP;
        cg_gdr_step_args a = CG_GDR_STEP_ARGS_INIT;
        a.q = ten(c, &s, 4, qk, -1, 1, 1), a.k = ten(c, &s, 4, qk, -1, 1, 1), a.v = ten(c, &s, 4, v, -1, 1, 1);
        a.g = ten(c, &s, 3, gh, -0.3f, 0, 1), a.beta = ten(c, &s, 3, gh, 0, 1, 1), a.use_qk_l2norm = 1;
        a.cache = ten(c, &s, 4, cs, -1, 1, 0), a.o = ten(c, &s, 4, v, 0, 0, 1), a.state_indices = idx;
        c->gdr = a;
    }
}

static void call_free(call *c) {
    for (int i = 0; i < c->nmem; i++) free(c->mem[i]);
    free(c->idx);
}

static const void *call_args(const call *c) {
    return c->op == CG_OP_SSD_STEP ? (const void *)&c->ssd : c->op == CG_OP_SSCAN_STEP ? (const void *)&c->scan : (const void *)&c->gdr;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *json = NULL, *tlist = "1,2", *only = NULL;
    double min_time = 0.5;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) tlist = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--op") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: cg_bench_decode [--json FILE] [--threads LIST] [--min-time S] [--quick] [--op NAME]\n");
            return 2;
        }
    }
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return 1;
    cg_context_set_tune_on_miss(ctx, 0);
    const long long llc = llc_bytes();
    const size_t copy_bytes = quick ? (size_t)64 << 20 : (size_t)384 << 20; /* past the 260 MiB L3 here */
    char *ca = malloc(copy_bytes), *cb = malloc(copy_bytes);
    if (!ca || !cb) return fprintf(stderr, "decode: out of memory for the copy\n"), 1;
    memset(ca, 1, copy_bytes), memset(cb, 2, copy_bytes);
    FILE *f = json ? fopen(json, "w") : NULL;
    if (f) fprintf(f, "{\"kind\": \"chunkgen-decode-cpu\", \"chunkgen\": \"%s\", \"llc_bytes\": %lld, \"results\": [", cg_version(), llc);
    int first = 1;
    for (const char *tp = tlist; *tp;) {
        const int threads = atoi(tp);
        while (*tp && *tp != ',') tp++;
        if (*tp) tp++;
        if (threads < 1 || threads > 64) continue;
        printf("threads %d (copy of %zu MiB, read + write, interleaved with each cell's calls)\n", threads,
               copy_bytes >> 20);
        char cfg[32];
        snprintf(cfg, sizeof cfg, "threads=%d", threads);
        cg_exec ex = CG_EXEC_INIT;
        ex.backend = CG_BACKEND_CPU;
        ex.config = cfg;
        for (size_t ci = 0; ci < sizeof k_cells / sizeof k_cells[0]; ci++) {
            const cell *e = &k_cells[ci];
            if (only && strcmp(e->op, only)) continue;
            const int64_t batches[4] = {1, 16, quick ? 32 : 256, 1024};
            const int nb = !strcmp(e->op, "sscan_step") && !quick ? 4 : 3;
            for (int bi = 0; bi < nb; bi++) {
                call c;
                call_new(&c, e, batches[bi]);
                cg_status st = cg_run(ctx, c.op, call_args(&c), &ex); /* warm: plan, pool, pages */
                if (st != CG_OK) {
                    printf("%s B=%lld: %s\n", e->op, (long long)batches[bi], cg_errmsg(ctx));
                    call_free(&c);
                    continue;
                }
                /* rounds of one copy, then calls for min_time / ROUNDS: a shared machine's load
                 * weighs on both alike; the medians of each */
                enum { ROUNDS = 7 };
                double wall[4096], bws[ROUNDS], cbws[ROUNDS], cpu_sum = 0, wall_sum = 0;
                int n = 0;
                for (int round = 0; round < ROUNDS; round++) {
                    bws[round] = copy_bw(cb, ca, copy_bytes, threads, &cbws[round]);
                    const double start = clock_s(CLOCK_MONOTONIC);
                    for (int k = 0; n < 4096 && (k < 1 || clock_s(CLOCK_MONOTONIC) - start < min_time / ROUNDS); k++) {
                        const double t0 = clock_s(CLOCK_MONOTONIC), u0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
                        (void)cg_run(ctx, c.op, call_args(&c), &ex);
                        wall[n] = clock_s(CLOCK_MONOTONIC) - t0;
                        cpu_sum += clock_s(CLOCK_PROCESS_CPUTIME_ID) - u0, wall_sum += wall[n++];
                    }
                }
                qsort(wall, (size_t)n, sizeof wall[0], cmp_d);
                qsort(bws, ROUNDS, sizeof bws[0], cmp_d);
                qsort(cbws, ROUNDS, sizeof cbws[0], cmp_d);
                const double bw = bws[ROUNDS / 2], cbw = cbws[ROUNDS / 2];
                const double med = wall[n / 2], bytes = 2.0 * c.state_bytes + c.io_bytes, gbs = bytes / med;
                const int fits = llc > 0 && 2.0 * c.state_bytes <= (double)llc;
                const double cgbs = bytes / (cpu_sum / n); /* per second of CPU time, as cbw */
                printf("  %-10s %-24s B=%-5lld %9.1f us  %7.2f GB/s  copy %6.2f GB/s  %5.1f%%  cpu/wall %.2f  "
                       "by CPU time %5.1f%%  state %s LLC\n",
                       e->op, e->name, (long long)batches[bi], med * 1e6, gbs / 1e9, bw / 1e9, 100 * gbs / bw,
                       cpu_sum / wall_sum, 100 * cgbs / cbw, fits ? "fits in" : "exceeds");
                if (f)
                    fprintf(f, "%s\n  {\"op\": \"%s\", \"cell\": \"%s\", \"batch\": %lld, \"threads\": %d, \"median_us\": %.3f, "
                               "\"cpu_us\": %.3f, \"calls\": %d, \"bytes\": %.0f, \"state_bytes\": %.0f, \"gbs\": %.4f, "
                               "\"copy_gbs\": %.4f, \"frac_copy\": %.4f, \"cpu_gbs\": %.4f, \"copy_cpu_gbs\": %.4f, "
                               "\"frac_copy_cpu\": %.4f, \"state_fits_llc\": %s}",
                            first ? "" : ",", e->op, e->name, (long long)batches[bi], threads, med * 1e6,
                            cpu_sum / n * 1e6, n, bytes, c.state_bytes, gbs / 1e9, bw / 1e9, gbs / bw, cgbs / 1e9, cbw / 1e9,
                            cgbs / cbw, fits ? "true" : "false");
                first = 0;
                call_free(&c);
            }
        }
    }
    if (f) fprintf(f, "\n]}\n"), fclose(f);
    free(ca), free(cb);
    cg_context_free(ctx);
    return 0;
}
