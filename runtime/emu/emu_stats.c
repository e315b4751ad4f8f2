/* emu_stats.c -- the emulator's access statistics: shared-memory bank conflicts
 * (wavefronts per warp-wide request) and global coalescing (32-byte sectors per
 * request), per kernel launch and per source line. docs/emulator.md has the model and
 * the JSON schema.
 *
 * Only instrumented modules count (CHUNKGEN_EMU_STATS or cg__emu_stats_enable): every
 * load and store of such a module reaches emu_rt.c's access hook, which logs it here
 * per thread. A block's threads are fibers run one after another, so a warp's lanes
 * are matched afterwards: at a point where the whole warp stands at one place (a
 * __syncthreads, a full-warp collective, the block's end) the k-th execution of an
 * instruction by each lane since the last such point forms one warp-wide request, as
 * on a converged warp. Lines come from addr2line on the module (built with -g1) and
 * the `// ---- begin/end FILE` marks of the rendered source (generator/core.lua). */
#include "emu.h"
#include "fsutil.h"

#include <jansson.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* Entries a worker's threads log between two matching points (24 bytes each); more
 * are dropped (counted). */
#define WS_LOG_CAP (1 << 22)

typedef struct ws_ent {
    uintptr_t pc, addr;
    uint32_t n;
    uint8_t space, write;
} ws_ent;

typedef struct ws_log {
    ws_ent *e;
    int n, cap;
} ws_log;

/* One instruction (and space): its counters. */
typedef struct st_pc {
    uintptr_t pc;
    uint8_t space, write, used;
    uint32_t width;
    uint64_t requests, units, ideal;
    uint64_t stamp; /* (warp flush << 6) | lane + 1 of the occurrence count below */
    uint32_t occ;
} st_pc;

typedef struct st_table {
    st_pc *e;
    size_t cap, n; /* cap a power of two */
} st_table;

/* One lane's part of a warp-wide request: the occ-th execution of instruction pc
 * (space, write) by that lane since the warp's last matching point. */
typedef struct ws_item {
    uintptr_t pc, addr;
    uint32_t occ, lane, n;
    uint8_t space, write;
} ws_item;

struct cg_emu_wstats {
    ws_log log[1024];
    st_table t;
    ws_item *items;
    size_t nitems, items_cap;
    uint64_t *scratch;
    size_t scratch_cap;
    size_t logged; /* entries in the logs */
    uint64_t flushes, dropped, blocks;
};

struct cg_emu_gstats {
    pthread_mutex_t mu;
    st_table t;
    uint64_t dropped, blocks;
};

/* ------------------------------------------------------------------ tables */
static size_t pc_hash(uintptr_t pc, int space, int write) {
    uint64_t h = (uint64_t)pc * 0x9E3779B97F4A7C15ull ^ (uint64_t)(space * 2 + write) * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static int table_grow(st_table *t) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    st_pc *e = calloc(cap, sizeof *e);
    if (!e) return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->e[i].used) continue;
        size_t j = pc_hash(t->e[i].pc, t->e[i].space, t->e[i].write) & (cap - 1);
        while (e[j].used) j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return 0;
}

/* The slot of (pc, space, write), inserted when new; SIZE_MAX when out of memory. */
static size_t table_slot(st_table *t, uintptr_t pc, int space, int write, uint32_t width) {
    if ((t->n + 1) * 2 > t->cap && table_grow(t) != 0) return SIZE_MAX;
    size_t j = pc_hash(pc, space, write) & (t->cap - 1);
    while (t->e[j].used) {
        if (t->e[j].pc == pc && t->e[j].space == space && t->e[j].write == write) return j;
        j = (j + 1) & (t->cap - 1);
    }
    st_pc *e = &t->e[j];
    memset(e, 0, sizeof *e);
    e->pc = pc;
    e->space = (uint8_t)space;
    e->write = (uint8_t)write;
    e->width = width;
    e->used = 1;
    t->n++;
    return j;
}

static void table_clear(st_table *t) {
    if (t->e) memset(t->e, 0, t->cap * sizeof *t->e);
    t->n = 0;
}

/* ----------------------------------------------------------- worker side */
cg_emu_wstats *cg__emu_wstats_new(void) { return calloc(1, sizeof(cg_emu_wstats)); }

void cg__emu_wstats_free(cg_emu_wstats *ws) {
    if (!ws) return;
    for (int i = 0; i < 1024; i++) free(ws->log[i].e);
    free(ws->t.e);
    free(ws->items);
    free(ws->scratch);
    free(ws);
}

void cg__emu_wstats_log(cg_emu_wstats *ws, int tid, const void *pc, const void *addr, size_t n, int space, int write) {
    ws_log *l = &ws->log[tid];
    if (ws->logged >= WS_LOG_CAP) {
        ws->dropped++;
        return;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 256;
        ws_ent *e = realloc(l->e, (size_t)cap * sizeof *e);
        if (!e) {
            ws->dropped++;
            return;
        }
        l->e = e;
        l->cap = cap;
    }
    ws_ent *e = &l->e[l->n++];
    ws->logged++;
    e->pc = (uintptr_t)pc;
    e->addr = (uintptr_t)addr;
    e->n = n > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)n;
    e->space = (uint8_t)space;
    e->write = (uint8_t)write;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int item_cmp(const void *a, const void *b) {
    const ws_item *x = a, *y = b;
    if (x->pc != y->pc) return x->pc < y->pc ? -1 : 1;
    if (x->space != y->space) return x->space < y->space ? -1 : 1;
    if (x->write != y->write) return x->write < y->write ? -1 : 1;
    if (x->occ != y->occ) return x->occ < y->occ ? -1 : 1;
    return x->lane < y->lane ? -1 : x->lane > y->lane;
}

static uint64_t *scratch(cg_emu_wstats *ws, size_t n) {
    if (n > ws->scratch_cap) {
        size_t cap = n < 4096 ? 4096 : n * 2;
        uint64_t *p = realloc(ws->scratch, cap * sizeof *p);
        if (!p) return NULL;
        ws->scratch = p;
        ws->scratch_cap = cap;
    }
    return ws->scratch;
}

static size_t sort_unique(uint64_t *v, size_t n) {
    if (n < 2) return n;
    qsort(v, n, sizeof *v, u64_cmp);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[k - 1]) v[k++] = v[i];
    return k;
}

/* Lanes a shared-memory request of w bytes per lane is processed in together: a warp
 * for 4 bytes or less, a half-warp for 8, a quarter-warp for 16 and more. */
static int phase_lanes(uint32_t w) { return w <= 4 ? 32 : w <= 8 ? 16 : 8; }

/* One warp-wide shared request (lanes it[0..n), sorted by lane): wavefronts, ideal. */
static int shared_cost(cg_emu_wstats *ws, const ws_item *it, size_t n, uint64_t *wave, uint64_t *ideal) {
    uint32_t wmax = 1;
    for (size_t i = 0; i < n; i++)
        if (it[i].n > wmax) wmax = it[i].n;
    const uint32_t P = (uint32_t)phase_lanes(wmax);
    *wave = *ideal = 0;
    for (size_t i = 0; i < n;) {
        const uint32_t ph = it[i].lane / P;
        size_t j = i, nw = 0;
        while (j < n && it[j].lane / P == ph) {
            nw += (it[j].n ? (it[j].addr + it[j].n - 1) / 4 - it[j].addr / 4 : 0) + 1;
            j++;
        }
        uint64_t *w = scratch(ws, nw);
        if (!w) return -1;
        size_t k = 0;
        for (size_t q = i; q < j; q++) {
            uint64_t a = it[q].addr / 4, b = it[q].n ? (it[q].addr + it[q].n - 1) / 4 : a;
            for (uint64_t x = a; x <= b; x++) w[k++] = x;
        }
        k = sort_unique(w, k);
        unsigned cnt[32] = {0}, mx = 0;
        for (size_t q = 0; q < k; q++) {
            unsigned c = ++cnt[w[q] & 31];
            if (c > mx) mx = c;
        }
        *wave += mx;
        *ideal += (k + 31) / 32;
        i = j;
    }
    return 0;
}

/* One warp-wide global request: distinct 32-byte sectors, and the fewest that hold
 * its distinct lane addresses' bytes. */
static int global_cost(cg_emu_wstats *ws, const ws_item *it, size_t n, uint64_t *sect, uint64_t *ideal) {
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (it[i].n) ns += (it[i].addr + it[i].n - 1) / 32 - it[i].addr / 32 + 1;
    uint64_t *s = scratch(ws, ns + n);
    if (!s) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (it[i].n)
            for (uint64_t x = it[i].addr / 32; x <= (it[i].addr + it[i].n - 1) / 32; x++) s[k++] = x;
    *sect = sort_unique(s, k);
    uint32_t w = 0;
    for (size_t i = 0; i < n; i++) {
        s[i] = it[i].addr;
        if (it[i].n > w) w = it[i].n;
    }
    *ideal = (sort_unique(s, n) * w + 31) / 32;
    return 0;
}

/* Match and count the logs of warp lanes [base, base + nl). */
static void flush_warp(cg_emu_wstats *ws, int base, int nl) {
    size_t total = 0;
    for (int l = 0; l < nl; l++) total += (size_t)ws->log[base + l].n;
    if (!total) return;
    if (total > ws->items_cap) {
        size_t cap = total * 2;
        ws_item *p = realloc(ws->items, cap * sizeof *p);
        if (!p) {
            ws->dropped += total;
            for (int l = 0; l < nl; l++) ws->log[base + l].n = 0;
            ws->logged -= total;
            return;
        }
        ws->items = p;
        ws->items_cap = cap;
    }
    ws->flushes++;
    size_t k = 0;
    for (int l = 0; l < nl; l++) {
        ws_log *lg = &ws->log[base + l];
        const uint64_t stamp = (ws->flushes << 6) | (uint64_t)(l + 1);
        for (int i = 0; i < lg->n; i++) {
            const ws_ent *e = &lg->e[i];
            size_t j = table_slot(&ws->t, e->pc, e->space, e->write, e->n);
            if (j == SIZE_MAX) {
                ws->dropped++;
                continue;
            }
            st_pc *p = &ws->t.e[j];
            if (p->stamp != stamp) {
                p->stamp = stamp;
                p->occ = 0;
            }
            ws_item *it = &ws->items[k++];
            it->pc = e->pc;
            it->space = e->space;
            it->write = e->write;
            it->occ = p->occ++;
            it->lane = (uint32_t)l;
            it->n = e->n;
            it->addr = e->addr;
        }
        ws->logged -= (size_t)lg->n;
        lg->n = 0;
    }
    qsort(ws->items, k, sizeof *ws->items, item_cmp);
    for (size_t i = 0; i < k;) {
        size_t j = i + 1;
        const ws_item *g = &ws->items[i];
        while (j < k && ws->items[j].pc == g->pc && ws->items[j].space == g->space && ws->items[j].write == g->write &&
               ws->items[j].occ == g->occ)
            j++;
        /* the instruction's slot, looked up again: inserts above may have moved it */
        const size_t slot = table_slot(&ws->t, g->pc, g->space, g->write, g->n);
        st_pc *p = slot == SIZE_MAX ? NULL : &ws->t.e[slot];
        uint64_t u = 0, id = 0;
        int rc = !p                                ? -1
                 : p->space == CG_EMU_SPACE_SHARED ? shared_cost(ws, ws->items + i, j - i, &u, &id)
                                                   : global_cost(ws, ws->items + i, j - i, &u, &id);
        if (rc != 0) ws->dropped += j - i;
        else {
            p->requests++;
            p->units += u;
            p->ideal += id;
        }
        i = j;
    }
}

void cg__emu_wstats_flush(cg_emu_wstats *ws, int tid0, int nthreads) {
    for (int b = tid0; b < tid0 + nthreads; b += 32)
        flush_warp(ws, b, tid0 + nthreads - b < 32 ? tid0 + nthreads - b : 32);
}

void cg__emu_wstats_block_done(cg_emu_wstats *ws) { ws->blocks++; }

/* Forget the logs of an abandoned block. */
void cg__emu_wstats_reset(cg_emu_wstats *ws) {
    for (int i = 0; i < 1024; i++) ws->log[i].n = 0;
    ws->logged = 0;
    table_clear(&ws->t);
    ws->dropped = ws->blocks = 0;
}

/* ------------------------------------------------------------- grid side */
cg_emu_gstats *cg__emu_gstats_new(void) {
    cg_emu_gstats *gs = calloc(1, sizeof *gs);
    if (gs) pthread_mutex_init(&gs->mu, NULL);
    return gs;
}

void cg__emu_gstats_free(cg_emu_gstats *gs) {
    if (!gs) return;
    pthread_mutex_destroy(&gs->mu);
    free(gs->t.e);
    free(gs);
}

int cg__emu_wstats_merge(cg_emu_wstats *ws, cg_emu_gstats *gs) {
    int rc = 0;
    pthread_mutex_lock(&gs->mu);
    for (size_t i = 0; i < ws->t.cap; i++) {
        const st_pc *p = &ws->t.e[i];
        if (!p->used || !p->requests) continue;
        size_t j = table_slot(&gs->t, p->pc, p->space, p->write, p->width);
        if (j == SIZE_MAX) {
            rc = -1;
            break;
        }
        gs->t.e[j].requests += p->requests;
        gs->t.e[j].units += p->units;
        gs->t.e[j].ideal += p->ideal;
    }
    gs->dropped += ws->dropped;
    gs->blocks += ws->blocks;
    pthread_mutex_unlock(&gs->mu);
    table_clear(&ws->t);
    ws->dropped = ws->blocks = 0;
    return rc;
}

int cg__emu_gstats_n(cg_emu_gstats *gs) {
    size_t k = 0;
    for (size_t i = 0; i < gs->t.cap; i++)
        if (gs->t.e[i].used && gs->t.e[i].requests) gs->t.e[k++] = gs->t.e[i];
    gs->t.n = k; /* packed: no longer a hash table */
    return (int)k;
}

void cg__emu_gstats_at(const cg_emu_gstats *gs, int i, uintptr_t *pc, int *space, int *write, unsigned *width,
                       uint64_t c[3]) {
    const st_pc *p = &gs->t.e[i];
    *pc = p->pc;
    *space = p->space;
    *write = p->write;
    *width = p->width;
    c[0] = p->requests;
    c[1] = p->units;
    c[2] = p->ideal;
}

void cg__emu_gstats_totals(const cg_emu_gstats *gs, uint64_t *blocks, uint64_t *dropped) {
    *blocks = gs->blocks;
    *dropped = gs->dropped;
}
