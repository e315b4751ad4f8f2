/* emu_rt.c -- the SIMT runtime: fibers, the block scheduler, barriers, warp
 * collectives, asynchronous cp.async and the access hook of the statistics (emu_stats.c)
 * (the shared-memory race checker: emu_race.c; the records both use: emu_rt.h).
 *
 * Each OS thread that runs blocks owns a worker: fiber stacks (regions of
 * CG_EMU_STACK_REGION bytes aligned to their size, the fiber record in the first
 * page, a guard page after it), the dynamic shared memory and the race shadow. A
 * block's threads are fibers switched cooperatively: a fiber runs until it waits at
 * a barrier or a warp collective, or exits, and then switches straight to the next
 * runnable fiber. The last thread to arrive at a barrier releases the others and
 * runs on. When no fiber can run and some have not exited, the block is deadlocked:
 * that (and a divergent barrier) is reported as an error, never a hang. */
#include "emu_rt.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ------------------------------------------------------------ context switch */
#ifdef EMU_ASM_SWITCH
/* cg__emu_swap(save, to): push the callee-saved registers, store rsp in *save, load
 * rsp = to, pop and return into the other context. A new fiber's stack holds a frame
 * that returns into the trampoline, which calls r13(r12) = fiber_main(fiber). */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cg__emu_swap\n"
        ".hidden cg__emu_swap\n"
        ".type cg__emu_swap,@function\n"
        "cg__emu_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size cg__emu_swap, .-cg__emu_swap\n"
        ".p2align 4\n"
        ".globl cg__emu_trampoline\n"
        ".hidden cg__emu_trampoline\n"
        ".type cg__emu_trampoline,@function\n"
        "cg__emu_trampoline:\n"
        "  movq %r12, %rdi\n"
        "  andq $-16, %rsp\n"
        "  call *%r13\n"
        "  ud2\n"
        ".size cg__emu_trampoline, .-cg__emu_trampoline\n");
void cg__emu_swap(void **save, void *to);
void cg__emu_trampoline(void);
#endif

static void fiber_main(emu_fiber *f);

static char *fiber_region(const emu_fiber *f) { return (char *)f; }

#ifndef EMU_ASM_SWITCH
static void fiber_entry_uc(unsigned lo, unsigned hi) { fiber_main((emu_fiber *)(((uintptr_t)hi << 32) | lo)); }
#endif

static void fiber_init(emu_worker *w, emu_fiber *f) {
    char *top = fiber_region(f) + CG_EMU_STACK_REGION;
#ifdef EMU_ASAN
    /* Frames still live when the fiber last switched away (it exited or was
     * abandoned) leave poisoned redzones above its saved stack pointer. */
    if (f->sp) {
        char *lo = (char *)f->sp - 1024, *stack_lo = fiber_region(f) + 2 * w->page;
        if (lo < stack_lo) lo = stack_lo;
        __asan_unpoison_memory_region(lo, (size_t)(top - lo));
    }
#endif
#ifdef EMU_ASM_SWITCH
    uint64_t *s = (uint64_t *)top;
    s[-1] = 0;
    s[-2] = (uint64_t)(uintptr_t)&cg__emu_trampoline; /* ret */
    s[-3] = 0;                                        /* rbp */
    s[-4] = 0;                                        /* rbx */
    s[-5] = (uint64_t)(uintptr_t)f;                   /* r12 */
    s[-6] = (uint64_t)(uintptr_t)&fiber_main;         /* r13 */
    s[-7] = 0;                                        /* r14 */
    s[-8] = 0;                                        /* r15 */
    f->sp = &s[-8];
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = fiber_region(f) + 2 * w->page;
    f->uc.uc_stack.ss_size = CG_EMU_STACK_REGION - 2 * w->page;
    f->uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)f;
    makecontext(&f->uc, (void (*)(void))fiber_entry_uc, 2, (unsigned)(p & 0xFFFFFFFFu), (unsigned)(p >> 32));
    (void)top;
#endif
}

/* Switch from the running context (a fiber, or the scheduler when from is NULL) to
 * `to` (a fiber, or the scheduler when NULL). `dying`: from never runs again. */
static void switch_to(emu_worker *w, emu_fiber *from, emu_fiber *to, int dying) {
#ifdef EMU_ASAN
    void *fake = NULL;
    const void *bottom = to ? (const void *)(fiber_region(to) + 2 * w->page) : w->sched_bottom;
    size_t size = to ? CG_EMU_STACK_REGION - 2 * w->page : w->sched_size;
    __sanitizer_start_switch_fiber(dying ? NULL : &fake, bottom, size);
#else
    (void)dying;
#endif
#ifdef EMU_ASM_SWITCH
    cg__emu_swap(from ? &from->sp : &w->sched_sp, to ? to->sp : w->sched_sp);
#else
    char here;
    if (from) from->sp = &here; /* about the stack pointer, for fiber_init */
    swapcontext(from ? &from->uc : &w->sched_uc, to ? &to->uc : &w->sched_uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* ------------------------------------------------------------------ workers */
static pthread_key_t g_worker_key;
static pthread_once_t g_worker_once = PTHREAD_ONCE_INIT;
static __thread emu_worker *t_worker;

static void worker_free(void *p) {
    emu_worker *w = p;
    if (!w) return;
    for (int i = 0; i < w->nfib; i++) free(w->cpa_own[i]);
    for (int c = 0; c < EMU_MAX_THREADS / EMU_CHUNK; c++)
        if (w->chunks[c]) munmap(w->chunks[c], (size_t)EMU_CHUNK * CG_EMU_STACK_REGION);
    cg__emu_wstats_free(w->ws);
    free(w->smem);
    free(w->shadow);
    free(w);
}

static void worker_key_init(void) { pthread_key_create(&g_worker_key, worker_free); }

static emu_worker *worker_get(void) {
    if (t_worker) return t_worker;
    pthread_once(&g_worker_once, worker_key_init);
    emu_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->page = (size_t)sysconf(_SC_PAGESIZE);
    CG_ASSERT(sizeof(emu_fiber) <= w->page && 4 * w->page <= CG_EMU_STACK_REGION);
    w->epoch = 1;
#ifdef EMU_ASAN
    pthread_attr_t attr;
    void *lo = NULL;
    size_t sz = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &lo, &sz);
        pthread_attr_destroy(&attr);
    }
    w->sched_bottom = lo;
    w->sched_size = sz;
#endif
    pthread_setspecific(g_worker_key, w);
    t_worker = w;
    return w;
}

/* Fibers [0, n): one mapping per EMU_CHUNK, aligned to the region size. */
static int worker_fibers(emu_worker *w, int n) {
    while (w->nfib < n) {
        int c = w->nfib / EMU_CHUNK;
        size_t span = (size_t)EMU_CHUNK * CG_EMU_STACK_REGION;
        char *raw = mmap(NULL, span + CG_EMU_STACK_REGION, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (raw == MAP_FAILED) return -1;
        char *base = (char *)(((uintptr_t)raw + CG_EMU_STACK_REGION - 1) & ~(uintptr_t)(CG_EMU_STACK_REGION - 1));
        if (base > raw) munmap(raw, (size_t)(base - raw));
        size_t tail = (size_t)(raw + span + CG_EMU_STACK_REGION - (base + span));
        if (tail) munmap(base + span, tail);
        w->chunks[c] = base;
        for (int k = 0; k < EMU_CHUNK; k++) {
            char *r = base + (size_t)k * CG_EMU_STACK_REGION;
            mprotect(r + w->page, w->page, PROT_NONE); /* guard page below the stack */
            emu_fiber *f = (emu_fiber *)r;
            f->w = w;
            f->slot = c * EMU_CHUNK + k;
            w->fib[f->slot] = f;
        }
        w->nfib += EMU_CHUNK;
    }
    return 0;
}

/* ---------------------------------------------------------------- messages */
static void worker_msg(emu_worker *w, const emu_fiber *f, const char *fmt, va_list ap) {
    if (w->failed) return;
    w->failed = 1;
    const cg_emu_block *b = &w->blk;
    int k = snprintf(w->msg, sizeof w->msg, "block (%u,%u,%u)", b->blockIdx.x, b->blockIdx.y, b->blockIdx.z);
    if (f)
        k += snprintf(w->msg + k, sizeof w->msg - (size_t)k, " thread (%u,%u,%u)", f->pub.threadIdx.x,
                      f->pub.threadIdx.y, f->pub.threadIdx.z);
    k += snprintf(w->msg + k, sizeof w->msg - (size_t)k, ": ");
    vsnprintf(w->msg + k, sizeof w->msg - (size_t)k, fmt, ap);
}

static void block_fail(emu_worker *w, const char *fmt, ...) CG_PRINTF(2, 3);
static void block_fail(emu_worker *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    worker_msg(w, NULL, fmt, ap);
    va_end(ap);
}

/* Stop the block from inside fiber f: back to the scheduler for good. */
static void fiber_fail(emu_fiber *f, const char *fmt, ...) CG_PRINTF(2, 3) __attribute__((noreturn));
static void fiber_fail(emu_fiber *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    worker_msg(f->w, f, fmt, ap);
    va_end(ap);
    switch_to(f->w, f, NULL, 1);
    abort(); /* never resumed */
}

/* ---------------------------------------------------------------- scheduling */
static emu_fiber *next_ready(emu_worker *w, int from) {
    for (int k = 1; k <= w->n; k++) {
        int i = from + k;
        if (i >= w->n) i -= w->n;
        if (w->fib[i]->state == F_READY) return w->fib[i];
    }
    return NULL;
}

/* f waits (its state says where): run someone else until f is released. */
static void fiber_wait(emu_fiber *f) { switch_to(f->w, f, next_ready(f->w, f->pub.tid), 0); }

static void fiber_main(emu_fiber *f) {
    emu_worker *w = f->w;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    w->g->entry(w->g->params);
    f->state = F_DONE;
    w->ndone++;
    if (w->nbar && w->nbar + w->ndone == w->n)
        fiber_fail(f, "exited while other threads wait at %s in line %d (divergent barrier)", w->bar_what, w->bar_line);
    const int base = f->pub.warp * 32;
    for (int l = 0; l < 32 && base + l < w->n; l++) {
        emu_fiber *g = w->fib[base + l];
        if (g->state == F_WARP && (g->wmask >> f->pub.lane & 1))
            fiber_fail(f, "exited while lane %d of its warp waits for it at %s in line %d (mask 0x%08x)", g->pub.lane,
                       g->what, g->line, g->wmask);
    }
    switch_to(w, f, next_ready(w, f->pub.tid), 1);
    abort(); /* never resumed */
}

static void describe_deadlock(emu_worker *w) {
    char buf[768];
    size_t k = 0;
    int groups = 0;
    for (int i = 0; i < w->n && groups < 6;) {
        emu_fiber *f = w->fib[i];
        int j = i + 1;
        while (j < w->n && w->fib[j]->state == f->state && w->fib[j]->line == f->line && w->fib[j]->what == f->what &&
               w->fib[j]->wmask == f->wmask)
            j++;
        if (f->state == F_BAR)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%sthreads %d-%d wait at %s in line %d", groups ? "; " : "",
                                  i, j - 1, f->what, f->line);
        else if (f->state == F_WARP)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%sthreads %d-%d wait at %s in line %d (mask 0x%08x)",
                                  groups ? "; " : "", i, j - 1, f->what, f->line, f->wmask);
        else k += (size_t)snprintf(buf + k, sizeof buf - k, "%sthreads %d-%d exited", groups ? "; " : "", i, j - 1);
        if (k >= sizeof buf) k = sizeof buf - 1;
        groups++;
        i = j;
    }
    block_fail(w, "deadlock: %s", buf);
}

/* Statistics: log an access unless it is to a fiber's stack, the runtime's records,
 * the launch parameters or the module's own data. */
static void stats_access(emu_worker *w, const emu_fiber *f, const void *p, size_t n, int is_write, const void *pc) {
    const unsigned char *a = p;
    size_t base, shift;
    const char *where;
    int space = CG_EMU_SPACE_SHARED;
    if (!cg__emu_smem_where(w, a, &n, &base, &shift, &where)) {
        const size_t span = (size_t)EMU_CHUNK * CG_EMU_STACK_REGION;
        for (int c = 0; c < w->nfib / EMU_CHUNK; c++)
            if ((uintptr_t)(a - (const unsigned char *)w->chunks[c]) < span) return;
        const cg_emu_grid *g = w->g;
        if ((uintptr_t)(a - (const unsigned char *)w) < sizeof *w) return;
        if ((uintptr_t)(a - (const unsigned char *)&cg__emu_api) < sizeof cg__emu_api) return;
        if ((uintptr_t)(a - (const unsigned char *)g->params) < g->params_size) return;
        if (a >= (const unsigned char *)g->img_lo && a < (const unsigned char *)g->img_hi) return;
        space = CG_EMU_SPACE_GLOBAL;
    }
    cg__emu_wstats_log(w->ws, f->pub.tid, pc, p, n, space, is_write);
}

static void rt_access(const cg_emu_thread *t, const void *p, size_t n, int is_write, const void *pc) {
    emu_fiber *f = (emu_fiber *)(uintptr_t)t;
    emu_worker *w = f->w;
    if (w->blk.stats) stats_access(w, f, p, n, is_write, pc);
    if (w->blk.racecheck && cg__emu_race_access(f, p, n, is_write, (uint16_t)t->tid, pc))
        fiber_fail(f, "%s", w->race_msg);
}

/* -------------------------------------------------------------- cp.async */
static void rt_cp_async(const cg_emu_thread *t, void *dst, const void *src, int size, int src_bytes, const void *pc) {
    emu_fiber *f = (emu_fiber *)(uintptr_t)t;
    emu_worker *w = f->w;
    if (w->blk.stats) {
        if (src_bytes > 0) stats_access(w, f, src, (size_t)src_bytes, 0, pc);
        stats_access(w, f, dst, (size_t)size, 1, pc);
    }
    if (w->blk.racecheck && cg__emu_race_access(f, dst, (size_t)size, 1, (uint16_t)(t->tid | EMU_ASYNC), pc))
        fiber_fail(f, "%s", w->race_msg);
    if (f->ncpa == f->cpa_cap) {
        int cap = f->cpa_cap ? f->cpa_cap * 2 : 64;
        emu_cpa *c = realloc(f->cpa, (size_t)cap * sizeof *c);
        if (!c) fiber_fail(f, "out of memory for %d cp.async in flight", f->ncpa + 1);
        f->cpa = c;
        w->cpa_own[f->slot] = c;
        f->cpa_cap = cap;
    }
    emu_cpa *c = &f->cpa[f->ncpa++];
    c->dst = dst;
    c->group = f->ncommit;
    c->size = (unsigned)size;
    memcpy(c->data, src, (size_t)src_bytes);
    memset(c->data + src_bytes, 0, (size_t)(size - src_bytes));
    memset(dst, 0xFF, (size_t)size); /* in flight: NaN bytes until the wait */
}

static void rt_cp_async_commit(const cg_emu_thread *t) { ((emu_fiber *)(uintptr_t)t)->ncommit++; }

static void rt_cp_async_wait(const cg_emu_thread *t, int n) {
    emu_fiber *f = (emu_fiber *)(uintptr_t)t;
    if (n < 0) f->ncommit++; /* wait_all = commit_group; wait_group 0 */
    const unsigned lim = n < 0 ? f->ncommit : f->ncommit >= (unsigned)n ? f->ncommit - (unsigned)n : 0;
    int k = 0;
    for (; k < f->ncpa && f->cpa[k].group < lim; k++) {
        const emu_cpa *c = &f->cpa[k];
        memcpy(c->dst, c->data, c->size);
        if (f->w->blk.racecheck) cg__emu_race_mark(f, c->dst, c->size, (uint16_t)t->tid);
    }
    if (k) {
        memmove(f->cpa, f->cpa + k, (size_t)(f->ncpa - k) * sizeof *f->cpa);
        f->ncpa -= k;
    }
}

/* ----------------------------------------------------------------- services */
static int bar_arrive(emu_fiber *f, const char *what, int line, int op, int pred) {
    emu_worker *w = f->w;
    if (w->nbar == 0) {
        w->bar_what = what;
        w->bar_line = line;
        w->bar_tid = f->pub.tid;
    } else if (w->bar_line != line || strcmp(w->bar_what, what) != 0) {
        fiber_fail(f, "divergent barrier: reached %s in line %d while thread %d waits at %s in line %d", what, line,
                   w->bar_tid, w->bar_what, w->bar_line);
    }
    f->state = F_BAR;
    f->what = what;
    f->line = line;
    f->pred = pred;
    w->nbar++;
    if (w->nbar + w->ndone < w->n) {
        fiber_wait(f);
        return w->bar_result;
    }
    if (w->ndone)
        fiber_fail(f, "%s in line %d: %d thread(s) of the block exited without reaching it (divergent barrier)", what,
                   line, w->ndone);
    if (w->blk.stats) cg__emu_wstats_flush(w->ws, 0, w->n);
    int count = 0;
    for (int i = 0; i < w->n; i++) {
        count += w->fib[i]->pred;
        w->fib[i]->state = F_READY;
    }
    w->bar_result = op == 0 ? count : op == 1 ? count == w->n : count > 0;
    w->nbar = 0;
    w->epoch++;
    if (w->blk.racecheck) /* a barrier does not wait for cp.async: still in flight */
        for (int i = 0; i < w->n; i++) {
            emu_fiber *g = w->fib[i];
            for (int k = 0; k < g->ncpa; k++)
                cg__emu_race_mark(g, g->cpa[k].dst, g->cpa[k].size, (uint16_t)(g->pub.tid | EMU_ASYNC));
        }
    return w->bar_result;
}

static void rt_syncthreads(const cg_emu_thread *t, const char *what, int line) {
    bar_arrive((emu_fiber *)(uintptr_t)t, what, line, 0, 0);
}

static int rt_syncthreads_red(const cg_emu_thread *t, const char *what, int line, int op, int pred) {
    return bar_arrive((emu_fiber *)(uintptr_t)t, what, line, op, pred != 0);
}

static void rt_warp_sync(const cg_emu_thread *t, unsigned mask, const char *what, int line, void *arg,
                         cg_emu_warp_fn fn) {
    emu_fiber *f = (emu_fiber *)(uintptr_t)t;
    emu_worker *w = f->w;
    const int base = t->warp * 32;
    const int nl = w->n - base < 32 ? w->n - base : 32;
    const unsigned exist = nl == 32 ? 0xFFFFFFFFu : ((1u << nl) - 1u);
    if (!(mask >> t->lane & 1))
        fiber_fail(f, "%s in line %d: the mask 0x%08x does not include the calling lane %d", what, line, mask, t->lane);
    const unsigned group = mask & exist;
    f->state = F_WARP;
    f->what = what;
    f->line = line;
    f->wmask = mask;
    f->warg = arg;
    f->wfn = fn;
    for (int l = 0; l < nl; l++) {
        if (!(group >> l & 1)) continue;
        emu_fiber *g = w->fib[base + l];
        if (g->state == F_DONE)
            fiber_fail(f, "%s in line %d: lane %d of the mask 0x%08x has exited", what, line, l, mask);
    }
    for (int l = 0; l < nl; l++) {
        if (!(group >> l & 1)) continue;
        emu_fiber *g = w->fib[base + l];
        if (g->state != F_WARP || g->wmask != mask) {
            fiber_wait(f);
            return;
        }
    }
    void *args[32] = {0};
    for (int l = 0; l < nl; l++) {
        if (!(group >> l & 1)) continue;
        emu_fiber *g = w->fib[base + l];
        if (g->wfn != fn)
            fiber_fail(f, "lanes of one warp collective disagree: lane %d at %s in line %d, lane %d at %s in line %d",
                       t->lane, what, line, l, g->what, g->line);
        args[l] = g->warg;
    }
    fn(args, group);
    unsigned done = 0;
    for (int l = 0; l < nl; l++) {
        emu_fiber *g = w->fib[base + l];
        if (g->state == F_DONE) done |= 1u << l;
        if (!(group >> l & 1)) continue;
        g->state = F_READY;
        g->pub.nsync_warp++;
    }
    if (w->blk.stats && (group | done) == exist) cg__emu_wstats_flush(w->ws, base, nl);
}

static unsigned rt_activemask(const cg_emu_thread *t) {
    const emu_fiber *f = (const emu_fiber *)(uintptr_t)t;
    const emu_worker *w = f->w;
    const int base = t->warp * 32;
    unsigned m = 0;
    for (int l = 0; l < 32 && base + l < w->n; l++)
        if (w->fib[base + l]->state != F_DONE) m |= 1u << l;
    return m;
}

static void rt_yield(const cg_emu_thread *t) {
    emu_fiber *f = (emu_fiber *)(uintptr_t)t;
    emu_fiber *to = next_ready(f->w, t->tid);
    if (to && to != f) switch_to(f->w, f, to, 0);
}

static void rt_fail(const cg_emu_thread *t, const char *msg) { fiber_fail((emu_fiber *)(uintptr_t)t, "%s", msg); }

const cg_emu_api cg__emu_api = {
    CG_EMU_ABI_VERSION, rt_syncthreads, rt_syncthreads_red, rt_warp_sync,     rt_activemask, rt_yield, rt_fail,
    rt_access,          rt_cp_async,    rt_cp_async_commit, rt_cp_async_wait,
};

/* ------------------------------------------------------------------- blocks */
static int run_block(emu_worker *w, int64_t bi) {
    const cg_emu_grid *g = w->g;
    cg_emu_block *b = &w->blk;
    b->blockIdx.x = (unsigned)(bi % g->grid[0]);
    b->blockIdx.y = (unsigned)(bi / g->grid[0] % g->grid[1]);
    b->blockIdx.z = (unsigned)(bi / ((int64_t)g->grid[0] * g->grid[1]));
    /* shared memory starts as garbage on a GPU: NaN bytes make reads of unwritten
     * shared memory visible */
    if (g->smem) memset(b->dyn_smem, 0xFF, g->smem);
    w->n = b->nthreads;
    w->ndone = w->nbar = 0;
    w->failed = 0;
    w->epoch++;
    for (int i = 0; i < w->n; i++) {
        emu_fiber *f = w->fib[i];
        f->pub.threadIdx.x = (unsigned)i % g->block[0];
        f->pub.threadIdx.y = (unsigned)i / g->block[0] % g->block[1];
        f->pub.threadIdx.z = (unsigned)i / (g->block[0] * g->block[1]);
        f->pub.tid = i;
        f->pub.lane = i & 31;
        f->pub.warp = i >> 5;
        f->pub.blk = b;
        f->pub.nsync_warp = 0;
        f->state = F_READY;
        f->what = NULL;
        f->line = 0;
        f->pred = 0;
        f->wmask = 0;
        f->ncpa = 0;
        f->ncommit = 0;
        fiber_init(w, f);
    }
#ifdef EMU_ASM_SWITCH
    w->sched_sp = NULL; /* switch_to saves the scheduler here */
#endif
    switch_to(w, NULL, w->fib[0], 0);
    if (!w->failed && w->ndone < w->n) describe_deadlock(w);
    if (w->failed) return -1;
    if (b->stats) {
        cg__emu_wstats_flush(w->ws, 0, w->n);
        cg__emu_wstats_block_done(w->ws);
    }
    return 0;
}

int cg__emu_run_blocks(const cg_emu_grid *g, int64_t b0, int64_t b1, char *msg, size_t cap) {
    emu_worker *w = worker_get();
    if (!w) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    const int n = (int)(g->block[0] * g->block[1] * g->block[2]);
    if (worker_fibers(w, n) != 0) {
        snprintf(msg, cap, "cannot map the stacks of %d threads", n);
        return -1;
    }
    if (g->smem > w->smem_cap) {
        free(w->smem);
        w->smem = NULL;
        w->smem_cap = 0;
        if (posix_memalign((void **)&w->smem, 128, g->smem)) {
            snprintf(msg, cap, "out of memory for %zu bytes of shared memory", g->smem);
            return -1;
        }
        w->smem_cap = g->smem;
    }
    w->g = g;
    cg_emu_block *b = &w->blk;
    b->blockDim.x = g->block[0];
    b->blockDim.y = g->block[1];
    b->blockDim.z = g->block[2];
    b->gridDim.x = g->grid[0];
    b->gridDim.y = g->grid[1];
    b->gridDim.z = g->grid[2];
    b->dyn_smem = w->smem;
    b->dyn_smem_bytes = g->smem;
    b->nthreads = n;
    b->racecheck = g->racecheck;
    b->stats = g->stats != NULL;
    if (g->racecheck || g->stats) cg__emu_race_reset_ranges(w);
    if (g->racecheck && cg__emu_race_shadow(w) != 0) {
        snprintf(msg, cap, "out of memory for the race shadow");
        return -1;
    }
    if (g->stats && !w->ws && !(w->ws = cg__emu_wstats_new())) {
        snprintf(msg, cap, "out of memory for the access statistics");
        return -1;
    }
    for (int64_t bi = b0; bi < b1; bi++) {
        if (run_block(w, bi) != 0) {
            snprintf(msg, cap, "%s", w->msg);
            if (g->stats) cg__emu_wstats_reset(w->ws);
            w->g = NULL;
            return -1;
        }
    }
    w->g = NULL;
    if (g->stats && cg__emu_wstats_merge(w->ws, g->stats) != 0) {
        snprintf(msg, cap, "out of memory for the access statistics");
        return -1;
    }
    return 0;
}
