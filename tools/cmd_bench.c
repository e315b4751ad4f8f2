/* cmd_bench.c -- `chunkgen bench`: the seeds' benchmark matrix, measured side by side.
 *
 * For every cell of the matrix (op, config, seq, mode) it allocates one set of inputs,
 * runs each implementation on them (chunkgen cpu, cuda with the tuned and with the
 * default config, emulate on small shapes, and the float64 scan reference), and writes
 * one JSON row per (impl, cell) in the seeds' schema: impl, mode, config, batch, groups,
 * heads, seq, dk, dv (the selective scan: shape {batch, seq, dim, state}), compile_s,
 * inner, median_ms, q1_ms, q3_ms, rel_err, rel_err_grads, peak_mb, and error or skipped,
 * plus roofline fields (flops, bytes, achieved fractions of the device's bounds).
 *
 * Accuracy: rel_err = max|out - ref| / max|ref| against the float64 reference run on the
 * SAME inputs. The reference is computed once per cell, on batch element 0 and at most
 * --ref-seq tokens (rel_err_note says when a row was cut); per (batch, head) slices run
 * on all threads. Timing: warm-up, then samples of `inner` back-to-back calls until both
 * --repeats samples and --min-time seconds are reached; median and quartiles per call.
 * docs/bench.md describes every field and the assumptions behind the roofline. */
#include "chunkgen.h"
#include "cmd_bench.h"
#include "gen.h"
#include "internal.h"
#include "cpu/cpu_isa.h"

#include <jansson.h>

#include <dlfcn.h>
#include <ftw.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static const char bench_usage[] =
    "usage: chunkgen bench [options]\n"
    "\n"
    "Runs the seeds' benchmark matrix and writes JSON rows in the seeds' schema.\n"
    "  SSD configs [batch, groups, heads, dk, dv]: g2h8_d128 [4,2,8,128,128],\n"
    "    g1h24_dk128_dv64 [2,1,24,128,64], g1h1_d128 [4,1,1,128,128], g2h4_dk48_dv40 [4,2,4,48,40]\n"
    "  selective scan: batch 4, dim 256/512/1024 (sscan_d256 ...), state 16\n"
    "  seq 512, 2048, 8192; modes fwd and fwd_bwd\n"
    "  impls: chunkgen_cpu, chunkgen_cuda (tuned), chunkgen_cuda_default, chunkgen_emulate\n"
    "         (seq <= --emu-max-seq), ref (float64 scan; skipped where too slow)\n"
    "Filters narrow the matrix; with none it runs all of it, except that a run without\n"
    "the cuda backend leaves out fwd_bwd at seq > 2048 unless --all is given.\n"
    "\n"
    "options (LIST = comma-separated values):\n"
    "  --backend LIST        cpu, cuda, emulate, ref (default: all that are available)\n"
    "  --impls LIST          exact impl names (overrides --backend)\n"
    "  --op ssd|sscan        one op only\n"
    "  --config LIST         config names (e.g. g1h1_d128, sscan_d512)\n"
    "  --seq LIST            sequence lengths (replace 512,2048,8192)\n"
    "  --mode fwd|fwd_bwd    one mode only\n"
    "  --ssd-shape NAME=B,G,H,DK,DV    a custom SSD config (repeatable; replaces the seeds';\n"
    "                                  given alone, it also means --op ssd)\n"
    "  --sscan-shape NAME=B,D,N        a custom selective-scan config (likewise)\n"
    "  --layout token|head   SSD tensor layout (default token: [B,T,heads,dim])\n"
    "  --all                 also run the slow cells left out by default\n"
    "  --threads N           CPU threads for chunkgen and the peers (0 = all cores, default)\n"
    "  --repeats N           samples at least (default 5)\n"
    "  --min-time S          seconds of samples at least, per row (default 1.0)\n"
    "  --warmup N            warm-up calls (default 1; the first one is compile_s)\n"
    "  --ref-seq N           tokens of the reference cut for rel_err (default 2048)\n"
    "  --ref-max-s S         skip the ref row when a call would take longer (default 2)\n"
    "  --emu-max-seq N       largest seq for chunkgen_emulate (default 64; with no --seq the\n"
    "                        matrix gains cells at that seq, for the emulator)\n"
    "  --no-check            skip rel_err (no reference run)\n"
    "  --no-probe            skip the peak FMA / bandwidth measurements\n"
    "  --commit STR          commit id recorded in the config block\n"
    "  --out FILE            JSON output (default: stdout)\n"
    "  --quiet               no progress lines on stderr\n";

/* ===================================================================== options */

#define MAXLIST 16

typedef struct custom_shape {
    char name[48];
    int64_t d[5];
} custom_shape;

typedef struct bench_opts {
    int want_cpu, want_cuda, want_emu, want_ref, want_cuda_def; /* -1 unset */
    int backend_given, impls_given;
    int op; /* 0 both, 1 ssd, 2 sscan */
    char configs[MAXLIST][48];
    int nconfigs;
    int64_t seqs[MAXLIST];
    int nseqs;
    int mode; /* 0 both, 1 fwd, 2 fwd_bwd */
    custom_shape ssd_custom[MAXLIST], sscan_custom[MAXLIST];
    int nssd_custom, nsscan_custom;
    cg_layout layout;
    int all, threads, repeats, warmup, check, probe, quiet;
    double min_time, ref_max_s;
    int64_t ref_seq, emu_max_seq;
    const char *commit, *out;
} bench_opts;

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...) {
    va_list ap;
    fputs("chunkgen bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(run `chunkgen bench --help` for the usage)\n", stderr);
    return 2;
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* Split a comma list into words of at most cap-1 chars; returns the count or -1. */
static int split_list(const char *s, char out[][48], int max) {
    int n = 0;
    while (*s) {
        const char *c = strchr(s, ',');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        if (len == 0 || len >= 48 || n >= max) return -1;
        memcpy(out[n], s, len);
        out[n][len] = 0;
        n++;
        s += len + (c ? 1 : 0);
    }
    return n;
}

static int parse_shape(const char *val, int want, custom_shape *cs) {
    const char *eq = strchr(val, '=');
    if (!eq || eq == val || (size_t)(eq - val) >= sizeof cs->name) return -1;
    memcpy(cs->name, val, (size_t)(eq - val));
    cs->name[eq - val] = 0;
    char words[MAXLIST][48];
    int n = split_list(eq + 1, words, MAXLIST);
    if (n != want) return -1;
    for (int i = 0; i < n; i++)
        if (parse_i64(words[i], 1, (int64_t)1 << 20, &cs->d[i])) return -1;
    return 0;
}

static int parse_opts(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->layout = CG_LAYOUT_TOKEN_MAJOR;
    o->repeats = 5;
    o->warmup = 1;
    o->min_time = 1.0;
    o->ref_seq = 2048;
    o->ref_max_s = 2.0;
    o->emu_max_seq = 64;
    o->check = 1;
    o->probe = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(bench_usage, stdout);
            return -1;
        }
        char name[32];
        const char *eq = strchr(a, '='), *val = NULL;
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        if (a[0] != '-' || nlen >= sizeof name) return usage_err("unexpected argument '%s'", a);
        memcpy(name, a, nlen);
        name[nlen] = 0;
        static const char *const flags[] = {"--all", "--no-check", "--no-probe", "--quiet", NULL};
        int is_flag = 0;
        for (int f = 0; flags[f]; f++) is_flag |= !strcmp(name, flags[f]);
        if (!is_flag) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else return usage_err("option %s needs a value", name);
        } else if (eq) {
            return usage_err("option %s takes no value", name);
        }
        int64_t iv;
        char words[MAXLIST][48];
        int nw;
        if (!strcmp(name, "--all")) o->all = 1;
        else if (!strcmp(name, "--no-check")) o->check = 0;
        else if (!strcmp(name, "--no-probe")) o->probe = 0;
        else if (!strcmp(name, "--quiet")) o->quiet = 1;
        else if (!strcmp(name, "--backend") || !strcmp(name, "--impls")) {
            int impls = !strcmp(name, "--impls");
            if ((nw = split_list(val, words, MAXLIST)) <= 0) return usage_err("%s: expected a comma list, got '%s'", name, val);
            if (impls) {
                o->impls_given = 1;
                o->want_cpu = o->want_cuda = o->want_cuda_def = o->want_emu = o->want_ref = 0;
            } else if (!o->impls_given) {
                o->backend_given = 1;
            }
            for (int w = 0; w < nw; w++) {
                const char *x = words[w];
                if (impls) {
                    if (!strcmp(x, "chunkgen_cpu")) o->want_cpu = 1;
                    else if (!strcmp(x, "chunkgen_cuda")) o->want_cuda = 1;
                    else if (!strcmp(x, "chunkgen_cuda_default")) o->want_cuda_def = 1;
                    else if (!strcmp(x, "chunkgen_emulate")) o->want_emu = 1;
                    else if (!strcmp(x, "ref")) o->want_ref = 1;
                    else return usage_err("--impls: unknown impl '%s' (expected chunkgen_cpu, chunkgen_cuda, "
                                          "chunkgen_cuda_default, chunkgen_emulate or ref)", x);
                } else if (!o->impls_given) {
                    if (!strcmp(x, "cpu")) o->want_cpu = 1;
                    else if (!strcmp(x, "cuda")) o->want_cuda = o->want_cuda_def = 1;
                    else if (!strcmp(x, "emulate")) o->want_emu = 1;
                    else if (!strcmp(x, "ref")) o->want_ref = 1;
                    else return usage_err("--backend: unknown backend '%s' (expected cpu, cuda, emulate or ref)", x);
                }
            }
        } else if (!strcmp(name, "--op")) {
            if (!strcmp(val, "ssd")) o->op = 1;
            else if (!strcmp(val, "sscan")) o->op = 2;
            else return usage_err("--op: expected ssd or sscan, got '%s'", val);
        } else if (!strcmp(name, "--config")) {
            if ((nw = split_list(val, o->configs + o->nconfigs, MAXLIST - o->nconfigs)) <= 0)
                return usage_err("--config: expected a comma list of config names, got '%s'", val);
            o->nconfigs += nw;
        } else if (!strcmp(name, "--seq")) {
            if ((nw = split_list(val, words, MAXLIST - o->nseqs)) <= 0)
                return usage_err("--seq: expected a comma list of lengths, got '%s'", val);
            for (int w = 0; w < nw; w++)
                if (parse_i64(words[w], 1, (int64_t)1 << 30, &o->seqs[o->nseqs++]))
                    return usage_err("--seq: expected integers in [1, 2^30], got '%s'", words[w]);
        } else if (!strcmp(name, "--mode")) {
            if (!strcmp(val, "fwd")) o->mode = 1;
            else if (!strcmp(val, "fwd_bwd")) o->mode = 2;
            else return usage_err("--mode: expected fwd or fwd_bwd, got '%s'", val);
        } else if (!strcmp(name, "--ssd-shape")) {
            if (o->nssd_custom >= MAXLIST || parse_shape(val, 5, &o->ssd_custom[o->nssd_custom]))
                return usage_err("--ssd-shape: expected NAME=B,G,H,DK,DV with positive integers, got '%s'", val);
            custom_shape *c = &o->ssd_custom[o->nssd_custom++];
            if (c->d[2] % c->d[1]) return usage_err("--ssd-shape %s: heads %lld is not a multiple of groups %lld",
                                                    c->name, (long long)c->d[2], (long long)c->d[1]);
        } else if (!strcmp(name, "--sscan-shape")) {
            if (o->nsscan_custom >= MAXLIST || parse_shape(val, 3, &o->sscan_custom[o->nsscan_custom]))
                return usage_err("--sscan-shape: expected NAME=B,D,N with positive integers, got '%s'", val);
            o->nsscan_custom++;
        } else if (!strcmp(name, "--layout")) {
            if (!strcmp(val, "token") || !strcmp(val, "bthd")) o->layout = CG_LAYOUT_TOKEN_MAJOR;
            else if (!strcmp(val, "head") || !strcmp(val, "bhtd")) o->layout = CG_LAYOUT_HEAD_MAJOR;
            else return usage_err("--layout: expected token or head, got '%s'", val);
        } else if (!strcmp(name, "--threads")) {
            if (parse_i64(val, 0, 4096, &iv)) return usage_err("--threads: expected an integer in 0..4096, got '%s'", val);
            o->threads = (int)iv;
        } else if (!strcmp(name, "--repeats")) {
            if (parse_i64(val, 1, 1000, &iv)) return usage_err("--repeats: expected an integer in 1..1000, got '%s'", val);
            o->repeats = (int)iv;
        } else if (!strcmp(name, "--warmup")) {
            if (parse_i64(val, 1, 100, &iv)) return usage_err("--warmup: expected an integer in 1..100, got '%s'", val);
            o->warmup = (int)iv;
        } else if (!strcmp(name, "--min-time")) {
            if (parse_f64(val, 0, 3600, &o->min_time)) return usage_err("--min-time: expected seconds in [0, 3600], got '%s'", val);
        } else if (!strcmp(name, "--ref-max-s")) {
            if (parse_f64(val, 0, 1e6, &o->ref_max_s)) return usage_err("--ref-max-s: expected seconds >= 0, got '%s'", val);
        } else if (!strcmp(name, "--ref-seq")) {
            if (parse_i64(val, 1, (int64_t)1 << 30, &o->ref_seq)) return usage_err("--ref-seq: expected an integer >= 1, got '%s'", val);
        } else if (!strcmp(name, "--emu-max-seq")) {
            if (parse_i64(val, 0, (int64_t)1 << 30, &o->emu_max_seq))
                return usage_err("--emu-max-seq: expected an integer >= 0, got '%s'", val);
        } else if (!strcmp(name, "--commit")) {
            o->commit = val;
        } else if (!strcmp(name, "--out")) {
            o->out = val;
        } else {
            return usage_err("unknown option '%s'", a);
        }
    }
    /* Custom shapes of one op only: run that op only. */
    if (!o->op && o->nssd_custom && !o->nsscan_custom) o->op = 1;
    if (!o->op && o->nsscan_custom && !o->nssd_custom) o->op = 2;
    if (!o->backend_given && !o->impls_given) o->want_cpu = o->want_cuda = o->want_cuda_def = o->want_emu = o->want_ref = 1;
    return 0;
}

/* ===================================================================== small utilities */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile p in [0, 1] of sorted v, linear between order statistics (numpy's default). */
static double pctl(const double *v, int n, double p) {
    if (n <= 0) return NAN;
    double pos = p * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

static int g_quiet;
static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
    if (g_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A JSON number, or null for a value that is not finite (jansson rejects NaN/Inf). */
static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* ===================================================================== memory probes */

/* kB value of `key` in /proc/self/status, or -1. */
static int64_t proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            v = strtoll(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Reset the peak RSS (VmHWM) to the current RSS; 0 on success. Linux >= 4.0. */
static int hwm_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* ===================================================================== CPU probes */

typedef struct cpu_info {
    char model[128];
    double mhz;          /* nominal clock from /proc/cpuinfo */
    int cores;           /* online */
    int lanes;           /* fp32 lanes of the widest FMA the CPU has (16 AVX-512, 8 AVX2) */
    const char *simd;
    double peak_nominal; /* GFLOP/s: threads * GHz * 2 FMA units * lanes * 2 */
    double peak_meas;    /* GFLOP/s of an FMA loop on `threads` threads */
    double bw_meas;      /* GB/s of a triad a = b + s c on `threads` threads */
} cpu_info;

static void cpu_model(cpu_info *ci) {
    snprintf(ci->model, sizeof ci->model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    int got_model = 0, got_mhz = 0;
    while (fgets(line, sizeof line, f) && !(got_model && got_mhz)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        if (!got_model && !strncmp(line, "model name", 10)) {
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(ci->model, sizeof ci->model, "%s", c);
            got_model = 1;
        } else if (!got_mhz && !strncmp(line, "cpu MHz", 7)) {
            ci->mhz = strtod(c + 1, NULL);
            got_mhz = 1;
        }
    }
    fclose(f);
}

#if defined(__x86_64__)
/* 12 independent FMA chains keep two FMA ports busy through a 4-cycle latency. */
#define FMA_CHAINS 12
__attribute__((target("avx512f"))) static float fma_loop_512(int64_t iters) {
    __m512 acc[FMA_CHAINS];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++)
        for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
    __m512 s = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++) s = _mm512_add_ps(s, acc[j]);
    return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) static float fma_loop_256(int64_t iters) {
    __m256 acc[FMA_CHAINS];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm256_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++)
        for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
    float out[8], s = 0;
    __m256 t = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++) t = _mm256_add_ps(t, acc[j]);
    _mm256_storeu_ps(out, t);
    for (int j = 0; j < 8; j++) s += out[j];
    return s;
}
#endif

typedef struct probe_arg {
    int lanes;
    int64_t iters;
    float sink;
    float *a, *b, *c;
    int64_t n, reps;
} probe_arg;

static void *fma_thread(void *p) {
    probe_arg *a = p;
#if defined(__x86_64__)
    a->sink = a->lanes == 16 ? fma_loop_512(a->iters) : fma_loop_256(a->iters);
#endif
    return NULL;
}

static void *triad_thread(void *p) {
    probe_arg *a = p;
    for (int64_t r = 0; r < a->reps; r++) {
        const float s = 1.0001f + (float)r * 1e-7f;
        for (int64_t i = 0; i < a->n; i++) a->a[i] = a->b[i] + s * a->c[i];
    }
    a->sink = a->a[a->n / 2];
    return NULL;
}

/* Run fn on nt threads with args[i]; wall seconds. */
static double run_threads(int nt, void *(*fn)(void *), probe_arg *args) {
    pthread_t th[64];
    double t0 = now_s();
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[i], NULL, fn, &args[i]) == 0) started = i;
        else break;
    fn(&args[0]);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    return now_s() - t0;
}

static void cpu_probe(cpu_info *ci, int threads, int measure) {
    memset(ci, 0, sizeof *ci);
    cpu_model(ci);
    ci->cores = cg__online_cores();
    ci->lanes = 4;
    ci->simd = "sse";
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) ci->lanes = 16, ci->simd = "avx512f";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ci->lanes = 8, ci->simd = "avx2+fma";
#endif
    ci->peak_nominal = threads * ci->mhz * 1e-3 * 2 * ci->lanes * 2;
    ci->peak_meas = NAN;
    ci->bw_meas = NAN;
    if (!measure) return;
    int nt = threads < 64 ? threads : 64;
    probe_arg args[64];
#if defined(__x86_64__)
    if (ci->lanes >= 8) {
        /* Calibrate to about 0.3 s, then take the best of 3. */
        int64_t iters = 1 << 20;
        for (int i = 0; i < nt; i++) args[i] = (probe_arg){.lanes = ci->lanes, .iters = iters};
        double t = run_threads(nt, fma_thread, args);
        iters = (int64_t)((double)iters * 0.3 / (t > 1e-4 ? t : 1e-4));
        if (iters < 1000) iters = 1000;
        double best = 0;
        for (int r = 0; r < 3; r++) {
            for (int i = 0; i < nt; i++) args[i] = (probe_arg){.lanes = ci->lanes, .iters = iters};
            t = run_threads(nt, fma_thread, args);
            double gf = (double)nt * (double)iters * FMA_CHAINS * ci->lanes * 2 / t * 1e-9;
            if (gf > best) best = gf;
        }
        ci->peak_meas = best;
    }
#endif
    /* Triad over 3 x 64 MiB per thread in total: out of the caches of most machines. */
    int64_t per = ((int64_t)16 << 20) / nt;
    float *mem = malloc((size_t)(3 * per * nt) * sizeof(float));
    if (!mem) return;
    for (int64_t i = 0; i < 3 * per * nt; i++) mem[i] = (float)(i & 1023) * 1e-3f;
    double best = 0;
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < nt; i++)
            args[i] = (probe_arg){.a = mem + (3 * i) * per, .b = mem + (3 * i + 1) * per, .c = mem + (3 * i + 2) * per,
                                  .n = per, .reps = 2};
        double t = run_threads(nt, triad_thread, args);
        double gbs = 3.0 * 4.0 * (double)per * nt * 2 / t * 1e-9;
        if (r > 0 && gbs > best) best = gbs; /* the first pass faults the pages in */
    }
    free(mem);
    ci->bw_meas = best;
}

/* ===================================================================== CUDA probes */

/* What the driver says about device 0, read through dlopen (the library keeps its own
 * handles; these are only attribute queries). */
/* The device the cuda impls run on: the CUDA driver, or (test hook, for machines without
 * a GPU) the SIMT emulator when CHUNKGEN_BENCH_FAKE_CUDA=emulate, so that the device-memory
 * path of this file (alloc, copies, sync, cut reruns) runs somewhere. */
static const cg_kexec *g_kx;
static cg_backend g_cuda_backend = CG_BACKEND_CUDA;
static int g_fake_cuda;

static void kexec_select(void) {
    const char *fake = getenv("CHUNKGEN_BENCH_FAKE_CUDA");
    g_kx = &cg__kexec_cuda;
    if (fake && !strcmp(fake, "emulate")) {
        g_kx = &cg__kexec_emu;
        g_cuda_backend = CG_BACKEND_EMULATE;
        g_fake_cuda = 1;
    }
}

typedef struct gpu_info {
    int ok;
    char why[256];
    char name[128];
    int arch, sm_count, driver;
    double clock_mhz, mem_clock_mhz, bus_bits, mem_gb;
    double fp32_peak_gflops; /* sm_count * fp32 lanes/SM * 2 * clock */
    double bw_peak_gbs;      /* 2 * mem clock * bus width / 8 */
    cg_devinfo dev;
} gpu_info;

static void gpu_probe(cg_context *ctx, gpu_info *gi) {
    memset(gi, 0, sizeof *gi);
    gi->fp32_peak_gflops = gi->bw_peak_gbs = NAN;
    if (!g_kx->device) {
        snprintf(gi->why, sizeof gi->why, "the CUDA backend is not built into this chunkgen");
        return;
    }
    cg_status s = g_kx->device(ctx, &gi->dev);
    if (s != CG_OK) {
        snprintf(gi->why, sizeof gi->why, "no CUDA device: %s", cg_errmsg(ctx));
        return;
    }
    gi->ok = 1;
    snprintf(gi->name, sizeof gi->name, "%s", gi->dev.name);
    gi->arch = gi->dev.arch;
    gi->sm_count = gi->dev.sm_count;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    typedef int (*init_t)(unsigned);
    typedef int (*dget_t)(int *, int);
    typedef int (*attr_t)(int *, int, int);
    typedef int (*ver_t)(int *);
    typedef int (*mem_t)(size_t *, int);
    init_t cu_init = (init_t)dlsym(h, "cuInit");
    dget_t cu_dev = (dget_t)dlsym(h, "cuDeviceGet");
    attr_t cu_attr = (attr_t)dlsym(h, "cuDeviceGetAttribute");
    ver_t cu_ver = (ver_t)dlsym(h, "cuDriverGetVersion");
    mem_t cu_mem = (mem_t)dlsym(h, "cuDeviceTotalMem_v2");
    int dev = 0, v = 0;
    if (cu_init && cu_dev && cu_attr && cu_init(0) == 0 && cu_dev(&dev, 0) == 0) {
        /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE 13, MEMORY_CLOCK_RATE 36, GLOBAL_MEMORY_BUS_WIDTH 37 (kHz, bits) */
        if (cu_attr(&v, 13, dev) == 0) gi->clock_mhz = v * 1e-3;
        if (cu_attr(&v, 36, dev) == 0) gi->mem_clock_mhz = v * 1e-3;
        if (cu_attr(&v, 37, dev) == 0) gi->bus_bits = v;
        size_t bytes = 0;
        if (cu_mem && cu_mem(&bytes, dev) == 0) gi->mem_gb = (double)bytes / (1024.0 * 1024 * 1024);
        if (cu_ver && cu_ver(&v) == 0) gi->driver = v;
    }
    dlclose(h);
    /* FP32 lanes per SM: 64 on sm_80 (A100) and sm_60/70, 128 on sm_86, sm_89, sm_90, sm_100+. */
    int lanes = (gi->arch == 80 || gi->arch < 75) ? 64 : 128;
    if (gi->clock_mhz > 0 && gi->sm_count > 0) gi->fp32_peak_gflops = gi->sm_count * lanes * 2.0 * gi->clock_mhz * 1e-3;
    if (gi->mem_clock_mhz > 0 && gi->bus_bits > 0) gi->bw_peak_gbs = 2.0 * gi->mem_clock_mhz * 1e6 * gi->bus_bits / 8 * 1e-9;
}

/* ===================================================================== the matrix */

typedef enum { OP_SSD = 1, OP_SSCAN = 2 } op_kind;

typedef struct bconfig {
    op_kind op;
    char name[48];
    int64_t B, G, H, dk, dv; /* SSD */
    int64_t D, N;            /* selective scan (B shared) */
} bconfig;

static const bconfig k_ssd_seed[] = {
    {OP_SSD, "g2h8_d128", 4, 2, 8, 128, 128, 0, 0},
    {OP_SSD, "g1h24_dk128_dv64", 2, 1, 24, 128, 64, 0, 0},
    {OP_SSD, "g1h1_d128", 4, 1, 1, 128, 128, 0, 0},
    {OP_SSD, "g2h4_dk48_dv40", 4, 2, 4, 48, 40, 0, 0},
};
static const bconfig k_sscan_seed[] = {
    {OP_SSCAN, "sscan_d256", 4, 0, 0, 0, 0, 256, 16},
    {OP_SSCAN, "sscan_d512", 4, 0, 0, 0, 0, 512, 16},
    {OP_SSCAN, "sscan_d1024", 4, 0, 0, 0, 0, 1024, 16},
};
static const int64_t k_seed_seqs[] = {512, 2048, 8192};

typedef enum { IMPL_CPU, IMPL_CUDA, IMPL_CUDA_DEF, IMPL_EMU, IMPL_REF, IMPL_COUNT } impl_kind;
static const char *const k_impl_names[IMPL_COUNT] = {"chunkgen_cpu", "chunkgen_cuda", "chunkgen_cuda_default",
                                                     "chunkgen_emulate", "ref"};

/* ===================================================================== tensors */

/* One float32 tensor of a cell, in the op's logical dim order (SSD: [b, t, g|h, i];
 * la: [b, t, h]; states [b, h, i, j]; sscan as in chunkgen.h). The memory order may be
 * a permutation (head-major SSD), so strides are kept per logical dim. */
typedef struct btensor {
    const char *name;
    int used, nd;
    int has_b, has_t; /* logical dim 0 is batch, dim 1 is time */
    int head_perm;    /* head-major: the API's dims 1 and 2 are logical 2 and 1 */
    int out;          /* written by the op */
    int64_t n[4], s[4], count;
    float *h;         /* host */
    void *d;          /* device (cuda) */
    double *ref;      /* float64 reference values of an output, on the cut, contiguous */
    int64_t rn[4];    /* the cut's shape */
} btensor;

enum { S_Q, S_K, S_V, S_LA, S_H0, S_O, S_HT, S_DO, S_DQ, S_DK, S_DV, S_DLA, S_DH0, S_COUNT };
enum { X_X, X_DELTA, X_A, X_B, X_C, X_D, X_Z, X_BIAS, X_Y, X_HT, X_DY, X_DX, X_DDELTA, X_DA, X_DB, X_DC, X_DD, X_DZ,
       X_DBIAS, X_COUNT };
#define MAX_T 20

typedef struct cell {
    const bconfig *cfg;
    int64_t seq;
    int bwd; /* fwd_bwd */
    cg_layout layout;
    btensor t[MAX_T];
    int nt;
    int64_t cut_t; /* tokens of the reference cut */
    int have_ref;
    char ref_err[512];
    double ref_rate; /* reference flop/s per thread, measured */
} cell;

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

static void cell_define(cell *c) {
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
static double tbytes(const btensor *t) { return t->used ? 4.0 * (double)t->count : 0; }

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
static const char k_inputs_ssd[] =
    "q, k, v, do, h0 ~ U(-1, 1); log_alpha ~ U(-0.5, -0.001); h0 given, hT returned, dhT absent";
static const char k_inputs_sscan[] =
    "x, z, dy ~ U(-1, 1); delta ~ U(-4, -1) with delta_softplus and delta_bias ~ U(-0.5, 0.5); "
    "A[d, n] = -(n + 1); B, C [B, L, N] (ungrouped) ~ U(-1, 1); D ~ U(-1, 1); h0 absent, hT returned";

static int cell_alloc(cell *c, char *err, size_t errlen) {
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

static void cell_free(cell *c) {
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

/* Memory (host or device) and the cut of one run. */
typedef struct bptrs {
    void *p[MAX_T];
    int64_t b, tt; /* 0: full */
} bptrs;

static void ssd_args(const cell *c, const bptrs *m, cg_ssd_fwd_args *f, cg_ssd_bwd_args *g) {
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

static void sscan_args(const cell *c, const bptrs *m, cg_sscan_fwd_args *f, cg_sscan_bwd_args *g) {
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

static void host_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < c->nt; i++) m->p[i] = c->t[i].used ? c->t[i].h : NULL;
    m->b = b;
    m->tt = tt;
}

/* ===================================================================== the float64 reference */

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

/* Reference flops per token and head (SSD) or per (token, channel, state) (sscan): a
 * model of the sequential scan's work, used only to predict the ref row's run time. */
static double ref_work(const cell *c, int64_t batch, int64_t tokens) {
    const bconfig *f = c->cfg;
    if (f->op == OP_SSD) return (double)batch * tokens * f->H * f->dk * f->dv * (c->bwd ? 17.0 : 4.0);
    return (double)batch * tokens * f->D * f->N * (c->bwd ? 31.0 : 7.0);
}

typedef struct ssd_ref_job {
    cell *c;
    double *in[S_COUNT];   /* float64 cut copies of the inputs */
    double *dqh, *dkh;     /* per-head dq, dk partials [H][Tc][dk] */
    atomic_int next;
    atomic_int failed;
    char err[512];
    pthread_mutex_t mu;
} ssd_ref_job;

static void *ssd_ref_worker(void *arg) {
    ssd_ref_job *j = arg;
    cell *c = j->c;
    const bconfig *f = c->cfg;
    const int64_t Tc = c->cut_t, G = f->G, H = f->H, dk = f->dk, dv = f->dv, hpg = H / G;
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) {
        atomic_store(&j->failed, 1);
        return NULL;
    }
    cg_exec ex = {.backend = CG_BACKEND_REF};
    for (;;) {
        int h = atomic_fetch_add(&j->next, 1);
        if (h >= H || atomic_load(&j->failed)) break;
        const int64_t g = h / hpg;
        btensor *t = c->t;
        cg_tensor q = f64_view(j->in[S_Q] + g * dk, 4, 1, Tc, 1, dk, Tc * G * dk, G * dk, dk, 1);
        cg_tensor k = f64_view(j->in[S_K] + g * dk, 4, 1, Tc, 1, dk, Tc * G * dk, G * dk, dk, 1);
#define HV(p) f64_view((p) + h * dv, 4, 1, Tc, 1, dv, Tc * H * dv, H * dv, dv, 1)
#define HL(p) f64_view((p) + h, 3, 1, Tc, 1, 0, Tc * H, H, 1, 0)
#define HS(p) f64_view((p) + h * dk * dv, 4, 1, 1, dk, dv, H * dk * dv, dk * dv, dv, 1)
        cg_status s;
        cg_ssd_fwd_args fa = {.layout = CG_LAYOUT_TOKEN_MAJOR, .q = q, .k = k, .v = HV(j->in[S_V]),
                              .log_alpha = HL(j->in[S_LA]), .h0 = HS(j->in[S_H0]), .o = HV(t[S_O].ref),
                              .hT = HS(t[S_HT].ref)};
        s = cg_ssd_fwd(ctx, &fa, &ex);
        if (s == CG_OK && c->bwd) {
            cg_ssd_bwd_args ba = {.layout = CG_LAYOUT_TOKEN_MAJOR, .q = q, .k = k, .v = HV(j->in[S_V]),
                                  .log_alpha = HL(j->in[S_LA]), .h0 = HS(j->in[S_H0]), .dout = HV(j->in[S_DO]),
                                  .dq = f64_view(j->dqh + h * Tc * dk, 4, 1, Tc, 1, dk, Tc * dk, dk, dk, 1),
                                  .dk = f64_view(j->dkh + h * Tc * dk, 4, 1, Tc, 1, dk, Tc * dk, dk, dk, 1),
                                  .dv = HV(t[S_DV].ref), .dlog_alpha = HL(t[S_DLA].ref), .dh0 = HS(t[S_DH0].ref)};
            s = cg_ssd_bwd(ctx, &ba, &ex);
        }
#undef HV
#undef HL
#undef HS
        if (s != CG_OK) {
            pthread_mutex_lock(&j->mu);
            if (!atomic_load(&j->failed))
                snprintf(j->err, sizeof j->err, "reference failed on head %d: %s: %s", h, cg_status_str(s), cg_errmsg(ctx));
            atomic_store(&j->failed, 1);
            pthread_mutex_unlock(&j->mu);
        }
    }
    cg_context_free(ctx);
    return NULL;
}

static int alloc_refs(cell *c, const int *outs, int nouts) {
    for (int i = 0; i < nouts; i++) {
        btensor *t = &c->t[outs[i]];
        if (!t->used) continue;
        cut_shape(c, t, t->rn);
        t->ref = calloc((size_t)prod4(t->rn), sizeof(double));
        if (!t->ref) return -1;
    }
    return 0;
}

static int ssd_reference(cell *c, int threads) {
    const bconfig *f = c->cfg;
    const int64_t Tc = c->cut_t, H = f->H, G = f->G, dk = f->dk, hpg = H / G;
    ssd_ref_job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    pthread_mutex_init(&j.mu, NULL);
    static const int outs[] = {S_O, S_HT, S_DQ, S_DK, S_DV, S_DLA, S_DH0};
    static const int ins[] = {S_Q, S_K, S_V, S_LA, S_H0, S_DO};
    int rc = -1;
    if (alloc_refs(c, outs, 7)) goto oom;
    for (int i = 0; i < 6; i++)
        if (c->t[ins[i]].used && !(j.in[ins[i]] = copy_cut_f64(c, &c->t[ins[i]]))) goto oom;
    if (c->bwd) {
        j.dqh = calloc((size_t)(H * Tc * dk), sizeof(double));
        j.dkh = calloc((size_t)(H * Tc * dk), sizeof(double));
        if (!j.dqh || !j.dkh) goto oom;
    }
    {
        int nt = threads < H ? threads : (int)H;
        if (nt < 1) nt = 1;
        if (nt > 64) nt = 64;
        pthread_t th[64];
        double t0 = now_s();
        int started = 0;
        for (int i = 1; i < nt; i++) {
            if (pthread_create(&th[i], NULL, ssd_ref_worker, &j) != 0) break;
            started = i;
        }
        ssd_ref_worker(&j);
        for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
        double wall = now_s() - t0;
        c->ref_rate = ref_work(c, 1, Tc) / (wall * (started + 1));
    }
    if (atomic_load(&j.failed)) {
        snprintf(c->ref_err, sizeof c->ref_err, "%s", j.err[0] ? j.err : "reference failed (context creation)");
        goto out;
    }
    if (c->bwd) {
        /* dq, dk of a group: the sum over its heads in head order, in float64. */
        double *dq = c->t[S_DQ].ref, *dkr = c->t[S_DK].ref;
        for (int64_t t = 0; t < Tc; t++)
            for (int64_t g = 0; g < G; g++)
                for (int64_t i = 0; i < dk; i++) {
                    double sq = 0, sk = 0;
                    for (int64_t h = g * hpg; h < (g + 1) * hpg; h++) {
                        sq += j.dqh[(h * Tc + t) * dk + i];
                        sk += j.dkh[(h * Tc + t) * dk + i];
                    }
                    dq[(t * G + g) * dk + i] = sq;
                    dkr[(t * G + g) * dk + i] = sk;
                }
    }
    c->have_ref = 1;
    rc = 0;
    goto out;
oom:
    snprintf(c->ref_err, sizeof c->ref_err, "out of host memory for the float64 reference");
out:
    for (int i = 0; i < S_COUNT; i++) free(j.in[i]);
    free(j.dqh);
    free(j.dkh);
    pthread_mutex_destroy(&j.mu);
    return rc;
}

static int sscan_reference(cell *c) {
    static const int outs[] = {X_Y, X_HT, X_DX, X_DDELTA, X_DA, X_DB, X_DC, X_DD, X_DZ, X_DBIAS};
    static const int ins[] = {X_X, X_DELTA, X_A, X_B, X_C, X_D, X_Z, X_BIAS, X_DY};
    double *in[X_COUNT] = {0};
    int rc = -1;
    cg_context *ctx = NULL;
    if (alloc_refs(c, outs, 10)) goto oom;
    for (int i = 0; i < 9; i++)
        if (c->t[ins[i]].used && !(in[ins[i]] = copy_cut_f64(c, &c->t[ins[i]]))) goto oom;
    if (cg_context_create(&ctx) != CG_OK) goto oom;
    {
        const bconfig *f = c->cfg;
        const int64_t L = c->cut_t, D = f->D, N = f->N;
#define R3(p, n2) f64_view((p), 3, 1, L, n2, 0, L * (n2), n2, 1, 0)
#define RA(p) f64_view((p), 2, D, N, 0, 0, N, 1, 0, 0)
#define RD(p) f64_view((p), 1, D, 0, 0, 0, 1, 0, 0, 0)
        cg_exec ex = {.backend = CG_BACKEND_REF};
        btensor *t = c->t;
        double t0 = now_s();
        cg_sscan_fwd_args fa = {.x = R3(in[X_X], D), .delta = R3(in[X_DELTA], D), .A = RA(in[X_A]), .B = R3(in[X_B], N),
                                .C = R3(in[X_C], N), .D = RD(in[X_D]), .z = R3(in[X_Z], D),
                                .delta_bias = RD(in[X_BIAS]), .delta_softplus = 1, .y = R3(t[X_Y].ref, D),
                                .hT = f64_view(t[X_HT].ref, 3, 1, D, N, 0, D * N, N, 1, 0)};
        cg_status s = cg_sscan_fwd(ctx, &fa, &ex);
        if (s == CG_OK && c->bwd) {
            cg_sscan_bwd_args ba = {.x = fa.x, .delta = fa.delta, .A = fa.A, .B = fa.B, .C = fa.C, .D = fa.D, .z = fa.z,
                                    .delta_bias = fa.delta_bias, .delta_softplus = 1, .dy = R3(in[X_DY], D),
                                    .dx = R3(t[X_DX].ref, D), .ddelta = R3(t[X_DDELTA].ref, D), .dA = RA(t[X_DA].ref),
                                    .dB = R3(t[X_DB].ref, N), .dC = R3(t[X_DC].ref, N), .dD = RD(t[X_DD].ref),
                                    .dz = R3(t[X_DZ].ref, D), .ddelta_bias = RD(t[X_DBIAS].ref)};
            s = cg_sscan_bwd(ctx, &ba, &ex);
        }
#undef R3
#undef RA
#undef RD
        c->ref_rate = ref_work(c, 1, L) / (now_s() - t0);
        if (s != CG_OK) {
            snprintf(c->ref_err, sizeof c->ref_err, "reference failed: %s: %s", cg_status_str(s), cg_errmsg(ctx));
            goto out;
        }
    }
    c->have_ref = 1;
    rc = 0;
    goto out;
oom:
    snprintf(c->ref_err, sizeof c->ref_err, "out of host memory for the float64 reference");
out:
    for (int i = 0; i < X_COUNT; i++) free(in[i]);
    cg_context_free(ctx);
    return rc;
}

/* max |a - ref| / max |ref| over the cut of t (a read from host memory with t's strides).
 * NaN when a holds a NaN. ref max 0: the absolute error. */
static double rel_err_cut(const btensor *t) {
    const int64_t *rn = t->rn;
    double emax = 0, rmax = 0;
    int nan = 0;
    int64_t k = 0;
    for (int64_t a = 0; a < rn[0]; a++)
        for (int64_t b = 0; b < rn[1]; b++)
            for (int64_t e = 0; e < rn[2]; e++)
                for (int64_t f = 0; f < rn[3]; f++) {
                    double x = t->h[a * t->s[0] + b * t->s[1] + e * t->s[2] + f * t->s[3]], r = t->ref[k++];
                    double d = fabs(x - r);
                    if (d != d) nan = 1;
                    if (d > emax) emax = d;
                    if (fabs(r) > rmax) rmax = fabs(r);
                }
    if (nan) return NAN;
    return rmax > 0 ? emax / rmax : emax;
}

/* ===================================================================== running one impl */

typedef struct runner {
    cell *c;
    impl_kind impl;
    cg_context *ctx;
    cg_exec ex;
    int cuda;          /* device memory; sync after each sample */
    char msg[1024];
    int skipped;       /* msg is a reason to skip, not an error */
} runner;

static int runner_fail(runner *r, cg_status s, const char *what) {
    r->skipped = s == CG_EUNSUPPORTED || s == CG_ENODEV;
    snprintf(r->msg, sizeof r->msg, "%s: %s: %s", what, cg_status_str(s), cg_errmsg(r->ctx));
    return -1;
}

static void device_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < c->nt; i++) m->p[i] = c->t[i].used ? c->t[i].d : NULL;
    m->b = b;
    m->tt = tt;
}

/* One fwd (and bwd for fwd_bwd) call on memory m. */
static int run_call(runner *r, const bptrs *m) {
    cell *c = r->c;
    cg_status s;
    if (c->cfg->op == OP_SSD) {
        cg_ssd_fwd_args f;
        cg_ssd_bwd_args g;
        ssd_args(c, m, &f, c->bwd ? &g : NULL);
        if ((s = cg_ssd_fwd(r->ctx, &f, &r->ex)) != CG_OK) return runner_fail(r, s, "cg_ssd_fwd");
        if (c->bwd && (s = cg_ssd_bwd(r->ctx, &g, &r->ex)) != CG_OK) return runner_fail(r, s, "cg_ssd_bwd");
    } else {
        cg_sscan_fwd_args f;
        cg_sscan_bwd_args g;
        sscan_args(c, m, &f, c->bwd ? &g : NULL);
        if ((s = cg_sscan_fwd(r->ctx, &f, &r->ex)) != CG_OK) return runner_fail(r, s, "cg_sscan_fwd");
        if (c->bwd && (s = cg_sscan_bwd(r->ctx, &g, &r->ex)) != CG_OK) return runner_fail(r, s, "cg_sscan_bwd");
    }
    return 0;
}

static int run_sync(runner *r) {
    if (!r->cuda) return 0;
    cg_status s = g_kx->sync(r->ctx, NULL);
    return s == CG_OK ? 0 : runner_fail(r, s, "stream sync");
}

typedef struct meas {
    double compile_s, median_ms, q1_ms, q3_ms;
    double cpu_ms; /* median process CPU time per call (all threads) */
    int inner, samples;
    double workspace_mb; /* NaN: unknown */
} meas;

#define MAX_SAMPLES 200

/* Device timing (cuda, or its emulate stand-in): the executor's L2 flush and timer. */
static int gpu_timed(const runner *r) {
    return r->cuda && g_kx->flush_l2 && g_kx->timer_start && g_kx->timer_stop;
}

/* One device sample of `inner` calls: L2 flushed outside the timed region, then the
 * executor's timer (CUDA events on the call's stream) around the calls. */
static int run_timed_gpu(runner *r, const bptrs *m, int inner, double *sec) {
    void *tok = NULL;
    double ms = 0;
    cg_status s = g_kx->flush_l2(r->ctx, r->ex.stream);
    if (s != CG_OK) return runner_fail(r, s, "L2 flush");
    if ((s = g_kx->timer_start(r->ctx, r->ex.stream, &tok)) != CG_OK) return runner_fail(r, s, "device timer start");
    for (int i = 0; i < inner; i++) {
        if (run_call(r, m)) {
            (void)g_kx->timer_stop(r->ctx, r->ex.stream, tok, &ms); /* releases the timer; r->msg kept */
            return -1;
        }
    }
    if ((s = g_kx->timer_stop(r->ctx, r->ex.stream, tok, &ms)) != CG_OK) return runner_fail(r, s, "device timer stop");
    *sec = 1e-3 * ms;
    return 0;
}

/* Warm-up (the first call is compile_s), then samples of `inner` calls until both
 * `repeats` samples and `min_time` seconds; a call slower than 2 * min_time takes at
 * most 3 samples of one call. On the device every sample is one call (inner = 1) timed
 * by run_timed_gpu, so each starts with a cold L2. */
static int measure(runner *r, const bptrs *m, const bench_opts *o, meas *out) {
    memset(out, 0, sizeof *out);
    out->workspace_mb = NAN;
    int hwm_ok = !r->cuda && hwm_reset() == 0;
    int64_t rss0 = proc_status_kb("VmRSS");
    double t0 = now_s();
    if (run_call(r, m) || run_sync(r)) return -1;
    out->compile_s = now_s() - t0;
    double t1 = out->compile_s;
    if (r->impl != IMPL_REF) { /* the reference compiles nothing: its first call is the calibration */
        for (int w = 1; w < o->warmup; w++)
            if (run_call(r, m) || run_sync(r)) return -1;
        t0 = now_s();
        if (run_call(r, m) || run_sync(r)) return -1;
        t1 = now_s() - t0;
    }
    static double v[MAX_SAMPLES], vc[MAX_SAMPLES];
    int n = 0, nc = 0, inner = 1, want = o->repeats;
    double total = 0;
    if (t1 > 2 * o->min_time) {
        want = o->repeats < 3 ? o->repeats : 3;
        v[n++] = t1;
    } else {
        double per = o->min_time / o->repeats;
        inner = t1 > 0 ? (int)(per / t1) : 1000;
        if (inner < 1) inner = 1;
        if (inner > 100000) inner = 100000;
        if (gpu_timed(r)) inner = 1;
    }
    while (n < MAX_SAMPLES && (n < want || (total < o->min_time && !(t1 > 2 * o->min_time)))) {
        double c0 = cpu_s(), dt = 0;
        if (gpu_timed(r)) {
            if (run_timed_gpu(r, m, inner, &dt)) return -1;
        } else {
            t0 = now_s();
            for (int i = 0; i < inner; i++)
                if (run_call(r, m)) return -1;
            if (run_sync(r)) return -1;
            dt = now_s() - t0;
        }
        vc[nc++] = (cpu_s() - c0) / inner;
        total += dt;
        v[n++] = dt / inner;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    qsort(vc, (size_t)nc, sizeof *vc, cmp_dbl);
    out->cpu_ms = 1e3 * pctl(vc, nc, 0.5);
    out->median_ms = 1e3 * pctl(v, n, 0.5);
    out->q1_ms = 1e3 * pctl(v, n, 0.25);
    out->q3_ms = 1e3 * pctl(v, n, 0.75);
    out->inner = inner;
    out->samples = n;
    if (hwm_ok && rss0 >= 0) {
        int64_t hwm = proc_status_kb("VmHWM");
        if (hwm >= 0) out->workspace_mb = (double)(hwm > rss0 ? hwm - rss0 : 0) / 1024.0;
    }
    return 0;
}

/* ===================================================================== device memory (cuda) */

static int cuda_cell_alloc(cell *c, cg_context *ctx, char *err, size_t errlen) {
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used) continue;
        cg_status s = g_kx->alloc(ctx, (size_t)t->count * sizeof(float), &t->d);
        if (s != CG_OK) {
            snprintf(err, errlen, "device alloc of %s (%lld floats): %s: %s", t->name, (long long)t->count,
                     cg_status_str(s), cg_errmsg(ctx));
            return -1;
        }
    }
    return 0;
}

static void cuda_cell_free(cell *c, cg_context *ctx) {
    for (int i = 0; i < c->nt; i++)
        if (c->t[i].d) {
            g_kx->free(ctx, c->t[i].d);
            c->t[i].d = NULL;
        }
}

/* dir 0: every used tensor host -> device (outputs too: they carry the NaN fill);
 * dir 1: outputs device -> host. */
static int cuda_copy(cell *c, cg_context *ctx, int dir, char *err, size_t errlen) {
    for (int i = 0; i < c->nt; i++) {
        btensor *t = &c->t[i];
        if (!t->used || (dir == 1 && !t->out)) continue;
        size_t bytes = (size_t)t->count * sizeof(float);
        cg_status s = dir == 0 ? g_kx->copy(ctx, t->d, t->h, bytes, 0, NULL) : g_kx->copy(ctx, t->h, t->d, bytes, 1, NULL);
        if (s == CG_OK) s = g_kx->sync(ctx, NULL);
        if (s != CG_OK) {
            snprintf(err, errlen, "copy of %s %s: %s: %s", t->name, dir ? "to the host" : "to the device",
                     cg_status_str(s), cg_errmsg(ctx));
            return -1;
        }
    }
    return 0;
}

/* Outputs filled with NaN before each impl, so an output it never writes shows. */
static void poison_outputs(cell *c) {
    for (int i = 0; i < c->nt; i++)
        if (c->t[i].used && c->t[i].out) memset(c->t[i].h, 0xff, (size_t)c->t[i].count * sizeof(float));
}

/* ===================================================================== roofline */

/* Flops of the chunked algorithm with chunk C (see docs/bench.md): per (b, h) and chunk of
 * c tokens, forward c(c+1)(dk+dv) for the causal halves of Q K^T and P V plus 4 c dk dv for
 * Q S0 and the chunk state; backward c(c+1)(3dk+2dv) + 10 c dk dv + 4 c dk. */
static double ssd_flops(const bconfig *f, int64_t T, int64_t C, int bwd) {
    double dk = (double)f->dk, dv = (double)f->dv, tot = 0;
    for (int part = 0; part < 2; part++) {
        double c = (double)(part ? T % C : C), nchunks = (double)(part ? (T % C ? 1 : 0) : T / C);
        if (nchunks == 0) continue;
        double fw = c * (c + 1) * (dk + dv) + 4 * c * dk * dv;
        double bw = c * (c + 1) * (3 * dk + 2 * dv) + 10 * c * dk * dv + 4 * c * dk;
        tot += nchunks * (fw + (bwd ? bw : 0));
    }
    return tot * (double)f->B * (double)f->H;
}

/* Selective scan: per (b, l, d, n) 7 flops forward and 24 backward (recompute included),
 * per (b, l, d) 11 forward and 20 backward; exp, softplus and sigmoid count as one. */
static double sscan_flops(const bconfig *f, int64_t L, int bwd) {
    double e = (double)f->B * (double)L * (double)f->D;
    double fw = e * (7.0 * f->N + 11), bw = e * (24.0 * f->N + 20);
    return fw + (bwd ? bw : 0);
}

/* Bytes every call must move at least: each input read once, each output written once
 * (fwd_bwd: the forward's and the backward's, each reading the inputs). */
static double cell_bytes(const cell *c) {
    const btensor *t = c->t;
    double fwd = 0, bwd = 0;
    if (c->cfg->op == OP_SSD) {
        for (int i = S_Q; i <= S_HT; i++) fwd += tbytes(&t[i]);
        if (c->bwd) {
            for (int i = S_Q; i <= S_H0; i++) bwd += tbytes(&t[i]);
            for (int i = S_DO; i <= S_DH0; i++) bwd += tbytes(&t[i]);
        }
    } else {
        for (int i = X_X; i <= X_HT; i++) fwd += tbytes(&t[i]);
        if (c->bwd) {
            for (int i = X_X; i <= X_BIAS; i++) bwd += tbytes(&t[i]);
            for (int i = X_DY; i <= X_DBIAS; i++) bwd += tbytes(&t[i]);
        }
    }
    return fwd + bwd;
}

/* The chunk named in a dispatch line ("... config=chunk=64,..."), or 0. */
static int64_t dispatch_chunk(const char *line) {
    const char *p = line ? strstr(line, "chunk=") : NULL;
    if (!p) return 0;
    if (p > line && p[-1] != '=' && p[-1] != ',' && p[-1] != ' ') return 0;
    return strtoll(p + 6, NULL, 10);
}

/* ===================================================================== the run */

typedef struct bench {
    bench_opts *o;
    int threads;
    cpu_info ci;
    gpu_info gi;
    cg_context *ctx_cpu, *ctx_cuda, *ctx_cuda_def, *ctx_emu, *ctx_ref;
    int want[IMPL_COUNT];
    char unavailable[IMPL_COUNT][320]; /* non-empty: the impl cannot run here, and why */
    char def_cache[256];
    json_t *doc, *results;
    int errors;
    int cpu_subset; /* fwd_bwd at seq > 2048 left out */
} bench;

static json_t *row_base(const bench *bn, const cell *c, impl_kind impl) {
    const bconfig *f = c->cfg;
    json_t *r = json_object();
    json_object_set_new(r, "impl", json_string(k_impl_names[impl]));
    json_object_set_new(r, "op", json_string(f->op == OP_SSD ? "ssd" : "sscan"));
    json_object_set_new(r, "mode", json_string(c->bwd ? "fwd_bwd" : "fwd"));
    json_object_set_new(r, "config", json_string(f->name));
    if (f->op == OP_SSD) {
        json_object_set_new(r, "batch", json_integer(f->B));
        json_object_set_new(r, "groups", json_integer(f->G));
        json_object_set_new(r, "heads", json_integer(f->H));
        json_object_set_new(r, "seq", json_integer(c->seq));
        json_object_set_new(r, "dk", json_integer(f->dk));
        json_object_set_new(r, "dv", json_integer(f->dv));
        json_object_set_new(r, "layout", json_string(c->layout == CG_LAYOUT_HEAD_MAJOR ? "head" : "token"));
    } else {
        json_t *s = json_object();
        json_object_set_new(s, "batch", json_integer(f->B));
        json_object_set_new(s, "seq", json_integer(c->seq));
        json_object_set_new(s, "dim", json_integer(f->D));
        json_object_set_new(s, "state", json_integer(f->N));
        json_object_set_new(r, "shape", s);
    }
    int th = impl == IMPL_REF ? 1 : (impl == IMPL_CPU || impl == IMPL_EMU) ? bn->threads : 0;
    if (th) json_object_set_new(r, "threads", json_integer(th));
    return r;
}

static void row_fail(bench *bn, json_t *row, int skipped, const char *msg) {
    json_object_set_new(row, skipped ? "skipped" : "error", json_string(msg));
    if (!skipped) bn->errors++;
    progress("  %-22s %s: %s", json_string_value(json_object_get(row, "impl")), skipped ? "skipped" : "ERROR", msg);
}

/* Whether an impl's rel_err needs its own run on the cut (not the timed run's outputs). */
static int needs_cut_run(const cell *c) {
    if (c->cut_t < c->seq) return 1;
    return c->cfg->op == OP_SSCAN && c->bwd && c->cfg->B > 1; /* dA, dD, ddelta_bias sum over the batch */
}

static void add_rel_err(const cell *c, json_t *row) {
    double all = 0;
    int nan = 0;
    json_t *outs = json_object(), *grads = json_object();
    for (int i = 0; i < c->nt; i++) {
        const btensor *t = &c->t[i];
        if (!t->used || !t->out || !t->ref) continue;
        double e = rel_err_cut(t);
        if (e != e) nan = 1;
        else if (e > all) all = e;
        int is_grad = c->cfg->op == OP_SSD ? i >= S_DQ : i >= X_DX;
        json_object_set_new(is_grad ? grads : outs, t->name, jnum(e));
    }
    json_object_set_new(row, "rel_err", nan ? json_null() : json_real(all));
    if (c->bwd) json_object_set_new(row, "rel_err_grads", grads);
    else json_decref(grads);
    json_object_set_new(row, "rel_err_outputs", outs);
    char note[256] = "";
    const int64_t B = c->cfg->B;
    if (c->cut_t < c->seq)
        snprintf(note, sizeof note, "reference on batch[0:1], seq[0:%lld] of %lld; the impl rerun on that cut",
                 (long long)c->cut_t, (long long)c->seq);
    else if (needs_cut_run(c))
        snprintf(note, sizeof note, "reference on batch[0:1] of %lld; the impl rerun on that cut", (long long)B);
    else if (B > 1)
        snprintf(note, sizeof note, "reference on batch[0:1] of %lld, compared with the timed run's outputs", (long long)B);
    if (nan) snprintf(note + strlen(note), sizeof note - strlen(note), "%sNaN in the outputs", note[0] ? "; " : "");
    if (note[0]) json_object_set_new(row, "rel_err_note", json_string(note));
}

static void add_roofline(const bench *bn, const cell *c, impl_kind impl, const char *dispatch, const meas *m,
                         json_t *row) {
    const bconfig *f = c->cfg;
    double flops;
    if (f->op == OP_SSD) {
        int64_t chunk = dispatch_chunk(dispatch);
        if (chunk <= 0 && impl == IMPL_CPU) {
            cg_ssd_prob p;
            memset(&p, 0, sizeof p);
            p.B = f->B, p.T = c->seq, p.G = f->G, p.H = f->H, p.dk = f->dk, p.dv = f->dv;
            cg_ssd_cpu_params d;
            if (cg__ssd_cpu_params_default(bn->ctx_cpu, &p, c->bwd, &d) == CG_OK) chunk = d.chunk;
        }
        if (chunk <= 0) chunk = 64;
        flops = ssd_flops(f, c->seq, chunk, c->bwd);
        json_object_set_new(row, "flops_chunk", json_integer(chunk));
    } else {
        flops = sscan_flops(f, c->seq, c->bwd);
    }
    double bytes = cell_bytes(c), sec = m->median_ms * 1e-3;
    json_object_set_new(row, "flops", jnum(flops));
    json_object_set_new(row, "bytes", jnum(bytes));
    json_object_set_new(row, "gflops", jnum(flops / sec * 1e-9));
    json_object_set_new(row, "gbs", jnum(bytes / sec * 1e-9));
    double P = NAN, W = NAN;
    if (impl == IMPL_CPU) {
        /* The larger of the measured and the nominal peak: a busy machine measures low,
         * and a fraction must never look better than it is. */
        double meas = bn->ci.peak_meas, nom = bn->ci.peak_nominal;
        P = isfinite(meas) && meas > nom ? meas : nom;
        W = bn->ci.bw_meas;
        json_object_set_new(row, "frac_flops_nominal", jnum(flops / sec * 1e-9 / nom));
        if (isfinite(meas)) json_object_set_new(row, "frac_flops_measured", jnum(flops / sec * 1e-9 / meas));
    } else if (impl == IMPL_CUDA || impl == IMPL_CUDA_DEF) {
        P = bn->gi.fp32_peak_gflops, W = bn->gi.bw_peak_gbs;
    }
    if (isfinite(P) && isfinite(W) && P > 0 && W > 0) {
        double gf = flops / sec * 1e-9, gb = bytes / sec * 1e-9, ai = flops / bytes;
        double roof = ai * W < P ? ai * W : P;
        json_object_set_new(row, "frac_flops", jnum(gf / P));
        json_object_set_new(row, "frac_bw", jnum(gb / W));
        json_object_set_new(row, "frac_roofline", jnum(gf / roof));
        json_object_set_new(row, "bound", json_string(ai * W < P ? "bandwidth" : "flops"));
    }
}

static double cell_tensor_mb(const cell *c) {
    double b = 0;
    for (int i = 0; i < c->nt; i++) b += tbytes(&c->t[i]);
    return b / (1024.0 * 1024.0);
}

static cg_context *impl_ctx(bench *bn, impl_kind impl) {
    switch (impl) {
    case IMPL_CPU: return bn->ctx_cpu;
    case IMPL_CUDA: return bn->ctx_cuda;
    case IMPL_CUDA_DEF: return bn->ctx_cuda_def;
    case IMPL_EMU: return bn->ctx_emu;
    default: return bn->ctx_ref;
    }
}

static const cg_backend k_impl_backend[IMPL_COUNT] = {CG_BACKEND_CPU, CG_BACKEND_CUDA, CG_BACKEND_CUDA,
                                                     CG_BACKEND_EMULATE, CG_BACKEND_REF};

static void run_impl(bench *bn, cell *c, impl_kind impl, int *cuda_ready) {
    const bench_opts *o = bn->o;
    json_t *row = row_base(bn, c, impl);
    json_array_append_new(bn->results, row);
    if (bn->unavailable[impl][0]) {
        row_fail(bn, row, 1, bn->unavailable[impl]);
        return;
    }
    if (impl == IMPL_REF) {
        double rate = c->ref_rate > 0 ? c->ref_rate : 5e8;
        double pred = ref_work(c, c->cfg->B, c->seq) / rate;
        if (pred > o->ref_max_s) {
            char why[256];
            snprintf(why, sizeof why, "too slow: about %.0f s per call predicted from the reference cut (--ref-max-s %g)",
                     pred, o->ref_max_s);
            row_fail(bn, row, 1, why);
            return;
        }
    }
    runner r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.impl = impl;
    r.ctx = impl_ctx(bn, impl);
    r.ex.backend = k_impl_backend[impl];
    if (impl == IMPL_CUDA || impl == IMPL_CUDA_DEF) r.ex.backend = g_cuda_backend;
    r.cuda = impl == IMPL_CUDA || impl == IMPL_CUDA_DEF;
    char err[512];
    poison_outputs(c);
    bptrs m;
    if (r.cuda) {
        if (!*cuda_ready) {
            if (cuda_cell_alloc(c, bn->ctx_cuda, err, sizeof err)) {
                row_fail(bn, row, 0, err);
                return;
            }
            *cuda_ready = 1;
        }
        if (cuda_copy(c, bn->ctx_cuda, 0, err, sizeof err)) {
            row_fail(bn, row, 0, err);
            return;
        }
        device_ptrs(c, &m, 0, 0);
    } else {
        host_ptrs(c, &m, 0, 0);
    }
    meas ms;
    if (measure(&r, &m, o, &ms)) {
        row_fail(bn, row, r.skipped, r.msg);
        return;
    }
    char dispatch[CG_DISPATCH_CAP];
    snprintf(dispatch, sizeof dispatch, "%s", cg_last_dispatch(r.ctx));
    json_object_set_new(row, "compile_s", jnum(ms.compile_s));
    json_object_set_new(row, "inner", json_integer(ms.inner));
    json_object_set_new(row, "samples", json_integer(ms.samples));
    json_object_set_new(row, "median_ms", jnum(ms.median_ms));
    json_object_set_new(row, "q1_ms", jnum(ms.q1_ms));
    json_object_set_new(row, "q3_ms", jnum(ms.q3_ms));
    json_object_set_new(row, "cpu_ms", jnum(ms.cpu_ms));
    if (c->have_ref) {
        int ok = 1;
        if (needs_cut_run(c)) {
            bptrs mc = m;
            mc.b = 1;
            mc.tt = c->cut_t;
            ok = !run_call(&r, &mc) && !run_sync(&r);
            if (!ok) row_fail(bn, row, 0, r.msg);
        }
        if (ok && r.cuda && cuda_copy(c, bn->ctx_cuda, 1, err, sizeof err)) {
            row_fail(bn, row, 0, err);
            ok = 0;
        }
        if (ok) add_rel_err(c, row);
    } else if (o->check) {
        json_object_set_new(row, "rel_err", json_null());
        json_object_set_new(row, "rel_err_note", json_string(c->ref_err[0] ? c->ref_err : "no reference"));
    }
    double tensors = cell_tensor_mb(c);
    if (r.cuda) {
        json_object_set_new(row, "peak_mb", jnum(tensors));
        json_object_set_new(row, "peak_mb_note", json_string("device tensors of the call only (the library's workspace is not counted)"));
    } else {
        json_object_set_new(row, "peak_mb", jnum(tensors + (isfinite(ms.workspace_mb) ? ms.workspace_mb : 0)));
        json_object_set_new(row, "workspace_mb", jnum(ms.workspace_mb));
    }
    add_roofline(bn, c, impl, dispatch, &ms, row);
    if (dispatch[0]) json_object_set_new(row, "dispatch", json_string(dispatch));
    json_t *re = json_object_get(row, "rel_err");
    progress("  %-22s median %10.3f ms  [%.3f, %.3f]  inner %d x %d  rel_err %s", k_impl_names[impl], ms.median_ms,
             ms.q1_ms, ms.q3_ms, ms.inner, ms.samples,
             json_is_real(re) ? (snprintf(err, sizeof err, "%.2e", json_real_value(re)), err) : "-");
}

static void run_cell(bench *bn, const bconfig *f, int64_t seq, int bwd) {
    const bench_opts *o = bn->o;
    cell *c = calloc(1, sizeof *c);
    if (!c) return;
    c->cfg = f;
    c->seq = seq;
    c->bwd = bwd;
    c->layout = o->layout;
    cell_define(c);
    progress("%s %s seq %lld %s", f->op == OP_SSD ? "ssd" : "sscan", f->name, (long long)seq, bwd ? "fwd_bwd" : "fwd");
    char err[512];
    int impls[IMPL_COUNT], n = 0;
    for (int i = 0; i < IMPL_COUNT; i++) {
        if (!bn->want[i]) continue;
        if (i == IMPL_EMU && seq > o->emu_max_seq) continue;
        impls[n++] = i;
    }
    if (cell_alloc(c, err, sizeof err)) {
        for (int i = 0; i < n; i++) {
            json_t *row = row_base(bn, c, (impl_kind)impls[i]);
            json_array_append_new(bn->results, row);
            row_fail(bn, row, 0, err);
        }
        cell_free(c);
        free(c);
        return;
    }
    if (o->check) {
        c->cut_t = seq < o->ref_seq ? seq : o->ref_seq;
        double t0 = now_s();
        if (f->op == OP_SSD) ssd_reference(c, bn->threads);
        else sscan_reference(c);
        progress("  reference on batch 0, %lld tokens: %.2f s%s%s", (long long)c->cut_t, now_s() - t0,
                 c->ref_err[0] ? ": " : "", c->ref_err);
    }
    int cuda_ready = 0;
    for (int i = 0; i < n; i++) run_impl(bn, c, (impl_kind)impls[i], &cuda_ready);
    if (cuda_ready) cuda_cell_free(c, bn->ctx_cuda);
    cell_free(c);
    free(c);
}

/* ===================================================================== JSON document */

static json_t *device_block(const bench *bn) {
    const cpu_info *ci = &bn->ci;
    const gpu_info *gi = &bn->gi;
    json_t *d = json_object();
    int gpu_run = gi->ok && (bn->want[IMPL_CUDA] || bn->want[IMPL_CUDA_DEF]);
    json_object_set_new(d, "backend", json_string(gpu_run ? "cuda" : "cpu"));
    json_object_set_new(d, "device_kind", json_string(gpu_run ? gi->name : "cpu"));
    json_object_set_new(d, "cpu", json_string(ci->model));
    json_object_set_new(d, "cores", json_integer(ci->cores));
    json_object_set_new(d, "threads", json_integer(bn->threads));
    json_object_set_new(d, "simd", json_string(ci->simd));
    json_object_set_new(d, "cpu_isa", json_string(cg__cpu_isa_ops()->name)); /* the CPU path's variant */
    json_object_set_new(d, "cpu_mhz", jnum(ci->mhz));
    json_object_set_new(d, "fma_peak_gflops_nominal", jnum(ci->peak_nominal));
    json_object_set_new(d, "fma_peak_gflops_measured", jnum(ci->peak_meas));
    json_object_set_new(d, "mem_bw_gbs_measured", jnum(ci->bw_meas));
    json_object_set_new(d, "cpu_peak_note",
                        json_string("nominal = threads x cpu MHz x 2 FMA units x fp32 lanes x 2 flops (assumes two "
                                    "FMA ports at the nominal clock); measured = best of 3 runs of 12 independent FMA "
                                    "chains per thread; bandwidth = best triad a = b + s*c over 3 x 64 MiB. CPU rows' "
                                    "frac_flops use the larger of the two peaks (a busy machine measures low), "
                                    "frac_bw the measured bandwidth"));
    if (g_fake_cuda)
        json_object_set_new(d, "fake_cuda", json_string("CHUNKGEN_BENCH_FAKE_CUDA=emulate: the chunkgen_cuda rows ran on "
                                                        "the SIMT emulator (a test of the bench's device-memory path)"));
    if (gi->ok) {
        json_object_set_new(d, "gpu", json_string(gi->name));
        json_object_set_new(d, "gpu_arch", json_integer(gi->arch));
        json_object_set_new(d, "sm_count", json_integer(gi->sm_count));
        json_object_set_new(d, "gpu_clock_mhz", jnum(gi->clock_mhz));
        json_object_set_new(d, "gpu_mem_clock_mhz", jnum(gi->mem_clock_mhz));
        json_object_set_new(d, "gpu_bus_bits", jnum(gi->bus_bits));
        json_object_set_new(d, "gpu_memory_gb", jnum(gi->mem_gb));
        json_object_set_new(d, "driver", json_integer(gi->driver));
        json_object_set_new(d, "gpu_fp32_peak_gflops", jnum(gi->fp32_peak_gflops));
        json_object_set_new(d, "gpu_bw_gbs", jnum(gi->bw_peak_gbs));
        json_object_set_new(d, "gpu_peak_note",
                            json_string("fp32 peak = SMs x FP32 lanes per SM (64 on sm_80, else 128) x 2 x max clock; "
                                        "bandwidth = 2 x memory clock x bus width / 8 (driver attributes)"));
    } else {
        json_object_set_new(d, "gpu", json_null());
        json_object_set_new(d, "gpu_note", json_string(gi->why));
    }
    struct utsname u;
    if (uname(&u) == 0) {
        char os[400];
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
        json_object_set_new(d, "os", json_string(os));
    }
#ifdef __VERSION__
    json_object_set_new(d, "compiler", json_string("gcc " __VERSION__));
#endif
    json_object_set_new(d, "chunkgen", json_string(cg_version()));
    return d;
}

static json_t *config_block(const bench *bn, const bconfig *cfgs, int ncfg, const int64_t *seqs, int nseqs, int argc,
                            char **argv) {
    const bench_opts *o = bn->o;
    json_t *c = json_object();
    int gpu_run = bn->gi.ok && (bn->want[IMPL_CUDA] || bn->want[IMPL_CUDA_DEF]);
    json_object_set_new(c, "device", json_string(gpu_run ? "gpu" : "cpu"));
    json_t *sc = json_object(), *xc = json_object();
    for (int i = 0; i < ncfg; i++) {
        const bconfig *f = &cfgs[i];
        json_t *a = json_array();
        if (f->op == OP_SSD) {
            int64_t v[5] = {f->B, f->G, f->H, f->dk, f->dv};
            for (int k = 0; k < 5; k++) json_array_append_new(a, json_integer(v[k]));
            json_object_set_new(sc, f->name, a);
        } else {
            int64_t v[3] = {f->B, f->D, f->N};
            for (int k = 0; k < 3; k++) json_array_append_new(a, json_integer(v[k]));
            json_object_set_new(xc, f->name, a);
        }
    }
    json_object_set_new(c, "configs", sc);
    json_object_set_new(c, "configs_fields", json_string("[batch, groups, heads, dk, dv]"));
    json_object_set_new(c, "sscan_configs", xc);
    json_object_set_new(c, "sscan_configs_fields", json_string("[batch, dim, state]"));
    json_t *sl = json_array();
    for (int i = 0; i < nseqs; i++) json_array_append_new(sl, json_integer(seqs[i]));
    json_object_set_new(c, "seq_lens", sl);
    json_t *im = json_array();
    for (int i = 0; i < IMPL_COUNT; i++)
        if (bn->want[i]) json_array_append_new(im, json_string(k_impl_names[i]));
    json_object_set_new(c, "impls", im);
    json_t *md = json_array();
    if (o->mode != 2) json_array_append_new(md, json_string("fwd"));
    if (o->mode != 1) json_array_append_new(md, json_string("fwd_bwd"));
    json_object_set_new(c, "modes", md);
    json_object_set_new(c, "layout", json_string(o->layout == CG_LAYOUT_HEAD_MAJOR ? "head" : "token"));
    json_object_set_new(c, "threads", json_integer(bn->threads));
    json_object_set_new(c, "repeats", json_integer(o->repeats));
    json_object_set_new(c, "min_time_s", json_real(o->min_time));
    json_object_set_new(c, "warmup", json_integer(o->warmup));
    json_object_set_new(c, "ref_seq", json_integer(o->ref_seq));
    json_object_set_new(c, "ref_max_s", json_real(o->ref_max_s));
    json_object_set_new(c, "emu_max_seq", json_integer(o->emu_max_seq));
    json_t *in = json_object();
    json_object_set_new(in, "ssd", json_string(k_inputs_ssd));
    json_object_set_new(in, "sscan", json_string(k_inputs_sscan));
    json_object_set_new(c, "inputs", in);
    json_object_set_new(c, "timing",
                        json_string("per row: warm-up calls (the first one's wall time is compile_s), then samples of "
                                    "`inner` back-to-back calls until `repeats` samples and min_time_s seconds; median_ms, "
                                    "q1_ms, q3_ms per call over the samples. cuda: inner = 1, each sample timed by CUDA "
                                    "events after an L2 flush (a memset of 2x the L2 size, outside the timed region); "
                                    "a call slower than 2 x min_time_s keeps its wall-clock calibration run as a sample. "
                                    "fwd_bwd = one forward call plus one backward call"));
    json_object_set_new(c, "rel_err",
                        json_string("max|out - ref| / max|ref| against the float64 sequential scan on the same inputs, "
                                    "computed once per cell on batch element 0 and at most ref_seq tokens; rel_err is "
                                    "the max over the outputs (fwd) or over outputs and gradients (fwd_bwd)"));
    json_object_set_new(c, "peak_mb",
                        json_string("host impls: the call's tensors (inputs and outputs, exact bytes) + workspace_mb, the "
                                    "growth of the process's peak RSS during the row's calls (VmHWM reset through "
                                    "/proc/self/clear_refs); cuda: the device tensors only"));
    json_object_set_new(c, "roofline",
                        json_string("flops: SSD chunked algorithm with chunk C per (b, h) and chunk of c tokens: forward "
                                    "c(c+1)(dk+dv) + 4c dk dv, backward c(c+1)(3dk+2dv) + 10c dk dv + 4c dk; selective "
                                    "scan per (b,l,d,n) 7 forward, 24 backward, per (b,l,d) 11 and 20. bytes: every "
                                    "input read once and every output written once per call. frac_roofline = achieved "
                                    "GFLOP/s / min(peak, flops/bytes x bandwidth)"));
    if (bn->cpu_subset)
        json_object_set_new(c, "omitted",
                            json_string("fwd_bwd at seq > 2048 (CPU default subset; --all runs it)"));
    char date[64];
    time_t tnow = time(NULL);
    struct tm tmv;
    gmtime_r(&tnow, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    json_object_set_new(c, "date", json_string(date));
    json_object_set_new(c, "commit", o->commit ? json_string(o->commit) : json_null());
    json_t *av = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(av, json_string(argv[i]));
    json_object_set_new(c, "argv", av);
    json_t *un = json_object();
    for (int i = 0; i < IMPL_COUNT; i++)
        if (bn->unavailable[i][0]) json_object_set_new(un, k_impl_names[i], json_string(bn->unavailable[i]));
    json_object_set_new(c, "unavailable", un);
    return c;
}

/* Write the document (atomically for a file: FILE.tmp, then rename). */
static int write_doc(const bench *bn) {
    const char *out = bn->o->out;
    size_t flags = JSON_INDENT(2) | JSON_REAL_PRECISION(10);
    if (!out || !strcmp(out, "-")) return 0; /* stdout: once, at the end */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    if (json_dump_file(bn->doc, tmp, flags) != 0) {
        fprintf(stderr, "chunkgen bench: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    if (rename(tmp, out) != 0) {
        fprintf(stderr, "chunkgen bench: cannot rename %s to %s: %s\n", tmp, out, strerror(errno));
        return -1;
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

/* Remove the default-config cache directory this run made (and only that). */
static void rm_tree(const char *dir) {
    if (!dir[0] || strncmp(dir, "/tmp/chunkgen-bench-", 20)) return;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ===================================================================== the command */

static int name_selected(const bench_opts *o, const char *name) {
    if (!o->nconfigs) return 1;
    for (int i = 0; i < o->nconfigs; i++)
        if (!strcmp(o->configs[i], name)) return 1;
    return 0;
}

int cg_cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    g_quiet = o.quiet;
    kexec_select();

    /* The configs of the run. */
    bconfig cfgs[64];
    int ncfg = 0;
    if (o.op != 2) {
        if (o.nssd_custom) {
            for (int i = 0; i < o.nssd_custom; i++) {
                const custom_shape *cs = &o.ssd_custom[i];
                bconfig f = {OP_SSD, "", cs->d[0], cs->d[1], cs->d[2], cs->d[3], cs->d[4], 0, 0};
                snprintf(f.name, sizeof f.name, "%s", cs->name);
                cfgs[ncfg++] = f;
            }
        } else {
            for (size_t i = 0; i < sizeof k_ssd_seed / sizeof *k_ssd_seed; i++)
                if (name_selected(&o, k_ssd_seed[i].name)) cfgs[ncfg++] = k_ssd_seed[i];
        }
    }
    if (o.op != 1) {
        if (o.nsscan_custom) {
            for (int i = 0; i < o.nsscan_custom; i++) {
                const custom_shape *cs = &o.sscan_custom[i];
                bconfig f = {OP_SSCAN, "", cs->d[0], 0, 0, 0, 0, cs->d[1], cs->d[2]};
                snprintf(f.name, sizeof f.name, "%s", cs->name);
                cfgs[ncfg++] = f;
            }
        } else {
            for (size_t i = 0; i < sizeof k_sscan_seed / sizeof *k_sscan_seed; i++)
                if (name_selected(&o, k_sscan_seed[i].name)) cfgs[ncfg++] = k_sscan_seed[i];
        }
    }
    for (int i = 0; i < o.nconfigs; i++) {
        int found = 0;
        for (int k = 0; k < ncfg; k++) found |= !strcmp(cfgs[k].name, o.configs[i]);
        if (!found && !o.nssd_custom && !o.nsscan_custom)
            return usage_err("--config: no config named '%s' for the chosen op (ssd: g2h8_d128, g1h24_dk128_dv64, "
                             "g1h1_d128, g2h4_dk48_dv40; sscan: sscan_d256, sscan_d512, sscan_d1024)",
                             o.configs[i]);
    }
    if (!ncfg) return usage_err("no config left after the filters");

    bench bn;
    memset(&bn, 0, sizeof bn);
    bn.o = &o;
    bn.threads = o.threads > 0 ? o.threads : cg__online_cores();
    bn.want[IMPL_CPU] = o.want_cpu;
    bn.want[IMPL_CUDA] = o.want_cuda;
    bn.want[IMPL_CUDA_DEF] = o.want_cuda_def;
    bn.want[IMPL_EMU] = o.want_emu;
    bn.want[IMPL_REF] = o.want_ref;
    int explicit_impls = o.backend_given || o.impls_given;

    cg_context **ctxs[] = {&bn.ctx_cpu, &bn.ctx_cuda, &bn.ctx_cuda_def, &bn.ctx_emu, &bn.ctx_ref};
    for (int i = 0; i < 5; i++)
        if (cg_context_create(ctxs[i]) != CG_OK) {
            fprintf(stderr, "chunkgen bench: cannot create a context\n");
            return 1;
        }
    cg_context_set_threads(bn.ctx_cpu, bn.threads);
    cg_context_set_threads(bn.ctx_emu, bn.threads);
    cg_context_set_threads(bn.ctx_ref, 1);

    /* What can run here. */
    gpu_probe(bn.ctx_cuda, &bn.gi);
    if (!bn.gi.ok) {
        for (int i = IMPL_CUDA; i <= IMPL_CUDA_DEF; i++) {
            if (!explicit_impls) bn.want[i] = 0;
            snprintf(bn.unavailable[i], sizeof bn.unavailable[i], "%s", bn.gi.why);
        }
    } else if (bn.want[IMPL_CUDA_DEF]) {
        /* The default config: a context whose cache directory is empty, so no tuned entry exists. */
        snprintf(bn.def_cache, sizeof bn.def_cache, "/tmp/chunkgen-bench-default.XXXXXX");
        if (!mkdtemp(bn.def_cache)) {
            snprintf(bn.unavailable[IMPL_CUDA_DEF], sizeof bn.unavailable[IMPL_CUDA_DEF],
                     "cannot make an empty cache directory for the default config: %s", strerror(errno));
            bn.def_cache[0] = 0;
        } else {
            cg_context_set_cache_dir(bn.ctx_cuda_def, bn.def_cache);
        }
    }
    int any = 0;
    for (int i = 0; i < IMPL_COUNT; i++) any |= bn.want[i];
    if (!any) return usage_err("no impl left to run");

    /* Sequence lengths. */
    int64_t seqs[MAXLIST + 1];
    int nseqs = 0;
    if (o.nseqs) {
        for (int i = 0; i < o.nseqs; i++) seqs[nseqs++] = o.seqs[i];
    } else {
        if (bn.want[IMPL_EMU] && !bn.unavailable[IMPL_EMU][0] && o.emu_max_seq > 0 && o.emu_max_seq < k_seed_seqs[0])
            seqs[nseqs++] = o.emu_max_seq; /* the emulator's small cells */
        for (size_t i = 0; i < sizeof k_seed_seqs / sizeof *k_seed_seqs; i++) seqs[nseqs++] = k_seed_seqs[i];
        int gpu_run = bn.gi.ok && (bn.want[IMPL_CUDA] || bn.want[IMPL_CUDA_DEF]);
        bn.cpu_subset = !gpu_run && !o.all;
    }

    cpu_probe(&bn.ci, bn.threads, o.probe);
    if (o.probe)
        progress("cpu: %s, %d threads, FMA peak %.1f GFLOP/s measured (%.1f nominal), triad %.1f GB/s", bn.ci.model,
                 bn.threads, bn.ci.peak_meas, bn.ci.peak_nominal, bn.ci.bw_meas);
    if (bn.gi.ok)
        progress("gpu: %s sm_%d, %d SMs, fp32 peak %.0f GFLOP/s, %.0f GB/s", bn.gi.name, bn.gi.arch, bn.gi.sm_count,
                 bn.gi.fp32_peak_gflops, bn.gi.bw_peak_gbs);

    bn.doc = json_object();
    bn.results = json_array();
    json_object_set_new(bn.doc, "device", device_block(&bn));
    json_object_set_new(bn.doc, "config", config_block(&bn, cfgs, ncfg, seqs, nseqs, argc, argv));
    json_object_set_new(bn.doc, "results", bn.results);

    int write_failed = 0;
    for (int k = 0; k < ncfg; k++)
        for (int s = 0; s < nseqs; s++)
            for (int md = 0; md < 2; md++) {
                if ((md == 0 && o.mode == 2) || (md == 1 && o.mode == 1)) continue;
                if (md == 1 && bn.cpu_subset && seqs[s] > 2048) continue;
                run_cell(&bn, &cfgs[k], seqs[s], md);
                if (write_doc(&bn)) write_failed = 1;
            }

    if (!o.out || !strcmp(o.out, "-")) {
        json_dumpf(bn.doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
    } else if (!write_failed) {
        progress("wrote %s (%zu rows)", o.out, json_array_size(bn.results));
    }
    json_decref(bn.doc);
    for (int i = 0; i < 5; i++) cg_context_free(*ctxs[i]);
    rm_tree(bn.def_cache);
    if (bn.errors) fprintf(stderr, "chunkgen bench: %d row(s) with an error\n", bn.errors);
    return (write_failed || bn.errors) ? 1 : 0;
}
