/* dispatch.c -- the public op calls: validate, pick a backend, run. */
#include "internal.h"
#include "gen.h"

#include <string.h>

static const char *const k_op_names[] = {"ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"};

static const cg_backend_vt *backend_vt(cg_backend b) {
    switch (b) {
    case CG_BACKEND_CPU: return &cg__backend_cpu;
    case CG_BACKEND_REF: return &cg__backend_ref;
    case CG_BACKEND_CUDA: return &cg__backend_cuda;
    case CG_BACKEND_EMULATE: return &cg__backend_emulate;
    default: return NULL;
    }
}

/* The pointers the caller gave are device pointers (kernel memory of the CUDA driver). */
static int device_pointers(cg_context *ctx, const void *any_input) {
    return cg__kexec_cuda.owns_ptr(ctx, any_input);
}

static cg_status run_on(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                        const cg_exec *exec, int host_copies, const char *why_not) {
    if (host_copies) return cg__host_fallback(ctx, &cg__kexec_cuda, vt, op, prob, cfg, exec, why_not);
    switch (op) {
    case CG_OP_SSD_FWD: return vt->ssd_fwd(ctx, prob, cfg, exec);
    case CG_OP_SSD_BWD: return vt->ssd_bwd(ctx, prob, cfg, exec);
    case CG_OP_SSCAN_FWD: return vt->sscan_fwd(ctx, prob, cfg, exec);
    case CG_OP_SSCAN_BWD: return vt->sscan_bwd(ctx, prob, cfg, exec);
    }
    return cg__err(ctx, CG_EINTERNAL, "op %d", (int)op);
}

static cg_status run(cg_context *ctx, cg_op op, const void *prob, cg_dtype dtype, const void *any_input,
                     const cg_exec *exec_in) {
    cg_exec exec;
    memset(&exec, 0, sizeof exec);
    if (exec_in) exec = *exec_in;
    if ((unsigned)exec.backend > CG_BACKEND_REF)
        return cg__err(ctx, CG_EINVAL, "exec.backend: %d but expected a cg_backend value", (int)exec.backend);
    cg_cfg cfg;
    cg_status s = cg__cfg_parse(ctx, exec.config, &cfg);
    if (s) return s;
    if (dtype == CG_F64 && exec.backend != CG_BACKEND_REF)
        return cg__err(ctx, CG_EINVAL, "dtype: CG_F64 tensors are accepted by the ref backend only (expected CG_F32 for backend %s)",
                       cg_backend_name(exec.backend));

    const cg_backend_vt *vt = NULL;
    const char *why = "";
    char why_not[CG_ERRMSG_CAP] = "";
    int host_copies = 0;
    if (exec.backend == CG_BACKEND_AUTO) {
        const cg_backend_vt *cuda = backend_vt(CG_BACKEND_CUDA);
        if (cuda && device_pointers(ctx, any_input)) {
            ctx->errmsg[0] = 0;
            if (cuda->supports(ctx, op, prob)) {
                vt = cuda;
                why = " (auto: device pointers)";
            } else {
                /* No shape is ever "unsupported": the CPU path on host copies. */
                snprintf(why_not, sizeof why_not, "%s", ctx->errmsg[0] ? ctx->errmsg : "no valid config");
                vt = &cg__backend_cpu;
                host_copies = 1;
                why = " (auto: device pointers, no CUDA kernel: ran on host copies)";
            }
        } else {
            vt = &cg__backend_cpu;
            why = " (auto: host pointers)";
        }
    } else {
        vt = backend_vt(exec.backend);
        if (!vt)
            return cg__err(ctx, CG_EUNSUPPORTED, "exec.backend: %s is not built into this library",
                           cg_backend_name(exec.backend));
        ctx->errmsg[0] = 0;
        if (!vt->supports(ctx, op, prob)) {
            snprintf(why_not, sizeof why_not, "%s", ctx->errmsg);
            return cg__err(ctx, CG_EUNSUPPORTED, "%s: backend %s cannot run this problem%s%s", k_op_names[op], vt->name,
                           why_not[0] ? ": " : "", why_not);
        }
    }
    ctx->errmsg[0] = 0;
    const char *level = "pinned";
    char cfgtext[CG_CFG_MAX * 66] = "";
    if (!exec.config || !*exec.config) {
        level = "default";
        if (vt != &cg__backend_ref) {
            if ((s = cg__tuned_lookup(ctx, vt->name, op, prob, &cfg, &level)) != CG_OK) return s;
        }
    }
    for (int i = 0, n = 0; i < cfg.n && n < (int)sizeof cfgtext; i++)
        n += snprintf(cfgtext + n, sizeof cfgtext - (size_t)n, "%s%s=%s", i ? "," : "", cfg.kv[i].key, cfg.kv[i].val);
    cg__set_dispatch(ctx, "%s backend=%s%s config=%s source=%s", k_op_names[op], vt->name, why,
                     cfgtext[0] ? cfgtext : "(default)", level);
    s = run_on(ctx, vt, op, prob, &cfg, &exec, host_copies, why_not);
    /* A stored config (tuned for a nearby seq bucket, or by an older version) that this
     * problem's constraints refuse: the backend says so before any work; run with the
     * default config instead and say so on the dispatch line. */
    if ((s == CG_EINVAL || s == CG_EUNSUPPORTED) && cfg.n && strcmp(level, "pinned") && strcmp(level, "pinned-env")) {
        char refused[CG_ERRMSG_CAP];
        snprintf(refused, sizeof refused, "%s", ctx->errmsg);
        memset(&cfg, 0, sizeof cfg);
        cg__set_dispatch(ctx, "%s backend=%s%s config=(default) source=default (the %s config %s was refused: %s)",
                         k_op_names[op], vt->name, why, level, cfgtext, refused);
        ctx->errmsg[0] = 0;
        s = run_on(ctx, vt, op, prob, &cfg, &exec, host_copies, why_not);
    }
    if (s == CG_OK && exec.verbose) fprintf(stderr, "chunkgen: %s\n", ctx->dispatch);
    return s;
}

cg_status cg_ssd_fwd(cg_context *ctx, const cg_ssd_fwd_args *args, const cg_exec *exec) {
    if (!ctx || cg__ctx_enter(ctx, "cg_ssd_fwd") != CG_OK) return CG_EINVAL; /* owner check */
    cg_ssd_prob p;
    cg_status s = cg__ssd_fwd_prob(ctx, args, &p);
    if (!s) s = run(ctx, CG_OP_SSD_FWD, &p, p.dtype, p.q.p, exec);
    cg__ctx_leave(ctx);
    return s;
}

cg_status cg_ssd_bwd(cg_context *ctx, const cg_ssd_bwd_args *args, const cg_exec *exec) {
    if (!ctx || cg__ctx_enter(ctx, "cg_ssd_bwd") != CG_OK) return CG_EINVAL; /* owner check */
    cg_ssd_prob p;
    cg_status s = cg__ssd_bwd_prob(ctx, args, &p);
    if (!s) s = run(ctx, CG_OP_SSD_BWD, &p, p.dtype, p.q.p, exec);
    cg__ctx_leave(ctx);
    return s;
}

cg_status cg_sscan_fwd(cg_context *ctx, const cg_sscan_fwd_args *args, const cg_exec *exec) {
    if (!ctx || cg__ctx_enter(ctx, "cg_sscan_fwd") != CG_OK) return CG_EINVAL; /* owner check */
    cg_sscan_prob p;
    cg_status s = cg__sscan_fwd_prob(ctx, args, &p);
    if (!s) s = run(ctx, CG_OP_SSCAN_FWD, &p, p.dtype, p.x.p, exec);
    cg__ctx_leave(ctx);
    return s;
}

cg_status cg_sscan_bwd(cg_context *ctx, const cg_sscan_bwd_args *args, const cg_exec *exec) {
    if (!ctx || cg__ctx_enter(ctx, "cg_sscan_bwd") != CG_OK) return CG_EINVAL; /* owner check */
    cg_sscan_prob p;
    cg_status s = cg__sscan_bwd_prob(ctx, args, &p);
    if (!s) s = run(ctx, CG_OP_SSCAN_BWD, &p, p.dtype, p.x.p, exec);
    cg__ctx_leave(ctx);
    return s;
}
