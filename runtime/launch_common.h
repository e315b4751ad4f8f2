/* launch_common.h -- what every host launcher of generated kernels shares: the
 * in-memory plan table, the workspace, and staging of tensors the kernels cannot
 * address. Host launch code only; no device code here.
 *
 * A plan (rendered source, launch geometry, workspace size) and its loaded module are
 * looked up in ctx->plans, keyed by (kernel executor, kernel, shape, config pins). The
 * first call for a key asks the generator (Lua) and loads the module (NVRTC or the
 * emulator's compiler); later calls find the entry and only fill the params struct and
 * launch: no Lua, no allocation, no host synchronization (the workspace comes from
 * cg_exec.workspace or from a context-owned buffer that only ever grows). That keeps
 * repeated launches capturable in a CUDA graph. */
#ifndef CG_LAUNCH_COMMON_H
#define CG_LAUNCH_COMMON_H

#include "internal.h"
#include "gen.h"

typedef struct cg_plan_entry {
    const cg_kexec *kx;
    char kernel[32];
    cg_kshape shape;
    cg_cfg pin;
    cg_status status;     /* CG_OK, or why no plan exists (cached so `supports` stays cheap) */
    char why[CG_ERRMSG_CAP];
    cg_plan plan;
    void *module;         /* loaded lazily by the first launch; owned by the executor */
    struct cg_plan_entry *next;
} cg_plan_entry;

/* The entry of (kx, kernel, shape, pin): found, or made now (Lua). NULL only when out
 * of memory; a plan that cannot exist is an entry with status != CG_OK. */
cg_plan_entry *cg__plan_get(cg_context *ctx, const cg_kexec *kx, const cg_devinfo *dev, const char *kernel,
                            const cg_kshape *shape, const cg_cfg *pin);

/* Kernel memory of at least `bytes` for kx: the caller's workspace when large enough,
 * else a context-owned buffer (grown, never shrunk; growing waits for the stream). */
cg_status cg__workspace_get(cg_context *ctx, const cg_kexec *kx, const cg_exec *ex, size_t bytes, void **out);

/* A tensor of a launch, for staging: view, logical extents (1 for unused dims), output? */
typedef struct cg_staged {
    const cg_view *v;
    int64_t n[4];
    int output;
    void *dev;    /* staging copy, or NULL */
    size_t bytes;
} cg_staged;

/* When any present tensor is not kernel-addressable, copy every tensor into kernel
 * memory (*staged = 1). ptr[i] receives the pointer the kernel must use. */
cg_status cg__stage_in(cg_context *ctx, const cg_kexec *kx, cg_staged *sv, int n, void *stream, float **ptr,
                       int *staged);
/* Copy staged outputs back (when s is CG_OK), synchronize, free; returns the status. */
cg_status cg__stage_out(cg_context *ctx, const cg_kexec *kx, cg_staged *sv, int n, void *stream, cg_status s);

/* Run every launch of the entry's plan with one params struct. */
cg_status cg__launch_plan(cg_context *ctx, cg_plan_entry *e, const void *params, size_t size, void *stream);

/* Append " kernel=NAME" (and the staging note) to the dispatch line. */
void cg__note_kernel(cg_context *ctx, const cg_plan_entry *e, int staged);

/* The op launchers (runtime/launch_ssd.c, runtime/launch_sscan.c), shared by the cuda
 * and emulate backends (runtime/gen_backends.c). `supports` is 1 when a plan with the
 * default config exists: the kernel's Lua constraints decide. */
int cg__ssd_gen_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p);
int cg__ssd_gen_bwd_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p);
cg_status cg__ssd_gen_fwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex);
cg_status cg__ssd_gen_bwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex);
int cg__sscan_gen_supports(cg_context *ctx, const cg_kexec *kx, int bwd, const cg_sscan_prob *p);
cg_status cg__sscan_gen_fwd(cg_context *ctx, const cg_kexec *kx, const cg_sscan_prob *p, const cg_cfg *cfg,
                            const cg_exec *ex);
cg_status cg__sscan_gen_bwd(cg_context *ctx, const cg_kexec *kx, const cg_sscan_prob *p, const cg_cfg *cfg,
                            const cg_exec *ex);

#endif
