/* backend.h -- one backend's side of a call, below the dispatcher (runtime/backend.c):
 * what a backend takes (its dtypes, its variable-length path) and its entry point by op.
 * cg__backend_dtypes and cg__backend_run are declared in internal.h. */
#ifndef CG_BACKEND_H
#define CG_BACKEND_H

#include "internal.h"

/* vt's entry point for op, called as it is: no dtype or variable-length check (for
 * runtime/varlen.c's per-sequence problems, which it has checked; cg__backend_run calls
 * vt->run itself, one hop less on the launch path). Inline, so that it depends on no file. */
static inline cg_status cg__backend_entry(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob,
                                          const cg_cfg *cfg, const cg_exec *exec) {
    if ((unsigned)op >= CG_OP_COUNT) return cg__err(ctx, CG_EINTERNAL, "op %d", (int)op);
    return vt->run(ctx, vt, op, prob, cfg, exec);
}

/* 1 when vt's kernels take op's cu_seqlens themselves (docs/varlen.md). */
int cg__backend_varlen_kernels(const cg_backend_vt *vt, cg_op op);
/* CG_EUNSUPPORTED: cu_seqlens on a backend with no variable-length path for op. */
cg_status cg__backend_varlen_refused(cg_context *ctx, const cg_backend_vt *vt, cg_op op);

#endif
