/* test_kexec_timer.c -- the executors' measurement entries (cg_kexec timer_start,
 * timer_stop, flush_l2): the emulator's host-clock timer around real emulated launches,
 * token bookkeeping and bad input, and the CUDA executor without a driver (ENODEV with a
 * message) or, on a machine with a GPU, with CUDA events. No timing thresholds: only
 * orderings that hold by construction (a timer that encloses another reads at least as
 * much; a timer around a sleep of S reads at least S on the monotonic clock). */
#include "cg_test.h"
#include "gen.h"

#include <math.h>
#include <time.h>

/* Each thread runs a dependent chain of p.iters steps and writes its final value. */
static const char k_timer_src[] =
    "struct kt_params { float *out; long long n; int iters; };\n"
    "extern \"C\" __global__ void kt_spin(kt_params p) {\n"
    "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i >= p.n) return;\n"
    "    float x = (float)(i % 7);\n"
    "    for (int k = 0; k < p.iters; k++) x = x * 0.5f + 1.0f;\n"
    "    p.out[i] = x;\n"
    "}\n";

typedef struct kt_params {
    float *out;
    long long n;
    int iters;
} kt_params;

/* The value kt_spin writes for element i (same float operations, same order). */
static float kt_expect(long long i, int iters) {
    float x = (float)(i % 7);
    for (int k = 0; k < iters; k++) x = x * 0.5f + 1.0f;
    return x;
}

static cg_status kt_launch(const cg_kexec *kx, cg_context *ctx, void *mod, float *out, long long n, int iters) {
    cg_launch l;
    memset(&l, 0, sizeof l);
    snprintf(l.entry, sizeof l.entry, "kt_spin");
    l.block[0] = 64;
    l.block[1] = l.block[2] = 1;
    l.grid[0] = (unsigned)((n + 63) / 64);
    l.grid[1] = l.grid[2] = 1;
    kt_params p = {out, n, iters};
    return kx->launch(ctx, mod, &l, &p, sizeof p, NULL);
}

static void kt_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
    }
}

/* The bookkeeping every executor shares: CG_KEXEC_TIMERS running at once, then EINVAL
 * with a message; foreign, stale and NULL arguments are EINVAL; a stop releases its
 * token even when it fails. */
static void kt_tokens(const cg_kexec *kx, cg_context *ctx) {
    void *tok[CG_KEXEC_TIMERS + 1];
    double ms = -1;
    for (int i = 0; i < CG_KEXEC_TIMERS; i++) {
        tok[i] = NULL;
        CG_CHECK_OK(ctx, kx->timer_start(ctx, NULL, &tok[i]));
        CG_CHECK(tok[i] != NULL, "%s: timer %d: no token", kx->name, i);
        for (int j = 0; j < i; j++) CG_CHECK(tok[i] != tok[j], "%s: timers %d and %d share a token", kx->name, j, i);
    }
    tok[CG_KEXEC_TIMERS] = (void *)1;
    cg_status st = kx->timer_start(ctx, NULL, &tok[CG_KEXEC_TIMERS]);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "timer") && tok[CG_KEXEC_TIMERS] == NULL,
             "%s: timer %d of %d: %s: %s", kx->name, CG_KEXEC_TIMERS + 1, CG_KEXEC_TIMERS, cg_status_str(st),
             cg_errmsg(ctx));
    /* NULL ms: EINVAL, and the token is released all the same. */
    st = kx->timer_stop(ctx, NULL, tok[0], NULL);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "ms"), "%s: stop with ms NULL: %s: %s", kx->name,
             cg_status_str(st), cg_errmsg(ctx));
    st = kx->timer_stop(ctx, NULL, tok[0], &ms);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "token"), "%s: stopping a released timer: %s: %s", kx->name,
             cg_status_str(st), cg_errmsg(ctx));
    int foreign = 0;
    st = kx->timer_stop(ctx, NULL, &foreign, &ms);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "token"), "%s: foreign token: %s: %s", kx->name,
             cg_status_str(st), cg_errmsg(ctx));
    st = kx->timer_stop(ctx, NULL, NULL, &ms);
    CG_CHECK(st == CG_EINVAL, "%s: NULL token: %s", kx->name, cg_status_str(st));
    st = kx->timer_start(ctx, NULL, NULL);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "token"), "%s: start with NULL token: %s: %s", kx->name,
             cg_status_str(st), cg_errmsg(ctx));
    /* The released slot is usable again; stop everything. */
    CG_CHECK_OK(ctx, kx->timer_start(ctx, NULL, &tok[0]));
    for (int i = 0; i < CG_KEXEC_TIMERS; i++) {
        ms = -1;
        CG_CHECK_OK(ctx, kx->timer_stop(ctx, NULL, tok[i], &ms));
        CG_CHECK(ms >= 0 && isfinite(ms), "%s: timer %d read %g ms", kx->name, i, ms);
    }
}

/* Flush, then an outer timer around one launch and an inner timer around a second one:
 * both non-negative, the outer at least the inner; the launches' results are right. */
static void kt_nested(const cg_kexec *kx, cg_context *ctx, void *mod, long long n, int iters) {
    float *dev = NULL;
    float *host = malloc((size_t)n * sizeof *host);
    CG_CHECK(host != NULL, "out of memory");
    if (!host) return;
    CG_CHECK_OK(ctx, kx->alloc(ctx, (size_t)n * sizeof(float), (void **)&dev));
    if (!dev) {
        free(host);
        return;
    }
    void *outer = NULL, *inner = NULL;
    double ms_out = -1, ms_in = -1;
    CG_CHECK_OK(ctx, kx->flush_l2(ctx, NULL));
    CG_CHECK_OK(ctx, kx->timer_start(ctx, NULL, &outer));
    CG_CHECK_OK(ctx, kt_launch(kx, ctx, mod, dev, n, iters));
    CG_CHECK_OK(ctx, kx->timer_start(ctx, NULL, &inner));
    CG_CHECK_OK(ctx, kt_launch(kx, ctx, mod, dev, n, iters + 1));
    CG_CHECK_OK(ctx, kx->timer_stop(ctx, NULL, inner, &ms_in));
    CG_CHECK_OK(ctx, kx->timer_stop(ctx, NULL, outer, &ms_out));
    CG_CHECK(ms_in >= 0 && isfinite(ms_in) && isfinite(ms_out), "%s: inner %g ms, outer %g ms", kx->name, ms_in,
             ms_out);
    /* CUDA events resolve about 0.5 us; the host clock is exact for this ordering. */
    CG_CHECK(ms_out >= ms_in - 1e-3, "%s: the outer timer (%g ms) read less than the inner one (%g ms)", kx->name,
             ms_out, ms_in);
    CG_CHECK_OK(ctx, kx->copy(ctx, host, dev, (size_t)n * sizeof(float), 1, NULL));
    CG_CHECK_OK(ctx, kx->sync(ctx, NULL));
    long long bad = -1;
    for (long long i = 0; i < n && bad < 0; i++)
        if (host[i] != kt_expect(i, iters + 1)) bad = i;
    CG_CHECK(bad < 0, "%s: kt_spin wrote %g at %lld, expected %g", kx->name, bad >= 0 ? host[bad] : 0.0, bad,
             bad >= 0 ? kt_expect(bad, iters + 1) : 0.0);
    /* More flushes and timers back to back reuse the same resources. */
    for (int r = 0; r < 3; r++) {
        void *t = NULL;
        double ms = -1;
        CG_CHECK_OK(ctx, kx->flush_l2(ctx, NULL));
        CG_CHECK_OK(ctx, kx->timer_start(ctx, NULL, &t));
        CG_CHECK_OK(ctx, kx->timer_stop(ctx, NULL, t, &ms));
        CG_CHECK(ms >= 0 && isfinite(ms), "%s: empty region %d read %g ms", kx->name, r, ms);
    }
    kx->free(ctx, dev);
    free(host);
}

static void *kt_load(const cg_kexec *kx, cg_context *ctx) {
    cg_plan plan;
    memset(&plan, 0, sizeof plan);
    snprintf(plan.kernel, sizeof plan.kernel, "kt_test");
    snprintf(plan.name, sizeof plan.name, "kexec_timer_spin");
    plan.source = (char *)k_timer_src;
    plan.nlaunch = 1;
    snprintf(plan.launch[0].entry, sizeof plan.launch[0].entry, "kt_spin");
    void *mod = NULL;
    cg_status st = kx->load(ctx, &plan, &mod);
    CG_CHECK(st == CG_OK && mod, "%s: load: %s: %s", kx->name, cg_status_str(st), cg_errmsg(ctx));
    return st == CG_OK ? mod : NULL;
}

CG_TEST(kexec_timer_emu) {
    const cg_kexec *emu = &cg__kexec_emu, *cu = &cg__kexec_cuda;
    CG_CHECK(emu->timer_start && emu->timer_stop && emu->flush_l2 && cu->timer_start && cu->timer_stop && cu->flush_l2,
             "an executor lacks a timing entry");
    if (!(emu->timer_start && emu->timer_stop && emu->flush_l2 && cu->timer_start && cu->timer_stop && cu->flush_l2))
        return;

    /* ---- emulate: host monotonic clock; flush_l2 does nothing and succeeds */
    CG_TEST_CONTEXT(ctx);
    cg_context_set_threads(ctx, 2);
    kt_tokens(emu, ctx);
    {
        void *t = NULL;
        double ms = -1;
        CG_CHECK_OK(ctx, emu->flush_l2(ctx, NULL));
        CG_CHECK_OK(ctx, emu->timer_start(ctx, NULL, &t));
        kt_sleep_ms(3);
        CG_CHECK_OK(ctx, emu->timer_stop(ctx, NULL, t, &ms));
        CG_CHECK(ms >= 3.0 - 1e-6 && isfinite(ms), "emulate: a 3 ms sleep read %g ms", ms);
    }
    cg_devinfo dev;
    cg_status st = emu->device(ctx, &dev);
    if (st == CG_EUNSUPPORTED) {
        cg_test_skip("no host C++ compiler for the emulator (the launches were not timed)");
    } else {
        CG_CHECK(st == CG_OK, "emulate: device: %s: %s", cg_status_str(st), cg_errmsg(ctx));
        void *mod = st == CG_OK ? kt_load(emu, ctx) : NULL;
        if (mod) kt_nested(emu, ctx, mod, 1000, 37);
    }
    cg_context_free(ctx);

    /* ---- cuda: CUDA events when there is a device, else ENODEV with a message */
    ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return;
    st = cu->device(ctx, &dev);
    if (st != CG_OK) {
        CG_CHECK(st == CG_ENODEV, "cuda: device without a GPU: %s (expected CG_ENODEV): %s", cg_status_str(st),
                 cg_errmsg(ctx));
        void *tok = (void *)1;
        double ms = -1;
        cg_status s1 = cu->timer_start(ctx, NULL, &tok);
        CG_CHECK(s1 == CG_ENODEV && strstr(cg_errmsg(ctx), "CUDA") && tok == NULL, "cuda: timer_start: %s: %s",
                 cg_status_str(s1), cg_errmsg(ctx));
        int fake = 0;
        cg_status s2 = cu->timer_stop(ctx, NULL, &fake, &ms);
        CG_CHECK(s2 == CG_ENODEV && strstr(cg_errmsg(ctx), "CUDA") && ms == -1, "cuda: timer_stop: %s: %s",
                 cg_status_str(s2), cg_errmsg(ctx));
        cg_status s3 = cu->flush_l2(ctx, NULL);
        CG_CHECK(s3 == CG_ENODEV && strstr(cg_errmsg(ctx), "CUDA"), "cuda: flush_l2: %s: %s", cg_status_str(s3),
                 cg_errmsg(ctx));
    } else {
        kt_tokens(cu, ctx);
        void *mod = kt_load(cu, ctx);
        if (mod) kt_nested(cu, ctx, mod, 1 << 20, 64);
    }
    cg_context_free(ctx);
}
