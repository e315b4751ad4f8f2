/* ssd_cpu.c -- shared parts of the SSD CPU path that do not depend on the instruction
 * set: workspaces, defaults and config pins. The GEMM and the transpose are in
 * ssd_cpu_gemm.c, the forward in ssd_cpu_fwd.c, the backward in ssd_cpu_bwd.c (those
 * three are compiled once per ISA variant, see cpu_isa.h). */
#include "ssd_cpu.h"

#include "gen.h"
#include "ops.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

void *cg__ssd_big_alloc(size_t bytes) {
    if (bytes < ((size_t)4 << 20)) return cg__aligned_alloc(bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* fewer page faults on a fresh workspace; advisory */
#endif
    return p;
}

void cg__ssd_big_free(void *p, size_t bytes) {
    if (!p) return;
    if (bytes < ((size_t)4 << 20)) cg__aligned_free(p);
    else munmap(p, bytes);
}

/* The CPU path's part of a context: its kept scratch. */
typedef struct cpu_state {
    void *ws;
    size_t bytes;
} cpu_state;

static void cpu_ctx_free(cg_context *ctx) {
    cpu_state *st = ctx->part[CG_PART_CPU].p;
    if (st) cg__ssd_big_free(st->ws, st->bytes);
    free(st);
    ctx->part[CG_PART_CPU].p = NULL;
}

void *cg__ctx_host_ws(cg_context *ctx, size_t bytes) {
    if (bytes > CG_HOST_WS_KEEP) return NULL;
    cpu_state *st = ctx->part[CG_PART_CPU].p;
    if (!st) {
        if (!(st = calloc(1, sizeof *st))) return NULL;
        ctx->part[CG_PART_CPU].p = st;
        ctx->part[CG_PART_CPU].free = cpu_ctx_free;
    }
    if (st->bytes < bytes) {
        cg__ssd_big_free(st->ws, st->bytes);
        size_t grow = bytes < ((size_t)4 << 20) ? ((size_t)4 << 20) : bytes; /* one mapping from the start */
        st->ws = cg__ssd_big_alloc(grow);
        st->bytes = st->ws ? grow : 0;
    }
    return st->ws;
}

/* ------------------------------------------------------------- parameters */

/* Config key heads (group | each) into *group (left alone when absent); *set = 1 when given. */
static cg_status heads_pin(cg_context *ctx, const cg_cfg *cfg, const char *what, int *group, int *set) {
    const char *s = cg__cfg_str(cfg, "heads", NULL);
    if (set) *set = 0;
    if (!s) return CG_OK;
    if (strcmp(s, "group") && strcmp(s, "each"))
        return cg__err(ctx, CG_EINVAL, "%s: config heads=%s: expected group or each", what, s);
    *group = strcmp(s, "group") == 0;
    if (set) *set = 1;
    return CG_OK;
}

/* The generator's default names heads (the forward's task choice is the Lua space's). */
static cg_status heads_word(cg_context *ctx, const cg_cfg *def, const char *what, int *group) {
    int set = 0;
    cg_status st = heads_pin(ctx, def, what, group, &set);
    if (st == CG_OK && !set) return cg__err(ctx, CG_EINTERNAL, "generator/cpu/ssd_cpu.lua: default without heads");
    return st;
}

/* The defaults are generator/cpu/ssd_cpu.lua's default(), the same one the tuner starts
 * from (cg__cpu_space_default, cached per shape). */
cg_status cg__ssd_cpu_params_default(cg_context *ctx, const cg_ssd_prob *p, int bwd, cg_ssd_cpu_params *out) {
    memset(out, 0, sizeof *out);
    out->chunk = 64, out->block_dv = (int)(CG_DIM(p, DV) > 0 ? CG_DIM(p, DV) : 1); /* an empty problem: nothing runs */
    if (CG_DIM(p, B) < 1 || CG_DIM(p, T) < 1 || CG_DIM(p, H) < 1 || CG_DIM(p, G) < 1 || CG_DIM(p, DK) < 1 ||
        CG_DIM(p, DV) < 1)
        return CG_OK;
    int64_t chunk, bdv, th;
    const cg_cpu_pin pins[] = {
        {"chunk", 1, 1024, &chunk, 1}, {"block_dv", 1, INT32_MAX, &bdv, 1}, {"threads", 0, 4096, &th, 0}};
    cg_cfg def;
    cg_status st = cg__cpu_default_pins(ctx, "ssd_cpu", bwd ? CG_OP_SSD_BWD : CG_OP_SSD_FWD, p, bwd ? CG_KS_BWD : 0,
                                        pins, 3, &def);
    if (st != CG_OK) return st;
    if ((st = heads_word(ctx, &def, "ssd_cpu.lua default", &out->group_heads)) != CG_OK) return st;
    out->chunk = (int)chunk, out->block_dv = (int)bdv, out->threads = (int)th;
    return CG_OK;
}

cg_status cg__ssd_cpu_resolve(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, int bwd, const char *what,
                              cg_ssd_cpu_run *run) {
    static const char *const known[] = {"chunk", "block_dv", "heads", "threads", "bwd_split"};
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 5);
    if (st) return st;
    cg_ssd_cpu_params d;
    if ((st = cg__ssd_cpu_params_default(ctx, p, bwd, &d)) != CG_OK) return st;
    memset(run, 0, sizeof *run);
    int64_t chunk = d.chunk, bdv = d.block_dv, threads = d.threads, split = -1;
    int pinned_threads, pinned_split, pinned_heads, group = d.group_heads;
    if ((st = cg__cfg_pin_int(ctx, cfg, "chunk", 1, 1024, what, &chunk, &run->pinned_chunk)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "block_dv", 1, INT32_MAX, what, &bdv, &run->pinned_block_dv)) != CG_OK)
        return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &threads, &pinned_threads)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "bwd_split", 0, 1, what, &split, &pinned_split)) != CG_OK) return st;
    if ((st = heads_pin(ctx, cfg, what, &group, &pinned_heads)) != CG_OK) return st;
    run->bwd_split = (int)split;
    run->group_heads = group;
    run->pinned = run->pinned_chunk || run->pinned_block_dv || pinned_threads || pinned_split || pinned_heads;
    run->chunk = cg__ssd_min(chunk, CG_DIM(p, T) > 0 ? CG_DIM(p, T) : 1);
    run->chunk_pad = cg__ssd_pad(run->chunk);
    run->block_dv = cg__ssd_min(bdv, CG_DIM(p, DV));
    run->pool = cg__ctx_pool(ctx);
    const int size = cg__pool_size(run->pool);
    run->nscratch = size;
    run->threads = (threads <= 0 || threads > size) ? size : (int)threads;
    return CG_OK;
}
