/* emu_kexec.c -- the `emulate` kernel executor: rendered CUDA sources compiled by the
 * host C++ compiler into shared objects (emu_source.c, cg_emu_module.c), run by the SIMT
 * runtime (emu_rt.c). Launches run on the context's pool, one task per block; memory
 * is host memory; timers read the host's monotonic clock. */
#include "emu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ launch */
typedef struct emu_job {
    const cg_emu_grid *g;
    atomic_int failed;
    pthread_mutex_t mu;
    int64_t fail_block;
    char msg[1024];
} emu_job;

static void emu_block_task(void *arg, int64_t i, int tid) {
    emu_job *job = arg;
    (void)tid;
    if (atomic_load(&job->failed)) return;
    char msg[1024];
    if (cg__emu_run_blocks(job->g, i, i + 1, msg, sizeof msg) != 0) {
        pthread_mutex_lock(&job->mu);
        if (!atomic_load(&job->failed) || i < job->fail_block) {
            job->fail_block = i;
            snprintf(job->msg, sizeof job->msg, "%s", msg);
        }
        atomic_store(&job->failed, 1);
        pthread_mutex_unlock(&job->mu);
    }
}

static cg_status emu_launch(cg_context *ctx, void *module, const cg_launch *l, const void *params, size_t params_size,
                            void *stream) {
    (void)stream;
    cg_emu_module *m = module;
    if (!m || !l) return cg__err(ctx, CG_EINVAL, "emulate: launch: no module or launch");
    const cg_emu_entry *e = NULL;
    for (int i = 0; i < m->nentry; i++)
        if (strcmp(m->entry[i].name, l->entry) == 0) e = &m->entry[i];
    if (!e) return cg__err(ctx, CG_EINVAL, "emulate: launch: module %s has no entry \"%s\"", m->name, l->entry);
    if (params_size != e->psize)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: params_size %zu, the kernel takes %zu bytes", l->entry,
                       params_size, e->psize);
    const uint64_t nt = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (!l->block[0] || !l->block[1] || !l->block[2] || nt > 1024 || l->block[2] > 64)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: block (%u,%u,%u): expected 1..1024 threads, z <= 64",
                       l->entry, l->block[0], l->block[1], l->block[2]);
    if (!l->grid[0] || !l->grid[1] || !l->grid[2] || l->grid[0] > 0x7FFFFFFFu || l->grid[1] > 65535 ||
        l->grid[2] > 65535)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: grid (%u,%u,%u) out of range", l->entry, l->grid[0],
                       l->grid[1], l->grid[2]);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    if (l->smem < 0 || l->smem > dev.smem_per_block)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: %lld bytes of dynamic shared memory, at most %lld",
                       l->entry, (long long)l->smem, (long long)dev.smem_per_block);
    cg_emu_grid g;
    memset(&g, 0, sizeof g);
    g.entry = e->fn;
    g.params = params;
    g.name = e->name;
    for (int k = 0; k < 3; k++) {
        g.grid[k] = l->grid[k];
        g.block[k] = l->block[k];
    }
    g.smem = (size_t)l->smem;
    g.params_size = params_size;
    g.racecheck = m->racecheck;
    g.img_lo = m->img_lo;
    g.img_hi = m->img_hi;
    if (m->stats && !(g.stats = cg__emu_gstats_new())) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    g.dl = m->dl;
    g.tls_size = m->tls_size;
    g.tls_touch = m->tls_touch;
    const int64_t nblocks = (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
    emu_job job;
    memset(&job, 0, sizeof job);
    job.g = &g;
    atomic_init(&job.failed, 0);
    pthread_mutex_init(&job.mu, NULL);
    cg_pool *pool = nblocks > 1 ? cg__ctx_pool(ctx) : NULL;
    if (pool) cg__pool_run(pool, 0, nblocks, emu_block_task, &job);
    else
        for (int64_t i = 0; i < nblocks && !atomic_load(&job.failed); i++) emu_block_task(&job, i, 0);
    pthread_mutex_destroy(&job.mu);
    if (atomic_load(&job.failed)) {
        cg__emu_gstats_free(g.stats);
        return cg__err(ctx, CG_ELAUNCH, "emulate: %s: %s", l->entry, job.msg);
    }
    cg_emu_state *es = g.stats ? cg__emu_state(ctx) : NULL;
    cg_status st = !g.stats ? CG_OK
                   : es     ? cg__emu_stats_finish(ctx, es, m, &g, g.stats)
                            : cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    cg__emu_gstats_free(g.stats);
    return st;
}

/* ------------------------------------------------------------------ memory */
static cg_status emu_device(cg_context *ctx, cg_devinfo *out) {
    char cxx[512], ver[512];
    cg_status st = cg__emu_find_cxx(ctx, cxx, sizeof cxx, ver, sizeof ver);
    if (st != CG_OK) return st;
    cg__devinfo_emulated(out);
    return CG_OK;
}

static cg_status emu_alloc(cg_context *ctx, size_t bytes, void **out) {
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 1))
        return cg__err(ctx, CG_ENOMEM, "emulate: cannot allocate %zu bytes", bytes);
    memset(p, 0xFF, bytes); /* device memory starts as garbage: NaN bytes show reads of it */
    *out = p;
    return CG_OK;
}

static void emu_free(cg_context *ctx, void *ptr) {
    (void)ctx;
    free(ptr);
}

static cg_status emu_copy(cg_context *ctx, void *dst, const void *src, size_t bytes, int dir, void *stream) {
    (void)ctx;
    (void)dir;
    (void)stream;
    if (bytes) memmove(dst, src, bytes);
    return CG_OK;
}

static cg_status emu_sync(cg_context *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    return CG_OK;
}

static int emu_owns_ptr(cg_context *ctx, const void *ptr) {
    (void)ctx;
    (void)ptr;
    return 1;
}

/* ------------------------------------------------------------------ timing
 * Launches run synchronously on the calling thread, so the host's monotonic clock
 * between timer_start and timer_stop is the kernels' time. There is no cache to flush. */
static double emu_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static cg_status emu_timer_start(cg_context *ctx, void *stream, void **token) {
    (void)stream;
    if (!token) return cg__err(ctx, CG_EINVAL, "emulate: timer_start: token is NULL (expected a void ** to fill)");
    *token = NULL;
    cg_emu_state *st = cg__emu_state(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    for (int i = 0; i < CG_KEXEC_TIMERS; i++) {
        if (st->timers[i].busy) continue;
        st->timers[i].busy = 1;
        st->timers[i].t0 = emu_now_ms();
        *token = &st->timers[i];
        return CG_OK;
    }
    return cg__err(ctx, CG_EINVAL,
                   "emulate: timer_start: all %d timers of this context are running (timer_stop "
                   "releases one)",
                   CG_KEXEC_TIMERS);
}

static cg_status emu_timer_stop(cg_context *ctx, void *stream, void *token, double *ms) {
    (void)stream;
    double now = emu_now_ms();
    cg_emu_state *st = ctx->part[CG_PART_EMU].p;
    cg_emu_timer *t = NULL;
    for (int i = 0; st && i < CG_KEXEC_TIMERS; i++)
        if (token == (void *)&st->timers[i]) t = &st->timers[i];
    if (!t || !t->busy)
        return cg__err(ctx, CG_EINVAL,
                       "emulate: timer_stop: token %p is not a running timer of this context "
                       "(expected one from timer_start)",
                       token);
    t->busy = 0;
    if (!ms) return cg__err(ctx, CG_EINVAL, "emulate: timer_stop: ms is NULL (expected a double * to fill)");
    *ms = now > t->t0 ? now - t->t0 : 0.0;
    return CG_OK;
}

static cg_status emu_flush_l2(cg_context *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    return CG_OK;
}

const cg_kexec cg__kexec_emu = {
    .name = "emulate",
    .device = emu_device,
    .load = cg__emu_load,
    .launch = emu_launch,
    .alloc = emu_alloc,
    .free = emu_free,
    .copy = emu_copy,
    .sync = emu_sync,
    .owns_ptr = emu_owns_ptr,
    .timer_start = emu_timer_start,
    .timer_stop = emu_timer_stop,
    .flush_l2 = emu_flush_l2,
};
