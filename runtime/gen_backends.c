/* gen_backends.c -- the generated-kernel backends: "cuda" (NVRTC + the driver) and
 * "emulate" (the same generated source run on the CPU by the SIMT emulator).
 *
 * Both go through the same launchers (runtime/launch_*.c) and differ only in the
 * kernel executor (cg_kexec) they hand over. `supports` asks the kernel's Lua
 * constraints (a plan with the default config must exist), so the decision has one
 * source of truth. Ops without a generated kernel yet answer CG_EUNSUPPORTED; under
 * the auto backend dispatch then runs the CPU path.
 *
 * Host pointers with the cuda backend: the launcher stages the tensors through device
 * memory and copies the outputs back (synchronizing); see runtime/launch_ssd.c. */
#include "internal.h"
#include "gen.h"

/* runtime/launch_ssd.c */
int cg__ssd_gen_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p);
cg_status cg__ssd_gen_fwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex);
int cg__ssd_gen_bwd_supports(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p);
cg_status cg__ssd_gen_bwd(cg_context *ctx, const cg_kexec *kx, const cg_ssd_prob *p, const cg_cfg *cfg,
                          const cg_exec *ex);

static const char *const k_ops[] = {"ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"};

static int gen_supports(cg_context *ctx, const cg_kexec *kx, const char *backend, cg_op op, const void *prob) {
    if (!kx) {
        cg__err(ctx, CG_EUNSUPPORTED, "backend %s: not built into this library", backend);
        return 0;
    }
    if (op == CG_OP_SSD_FWD) return cg__ssd_gen_supports(ctx, kx, prob);
    if (op == CG_OP_SSD_BWD) return cg__ssd_gen_bwd_supports(ctx, kx, prob);
    cg__err(ctx, CG_EUNSUPPORTED, "backend %s: no generated kernel for %s yet (the cpu backend runs it)", backend,
            k_ops[op]);
    return 0;
}

static cg_status no_kernel(cg_context *ctx, const char *backend, cg_op op) {
    return cg__err(ctx, CG_EUNSUPPORTED, "backend %s: no generated kernel for %s yet (the cpu backend runs it)",
                   backend, k_ops[op]);
}

/* ------------------------------------------------------------------ emulate */
static const cg_kexec *emu_kx(void) { return &cg__kexec_emu; }

static int emu_supports(cg_context *ctx, cg_op op, const void *prob) {
    return gen_supports(ctx, emu_kx(), "emulate", op, prob);
}
static cg_status emu_ssd_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__ssd_gen_fwd(ctx, emu_kx(), p, cfg, ex);
}
static cg_status emu_ssd_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__ssd_gen_bwd(ctx, emu_kx(), p, cfg, ex);
}
static cg_status emu_sscan_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)p, (void)cfg, (void)ex;
    return no_kernel(ctx, "emulate", CG_OP_SSCAN_FWD);
}
static cg_status emu_sscan_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)p, (void)cfg, (void)ex;
    return no_kernel(ctx, "emulate", CG_OP_SSCAN_BWD);
}

const cg_backend_vt cg__backend_emulate = {
    .name = "emulate",
    .supports = emu_supports,
    .ssd_fwd = emu_ssd_fwd,
    .ssd_bwd = emu_ssd_bwd,
    .sscan_fwd = emu_sscan_fwd,
    .sscan_bwd = emu_sscan_bwd,
};

/* --------------------------------------------------------------------- cuda */
static const cg_kexec *cuda_kx(void) { return &cg__kexec_cuda; }

static int cuda_supports(cg_context *ctx, cg_op op, const void *prob) {
    return gen_supports(ctx, cuda_kx(), "cuda", op, prob);
}
static cg_status cuda_ssd_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__ssd_gen_fwd(ctx, cuda_kx(), p, cfg, ex);
}
static cg_status cuda_ssd_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    return cg__ssd_gen_bwd(ctx, cuda_kx(), p, cfg, ex);
}
static cg_status cuda_sscan_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)p, (void)cfg, (void)ex;
    return no_kernel(ctx, "cuda", CG_OP_SSCAN_FWD);
}
static cg_status cuda_sscan_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)p, (void)cfg, (void)ex;
    return no_kernel(ctx, "cuda", CG_OP_SSCAN_BWD);
}

const cg_backend_vt cg__backend_cuda = {
    .name = "cuda",
    .supports = cuda_supports,
    .ssd_fwd = cuda_ssd_fwd,
    .ssd_bwd = cuda_ssd_bwd,
    .sscan_fwd = cuda_sscan_fwd,
    .sscan_bwd = cuda_sscan_bwd,
};
