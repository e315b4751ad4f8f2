/* gdr_cpu_chunk.c -- the part of the gated delta rule's chunked CPU path that does not
 * depend on the instruction set: config pins and the dispatch line. Compiled once; the
 * kernels (gdr_cpu_chunk_{prep,fwd,bwd}.c) once per variant, reached through cpu_isa.c's
 * table (cg__gdr_cpu_chunk_fwd / _bwd, after the dtype rule there).
 *
 * Config keys: chunk (tokens per chunk; clamped to T) and threads (0 or absent: the
 * context's pool); their defaults are generator/cpu/gdr_cpu.lua's default(), the space
 * the tuner searches. */
#include "gdr_cpu_chunk.h"

#include "gen.h"
#include "ops.h"

#define GDR_CHUNK_MAX 256

/* generator/cpu/gdr_cpu.lua's default() for p (cg__cpu_space_default, cached per shape). */
static cg_status chunk_default(cg_context *ctx, const cg_gdr_prob *p, int bwd, int64_t *chunk, int64_t *threads) {
    *chunk = 64, *threads = 0; /* an empty problem: nothing runs */
    if (CG_DIM(p, B) < 1 || CG_DIM(p, T) < 1 || CG_DIM(p, H) < 1 || CG_DIM(p, G) < 1 || CG_DIM(p, DK) < 1 ||
        CG_DIM(p, DV) < 1)
        return CG_OK;
    const cg_cpu_pin pins[] = {{"chunk", 1, GDR_CHUNK_MAX, chunk, 1}, {"threads", 0, 4096, threads, 0}};
    return cg__cpu_default_pins(ctx, "gdr_cpu", bwd ? CG_OP_GDR_BWD : CG_OP_GDR_FWD, p, bwd ? CG_KS_BWD : 0, pins, 2,
                                NULL);
}

cg_status cg__gdr_chunk_resolve(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, int bwd, const char *what,
                                cg_gdr_run *run) {
    static const char *const known[] = {"chunk", "threads"};
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 2);
    if (st != CG_OK) return st;
    int64_t chunk, threads;
    if ((st = chunk_default(ctx, p, bwd, &chunk, &threads)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "chunk", 1, GDR_CHUNK_MAX, what, &chunk, NULL)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &threads, NULL)) != CG_OK) return st;
    memset(run, 0, sizeof *run);
    run->chunk = cg__ssd_min(chunk, CG_DIM(p, T) > 0 ? CG_DIM(p, T) : 1);
    run->pool = cg__ctx_pool(ctx);
    if (!run->pool) return cg__err(ctx, CG_ENOMEM, "%s: no thread pool", what);
    const int size = cg__pool_size(run->pool);
    run->nscratch = size;
    run->threads = (threads <= 0 || threads > size) ? size : (int)threads;
    return CG_OK;
}

void cg__gdr_chunk_detail(cg_context *ctx, const char *op, const cg_gdr_run *run) {
    cg__dispatch_detail(ctx, "%s chunked chunk=%lld threads=%d isa=%s", op, (long long)run->chunk, run->threads,
                        cg__cpu_isa_name(cg__cpu_isa_chosen()));
}
