/* backend.c -- a call on a backend the dispatcher chose (backend.h): the dtypes it
 * takes, and its entry point, or one sequence at a time (runtime/varlen.c) for a packed
 * variable-length problem its kernels do not take whole. Below runtime/dispatch.c and
 * runtime/fallback.c, which both run a call so; above the backends. */
#include "backend.h"
#include "ops.h"

cg_status cg__backend_dtypes(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob) {
    const cg_op_desc *d = cg__op_desc(op);
    for (int i = 0; i < d->nt; i++) {
        const cg_view *v = cg__prob_view(d, prob, i);
        if (v->p && cg__dtype_half(v->dt) && !(vt->half & CG_DTM(v->dt)))
            return cg__err(ctx, CG_EUNSUPPORTED, "%s: %s is %s but backend %s does not take %s tensors yet", d->name,
                           d->t[i].name, cg__dtype_name(v->dt), vt->name, cg__dtype_name(v->dt));
    }
    return CG_OK;
}

int cg__backend_varlen_kernels(const cg_backend_vt *vt, cg_op op) {
    return vt && (vt->varlen_kernels & (1u << op)) != 0;
}

cg_status cg__backend_varlen_refused(cg_context *ctx, const cg_backend_vt *vt, cg_op op) {
    return cg__err(ctx, CG_EUNSUPPORTED,
                   "%s: cu_seqlens is given but backend %s does not take variable-length "
                   "batches of this op yet (backends cpu and ref do; docs/varlen.md)",
                   cg__op_desc(op)->name, vt->name);
}

/* A packed variable-length problem (docs/varlen.md): the host backends run it one
 * sequence at a time (runtime/varlen.c); the generated kernels take it whole. */
cg_status cg__backend_run(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                          const cg_exec *exec) {
    cg_status s = cg__backend_dtypes(ctx, vt, op, prob);
    if (s) return s;
    if (cg__prob_cu(cg__op_desc(op), prob)->p && !cg__backend_varlen_kernels(vt, op))
        return vt->varlen ? cg__varlen_run(ctx, vt, op, prob, cfg, exec) : cg__backend_varlen_refused(ctx, vt, op);
    if ((unsigned)op >= CG_OP_COUNT) return cg__err(ctx, CG_EINTERNAL, "op %d", (int)op);
    return vt->run(ctx, vt, op, prob, cfg, exec); /* gen_run (launch.c) or a host backend's table */
}
