/* emu_race.c -- the SIMT runtime's shared-memory race checker: a shadow per byte of
 * shared memory records who wrote and read it since the last barrier (emu_rt.h:
 * emu_shadow); an access that no barrier or __syncwarp orders against another thread's is
 * a race, described (both threads named) for emu_rt.c, which fails the block with it. */
#include "emu_rt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ race checking */
void cg__emu_race_reset_ranges(emu_worker *w) {
    w->tls_lo = NULL;
    w->tls_n = 0;
    const cg_emu_grid *g = w->g;
    if ((g->racecheck || g->stats) && g->tls_size && g->tls_touch) {
        void *p = NULL;
        g->tls_touch();
        if (dlinfo(g->dl, RTLD_DI_TLS_DATA, &p) == 0 && p) {
            w->tls_lo = p;
            w->tls_n = g->tls_size;
        }
    }
}

int cg__emu_race_shadow(emu_worker *w) {
    size_t need = w->blk.dyn_smem_bytes + w->tls_n;
    if (need <= w->shadow_cap) return 0;
    emu_shadow *s = calloc(need, sizeof *s); /* epoch 0 never matches */
    if (!s) return -1;
    free(w->shadow);
    w->shadow = s;
    w->shadow_cap = need;
    return 0;
}

static int ordered(const emu_fiber *f, int other_warp, unsigned other_sync) {
    return other_warp == f->pub.warp && (uint16_t)f->pub.nsync_warp != (uint16_t)other_sync;
}

static int race_report(emu_fiber *f, const char *kind, const char *other, int tid, const char *where, size_t off,
                       const void *pc) {
    Dl_info di;
    char at[600] = "";
    if (pc && dladdr(pc, &di) && di.dli_fname) {
        const char *base = strrchr(di.dli_fname, '/');
        if (di.dli_sname)
            snprintf(at, sizeof at, " at %s+0x%zx", di.dli_sname,
                     (size_t)((const char *)pc - (const char *)di.dli_saddr));
        else /* kernel code is hidden: addr2line -e <module> <offset> */
            snprintf(at, sizeof at, " at %s+0x%zx", base ? base + 1 : di.dli_fname,
                     (size_t)((const char *)pc - (const char *)di.dli_fbase));
    }
    char *m = f->w->race_msg;
    const size_t cap = sizeof f->w->race_msg;
    if (tid < 0)
        return snprintf(m, cap,
                        "shared-memory race: %s of %s byte %zu%s after reads by threads of several warps since the "
                        "last barrier",
                        kind, where, off, at),
               1;
    if (tid & EMU_ASYNC)
        return snprintf(m, cap,
                        "shared-memory race: %s of %s byte %zu%s while a cp.async of thread %d is still in flight "
                        "(no cp.async wait before it, or no __syncthreads after the wait)",
                        kind, where, off, at, tid & 0x3FF),
               1;
    return snprintf(m, cap, "shared-memory race: %s of %s byte %zu%s after a %s by thread %d since the last barrier",
                    kind, where, off, at, other, tid),
           1;
}

/* Where the n bytes at a lie in shared memory: 1 with their shadow index (base),
 * the offset of their region in the shadow (shift) and its name; 0 when a is not in
 * shared memory. n is clipped to the static region's end. */
int cg__emu_smem_where(const emu_worker *w, const unsigned char *a, size_t *n, size_t *base, size_t *shift,
                       const char **where) {
    if (a >= w->blk.dyn_smem && a < w->blk.dyn_smem + w->blk.dyn_smem_bytes) {
        *base = (size_t)(a - w->blk.dyn_smem);
        *shift = 0;
        *where = "dynamic shared memory";
        return 1;
    }
    if (w->tls_lo && a >= w->tls_lo && a < w->tls_lo + w->tls_n) {
        *base = w->blk.dyn_smem_bytes + (size_t)(a - w->tls_lo);
        *shift = w->blk.dyn_smem_bytes;
        *where = "static __shared__ memory";
        if (*n > (size_t)(w->tls_lo + w->tls_n - a)) *n = (size_t)(w->tls_lo + w->tls_n - a);
        return 1;
    }
    return 0;
}

/* A load or store of n bytes at p by f; a store records `as` as its writer (f's tid,
 * or tid | EMU_ASYNC for a cp.async in flight). */
int cg__emu_race_access(emu_fiber *f, const void *p, size_t n, int is_write, uint16_t as, const void *pc) {
    emu_worker *w = f->w;
    const unsigned char *a = p;
    size_t base, shift;
    const char *where;
    if (!cg__emu_smem_where(w, a, &n, &base, &shift, &where)) return 0;
    if (shift == 0 && n > (size_t)(w->blk.dyn_smem + w->blk.dyn_smem_bytes - a))
        return snprintf(w->race_msg, sizeof w->race_msg,
                        "access of %zu bytes runs past the end of dynamic shared memory (%zu bytes)", n,
                        w->blk.dyn_smem_bytes),
               1;
    const uint32_t E = w->epoch;
    const int tid = f->pub.tid;
    const uint16_t sync = (uint16_t)f->pub.nsync_warp;
    const char *kind = is_write ? "write" : "read";
    for (size_t i = 0; i < n; i++) {
        emu_shadow *s = &w->shadow[base + i];
        const size_t off = base + i - shift;
        if (s->wepoch == E && s->writer != tid && !ordered(f, s->writer / 32, s->wsync))
            return race_report(f, kind, "write", s->writer, where, off, pc);
        if (is_write) {
            if (s->repoch == E) {
                if (s->reader != tid && !ordered(f, s->reader / 32, s->rsync))
                    return race_report(f, kind, "read", s->reader, where, off, pc);
                if (s->owarp == EMU_MANY) return race_report(f, kind, "read", -1, where, off, pc);
                if (s->owarp != EMU_NONE && !ordered(f, s->owarp, s->osync))
                    return race_report(f, kind, "read", s->owarp * 32, where, off, pc);
            }
            s->wepoch = E;
            s->writer = as;
            s->wsync = sync;
        } else if (s->repoch != E) {
            s->repoch = E;
            s->reader = (uint16_t)tid;
            s->rsync = sync;
            s->owarp = EMU_NONE;
        } else if (s->reader == tid) {
            s->rsync = sync;
        } else {
            const uint16_t rw = (uint16_t)(s->reader / 32);
            if (s->owarp == EMU_NONE) {
                s->owarp = rw;
                s->osync = s->rsync;
            } else {
                if (s->owarp != rw) s->owarp = EMU_MANY;
                if ((uint16_t)(s->rsync - s->osync) < 0x8000u) s->osync = s->rsync;
            }
            s->reader = (uint16_t)tid;
            s->rsync = sync;
        }
    }
    return 0;
}

/* Record f's write `as` of n bytes at p in this interval, unchecked (a cp.async that
 * lands, or one still in flight across a barrier). */
void cg__emu_race_mark(emu_fiber *f, const void *p, size_t n, uint16_t as) {
    emu_worker *w = f->w;
    size_t base, shift;
    const char *where;
    if (!cg__emu_smem_where(w, p, &n, &base, &shift, &where)) return;
    for (size_t i = 0; i < n && base + i < w->shadow_cap; i++) {
        emu_shadow *s = &w->shadow[base + i];
        s->wepoch = w->epoch;
        s->writer = as;
        s->wsync = (uint16_t)f->pub.nsync_warp;
    }
}
