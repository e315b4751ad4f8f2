/* gdr_cpu_chunk.c -- the entry points of the gated delta rule's chunked CPU path
 * (cg__gdr_cpu_chunk_fwd / _bwd): config pins, then the kernel of the ISA variant this
 * process runs (cpu_choice.c). Compiled once; the kernels (gdr_cpu_chunk_{prep,fwd,bwd}.c)
 * once per variant.
 *
 * Config keys: chunk (tokens per chunk, default 64 as in fla and the SSD path; clamped
 * to T) and threads (0 or absent: the context's pool). */
#include "gdr_cpu_chunk.h"

#define GDR_CHUNK_DEFAULT 64
#define GDR_CHUNK_MAX 256

#define DECL_VARIANT(s)                                                                                       \
    cg_status cg__gdr_chunk_fwd_isa_##s(cg_context *, const cg_gdr_prob *, const cg_gdr_run *, const cg_exec *);              \
    cg_status cg__gdr_chunk_bwd_isa_##s(cg_context *, const cg_gdr_prob *, const cg_gdr_run *, const cg_exec *);
DECL_VARIANT(baseline)
#ifdef CG_CPU_ISA_X86
DECL_VARIANT(avx2)
DECL_VARIANT(avx512)
#endif

typedef cg_status (*gdr_kernel)(cg_context *, const cg_gdr_prob *, const cg_gdr_run *, const cg_exec *);
static const gdr_kernel k_fwd[CG_ISA_COUNT] = {
    cg__gdr_chunk_fwd_isa_baseline,
#ifdef CG_CPU_ISA_X86
    cg__gdr_chunk_fwd_isa_avx2, cg__gdr_chunk_fwd_isa_avx512,
#endif
};
static const gdr_kernel k_bwd[CG_ISA_COUNT] = {
    cg__gdr_chunk_bwd_isa_baseline,
#ifdef CG_CPU_ISA_X86
    cg__gdr_chunk_bwd_isa_avx2, cg__gdr_chunk_bwd_isa_avx512,
#endif
};

/* The storage dtypes this path reads and writes: q, k, v, beta, g, o and the gradients
 * of those in float32 / bf16 / fp16; the states and their gradients in float32. */
static cg_status check_dtypes(cg_context *ctx, const cg_gdr_prob *p, const char *what) {
    const struct { const char *name; const cg_view *v; int may16; } r[] = {
        {"q", &p->q, 1},         {"k", &p->k, 1},          {"v", &p->v, 1},          {"g", &p->g, 1},
        {"beta", &p->beta, 1},   {"o", &p->o, 1},          {"dout", &p->dout, 1},    {"dq", &p->grad_q, 1},
        {"dk", &p->grad_k, 1},   {"dv", &p->grad_v, 1},    {"dg", &p->grad_g, 1},    {"dbeta", &p->grad_beta, 1},
        {"h0", &p->h0, 0},       {"hT", &p->hT, 0},        {"dhT", &p->dhT, 0},      {"dh0", &p->grad_h0, 0}};
    if (p->dtype != CG_F32)
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: dtype: %s calls are not supported (expected CG_F32 math)", what,
                       cg__dtype_name(p->dtype));
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        const cg_dtype dt = r[i].v->dt;
        if (!r[i].v->p || dt == CG_F32 || (r[i].may16 && cg__dtype_half(dt))) continue;
        return cg__err(ctx, CG_EUNSUPPORTED, "%s: %s: %s tensors are not supported (expected CG_F32%s)", what,
                       r[i].name, cg__dtype_name(dt), r[i].may16 ? ", CG_BF16 or CG_F16" : "");
    }
    return CG_OK;
}

static cg_status resolve(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const char *what,
                         cg_gdr_run *run) {
    static const char *const known[] = {"chunk", "threads"};
    cg_status st = cg__cfg_only(ctx, cfg, what, known, 2);
    if (st != CG_OK) return st;
    if ((st = check_dtypes(ctx, p, what)) != CG_OK) return st;
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

static cg_status run_kernel(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex,
                            const gdr_kernel *tab,
                            const char *what, const char *op) {
    cg_gdr_run run;
    cg_status st = resolve(ctx, p, cfg, what, &run);
    if (st != CG_OK) return st;
    if (p->B < 1 || p->T < 1 || p->H < 1) return CG_OK; /* nothing to compute */
    if ((st = tab[cg__cpu_isa_chosen()](ctx, p, &run, ex)) != CG_OK) return st;
    cg__dispatch_detail(ctx, "%s chunked chunk=%lld threads=%d isa=%s", op, (long long)run.chunk, run.threads,
                        cg__cpu_isa_name(cg__cpu_isa_chosen()));
    return CG_OK;
}

cg_status cg__gdr_cpu_chunk_fwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return run_kernel(ctx, p, cfg, ex, k_fwd, "cpu gdr forward (chunked)", "gdr_fwd");
}

cg_status cg__gdr_cpu_chunk_bwd(cg_context *ctx, const cg_gdr_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return run_kernel(ctx, p, cfg, ex, k_bwd, "cpu gdr backward (chunked)", "gdr_bwd");
}
