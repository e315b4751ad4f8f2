/* kernels_api.c -- the public calls of include/chunkgen.h's "kernels" section that ask
 * about the machine and the generator: cg_free, cg_device_query, cg_kernel_list,
 * cg_kernel_describe. (The kernel cache: cuda/kcache_api.c; plans, configs and builds
 * ahead of time: kernel_plan_api.c.) */
#include "abi.h"
#include "cpu/cpu_isa.h"
#include "cuda/cg_cuda.h"
#include "gen.h"

#include <stdlib.h>
#include <string.h>

void cg_free(void *p) { free(p); }

static void gpu_fields(const cg_devinfo *d, cg_device_info *o) {
    o->gpu = 1;
    snprintf(o->gpu_name, sizeof o->gpu_name, "%s", d->name);
    o->gpu_arch = d->arch;
    o->gpu_sm_count = d->sm_count;
    o->gpu_smem_per_block = d->smem_per_block;
    o->gpu_regs_per_block = d->regs_per_block;
    o->gpu_emulated = d->emulated;
}

/* The toolchain: the driver and NVRTC, or why they are absent. */
static void toolchain(cg_context *ctx, cg_device_info *o) {
    const char *why = NULL;
    const cg_cu_api *cu = cg__cu_api(&why);
    int v = 0;
    if (!cu) snprintf(o->driver_why, sizeof o->driver_why, "%s", why ? why : "no CUDA driver");
    else if (cu->cuDriverGetVersion(&v) == CUDA_SUCCESS) o->driver_version = v;
    else snprintf(o->driver_why, sizeof o->driver_why, "libcuda loaded, version unknown");
    const cg_nvrtc_api *nv = cg__nvrtc_api(&why);
    int major = 0, minor = 0;
    if (!nv) snprintf(o->nvrtc_why, sizeof o->nvrtc_why, "%s", why ? why : "no NVRTC");
    else if (nv->nvrtcVersion(&major, &minor) == NVRTC_SUCCESS) o->nvrtc_version = 1000 * major + 10 * minor;
    if (nv && cg__nvrtc_id(ctx, o->nvrtc_id, sizeof o->nvrtc_id) != CG_OK) {
        o->nvrtc_id[0] = '\0';
        snprintf(o->nvrtc_why, sizeof o->nvrtc_why, "%s", cg_errmsg(ctx));
    }
}

static void cpu_fields(cg_device_info *o) {
    snprintf(o->cpu_model, sizeof o->cpu_model, "%s", cg__cpu_model());
    o->cpu_cores = cg__online_cores();
    snprintf(o->cpu_isa, sizeof o->cpu_isa, "%s", cg__cpu_isa_ops()->name);
    size_t n = 0;
    for (int isa = CG_ISA_COUNT - 1; isa >= 0; isa--)
        if (cg__cpu_isa_supported((cg_cpu_isa)isa) && n < sizeof o->cpu_isas)
            n += (size_t)snprintf(o->cpu_isas + n, sizeof o->cpu_isas - n, "%s%s", n ? "," : "",
                                  cg__cpu_isa_name((cg_cpu_isa)isa));
}

cg_status cg_device_query(cg_context *ctx, cg_backend backend, cg_device_info *out) {
    if (!ctx || cg__ctx_enter(ctx, "cg_device_query") != CG_OK) return CG_EINVAL;
    cg_device_info o;
    memset(&o, 0, sizeof o);
    cg_status st = cg__abi_out(ctx, "cg_device_query: out", out, &o, sizeof o); /* checked (and cleared) first */
    if (st == CG_OK && backend != CG_BACKEND_CUDA && backend != CG_BACKEND_EMULATE && backend != CG_BACKEND_CPU)
        st = cg__err(ctx, CG_EINVAL,
                     "cg_device_query: backend: expected cpu, cuda or emulate (the device to describe), got %s",
                     cg_backend_name(backend));
    if (st == CG_OK) {
        cpu_fields(&o);
        if (backend != CG_BACKEND_CPU) toolchain(ctx, &o);
        cg_devinfo d;
        const cg_kexec *kx = backend == CG_BACKEND_CUDA ? &cg__kexec_cuda : &cg__kexec_emu;
        if (backend == CG_BACKEND_CPU) {
            snprintf(o.gpu_why, sizeof o.gpu_why, "the cpu backend was asked about");
        } else if (kx->device && kx->device(ctx, &d) == CG_OK) {
            gpu_fields(&d, &o);
            cg_cuda_props pr;
            if (backend == CG_BACKEND_CUDA && cg__cuda_props(0, &pr) == CG_OK) {
                o.gpu_clock_mhz = pr.clock_mhz, o.gpu_mem_clock_mhz = pr.mem_clock_mhz;
                o.gpu_bus_bits = pr.bus_bits, o.gpu_mem_gb = pr.mem_gb;
            }
        } else {
            snprintf(o.gpu_why, sizeof o.gpu_why, "%s",
                     kx->device ? cg_errmsg(ctx) : "the CUDA backend is not built into this chunkgen");
        }
        ctx->errmsg[0] = '\0'; /* no device is an answer here, not an error */
        st = cg__abi_out(ctx, "cg_device_query: out", out, &o, sizeof o);
    }
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_kernel_list(cg_context *ctx, const char *const **names, int *n) {
    if (!ctx || cg__ctx_enter(ctx, "cg_kernel_list") != CG_OK) return CG_EINVAL;
    cg_status st;
    const char **list = NULL;
    int count = 0;
    if (!names) st = cg__err(ctx, CG_EINVAL, "cg_kernel_list: names is NULL (expected where to write the list)");
    else st = cg__gen_kernels(ctx, &list, &count);
    if (names) *names = st == CG_OK ? (const char *const *)list : NULL;
    if (n) *n = st == CG_OK ? count : 0;
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_kernel_describe(cg_context *ctx, const char *kernel, char **text) {
    if (!ctx || cg__ctx_enter(ctx, "cg_kernel_describe") != CG_OK) return CG_EINVAL;
    cg_status st;
    if (text) *text = NULL;
    if (!text) st = cg__err(ctx, CG_EINVAL, "cg_kernel_describe: text is NULL (expected where to write the text)");
    else if (!kernel)
        st = cg__err(ctx, CG_EINVAL, "cg_kernel_describe: kernel is NULL (expected a name of cg_kernel_list)");
    else st = cg__gen_describe(ctx, kernel, text);
    cg__ctx_leave(ctx);
    return st;
}
