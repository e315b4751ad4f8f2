/* gen_backends.c -- the generated-kernel backends: "cuda" (NVRTC + the driver) and
 * "emulate" (the same generated source run on the CPU by the SIMT emulator).
 *
 * Both go through the same launchers (runtime/launch_*.c) and differ only in the
 * kernel executor (cg_kexec) they hand over. `supports` asks the kernel's Lua
 * constraints (a plan with the default config must exist), so the decision has one
 * source of truth; under the auto backend, dispatch runs the CPU path otherwise.
 *
 * Host pointers with the cuda backend: the launcher stages the tensors through device
 * memory and copies the outputs back (synchronizing); see runtime/launch_common.c. */
#include "launch_common.h"

static int gen_supports(cg_context *ctx, const cg_kexec *kx, cg_op op, const void *prob) {
    switch (op) {
    case CG_OP_SSD_FWD: return cg__ssd_gen_supports(ctx, kx, prob);
    case CG_OP_SSD_BWD: return cg__ssd_gen_bwd_supports(ctx, kx, prob);
    case CG_OP_SSCAN_FWD: return cg__sscan_gen_supports(ctx, kx, 0, prob);
    case CG_OP_SSCAN_BWD: return cg__sscan_gen_supports(ctx, kx, 1, prob);
    }
    return 0;
}

/* One backend per executor: the same four launchers over a different cg_kexec. */
#define CG_GEN_BACKEND(NAME, KX)                                                                          \
    static int NAME##_supports(cg_context *ctx, cg_op op, const void *prob) {                           \
        return gen_supports(ctx, &KX, op, prob);                                                        \
    }                                                                                                   \
    static cg_status NAME##_ssd_fwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *c, const cg_exec *e) { \
        return cg__ssd_gen_fwd(ctx, &KX, p, c, e);                                                      \
    }                                                                                                   \
    static cg_status NAME##_ssd_bwd(cg_context *ctx, const cg_ssd_prob *p, const cg_cfg *c, const cg_exec *e) { \
        return cg__ssd_gen_bwd(ctx, &KX, p, c, e);                                                      \
    }                                                                                                   \
    static cg_status NAME##_sscan_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *c,         \
                                      const cg_exec *e) {                                               \
        return cg__sscan_gen_fwd(ctx, &KX, p, c, e);                                                    \
    }                                                                                                   \
    static cg_status NAME##_sscan_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *c,         \
                                      const cg_exec *e) {                                               \
        return cg__sscan_gen_bwd(ctx, &KX, p, c, e);                                                    \
    }

CG_GEN_BACKEND(emu, cg__kexec_emu)
CG_GEN_BACKEND(cuda, cg__kexec_cuda)

const cg_backend_vt cg__backend_emulate = {
    .name = "emulate",
    .supports = emu_supports,
    .ssd_fwd = emu_ssd_fwd,
    .ssd_bwd = emu_ssd_bwd,
    .sscan_fwd = emu_sscan_fwd,
    .sscan_bwd = emu_sscan_bwd,
};

const cg_backend_vt cg__backend_cuda = {
    .name = "cuda",
    .supports = cuda_supports,
    .ssd_fwd = cuda_ssd_fwd,
    .ssd_bwd = cuda_ssd_bwd,
    .sscan_fwd = cuda_sscan_fwd,
    .sscan_bwd = cuda_sscan_bwd,
};
