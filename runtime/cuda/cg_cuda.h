/* cg_cuda.h -- NVRTC and the CUDA driver API, loaded with dlopen (no CUDA headers or
 * libraries are needed to build chunkgen). Private to runtime/cuda/ and its tests. */
#ifndef CG_CUDA_H
#define CG_CUDA_H

#include "gen.h"
#include "kcache.h"

/* -------------------------------------------------- driver API (cuda.h subset) */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK 12
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1 /* static shared memory of the function */
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_UNIFIED 4
#define CU_EVENT_DEFAULT 0 /* timing enabled (CU_EVENT_DISABLE_TIMING is 2) */

/* Entry points by the symbol names cuda.h (12.x and 13.x) maps the plain names to:
 * cuMemAlloc -> cuMemAlloc_v2, cuEventElapsedTime -> cuEventElapsedTime_v2 (12.8+), ...
 * (loader.c). Members may be NULL only where marked optional. */
typedef struct cg_cu_api {
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxGetCurrent)(CUcontext *pctx);
    CUresult (*cuCtxGetDevice)(CUdevice *dev);
    CUresult (*cuCtxPushCurrent)(CUcontext ctx);
    CUresult (*cuCtxPopCurrent)(CUcontext *pctx);
    CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*cuModuleUnload)(CUmodule mod);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*cuFuncGetAttribute)(int *value, int attrib, CUfunction fn);
    CUresult (*cuFuncSetAttribute)(CUfunction fn, int attrib, int value);
    /* optional (driver 12.4+): offset and size of a kernel parameter */
    CUresult (*cuFuncGetParamInfo)(CUfunction fn, size_t index, size_t *offset, size_t *size);
    CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream stream, void **params, void **extra);
    CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr p);
    /* the direction comes from the pointers (unified addressing): staging copies any mix */
    CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*cuStreamSynchronize)(CUstream stream);
    /* optional; *status: 0 not capturing, 1 capturing, 2 capture invalidated (CUstreamCaptureStatus) */
    CUresult (*cuStreamIsCapturing)(CUstream stream, int *status);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned *flags, int *active);
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream);
    CUresult (*cuEventCreate)(CUevent *ev, unsigned flags);
    CUresult (*cuEventDestroy)(CUevent ev);
    CUresult (*cuEventRecord)(CUevent ev, CUstream stream);
    CUresult (*cuEventSynchronize)(CUevent ev);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*cuPointerGetAttribute)(void *data, int attrib, CUdeviceptr ptr);
    CUresult (*cuGetErrorName)(CUresult r, const char **s);
    CUresult (*cuGetErrorString)(CUresult r, const char **s);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev); /* optional: NULL when absent */
} cg_cu_api;

/* ------------------------------------------------------------ NVRTC subset */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
#define NVRTC_SUCCESS 0

typedef struct cg_nvrtc_api {
    const char *(*nvrtcGetErrorString)(nvrtcResult r);
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int *n);
    nvrtcResult (*nvrtcGetSupportedArchs)(int *archs);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *p, const char *src, const char *name, int nheaders,
                                      const char *const *headers, const char *const *include_names);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *p);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram p, int nopts, const char *const *opts);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram p, size_t *n);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram p, char *log);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram p, size_t *n);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram p, char *cubin);
} cg_nvrtc_api;

/* The loaded libraries (process-wide, loaded once, never unloaded). NULL when the
 * library is absent; then *why (static text) says what was tried. */
const cg_cu_api *cg__cu_api(const char **why);
const cg_nvrtc_api *cg__nvrtc_api(const char **why);

/* Attributes of a device for reports (chunkgen bench): 0 where the driver does not say. */
typedef struct cg_cuda_props {
    double clock_mhz, mem_clock_mhz, bus_bits, mem_gb;
    int driver; /* cuDriverGetVersion, e.g. 13000 */
} cg_cuda_props;
/* Fill *p for device `ordinal` through the process's driver (runtime/cuda/props.c);
 * CG_ENODEV when there is no driver or device. */
cg_status cg__cuda_props(int ordinal, cg_cuda_props *p);

/* Check one driver / NVRTC call: on failure record "<call> failed: <error> (file:line)"
 * on ctx and return the status. Used through the macros below, which return it. */
cg_status cg__cu_check(cg_context *ctx, CUresult r, cg_status fail, const char *call, const char *file, int line);
cg_status cg__nvrtc_check(cg_context *ctx, nvrtcResult r, const char *call, const char *file, int line);

#define CG_CU_CHECK(ctx, call)                                                                                         \
    do {                                                                                                               \
        cg_status cu_st_ = cg__cu_check((ctx), cg__cu->call, CG_ELAUNCH, #call, __FILE__, __LINE__);                   \
        if (cu_st_ != CG_OK) return cu_st_;                                                                            \
    } while (0)
#define CG_NVRTC_CHECK(ctx, call)                                                                                      \
    do {                                                                                                               \
        cg_status nv_st_ = cg__nvrtc_check((ctx), cg__nv->call, #call, __FILE__, __LINE__);                            \
        if (nv_st_ != CG_OK) return nv_st_;                                                                            \
    } while (0)

/* ------------------------------------------------------------ NVRTC compiler */

/* "nvrtc 13.0 <library path> size=<bytes> mtime=<ns>": identifies the compiler build
 * for cache keys (nvrtcVersion alone has no build number). ENODEV when absent. */
cg_status cg__nvrtc_id(cg_context *ctx, char *buf, size_t cap);

/* The NVRTC options for arch (e.g. 80) and a source, as the cache key names them:
 * -std=c++17, --gpu-architecture=sm_XX, --ptxas-options=-v, --split-compile (the
 * compile adds its thread count, see below), --minimal (NVRTC 12.4+), and any
 * `// nvrtc-options:` line of the source's header. Writes up to CG_NVRTC_MAX_OPTS
 * pointers into opts (into storage buf). */
#define CG_NVRTC_MAX_OPTS 12
int cg__nvrtc_options(int arch, const char *source, const char **opts, char *buf, size_t cap);

/* The threads NVRTC's --split-compile may use for one module: threads (<= 0: the
 * online cores), at least 2 and at most CG_NVRTC_SPLIT_MAX. Every count >= 2 gives
 * the same SASS (checked on the default kernels, docs/jit.md); 1 would not split and
 * may schedule differently, so it is never used: one key, one code. */
#define CG_NVRTC_SPLIT_MAX 8
int cg__nvrtc_split_threads(int threads);
/* 1 when the loaded NVRTC takes --split-compile (12.4 or newer; older ones compile
 * unsplit, under their own compiler id in the key). */
int cg__nvrtc_can_split(void);
/* 1 when the loaded NVRTC writes time traces (--fdevice-time-trace, NVRTC 13 or newer).
 * With CHUNKGEN_NVRTC_TIME_TRACE=DIR set, every compile then writes
 * DIR/<kernel name>-sm<arch>.json, a Chrome trace (front end, NVVM optimizer per
 * function, NVVM codegen, ptxas per entry): a diagnosis for the templates' compile
 * cost (bench/compile_trace.py summarizes them). The entries' code is the same with and
 * without it; an existing file of that name in DIR is overwritten. */
int cg__nvrtc_can_trace(void);
/* 1 when the loaded NVRTC takes --minimal (12.4 or newer), which every compile then
 * passes (it is in the options, so in the cache key). */
int cg__nvrtc_can_minimal(void);

/* Compile source to a CUBIN for sm_<arch>, the module's entries in parallel threads
 * (cg__nvrtc_split_threads(0)). *cubin and *log are malloc'd (log may be returned on
 * failure too, with CG_ECOMPILE and the log in the message). */
cg_status cg__nvrtc_compile(cg_context *ctx, const char *name, const char *source, int arch, void **cubin,
                            size_t *cubin_len, char **log);
/* The same with cg__nvrtc_split_threads(threads): callers that already compile several
 * modules at once (the sweep tests, build-kernels) pass a small count. */
cg_status cg__nvrtc_compile_threads(cg_context *ctx, const char *name, const char *source, int arch, int threads,
                                    void **cubin, size_t *cubin_len, char **log);

/* The first line of every CUBIN cache key: the chunkgen version and the entry format.
 * A kernel built by another chunkgen (or for another entry format) has another key,
 * so it is never found; `chunkgen import` refuses bundled kernels without this head. */
#define CG_CUBIN_KEY_HEAD "chunkgen " CG_VERSION_STRING " kcache-format " CG_KCACHE_FORMAT_STR

/* The kernel cache key (kcache.h) of the CUBIN of `source` for sm_<arch>: the
 * version head above, target, compiler (nvrtc_id, cg__nvrtc_id), options, name and the
 * source itself -- what both the CUDA executor and `chunkgen build-kernels` look up, so
 * kernels built ahead of time (without a GPU) are the ones a process later finds.
 * *out is malloc'd. */
cg_status cg__cubin_key(cg_context *ctx, const char *nvrtc_id, int arch, const char *name, const char *source,
                        char **out);

/* A device description of arch with that architecture's limits (for rendering and
 * compiling without the device, e.g. in tests and `chunkgen gen --arch`). 0 when the
 * arch is unknown. */
int cg__devinfo_arch(int arch, cg_devinfo *out);

#endif /* CG_CUDA_H */
