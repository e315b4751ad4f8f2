/* loader.c -- dlopen NVRTC and the CUDA driver once per process; the check helpers. */
#include "cg_cuda.h"
#include "env.h"

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
    /* CHUNKGEN_LIBCUDA: another driver library file (tests run a mock driver with it). */
    const char *explicit_path = cg__env(CG_ENV_LIBCUDA);
    void *lib = NULL;
    if (explicit_path) {
        lib = dlopen(explicit_path, RTLD_NOW | RTLD_LOCAL);
    } else {
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_cu_why, sizeof g_cu_why, "no CUDA driver: cannot load %.200s (%.250s)",
                 explicit_path && *explicit_path ? explicit_path : "libcuda.so.1", e ? e : "not found");
        return;
    }
    /* Versioned names: what cuda.h (12.x, 13.x) maps the plain names to; checked
     * against the CUDA 13 cuda.h and the exports of its libcuda stub. */
    struct {
        const char *name;
        void *fp;
        int optional;
    } t[] = {
        {"cuInit", &g_cu.cuInit, 0},
        {"cuDriverGetVersion", &g_cu.cuDriverGetVersion, 0},
        {"cuDeviceGetCount", &g_cu.cuDeviceGetCount, 0},
        {"cuDeviceGet", &g_cu.cuDeviceGet, 0},
        {"cuDeviceGetName", &g_cu.cuDeviceGetName, 0},
        {"cuDeviceGetAttribute", &g_cu.cuDeviceGetAttribute, 0},
        {"cuDevicePrimaryCtxRetain", &g_cu.cuDevicePrimaryCtxRetain, 0},
        {"cuDevicePrimaryCtxRelease_v2", &g_cu.cuDevicePrimaryCtxRelease, 0},
        {"cuDevicePrimaryCtxGetState", &g_cu.cuDevicePrimaryCtxGetState, 0},
        {"cuCtxGetCurrent", &g_cu.cuCtxGetCurrent, 0},
        /* the one-argument form; CUDA 13 added cuCtxGetDevice_v2(dev, ctx) beside it */
        {"cuCtxGetDevice", &g_cu.cuCtxGetDevice, 0},
        {"cuCtxPushCurrent_v2", &g_cu.cuCtxPushCurrent, 0},
        {"cuCtxPopCurrent_v2", &g_cu.cuCtxPopCurrent, 0},
        {"cuCtxSynchronize", &g_cu.cuCtxSynchronize, 0},
        {"cuModuleLoadData", &g_cu.cuModuleLoadData, 0},
        {"cuModuleUnload", &g_cu.cuModuleUnload, 0},
        {"cuModuleGetFunction", &g_cu.cuModuleGetFunction, 0},
        {"cuFuncGetAttribute", &g_cu.cuFuncGetAttribute, 0},
        {"cuFuncSetAttribute", &g_cu.cuFuncSetAttribute, 0},
        {"cuFuncGetParamInfo", &g_cu.cuFuncGetParamInfo, 1}, /* 12.4+ */
        {"cuLaunchKernel", &g_cu.cuLaunchKernel, 0},
        {"cuMemAlloc_v2", &g_cu.cuMemAlloc, 0},
        {"cuMemFree_v2", &g_cu.cuMemFree, 0},
        {"cuMemcpyAsync", &g_cu.cuMemcpyAsync, 0},
        {"cuStreamSynchronize", &g_cu.cuStreamSynchronize, 0},
        {"cuStreamIsCapturing", &g_cu.cuStreamIsCapturing, 1}, /* CUDA 10+ */
        {"cuMemsetD8Async", &g_cu.cuMemsetD8Async, 0},
        {"cuEventCreate", &g_cu.cuEventCreate, 0},
        {"cuEventDestroy_v2", &g_cu.cuEventDestroy, 0},
        {"cuEventRecord", &g_cu.cuEventRecord, 0},
        {"cuEventSynchronize", &g_cu.cuEventSynchronize, 0},
        /* _v2 since CUDA 12.8 (what cuda.h 13 maps the plain name to); older drivers
         * have only the plain one (fallback below). Same signature. */
        {"cuEventElapsedTime_v2", &g_cu.cuEventElapsedTime, 0},
        {"cuPointerGetAttribute", &g_cu.cuPointerGetAttribute, 0},
        {"cuGetErrorName", &g_cu.cuGetErrorName, 0},
        {"cuGetErrorString", &g_cu.cuGetErrorString, 0},
        {"cuDeviceTotalMem_v2", &g_cu.cuDeviceTotalMem, 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (sym(lib, t[i].name, t[i].fp) || t[i].optional) continue;
        if (t[i].fp == (void *)&g_cu.cuEventElapsedTime && sym(lib, "cuEventElapsedTime", t[i].fp)) continue;
        snprintf(g_cu_why, sizeof g_cu_why, "the CUDA driver (libcuda.so.1) lacks %s: too old", t[i].name);
        dlclose(lib);
        memset(&g_cu, 0, sizeof g_cu);
        return;
    }
    g_cu_ok = &g_cu;
}

/* NVRTC loads its builtins (libnvrtc-builtins.so.M.m) with dlopen by file name; when
 * libnvrtc itself came from a directory outside the loader path ($CUDA_HOME/lib64,
 * CHUNKGEN_NVRTC) that fails at the first compile (NVRTC_ERROR_BUILTIN_OPERATION_FAILURE).
 * Loading it first from libnvrtc's own directory makes NVRTC's dlopen find it by its
 * soname. Best effort: nothing happens when it is absent there. */
static void preload_builtins(void *lib) {
    nvrtcResult (*version)(int *, int *) = NULL;
    if (!sym(lib, "nvrtcVersion", &version)) return;
    int major = 0, minor = 0;
    if (version(&major, &minor) != NVRTC_SUCCESS) return;
    Dl_info info;
    void *fp;
    memcpy(&fp, &version, sizeof fp);
    if (!dladdr(fp, &info) || !info.dli_fname || !strchr(info.dli_fname, '/')) return;
    char path[1100];
    int dirlen = (int)(strrchr(info.dli_fname, '/') - info.dli_fname);
    if (dirlen > 1000) return;
    snprintf(path, sizeof path, "%.*s/libnvrtc-builtins.so.%d.%d", dirlen, info.dli_fname, major, minor);
    (void)dlopen(path, RTLD_NOW | RTLD_LOCAL); /* kept for the process, like libnvrtc */
}

static void load_nv(void) {
    void *lib = NULL;
    char tried[700] = "";
    /* An explicit library wins and is the only one tried. */
    const char *explicit_path = cg__env(CG_ENV_NVRTC);
    if (explicit_path) {
        lib = dlopen(explicit_path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            snprintf(g_nv_why, sizeof g_nv_why, "no NVRTC: cannot load $CHUNKGEN_NVRTC=%.300s (%.500s)", explicit_path,
                     e ? e : "not found");
            return;
        }
    }
    /* Sonames, newest first, except that the driver's own major goes first: a CUBIN
     * from an NVRTC newer than the driver's CUDA major may not load. */
    const char *names[8];
    int nn = 0;
    char driver_name[32] = "";
    const cg_cu_api *cu = cg__cu_api(NULL);
    int dv = 0;
    if (cu && cu->cuDriverGetVersion(&dv) == CUDA_SUCCESS && dv >= 11000) {
        snprintf(driver_name, sizeof driver_name, "libnvrtc.so.%d", dv / 1000);
        names[nn++] = driver_name;
    }
    static const char *const k_names[] = {"libnvrtc.so.14", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
                                          "libnvrtc.so"};
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (strcmp(k_names[i], driver_name) != 0) names[nn++] = k_names[i];
    /* Directories: $CUDA_HOME (or $CUDA_PATH), the loader path, /usr/local/cuda. */
    const char *cuda_home = cg__env(CG_ENV_CUDA_HOME);
    if (!cuda_home) cuda_home = cg__env(CG_ENV_CUDA_PATH);
    char home_lib[960] = "";
    if (cuda_home) snprintf(home_lib, sizeof home_lib, "%.900s/lib64/", cuda_home);
    const char *dirs[] = {home_lib, "", "/usr/local/cuda/lib64/", "/usr/local/cuda/lib/"};
    char path[1024];
    for (size_t d = 0; !lib && d < sizeof dirs / sizeof dirs[0]; d++) {
        if (d == 0 && !home_lib[0]) continue;
        for (int i = 0; !lib && i < nn; i++) {
            snprintf(path, sizeof path, "%s%s", dirs[d], names[i]);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
        size_t l = strlen(tried);
        snprintf(tried + l, sizeof tried - l, "%s%s", l ? ", " : "", dirs[d][0] ? dirs[d] : "the loader path");
    }
    if (!lib) {
        snprintf(g_nv_why, sizeof g_nv_why,
                 "no NVRTC: cannot load %s (or .13 / .12 / libnvrtc.so) from %s; set CHUNKGEN_NVRTC to the library "
                 "file or CUDA_HOME to the toolkit",
                 names[0], tried);
        return;
    }
    preload_builtins(lib);
    struct {
        const char *name;
        void *fp;
    } t[] = {
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
            memset(&g_nv, 0, sizeof g_nv);
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
        r == 46 /* DEVICE_UNAVAILABLE */ || r == 802 /* SYSTEM_NOT_READY */ ||
        r == 803 /* SYSTEM_DRIVER_MISMATCH: libcuda vs the kernel module */ ||
        r == 804 /* COMPAT_NOT_SUPPORTED_ON_DEVICE */ || (r == 999 /* UNKNOWN */ && strstr(call, "cuInit")))
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
