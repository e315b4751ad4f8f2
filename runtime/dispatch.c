/* dispatch.c -- the public op calls: validate, pick a backend, run. */
#include "ops.h"
#include "gen.h"
#include "abi.h"
#include "backend.h"

#include <pthread.h>
#include <string.h>

static const char *const k_src_names[] = {"pinned",         "pinned-env",    "exact",
                                          "nearest-bucket", "tuned-on-miss", "default"};

const char *cg__cfg_source_name(cg_cfg_source s) {
    return (unsigned)s < sizeof k_src_names / sizeof k_src_names[0] ? k_src_names[s] : "unknown";
}

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
static int device_pointers(cg_context *ctx, const void *any_input) { return cg__kexec_cuda.owns_ptr(ctx, any_input); }

/* The config a call runs on vt (into *cfg, *src): the caller's pin (exec->config, already
 * parsed into *cfg), else what the config source gives for vt (empty: the default). Asked
 * before vt->supports, which then makes the plan of that config: one resolve per call. */
static cg_status config_for(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_exec *exec,
                            cg_cfg *cfg, cg_cfg_source *src) {
    *src = CG_SRC_PINNED;
    if (exec->config && *exec->config) return CG_OK;
    memset(cfg, 0, sizeof *cfg);
    *src = CG_SRC_DEFAULT;
    if (vt != &cg__backend_ref && ctx->cfgsrc) return ctx->cfgsrc->lookup(ctx, vt->name, op, prob, cfg, src);
    return CG_OK;
}

/* What run() does once the backend and config are chosen. */
typedef enum run_mode {
    MODE_RUN = 0, /* the call */
    MODE_PREPARE, /* cg_prepare: plan, compile, load, allocate; *bytes */
    MODE_SIZE,    /* cg_workspace_size: plan only; *bytes */
    MODE_CHECK    /* cg_validate: the arguments only (no backend or config chosen) */
} run_mode;

static cg_status prepare_on(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                            const cg_exec *exec, int host_copies, run_mode mode, size_t *bytes) {
    *bytes = 0;
    if (host_copies || !vt->prepare) return CG_OK; /* the CPU path (also on host copies) keeps its own scratch */
    return vt->prepare(ctx, op, prob, cfg, exec, mode == MODE_PREPARE, bytes);
}

/* The backend a call names (not auto) into *out, with what that backend refuses before
 * a config is chosen: not built in, a 16-bit dtype it does not take, cu_seqlens on an op
 * it has no variable-length path for. */
static cg_status named_backend(cg_context *ctx, cg_op op, const void *prob, cg_backend be, const cg_backend_vt **out) {
    const cg_backend_vt *vt = *out = backend_vt(be);
    if (!vt)
        return cg__err(ctx, CG_EUNSUPPORTED, "exec.backend: %s is not built into this library", cg_backend_name(be));
    cg_status s = cg__backend_dtypes(ctx, vt, op, prob);
    if (s) return s;
    if (!vt->varlen && !cg__backend_varlen_kernels(vt, op) && cg__prob_cu(cg__op_desc(op), prob)->p)
        return cg__backend_varlen_refused(ctx, vt, op);
    return CG_OK;
}

static cg_status run(cg_context *ctx, cg_op op, const void *prob, cg_dtype dtype, const void *any_input,
                     const cg_exec *exec_in, run_mode mode, size_t *bytes) {
    cg_exec exec;
    cg_status s = cg__abi_in(ctx, "exec", &exec, sizeof exec, exec_in);
    if (s) return s;
    if ((unsigned)exec.backend > CG_BACKEND_REF)
        return cg__err(ctx, CG_EINVAL, "exec.backend: %d but expected a cg_backend value", (int)exec.backend);
    cg_cfg cfg;
    s = cg__cfg_parse(ctx, exec.config, &cfg);
    if (s) return s;
    if (dtype == CG_F64 && exec.backend != CG_BACKEND_REF)
        return cg__err(ctx, CG_EINVAL,
                       "dtype: CG_F64 tensors are accepted by the ref backend only (expected CG_F32 for backend %s)",
                       cg_backend_name(exec.backend));

    /* A device cu_seqlens is read by kernels only (the host runner would dereference it):
     * the cuda backend's own varlen kernels, or a refusal (docs/varlen.md). */
    const cg_view *cuv = cg__prob_cu(cg__op_desc(op), prob);
    if (cuv->p && cg__kexec_cuda.owns_ptr && cg__kexec_cuda.owns_ptr(ctx, cuv->p) &&
        ((exec.backend != CG_BACKEND_AUTO && exec.backend != CG_BACKEND_CUDA) ||
         !cg__backend_varlen_kernels(backend_vt(CG_BACKEND_CUDA), op) ||
         (exec.backend == CG_BACKEND_AUTO && !device_pointers(ctx, any_input))))
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "cu_seqlens: a device tensor, but %s takes device offsets on backend cuda "
                       "only, with device tensors (the generated kernels read them; docs/varlen.md)",
                       cg__op_desc(op)->name);
    if (mode == MODE_CHECK) { /* cg_validate: what the call refuses before it picks a config */
        const cg_backend_vt *named;
        return exec.backend == CG_BACKEND_AUTO ? CG_OK : named_backend(ctx, op, prob, exec.backend, &named);
    }

    const cg_backend_vt *vt = NULL;
    const char *why = "";
    char why_not[CG_ERRMSG_CAP] = "", auto_why[256];
    int host_copies = 0;
    cg_cfg_source src = CG_SRC_PINNED;
    if (exec.backend == CG_BACKEND_AUTO) {
        /* A backend that does not take the call's 16-bit tensors is never chosen: the CPU
         * path's place goes to the reference then (docs/dtypes.md), said on the dispatch line. */
        const cg_backend_vt *cuda = backend_vt(CG_BACKEND_CUDA), *host = &cg__backend_cpu;
        char host_why[160] = "";
        if (cg__backend_dtypes(ctx, host, op, prob) != CG_OK) {
            snprintf(host_why, sizeof host_why, ", cpu takes no %s tensors yet: ref",
                     cg__dtype_name(cg__prob_view(cg__op_desc(op), prob, cg__prob_half(cg__op_desc(op), prob))->dt));
            host = &cg__backend_ref;
        }
        if (cuda && device_pointers(ctx, any_input)) {
            ctx->errmsg[0] = 0;
            int dt_ok = cg__backend_dtypes(ctx, cuda, op, prob) == CG_OK;
            if (dt_ok && !cuda->varlen && !cg__backend_varlen_kernels(cuda, op) &&
                cg__prob_cu(cg__op_desc(op), prob)->p) /* docs/varlen.md */
                dt_ok = 0,
                (void)cg__err(ctx, CG_EUNSUPPORTED, "cu_seqlens: backend %s does not take variable-length batches yet",
                              cuda->name);
            if (dt_ok && (s = config_for(ctx, cuda, op, prob, &exec, &cfg, &src)) != CG_OK) return s;
            if (dt_ok) ctx->errmsg[0] = 0;
            if (dt_ok && cuda->supports(ctx, op, prob, &cfg)) {
                vt = cuda;
                why = " (auto: device pointers)";
            } else {
                /* No shape is ever "unsupported": the CPU path (or ref) on host copies. */
                if (cuv->p && cg__kexec_cuda.owns_ptr(ctx, cuv->p))
                    return cg__err(ctx, CG_EUNSUPPORTED,
                                   "cu_seqlens: a device tensor, and backend cuda cannot run this "
                                   "problem (%s): no host path reads device offsets",
                                   ctx->errmsg[0] ? ctx->errmsg : "no valid config");
                snprintf(why_not, sizeof why_not, "%s", ctx->errmsg[0] ? ctx->errmsg : "no valid config");
                vt = host;
                host_copies = 1;
                why = " (auto: device pointers, no CUDA kernel: ran on host copies)";
                if ((s = config_for(ctx, vt, op, prob, &exec, &cfg, &src)) != CG_OK) return s;
            }
        } else {
            /* A CUDA stream with tensors that are not device memory: where CUDA cannot be
             * used, device tensors look like host memory too and would be read as such, so
             * the reason is said instead (issue #33: a failed CUDA load is never silent). */
            if (exec.stream && cuda && cg__kexec_cuda.device) {
                cg_devinfo dev;
                if (cg__kexec_cuda.device(ctx, &dev) != CG_OK) {
                    char reason[CG_ERRMSG_CAP];
                    snprintf(reason, sizeof reason, "%s", ctx->errmsg);
                    return cg__err(ctx, CG_ENODEV,
                                   "exec.stream: a CUDA stream is given but CUDA cannot be used (%s), "
                                   "so device tensors cannot be told from host memory",
                                   reason);
                }
            }
            vt = host;
            why = " (auto: host pointers)";
            if ((s = config_for(ctx, vt, op, prob, &exec, &cfg, &src)) != CG_OK) return s;
        }
        if (host_why[0] && vt == host) {
            snprintf(auto_why, sizeof auto_why, "%.*s%s)", (int)strlen(why) - 1, why, host_why);
            why = auto_why;
        }
    } else {
        if ((s = named_backend(ctx, op, prob, exec.backend, &vt)) != CG_OK) return s;
        if ((s = config_for(ctx, vt, op, prob, &exec, &cfg, &src)) != CG_OK) return s;
        ctx->errmsg[0] = 0;
        if (!vt->supports(ctx, op, prob, &cfg)) {
            snprintf(why_not, sizeof why_not, "%s", ctx->errmsg);
            return cg__err(ctx, CG_EUNSUPPORTED, "%s: backend %s cannot run this problem%s%s", cg__op_desc(op)->name,
                           vt->name, why_not[0] ? ": " : "", why_not);
        }
    }
    ctx->errmsg[0] = 0;
    char cfgtext[CG_CFG_MAX * 66] = "";
    const char *opname = cg__op_desc(op)->name, *level = cg__cfg_source_name(src);
    for (int i = 0, n = 0; i < cfg.n && n < (int)sizeof cfgtext; i++)
        n += snprintf(cfgtext + n, sizeof cfgtext - (size_t)n, "%s%s=%s", i ? "," : "", cfg.kv[i].key, cfg.kv[i].val);
    const cg_op_desc *od = cg__op_desc(op);
    char vl[48] = ""; /* varlen calls say so: "varlen=N sequences" (docs/varlen.md) */
    if (cg__prob_cu(od, prob)->p)
        snprintf(vl, sizeof vl, " varlen=%lld sequences", (long long)*cg__prob_nseq(od, prob));
    cg__set_dispatch(ctx, "%s backend=%s%s config=%s source=%s%s", opname, vt->name, why,
                     cfgtext[0] ? cfgtext : "(default)", level, vl);
    /* The call on vt: on host copies of device tensors (fallback.c), else on vt itself.
     * A stored config (tuned for a nearby seq bucket, or by an older version) that this
     * problem's constraints refuse: the backend says so before any work; run once more
     * with the default config instead and say so on the dispatch line. */
    for (int retry = 0;; retry = 1) {
        s = mode != MODE_RUN ? prepare_on(ctx, vt, op, prob, &cfg, &exec, host_copies, mode, bytes)
            : host_copies    ? cg__host_fallback(ctx, &cg__kexec_cuda, vt, op, prob, &cfg, &exec, why_not)
                             : cg__backend_run(ctx, vt, op, prob, &cfg, &exec);
        if (retry || !(s == CG_EINVAL || s == CG_EUNSUPPORTED) || !cfg.n || src == CG_SRC_PINNED ||
            src == CG_SRC_PINNED_ENV)
            break;
        char refused[CG_ERRMSG_CAP];
        snprintf(refused, sizeof refused, "%s", ctx->errmsg);
        memset(&cfg, 0, sizeof cfg);
        cg__set_dispatch(ctx, "%s backend=%s%s config=(default) source=default (the %s config %s was refused: %s)",
                         opname, vt->name, why, level, cfgtext, refused);
        ctx->errmsg[0] = 0;
    }
    if (s == CG_OK && exec.verbose) cg__log(CG_LOG_INFO, "%s", ctx->dispatch);
    return s;
}

/* The call's name for the owner check's message ("cg_ssd_fwd", "cg_prepare(ssd_fwd)"...),
 * from the op table's names: made once, so that a call formats nothing. */
static char g_fn[4][CG_OP_COUNT][64];
static pthread_once_t g_fn_once = PTHREAD_ONCE_INIT;
static void fn_names(void) {
    static const char *const k_around[4][2] = {
        {"cg_", ""}, {"cg_prepare(", ")"}, {"cg_workspace_size(", ")"}, {"cg_validate(", ")"}}; /* by run_mode */
    for (int m = 0; m < 4; m++)
        for (int op = 0; op < CG_OP_COUNT; op++)
            snprintf(g_fn[m][op], sizeof g_fn[m][op], "%s%s%s", k_around[m][0], cg__op_desc((cg_op)op)->name,
                     k_around[m][1]);
}

/* Validate args of op against the op table, then run (or prepare, or size) it. */
static cg_status op_call(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec, run_mode mode,
                         size_t *bytes) {
    if (!ctx) return CG_EINVAL;
    const cg_op_desc *d = cg__op_desc(op);
    pthread_once(&g_fn_once, fn_names);
    if (cg__ctx_enter(ctx, g_fn[mode][op]) != CG_OK) return CG_EINVAL; /* owner check: one thread at a time */
    cg_prob_any p;
    cg_args_any a; /* the caller's struct in this header's layout (abi.h) */
    CG_ASSERT(d->args_size <= sizeof a && d->prob_size <= sizeof p); /* op_list.h lists the op's structs */
    cg_status s = cg__abi_in(ctx, "args", &a, d->args_size, args);
    if (!s) s = cg__op_validate_ex(ctx, d, args ? &a : NULL, &p, mode == MODE_CHECK);
    if (!s) {
        const cg_dtype dtype = *(const cg_dtype *)((const char *)&p + d->dtype_off);
        s = run(ctx, op, &p, dtype, cg__prob_view(d, &p, 0)->p, exec, mode, bytes); /* tensor 0: a required input */
    }
    cg__ctx_leave(ctx);
    return s;
}

/* The public entry points cg_<op> (chunkgen.h), one per line of the op list. */
#define OP_ENTRY_POINT(name, E, AT, PT)                                                                                \
    cg_status cg_##name(cg_context *ctx, const AT *args, const cg_exec *exec) {                                        \
        return op_call(ctx, E, args, exec, MODE_RUN, NULL);                                                            \
    }
CG_OP_LIST(OP_ENTRY_POINT)

/* CG_EINVAL unless op is a cg_op value (the calls that take op as a number). */
static cg_status op_number(cg_context *ctx, cg_op op) {
    if ((unsigned)op < CG_OP_COUNT) return CG_OK;
    return cg__err(ctx, CG_EINVAL, "op: %d but expected a cg_op value (%s ... %s)", (int)op, cg__op_const(0),
                   cg__op_const((cg_op)(CG_OP_COUNT - 1)));
}

static cg_status ahead(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec, run_mode mode, size_t *bytes) {
    if (!ctx) return CG_EINVAL;
    size_t local;
    cg_status s = op_number(ctx, op);
    return s ? s : op_call(ctx, op, args, exec, mode, bytes ? bytes : &local);
}

cg_status cg_workspace_size(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec, size_t *bytes) {
    if (ctx && !bytes) return cg__err(ctx, CG_EINVAL, "bytes: null pointer (expected a size_t to write to)");
    return ahead(ctx, op, args, exec, MODE_SIZE, bytes);
}

cg_status cg_prepare(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec, size_t *bytes) {
    return ahead(ctx, op, args, exec, MODE_PREPARE, bytes);
}

cg_status cg_validate(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec) {
    return ahead(ctx, op, args, exec, MODE_CHECK, NULL);
}

/* The one dispatch by op number (chunkgen.h): the call cg_<op> makes, for any op. */
cg_status cg_run(cg_context *ctx, cg_op op, const void *args, const cg_exec *exec) {
    if (!ctx) return CG_EINVAL;
    cg_status s = op_number(ctx, op);
    return s ? s : op_call(ctx, op, args, exec, MODE_RUN, NULL); /* a run writes no bytes */
}
