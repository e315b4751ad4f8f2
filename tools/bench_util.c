/* bench_util.c -- `chunkgen bench`'s small helpers: clocks, percentiles, progress lines,
 * JSON numbers, and the process's memory counters. */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double bench_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bench_cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile p in [0, 1] of sorted v, linear between order statistics (numpy's default). */
double bench_pctl(const double *v, int n, double p) {
    if (n <= 0) return NAN;
    double pos = p * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

int bench_quiet;
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_progress(const char *fmt, ...) {
    if (bench_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A JSON number, or null for a value that is not finite (jansson rejects NaN/Inf). */
json_t *bench_jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* kB value of `key` in /proc/self/status, or -1. */
int64_t bench_proc_status_kb(const char *key) {
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
int bench_hwm_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}
