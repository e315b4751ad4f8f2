/* gdr_cpu_chunk.c -- the part of the gated delta rule's chunked CPU path that does not
 * depend on the instruction set: config pins and the dispatch line. Compiled once; the
 * kernels (gdr_cpu_chunk_{prep,fwd,bwd}.c) once per variant, reached through cpu_isa.c's
 * table (cg__gdr_cpu_chunk_fwd / _bwd, after the dtype rule there).
 *
 * Config keys: chunk (tokens per chunk, default 64 as in fla and the SSD path; clamped
 * to T) and threads (0 or absent: the context's pool). */
#include "gdr_cpu_chunk.h"

#define GDR_CHUNK_DEFAULT 64
#define GDR_CHUNK_MAX 256

cg_status cg__gdr_chunk_resolve(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const char *what,
                                cg_gdr_run *run) {
    static const char *const known[] = {"chunk", "threads"};
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 2);
    if (st != CG_OK) return st;
    int64_t chunk = GDR_CHUNK_DEFAULT, threads = 0;
    if ((st = cg__cfg_pin_int(ctx, cfg, "chunk", 1, GDR_CHUNK_MAX, what, &chunk, NULL)) != CG_OK) return st;
    if ((st = cg__cfg_pin_int(ctx, cfg, "threads", 0, 4096, what, &threads, NULL)) != CG_OK) return st;
    memset(run, 0, sizeof *run);
    run->chunk = cg__ssd_min(chunk, p->T > 0 ? p->T : 1);
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
