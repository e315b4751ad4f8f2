/* loader.c -- dlopen NVRTC and the CUDA driver once per process; the check helpers. */
#include "cg_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

static cg_cu_api g_cu;
static const cg_cu_api *g_cu_ok;
static char g_cu_why[512];
static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;

static cg_nvrtc_api g_nv;
static const cg_nvrtc_api *g_nv_ok;
static char g_nv_why[1024];
static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;

/* dlsym into a function pointer without a pedantic object/function cast warning. */
static int sym(void *lib, const char *name, void *fnptr) {
    void *p = dlsym(lib, name);
    memcpy(fnptr, &p, sizeof p);
    return p != NULL;
}

static void load_cu(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_cu_why, sizeof g_cu_why, "no CUDA driver: cannot load libcuda.so.1 (%s)", e ? e : "not found");
        return;
    }
    /* Versioned names: what cuda.h maps the plain names to. */
    struct { const char *name; void *fp; } t[] = {
        {"cuInit", &g_cu.cuInit},
        {"cuDriverGetVersion", &g_cu.cuDriverGetVersion},
        {"cuDeviceGetCount", &g_cu.cuDeviceGetCount},
        {"cuDeviceGet", &g_cu.cuDeviceGet},
        {"cuDeviceGetName", &g_cu.cuDeviceGetName},
        {"cuDeviceGetAttribute", &g_cu.cuDeviceGetAttribute},
        {"cuDevicePrimaryCtxRetain", &g_cu.cuDevicePrimaryCtxRetain},
        {"cuDevicePrimaryCtxRelease_v2", &g_cu.cuDevicePrimaryCtxRelease},
        {"cuCtxGetCurrent", &g_cu.cuCtxGetCurrent},
        {"cuCtxGetDevice", &g_cu.cuCtxGetDevice},
        {"cuCtxPushCurrent_v2", &g_cu.cuCtxPushCurrent},
        {"cuCtxPopCurrent_v2", &g_cu.cuCtxPopCurrent},
        {"cuModuleLoadData", &g_cu.cuModuleLoadData},
        {"cuModuleUnload", &g_cu.cuModuleUnload},
        {"cuModuleGetFunction", &g_cu.cuModuleGetFunction},
        {"cuFuncSetAttribute", &g_cu.cuFuncSetAttribute},
        {"cuLaunchKernel", &g_cu.cuLaunchKernel},
        {"cuMemAlloc_v2", &g_cu.cuMemAlloc},
        {"cuMemFree_v2", &g_cu.cuMemFree},
        {"cuMemcpyHtoDAsync_v2", &g_cu.cuMemcpyHtoDAsync},
        {"cuMemcpyDtoHAsync_v2", &g_cu.cuMemcpyDtoHAsync},
        {"cuStreamSynchronize", &g_cu.cuStreamSynchronize},
        {"cuMemsetD8Async", &g_cu.cuMemsetD8Async},
        {"cuEventCreate", &g_cu.cuEventCreate},
        {"cuEventDestroy_v2", &g_cu.cuEventDestroy},
        {"cuEventRecord", &g_cu.cuEventRecord},
        {"cuEventSynchronize", &g_cu.cuEventSynchronize},
        /* _v2 since CUDA 12.8 (what cuda.h 13 maps the plain name to); older drivers
         * have only the plain one (fallback below). */
        {"cuEventElapsedTime_v2", &g_cu.cuEventElapsedTime},
        {"cuPointerGetAttribute", &g_cu.cuPointerGetAttribute},
        {"cuGetErrorName", &g_cu.cuGetErrorName},
        {"cuGetErrorString", &g_cu.cuGetErrorString},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!sym(lib, t[i].name, t[i].fp) &&
            !(t[i].fp == (void *)&g_cu.cuEventElapsedTime && sym(lib, "cuEventElapsedTime", t[i].fp))) {
            snprintf(g_cu_why, sizeof g_cu_why, "the CUDA driver (libcuda.so.1) lacks %s: too old", t[i].name);
            dlclose(lib);
            return;
        }
    }
    g_cu_ok = &g_cu;
}

static void load_nv(void) {
    /* The toolkit's own major first, then others; plain names as a last resort. */
    static const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.14", "libnvrtc.so.11.2",
                                  "libnvrtc.so", NULL};
    static const char *dirs[] = {"", "/usr/local/cuda/lib64/", "/usr/local/cuda/lib/", NULL};
    void *lib = NULL;
    const char *cuda_home = getenv("CUDA_HOME");
    if (!cuda_home || !*cuda_home) cuda_home = getenv("CUDA_PATH");
    char path[1024];
    for (int d = -1; !lib && (d < 0 || dirs[d]); d++) {
        for (int i = 0; !lib && names[i]; i++) {
            if (d < 0) {
                if (!cuda_home || !*cuda_home) break;
                snprintf(path, sizeof path, "%.900s/lib64/%s", cuda_home, names[i]);
            } else {
                snprintf(path, sizeof path, "%s%s", dirs[d], names[i]);
            }
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!lib) {
        snprintf(g_nv_why, sizeof g_nv_why,
                 "no NVRTC: cannot load libnvrtc.so.13 / .12 / libnvrtc.so (from the loader path, $CUDA_HOME/lib64 "
                 "or /usr/local/cuda/lib64)");
        return;
    }
    struct { const char *name; void *fp; } t[] = {
        {"nvrtcGetErrorString", &g_nv.nvrtcGetErrorString},
        {"nvrtcVersion", &g_nv.nvrtcVersion},
        {"nvrtcGetNumSupportedArchs", &g_nv.nvrtcGetNumSupportedArchs},
        {"nvrtcGetSupportedArchs", &g_nv.nvrtcGetSupportedArchs},
        {"nvrtcCreateProgram", &g_nv.nvrtcCreateProgram},
        {"nvrtcDestroyProgram", &g_nv.nvrtcDestroyProgram},
        {"nvrtcCompileProgram", &g_nv.nvrtcCompileProgram},
        {"nvrtcGetProgramLogSize", &g_nv.nvrtcGetProgramLogSize},
        {"nvrtcGetProgramLog", &g_nv.nvrtcGetProgramLog},
        {"nvrtcGetCUBINSize", &g_nv.nvrtcGetCUBINSize},
        {"nvrtcGetCUBIN", &g_nv.nvrtcGetCUBIN},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!sym(lib, t[i].name, t[i].fp)) {
            snprintf(g_nv_why, sizeof g_nv_why, "NVRTC lacks %s (needs CUDA 11.2 or newer)", t[i].name);
            dlclose(lib);
            return;
        }
    }
    g_nv_ok = &g_nv;
}

const cg_cu_api *cg__cu_api(const char **why) {
    pthread_once(&g_cu_once, load_cu);
    if (why) *why = g_cu_ok ? "" : g_cu_why;
    return g_cu_ok;
}

const cg_nvrtc_api *cg__nvrtc_api(const char **why) {
    pthread_once(&g_nv_once, load_nv);
    if (why) *why = g_nv_ok ? "" : g_nv_why;
    return g_nv_ok;
}

static const char *short_file(const char *file) {
    const char *p = strstr(file, "runtime/");
    return p ? p : file;
}

cg_status cg__cu_check(cg_context *ctx, CUresult r, cg_status fail, const char *call, const char *file, int line) {
    if (r == CUDA_SUCCESS) return CG_OK;
    const char *name = NULL, *text = NULL;
    if (g_cu_ok) {
        if (g_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
        if (g_cu.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    }
    /* No device / driver problems are ENODEV whatever the caller expected. */
    if (r == 100 /* NO_DEVICE */ || r == 35 /* INSUFFICIENT_DRIVER */ || r == 34 /* STUB_LIBRARY */ ||
        r == 46 /* DEVICE_UNAVAILABLE */ || (r == 999 /* UNKNOWN */ && strstr(call, "cuInit")))
        fail = CG_ENODEV;
    if (r == 2 /* OUT_OF_MEMORY */) fail = CG_ENOMEM;
    return cg__err(ctx, fail, "CUDA: %s failed: %s (%d: %s) at %s:%d", call, name ? name : "CUDA error", (int)r,
                   text ? text : "no description", short_file(file), line);
}

cg_status cg__nvrtc_check(cg_context *ctx, nvrtcResult r, const char *call, const char *file, int line) {
    if (r == NVRTC_SUCCESS) return CG_OK;
    const char *text = g_nv_ok ? g_nv.nvrtcGetErrorString(r) : NULL;
    return cg__err(ctx, r == 1 /* OUT_OF_MEMORY */ ? CG_ENOMEM : CG_ECOMPILE, "NVRTC: %s failed: %s (%d) at %s:%d",
                   call, text ? text : "error", (int)r, short_file(file), line);
}
