/* emu_rt.h -- the SIMT runtime's own records, shared by emu_rt.c (fibers, scheduling,
 * barriers, collectives, cp.async, the statistics' access hook) and emu_race.c (the
 * shared-memory race checker, which emu_rt.c calls). Private to runtime/emu/. */
#ifndef CG_EMU_RT_H
#define CG_EMU_RT_H

#include "emu.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && !defined(CG_EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

enum { F_READY, F_BAR, F_WARP, F_DONE };

typedef struct emu_worker emu_worker;

/* A cp.async in flight: the bytes it lands at the issuing thread's wait. */
typedef struct emu_cpa {
    unsigned char *dst;
    unsigned group; /* the thread's commit count when issued */
    unsigned size;
    unsigned char data[16];
} emu_cpa;

typedef struct emu_fiber {
    cg_emu_thread pub; /* first: the module reads it */
    emu_worker *w;
    void *sp; /* saved stack pointer while switched out */
    int state;
    const char *what; /* where it waits */
    int line;
    int pred;       /* __syncthreads_{count,and,or} operand */
    unsigned wmask; /* warp collective */
    void *warg;
    cg_emu_warp_fn wfn;
    emu_cpa *cpa; /* cp.async in flight, in issue order */
    int ncpa, cpa_cap;
    int slot;         /* index in the worker's fib[] */
    unsigned ncommit; /* cp.async groups committed */
#ifndef EMU_ASM_SWITCH
    ucontext_t uc;
#endif
} emu_fiber;

/* Race shadow, per byte of shared memory: who wrote and read it in the current
 * barrier interval (epoch), with the warp-barrier counts of the accessors then (two
 * lanes of one warp are ordered when a __syncwarp came between). Readers: the latest
 * one, and a summary of the others (their warp, or several; their largest count). */
typedef struct emu_shadow {
    uint32_t wepoch, repoch;
    uint16_t writer, wsync;
    uint16_t reader, rsync;
    uint16_t owarp, osync; /* other readers; owarp EMU_NONE or EMU_MANY */
} emu_shadow;
#define EMU_NONE 0xFFFEu
#define EMU_MANY 0xFFFFu
#define EMU_ASYNC 0x8000u /* writer: a cp.async of thread (writer & 0x3FF) still in flight */

#define EMU_CHUNK 32 /* fibers per stack mapping */
#define EMU_MAX_THREADS 1024

struct emu_worker {
    char *chunks[EMU_MAX_THREADS / EMU_CHUNK];
    int nfib; /* fibers allocated */
    emu_fiber *fib[EMU_MAX_THREADS];
    /* fib[i]->cpa again: the fibers live in mmapped stacks, which LeakSanitizer does not
     * scan, so the owner of each buffer is kept (and freed) here */
    void *cpa_own[EMU_MAX_THREADS];
    size_t page;
#ifdef EMU_ASM_SWITCH
    void *sched_sp;
#else
    ucontext_t sched_uc;
#endif
#ifdef EMU_ASAN
    const void *sched_bottom;
    size_t sched_size;
#endif
    cg_emu_block blk;
    unsigned char *smem;
    size_t smem_cap;
    const cg_emu_grid *g;
    /* the block in flight */
    int n, ndone, nbar;
    const char *bar_what;
    int bar_line, bar_tid, bar_result;
    int failed;
    char msg[1024];
    char race_msg[768]; /* the race checker's finding (emu_race.c), for fiber_fail */
    /* race checking */
    uint32_t epoch;
    emu_shadow *shadow; /* [dyn smem bytes + tls bytes] */
    size_t shadow_cap;
    unsigned char *tls_lo;
    size_t tls_n;
    cg_emu_wstats *ws; /* access statistics, when a grid counts */
};

/* emu_race.c (it calls nothing in emu_rt.c: a finding comes back as a message) */
/* The block's static __shared__ range (the module's TLS) when it checks races or counts. */
void cg__emu_race_reset_ranges(emu_worker *w);
/* A shadow for the block's shared memory; -1 when out of memory. */
int cg__emu_race_shadow(emu_worker *w);
/* A load or store of n bytes at p by f; a store records `as` as its writer (f's tid,
 * or tid | EMU_ASYNC for a cp.async in flight). 1 on a race (or an access past the end of
 * dynamic shared memory), described in w->race_msg; else 0. */
int cg__emu_race_access(emu_fiber *f, const void *p, size_t n, int is_write, uint16_t as, const void *pc);
/* Record f's write `as` of n bytes at p in this interval, unchecked. */
void cg__emu_race_mark(emu_fiber *f, const void *p, size_t n, uint16_t as);
/* Where the n bytes at a lie in shared memory: 1 with their shadow index (base), the
 * offset of their region in the shadow (shift) and its name; 0 when a is not in shared
 * memory. n is clipped to the static region's end. */
int cg__emu_smem_where(const emu_worker *w, const unsigned char *a, size_t *n, size_t *base, size_t *shift,
                       const char **where);

#endif
