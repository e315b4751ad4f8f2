/* pool.c -- a small persistent thread pool for parallel-for loops.
 * Work items are handed out in order through an atomic counter; which thread runs an
 * item never changes results, because each item writes disjoint memory.
 *
 * fork(): a child process has only the thread that forked, so a pool made before the
 * fork has no workers there (and its mutex and condition variables may be in any state).
 * A pthread_atfork child handler bumps a process-wide fork generation; a pool remembers
 * the generation it was made in, and a pool of an older one is stale: cg__ctx_pool
 * abandons it (frees its memory without touching its threads, mutex or condition
 * variables) and makes a new one, so a forked child's first call runs (every context's
 * pool, each on its next use). */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct cg_pool {
    int size;
    uint64_t fork_gen; /* g_fork_gen when made: another value means made before a fork */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* the job in flight */
    uint64_t generation;
    int active;  /* threads taking part in this job (the caller is tid 0) */
    int pending; /* helpers that have not finished the job */
    int64_t n;
    cg_task_fn fn;
    void *arg;
    atomic_int_fast64_t next;
    int quit;
};

/* ------------------------------------------------------------ fork */

static atomic_uint_fast64_t g_fork_gen;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void) { atomic_fetch_add(&g_fork_gen, 1); }
static void atfork_register(void) { (void)pthread_atfork(NULL, NULL, after_fork_child); }

int cg__pool_stale(const cg_pool *p) { return p && p->fork_gen != atomic_load(&g_fork_gen); }

/* A pool of the parent seen in a forked child: its workers do not exist here, and its
 * mutex and condition variables may be held or waited on by those (absent) threads, so
 * they are neither joined, locked nor destroyed: only the memory is freed. */
static void pool_abandon(cg_pool *p) {
    free(p->threads);
    free(p);
}

/* Read once per process: glibc's sysconf(_SC_NPROCESSORS_ONLN) opens and parses
 * /sys/devices/system/cpu/online on every call, and every CPU-path call asks for its
 * default thread count (several microseconds of a warm call's budget). */
int cg__online_cores(void) {
    static atomic_int cached;
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c > 0) return c;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c = n > 0 ? (int)n : 1;
    atomic_store_explicit(&cached, c, memory_order_relaxed);
    return c;
}

static void drain(cg_pool *p, int tid) {
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        p->fn(p->arg, i, tid);
    }
}

typedef struct {
    cg_pool *pool;
    int tid;
} worker_arg;

static void *worker(void *a) {
    worker_arg *wa = a;
    cg_pool *p = wa->pool;
    int tid = wa->tid;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        if (tid >= p->active) continue;
        pthread_mutex_unlock(&p->mu);
        drain(p, tid);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cg_pool *cg__pool_create(int threads) {
    if (threads < 1) threads = 1;
    pthread_once(&g_atfork_once, atfork_register); /* before the first worker exists */
    cg_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->size = threads;
    p->fork_gen = atomic_load(&g_fork_gen);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int t = 1; t < threads; t++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->size = t;
            break;
        }
        wa->pool = p;
        wa->tid = t;
        if (pthread_create(&p->threads[t], NULL, worker, wa) != 0) {
            free(wa);
            p->size = t;
            break;
        }
    }
    return p;
}

void cg__pool_free(cg_pool *p) {
    if (!p) return;
    if (cg__pool_stale(p)) { /* made before a fork: its threads are not in this process */
        pool_abandon(p);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->size; t++) pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int cg__pool_size(const cg_pool *p) { return p ? p->size : 1; }

void cg__pool_run(cg_pool *p, int threads, int64_t n, cg_task_fn fn, void *arg) {
    if (n <= 0) return;
    int use = (!p || threads <= 0 || threads > p->size) ? (p ? p->size : 1) : threads;
    if (use > n) use = (int)n;
    if (!p || use <= 1) {
        for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->n = n;
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->next, 0);
    p->active = use;
    p->pending = use - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
