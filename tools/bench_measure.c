/* bench_measure.c -- timing one impl on one cell: warm-up (compile_s), then samples of
 * back-to-back calls (device: one call per sample, timed by the executor after an L2
 * flush) until --repeats samples and --min-time seconds; median and quartiles. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device the cuda impls run on: the CUDA driver, or (test hook, for machines without
 * a GPU) the SIMT emulator when CHUNKGEN_BENCH_FAKE_CUDA=emulate, so that the device-memory
 * path (alloc, copies, sync, cut reruns) runs somewhere. */
cg_backend bench_cuda_backend = CG_BACKEND_CUDA;
int bench_fake_cuda;

void bench_kexec_select(void) {
    const char *fake = getenv("CHUNKGEN_BENCH_FAKE_CUDA");
    if (fake && !strcmp(fake, "emulate")) {
        bench_cuda_backend = CG_BACKEND_EMULATE;
        bench_fake_cuda = 1;
    }
}

int bench_runner_fail(runner *r, cg_status s, const char *what) {
    r->skipped = s == CG_EUNSUPPORTED || s == CG_ENODEV;
    snprintf(r->msg, sizeof r->msg, "%s: %s: %s", what, cg_status_str(s), cg_errmsg(r->ctx));
    return -1;
}

/* One fwd (and bwd for fwd_bwd) call on memory m. */
int bench_run_call(runner *r, const bptrs *m) {
    cell *c = r->c;
    for (int bwd = 0; bwd <= c->bwd; bwd++) {
        const bop *d = bench_cell_op(c, bwd);
        cli_args args;
        bench_cell_args(c, m, bwd, &args);
        r->ex.config = r->config[bwd];
        cg_status s = cg_run(r->ctx, d->o.op, &args, &r->ex);
        if (s != CG_OK) {
            char what[64];
            snprintf(what, sizeof what, "cg_%s", d->o.in.name);
            return bench_runner_fail(r, s, what);
        }
    }
    return 0;
}

int bench_run_sync(runner *r) {
    if (!r->cuda) return 0;
    cg_status s = cg_device_sync(r->ctx, bench_cuda_backend, NULL);
    return s == CG_OK ? 0 : bench_runner_fail(r, s, "stream sync");
}

#define MAX_SAMPLES 200

/* Device timing (cuda, or its emulate stand-in): the executor's L2 flush and timer. */
static int gpu_timed(const runner *r) { return r->cuda; }

/* One device sample of `inner` calls: L2 flushed outside the timed region, then the
 * executor's timer (CUDA events on the call's stream) around the calls. */
static int run_timed_gpu(runner *r, const bptrs *m, int inner, double *sec) {
    void *tok = NULL;
    double ms = 0;
    cg_status s = cg_device_flush_l2(r->ctx, bench_cuda_backend, r->ex.stream);
    if (s != CG_OK) return bench_runner_fail(r, s, "L2 flush");
    if ((s = cg_device_timer_start(r->ctx, bench_cuda_backend, r->ex.stream, &tok)) != CG_OK)
        return bench_runner_fail(r, s, "device timer start");
    for (int i = 0; i < inner; i++) {
        if (bench_run_call(r, m)) {
            (void)cg_device_timer_stop(r->ctx, bench_cuda_backend, r->ex.stream, tok,
                                       &ms); /* releases the timer; r->msg kept */
            return -1;
        }
    }
    if ((s = cg_device_timer_stop(r->ctx, bench_cuda_backend, r->ex.stream, tok, &ms)) != CG_OK)
        return bench_runner_fail(r, s, "device timer stop");
    *sec = 1e-3 * ms;
    return 0;
}

/* Warm-up (the first call is compile_s), then samples of `inner` calls until both
 * `repeats` samples and `min_time` seconds; a call slower than 2 * min_time takes at
 * most 3 samples of one call. On the device every sample is one call (inner = 1) timed
 * by run_timed_gpu, so each starts with a cold L2. */
int bench_measure(runner *r, const bptrs *m, const bench_opts *o, meas *out) {
    memset(out, 0, sizeof *out);
    out->workspace_mb = NAN;
    int hwm_ok = !r->cuda && bench_hwm_reset() == 0;
    int64_t rss0 = bench_proc_status_kb("VmRSS");
    double t0 = bench_now_s();
    if (bench_run_call(r, m) || bench_run_sync(r)) return -1;
    out->compile_s = bench_now_s() - t0;
    double t1 = out->compile_s;
    if (r->impl != IMPL_REF) { /* the reference compiles nothing: its first call is the calibration */
        for (int w = 1; w < o->warmup; w++)
            if (bench_run_call(r, m) || bench_run_sync(r)) return -1;
        t0 = bench_now_s();
        if (bench_run_call(r, m) || bench_run_sync(r)) return -1;
        t1 = bench_now_s() - t0;
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
        double c0 = bench_cpu_s(), dt = 0;
        if (gpu_timed(r)) {
            if (run_timed_gpu(r, m, inner, &dt)) return -1;
        } else {
            t0 = bench_now_s();
            for (int i = 0; i < inner; i++)
                if (bench_run_call(r, m)) return -1;
            if (bench_run_sync(r)) return -1;
            dt = bench_now_s() - t0;
        }
        vc[nc++] = (bench_cpu_s() - c0) / inner;
        total += dt;
        v[n++] = dt / inner;
    }
    qsort(v, (size_t)n, sizeof *v, bench_cmp_dbl);
    qsort(vc, (size_t)nc, sizeof *vc, bench_cmp_dbl);
    out->cpu_ms = 1e3 * bench_pctl(vc, nc, 0.5);
    out->median_ms = 1e3 * bench_pctl(v, n, 0.5);
    out->q1_ms = 1e3 * bench_pctl(v, n, 0.25);
    out->q3_ms = 1e3 * bench_pctl(v, n, 0.75);
    out->inner = inner;
    out->samples = n;
    if (hwm_ok && rss0 >= 0) {
        int64_t hwm = bench_proc_status_kb("VmHWM");
        if (hwm >= 0) out->workspace_mb = (double)(hwm > rss0 ? hwm - rss0 : 0) / 1024.0;
    }
    return 0;
}
