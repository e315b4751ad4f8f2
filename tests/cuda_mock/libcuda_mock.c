/* libcuda_mock.c -- a stand-in for libcuda.so.1 that runs no kernel but enforces the
 * driver's rules, so that the host side of runtime/cuda/ (context handling, module
 * loading, shared-memory opt-in, parameter passing, streams, stream capture, memory,
 * events, teardown) runs without a GPU. Built and loaded by the cuda_mock_driver test
 * of tests/test_cuda_exec.c (CHUNKGEN_LIBCUDA=<this library>); not part of the library.
 *
 * Modelled on the CUDA 13 cuda.h documentation, with one device (compute capability
 * 9.0, 227 KB opt-in shared memory per block) and its primary context:
 *  - calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT without one
 *    current on the calling thread, cuPointerGetAttribute included (as some drivers do);
 *  - host memory CUDA never saw gives CUDA_ERROR_INVALID_VALUE from cuPointerGetAttribute;
 *  - a function's dynamic shared memory allowance starts at 48 KB minus its static
 *    shared memory and rises only by cuFuncSetAttribute, up to 227 KB minus static;
 *  - kernel parameters are read from kernelParams[0], as many bytes as the CUBIN says;
 *  - while a stream captures (any mode is treated as global), allocation, freeing,
 *    synchronization, copies and module loads invalidate the capture (CUDA_ERROR_STREAM_
 *    CAPTURE_UNSUPPORTED), and cuStreamEndCapture then fails (..._INVALIDATED);
 *    cuStreamIsCapturing says whether a stream captures;
 *  - copies and memsets must stay inside their allocations.
 * Every broken rule is also counted and described in mock_stats(). Functions are
 * found in the image by their ".text.<name>" section; parameter sizes, launch bounds
 * and static shared memory are read from its ".nv.info.<name>" / ".nv.shared.<name>"
 * sections. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../elf_section.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    E_INVALID_VALUE = 1,
    E_OUT_OF_MEMORY = 2,
    E_NOT_INITIALIZED = 3,
    E_INVALID_IMAGE = 200,
    E_INVALID_CONTEXT = 201,
    E_INVALID_HANDLE = 400,
    E_NOT_FOUND = 500,
    E_CAPTURE_UNSUPPORTED = 900,
    E_CAPTURE_INVALIDATED = 901,
};

#define OPTIN_SMEM 232448
#define DEFAULT_SMEM 49152
#define RESERVED_SMEM 1024

typedef struct mock_stats {
    long long violations;     /* rules broken (each also returned as an error) */
    char last_violation[512];
    long long launches;       /* executed (not captured) launches */
    long long captured;       /* launches recorded into a capture */
    long long smem_optins;    /* cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) */
    long long param_checks;   /* cuFuncGetParamInfo calls */
    long long syncs;          /* stream / context / event synchronizations */
    long long alloc_calls;
    int allocs_live, modules_live, events_live, streams_live, graphs_live;
    int primary_refs;         /* cuDevicePrimaryCtxRetain minus releases */
    int max_ctx_depth;        /* deepest context stack seen on a thread */
} mock_stats;

static mock_stats g_stats;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_inited;
static struct { int magic; } g_primary = {0x7c7c};
static __thread void *t_stack[32];
static __thread int t_depth;

const mock_stats *mock_stats_get(void) { return &g_stats; }

static CUresult violation(CUresult code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_mu);
    g_stats.violations++;
    vsnprintf(g_stats.last_violation, sizeof g_stats.last_violation, fmt, ap);
    pthread_mutex_unlock(&g_mu);
    va_end(ap);
    fprintf(stderr, "libcuda_mock: %s\n", g_stats.last_violation);
    return code;
}

static void *current(void) { return t_depth ? t_stack[t_depth - 1] : NULL; }
#define NEED_INIT()                                                                                 \
    do {                                                                                            \
        if (!g_inited) return violation(E_NOT_INITIALIZED, "%s before cuInit", __func__);           \
    } while (0)
#define NEED_CTX()                                                                                  \
    do {                                                                                            \
        NEED_INIT();                                                                                \
        if (current() != &g_primary) return E_INVALID_CONTEXT;                                      \
    } while (0)

/* ----------------------------------------------------------------- handles */

/* Every handle struct starts with `int magic`, set while it lives and cleared when it is
 * destroyed, so that a stale or foreign pointer is refused; *live counts the live ones. */
static void *handle_new(size_t size, int magic, int *live) {
    int *h = calloc(1, size);
    if (!h) return NULL;
    *h = magic;
    (*live)++;
    return h;
}
static int handle_is(const void *h, int magic) { return h && *(const int *)h == magic; }
static CUresult handle_free(void *h, int *live) {
    *(int *)h = 0;
    free(h);
    (*live)--;
    return OK;
}

/* ----------------------------------------------------------------- streams */

typedef struct mstream {
    int magic;
    int capturing, invalidated;
    long long captured;
} mstream;
#define STREAM_MAGIC 0x5157
static mstream *g_capture; /* the stream capturing now, if any */

static int stream_ok(void *s) { return !s || handle_is(s, STREAM_MAGIC); }

/* An operation that must not happen during a capture: invalidates it. */
static CUresult capture_forbids(const char *what) {
    if (!g_capture) return OK;
    g_capture->invalidated = 1;
    return violation(E_CAPTURE_UNSUPPORTED, "%s while a stream is being captured", what);
}

/* --------------------------------------------------------------- memory */

#define MAX_ALLOCS 8192
static struct { unsigned char *p; size_t n; } g_allocs[MAX_ALLOCS];

static int alloc_find(uintptr_t p) {
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (g_allocs[i].p && p >= (uintptr_t)g_allocs[i].p && p < (uintptr_t)g_allocs[i].p + g_allocs[i].n) return i;
    return -1;
}

/* [p, p + n) is host memory, or inside one allocation. */
static CUresult range_ok(uintptr_t p, size_t n, const char *what) {
    int i = alloc_find(p);
    if (i < 0) return OK;
    if (n > (uintptr_t)g_allocs[i].p + g_allocs[i].n - p)
        return violation(E_INVALID_VALUE, "%s: %zu bytes at offset %zu overrun a %zu-byte allocation", what, n,
                         (size_t)(p - (uintptr_t)g_allocs[i].p), g_allocs[i].n);
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    NEED_CTX();
    CUresult r = capture_forbids("cuMemAlloc");
    if (r) return r;
    if (!dptr || !bytes) return violation(E_INVALID_VALUE, "cuMemAlloc(%p, %zu)", (void *)dptr, bytes);
    g_stats.alloc_calls++;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (g_allocs[i].p) continue;
        g_allocs[i].p = malloc(bytes);
        if (!g_allocs[i].p) return E_OUT_OF_MEMORY;
        memset(g_allocs[i].p, 0xA5, bytes); /* not zero: nothing may rely on it */
        g_allocs[i].n = bytes;
        g_stats.allocs_live++;
        *dptr = (CUdeviceptr)(uintptr_t)g_allocs[i].p;
        return OK;
    }
    return E_OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX();
    CUresult r = capture_forbids("cuMemFree");
    if (r) return r;
    int i = alloc_find((uintptr_t)p);
    if (i < 0 || (uintptr_t)g_allocs[i].p != (uintptr_t)p)
        return violation(E_INVALID_VALUE, "cuMemFree(%p): not an allocation", (void *)(uintptr_t)p);
    free(g_allocs[i].p);
    g_allocs[i].p = NULL;
    g_stats.allocs_live--;
    return OK;
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    NEED_CTX(); /* strict: some drivers want a current context for this query */
    if (attr != 2 /* MEMORY_TYPE */ || !data) return violation(E_INVALID_VALUE, "cuPointerGetAttribute(attr %d)", attr);
    if (alloc_find((uintptr_t)p) < 0) return E_INVALID_VALUE; /* host memory CUDA never saw */
    *(unsigned *)data = 2; /* CU_MEMORYTYPE_DEVICE */
    return OK;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    NEED_CTX();
    if (!stream_ok(stream)) return violation(E_INVALID_HANDLE, "cuMemcpyAsync: bad stream");
    if (stream && ((mstream *)stream)->capturing) {
        ((mstream *)stream)->invalidated = 1;
        return violation(E_CAPTURE_UNSUPPORTED, "cuMemcpyAsync on the launch path of a captured stream");
    }
    CUresult r = range_ok((uintptr_t)dst, n, "cuMemcpyAsync dst");
    if (!r) r = range_ok((uintptr_t)src, n, "cuMemcpyAsync src");
    if (r) return r;
    if (n) memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void *stream) {
    NEED_CTX();
    if (!stream_ok(stream)) return violation(E_INVALID_HANDLE, "cuMemsetD8Async: bad stream");
    if (alloc_find((uintptr_t)dst) < 0) return violation(E_INVALID_VALUE, "cuMemsetD8Async: not device memory");
    CUresult r = range_ok((uintptr_t)dst, n, "cuMemsetD8Async");
    if (r) return r;
    if (stream && ((mstream *)stream)->capturing) return OK; /* a memset node */
    memset((void *)(uintptr_t)dst, v, n);
    return OK;
}

/* -------------------------------------------------------- init, device */

CUresult cuInit(unsigned flags) {
    if (flags) return E_INVALID_VALUE;
    g_inited = 1;
    return OK;
}
CUresult cuDriverGetVersion(int *v) {
    if (!v) return E_INVALID_VALUE;
    *v = 13000;
    return OK;
}
CUresult cuDeviceGetCount(int *n) {
    NEED_INIT();
    *n = 1;
    return OK;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
    NEED_INIT();
    if (ordinal != 0) return violation(E_INVALID_VALUE, "cuDeviceGet(%d)", ordinal);
    *dev = 0;
    return OK;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
    NEED_INIT();
    if (dev != 0 || !name || len < 1) return E_INVALID_VALUE;
    snprintf(name, (size_t)len, "Mock GPU (sm_90)");
    return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    NEED_INIT();
    if (dev != 0) return E_INVALID_VALUE;
    switch (attr) {
    case 12: *v = 65536; return OK;       /* MAX_REGISTERS_PER_BLOCK */
    case 16: *v = 132; return OK;         /* MULTIPROCESSOR_COUNT */
    case 38: *v = 50 << 20; return OK;    /* L2_CACHE_SIZE */
    case 75: *v = 9; return OK;           /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; return OK;           /* COMPUTE_CAPABILITY_MINOR */
    case 97: *v = OPTIN_SMEM; return OK;  /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 8: *v = DEFAULT_SMEM; return OK; /* MAX_SHARED_MEMORY_PER_BLOCK */
    }
    return violation(E_INVALID_VALUE, "cuDeviceGetAttribute(%d) is not modelled", attr);
}

/* --------------------------------------------------------------- contexts */

CUresult cuDevicePrimaryCtxRetain(void **pctx, int dev) {
    NEED_INIT();
    if (dev != 0 || !pctx) return E_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    g_stats.primary_refs++;
    pthread_mutex_unlock(&g_mu);
    *pctx = &g_primary;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    NEED_INIT();
    if (dev != 0) return E_INVALID_VALUE;
    if (g_stats.primary_refs <= 0) return violation(E_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease without a retain");
    if (--g_stats.primary_refs == 0 && (g_stats.modules_live || g_stats.events_live || g_stats.allocs_live))
        return violation(OK, "the primary context was destroyed with %d modules, %d events, %d allocations live",
                         g_stats.modules_live, g_stats.events_live, g_stats.allocs_live);
    return OK;
}
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    NEED_INIT();
    if (dev != 0) return E_INVALID_VALUE;
    *flags = 0;
    *active = g_stats.primary_refs > 0;
    return OK;
}
CUresult cuCtxGetCurrent(void **pctx) {
    NEED_INIT();
    *pctx = current();
    return OK;
}
CUresult cuCtxGetDevice(int *dev) {
    NEED_CTX();
    *dev = 0;
    return OK;
}
CUresult cuCtxPushCurrent_v2(void *ctx) {
    NEED_INIT();
    if (ctx != &g_primary) return violation(E_INVALID_CONTEXT, "cuCtxPushCurrent(%p): not a context", ctx);
    if (g_stats.primary_refs <= 0) return violation(E_INVALID_CONTEXT, "cuCtxPushCurrent of a released context");
    if (t_depth == 32) return violation(E_INVALID_VALUE, "context stack overflow (a missing pop?)");
    t_stack[t_depth++] = ctx;
    if (t_depth > g_stats.max_ctx_depth) g_stats.max_ctx_depth = t_depth;
    return OK;
}
CUresult cuCtxPopCurrent_v2(void **pctx) {
    NEED_INIT();
    if (!t_depth) return violation(E_INVALID_CONTEXT, "cuCtxPopCurrent with no context current");
    void *c = t_stack[--t_depth];
    if (pctx) *pctx = c;
    return OK;
}
CUresult cuCtxSynchronize(void) {
    NEED_CTX();
    g_stats.syncs++;
    return capture_forbids("cuCtxSynchronize");
}

/* ---------------------------------------------------------------- modules */

typedef struct mfunc {
    int magic;
    char name[64];
    int static_smem, max_dyn, param_size, nparams;
    unsigned max_threads[3];
} mfunc;
#define FUNC_MAGIC 0x46f1
typedef struct mmodule {
    int magic;
    unsigned char *img;
    size_t len;
    int nfn;
    mfunc fn[16];
} mmodule;
#define MODULE_MAGIC 0x40d1

/* Bytes of an ELF64 image: the furthest end of its headers and sections. */
static size_t elf_size(const unsigned char *img) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3A, 2);
    memcpy(&shnum, img + 0x3C, 2);
    size_t end = (size_t)(shoff + (uint64_t)shnum * shentsize);
    for (unsigned i = 0; i < shnum; i++) {
        const unsigned char *h = img + shoff + (size_t)i * shentsize;
        uint32_t type;
        uint64_t off, sz;
        memcpy(&type, h + 4, 4);
        memcpy(&off, h + 24, 8);
        memcpy(&sz, h + 32, 8);
        if (type != 8 && off + sz > end) end = (size_t)(off + sz);
    }
    return end;
}

CUresult cuModuleLoadData(void **mod, const void *image) {
    NEED_CTX();
    /* Modelled conservatively: loading a module is no part of a captured graph. */
    CUresult cr = capture_forbids("cuModuleLoadData");
    if (cr != OK) return cr;
    const unsigned char *img = image;
    if (!mod || !img || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2)
        return violation(E_INVALID_IMAGE, "cuModuleLoadData: not an ELF64 CUBIN");
    mmodule *m = handle_new(sizeof *m, MODULE_MAGIC, &g_stats.modules_live);
    if (!m) return E_OUT_OF_MEMORY;
    m->len = elf_size(img);
    if (!(m->img = malloc(m->len))) {
        handle_free(m, &g_stats.modules_live);
        return E_OUT_OF_MEMORY;
    }
    memcpy(m->img, img, m->len); /* the driver copies the image: the caller may free it */
    *mod = m;
    return OK;
}

CUresult cuModuleUnload(void *mod) {
    NEED_CTX();
    mmodule *m = mod;
    if (!handle_is(m, MODULE_MAGIC)) return violation(E_INVALID_HANDLE, "cuModuleUnload: not a module");
    free(m->img);
    handle_free(m, &g_stats.modules_live);
    return OK;
}

CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
    NEED_CTX();
    mmodule *m = mod;
    if (!handle_is(m, MODULE_MAGIC) || !name || strlen(name) >= 64)
        return violation(E_INVALID_HANDLE, "cuModuleGetFunction: bad module or name");
    for (int i = 0; i < m->nfn; i++)
        if (!strcmp(m->fn[i].name, name)) {
            *fn = &m->fn[i];
            return OK;
        }
    char sec[96];
    const unsigned char *d;
    size_t sz;
    snprintf(sec, sizeof sec, ".text.%s", name);
    if (!cg_test_elf_find(m->img, m->len, sec, &d, &sz)) return E_NOT_FOUND;
    if (m->nfn == 16) return E_OUT_OF_MEMORY;
    mfunc *f = &m->fn[m->nfn];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(sec, sizeof sec, ".nv.shared.%s", name);
    /* sm_90 CUBINs count the 1 KB the system reserves per block in this section; the
     * function attribute (and the 48 KB default allowance) covers the static part only */
    if (cg_test_elf_find(m->img, m->len, sec, &d, &sz)) f->static_smem = sz > RESERVED_SMEM ? (int)(sz - RESERVED_SMEM) : 0;
    f->max_dyn = DEFAULT_SMEM - f->static_smem;
    snprintf(sec, sizeof sec, ".nv.info.%s", name);
    if (cg_test_elf_find(m->img, m->len, sec, &d, &sz) && d) {
        for (size_t i = 0; i + 4 <= sz;) {
            int fmt = d[i], attr = d[i + 1];
            uint16_t v16;
            memcpy(&v16, d + i + 2, 2);
            if (fmt != 4) {
                i += 4;
                continue;
            }
            if (attr == 0x17 && v16 >= 12) { /* EIATTR_KPARAM_INFO */
                uint32_t bits;
                memcpy(&bits, d + i + 12, 4);
                f->nparams++;
                f->param_size += (int)((bits >> 18) & 0x3FFF);
            }
            if (attr == 0x05 && v16 == 12) memcpy(f->max_threads, d + i + 4, 12); /* EIATTR_MAX_THREADS */
            i += 4 + (size_t)v16;
        }
    }
    f->magic = FUNC_MAGIC;
    m->nfn++;
    *fn = f;
    return OK;
}

static mfunc *func_of(void *fn) {
    mfunc *f = fn;
    return f && f->magic == FUNC_MAGIC ? f : NULL;
}

CUresult cuFuncGetAttribute(int *v, int attr, void *fn) {
    NEED_CTX();
    mfunc *f = func_of(fn);
    if (!f || !v) return violation(E_INVALID_HANDLE, "cuFuncGetAttribute: not a function");
    if (attr == 1) *v = f->static_smem;
    else if (attr == 8) *v = f->max_dyn;
    else return violation(E_INVALID_VALUE, "cuFuncGetAttribute(%d) is not modelled", attr);
    return OK;
}

CUresult cuFuncSetAttribute(void *fn, int attr, int v) {
    NEED_CTX();
    mfunc *f = func_of(fn);
    if (!f) return violation(E_INVALID_HANDLE, "cuFuncSetAttribute: not a function");
    if (attr != 8) return violation(E_INVALID_VALUE, "cuFuncSetAttribute(%d) is not modelled", attr);
    if (v < 0 || v + f->static_smem > OPTIN_SMEM)
        return violation(E_INVALID_VALUE, "%s: dynamic shared memory %d + static %d exceeds %d", f->name, v,
                         f->static_smem, OPTIN_SMEM);
    f->max_dyn = v;
    g_stats.smem_optins++;
    return OK;
}

CUresult cuFuncGetParamInfo(void *fn, size_t index, size_t *offset, size_t *size) {
    NEED_CTX();
    mfunc *f = func_of(fn);
    if (!f || !offset) return violation(E_INVALID_HANDLE, "cuFuncGetParamInfo: not a function");
    g_stats.param_checks++;
    if ((int)index >= f->nparams) return E_INVALID_VALUE;
    *offset = 0;
    if (size) *size = (size_t)f->param_size; /* the kernels here have one parameter */
    return OK;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *stream, void **params, void **extra) {
    NEED_CTX();
    mfunc *f = func_of(fn);
    if (!f) return violation(E_INVALID_HANDLE, "cuLaunchKernel: not a function");
    if (!stream_ok(stream)) return violation(E_INVALID_HANDLE, "cuLaunchKernel(%s): bad stream", f->name);
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024 || gy > 65535 || gz > 65535)
        return violation(E_INVALID_VALUE, "cuLaunchKernel(%s): grid %ux%ux%u block %ux%ux%u", f->name, gx, gy, gz, bx,
                         by, bz);
    if (f->max_threads[0] &&
        (uint64_t)bx * by * bz > (uint64_t)f->max_threads[0] * f->max_threads[1] * f->max_threads[2])
        return violation(E_INVALID_VALUE, "cuLaunchKernel(%s): block %ux%ux%u over __launch_bounds__ %u", f->name, bx,
                         by, bz, f->max_threads[0] * f->max_threads[1] * f->max_threads[2]);
    if ((int)smem > f->max_dyn)
        return violation(E_INVALID_VALUE, "cuLaunchKernel(%s): %u bytes of dynamic shared memory, the function "
                         "allows %d (cuFuncSetAttribute missing?)", f->name, smem, f->max_dyn);
    if (extra || (f->nparams && (!params || !params[0])))
        return violation(E_INVALID_VALUE, "cuLaunchKernel(%s): parameters", f->name);
    /* The driver copies the parameter bytes now: read exactly what the device takes. */
    unsigned char copy[4096];
    if (f->param_size > (int)sizeof copy) return violation(E_INVALID_VALUE, "parameters over 4 KB");
    if (f->nparams) memcpy(copy, params[0], (size_t)f->param_size);
    mstream *s = stream;
    if (s && s->capturing) {
        s->captured++;
        g_stats.captured++;
    } else {
        if (g_capture) return capture_forbids("a launch on the legacy stream");
        g_stats.launches++;
    }
    return OK;
}

/* ---------------------------------------------------------------- events */

typedef struct mevent {
    int magic, recorded;
} mevent;
#define EVENT_MAGIC 0x37e7

CUresult cuEventCreate(void **ev, unsigned flags) {
    NEED_CTX();
    if (flags & 2) return violation(E_INVALID_VALUE, "timing events must not have CU_EVENT_DISABLE_TIMING");
    if (!(*ev = handle_new(sizeof(mevent), EVENT_MAGIC, &g_stats.events_live))) return E_OUT_OF_MEMORY;
    return OK;
}
CUresult cuEventDestroy_v2(void *ev) {
    NEED_CTX();
    if (!handle_is(ev, EVENT_MAGIC)) return violation(E_INVALID_HANDLE, "cuEventDestroy: not an event");
    return handle_free(ev, &g_stats.events_live);
}
CUresult cuEventRecord(void *ev, void *stream) {
    NEED_CTX();
    mevent *e = ev;
    if (!handle_is(e, EVENT_MAGIC) || !stream_ok(stream)) return violation(E_INVALID_HANDLE, "cuEventRecord");
    e->recorded = 1;
    return OK;
}
CUresult cuEventSynchronize(void *ev) {
    NEED_CTX();
    if (!handle_is(ev, EVENT_MAGIC)) return violation(E_INVALID_HANDLE, "cuEventSynchronize");
    g_stats.syncs++;
    return capture_forbids("cuEventSynchronize");
}
CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) {
    NEED_CTX();
    mevent *x = a, *y = b;
    if (!handle_is(x, EVENT_MAGIC) || !handle_is(y, EVENT_MAGIC)) return violation(E_INVALID_HANDLE, "elapsed");
    if (!x->recorded || !y->recorded) return violation(E_INVALID_HANDLE, "cuEventElapsedTime: unrecorded event");
    *ms = 0.5f;
    return OK;
}
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { return cuEventElapsedTime_v2(ms, a, b); }

/* ------------------------------------------------- streams, capture, graphs */

CUresult cuStreamCreate(void **s, unsigned flags) {
    NEED_CTX();
    (void)flags;
    if (!(*s = handle_new(sizeof(mstream), STREAM_MAGIC, &g_stats.streams_live))) return E_OUT_OF_MEMORY;
    return OK;
}
CUresult cuStreamDestroy_v2(void *s) {
    NEED_CTX();
    mstream *m = s;
    if (!handle_is(m, STREAM_MAGIC) || m->capturing) return violation(E_INVALID_HANDLE, "cuStreamDestroy");
    return handle_free(m, &g_stats.streams_live);
}
CUresult cuStreamSynchronize(void *s) {
    NEED_CTX();
    if (!stream_ok(s)) return violation(E_INVALID_HANDLE, "cuStreamSynchronize: bad stream");
    g_stats.syncs++;
    return capture_forbids("cuStreamSynchronize");
}
CUresult cuStreamIsCapturing(void *s, int *status) {
    NEED_CTX();
    if (!stream_ok(s) || !status) return violation(E_INVALID_VALUE, "cuStreamIsCapturing");
    mstream *m = s;
    *status = m ? (m->capturing ? (m->invalidated ? 2 : 1) : 0) : (g_capture ? 1 : 0);
    return OK;
}

CUresult cuStreamBeginCapture_v2(void *s, int mode) {
    NEED_CTX();
    mstream *m = s;
    if (!handle_is(m, STREAM_MAGIC) || g_capture) return violation(E_INVALID_VALUE, "cuStreamBeginCapture");
    (void)mode;
    m->capturing = 1;
    m->invalidated = 0;
    m->captured = 0;
    g_capture = m;
    return OK;
}

typedef struct mgraph {
    int magic;
    long long launches;
} mgraph;
#define GRAPH_MAGIC 0x6a6a

CUresult cuStreamEndCapture(void *s, void **graph) {
    NEED_CTX();
    mstream *m = s;
    if (!handle_is(m, STREAM_MAGIC) || !m->capturing) return violation(E_INVALID_VALUE, "cuStreamEndCapture");
    m->capturing = 0;
    g_capture = NULL;
    *graph = NULL;
    if (m->invalidated) return E_CAPTURE_INVALIDATED;
    mgraph *g = handle_new(sizeof *g, GRAPH_MAGIC, &g_stats.graphs_live);
    if (!g) return E_OUT_OF_MEMORY;
    g->launches = m->captured;
    *graph = g;
    return OK;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    NEED_CTX();
    mgraph *g = graph;
    if (!handle_is(g, GRAPH_MAGIC) || flags) return violation(E_INVALID_VALUE, "cuGraphInstantiate");
    mgraph *x = handle_new(sizeof *x, GRAPH_MAGIC, &g_stats.graphs_live);
    if (!x) return E_OUT_OF_MEMORY;
    x->launches = g->launches;
    *exec = x;
    return OK;
}
CUresult cuGraphLaunch(void *exec, void *s) {
    NEED_CTX();
    mgraph *g = exec;
    if (!handle_is(g, GRAPH_MAGIC) || !stream_ok(s)) return violation(E_INVALID_HANDLE, "cuGraphLaunch");
    g_stats.launches += g->launches;
    return OK;
}
static CUresult graph_free(void *graph) {
    if (!handle_is(graph, GRAPH_MAGIC)) return violation(E_INVALID_HANDLE, "graph destroy");
    return handle_free(graph, &g_stats.graphs_live);
}
CUresult cuGraphExecDestroy(void *exec) { return graph_free(exec); }
CUresult cuGraphDestroy(void *graph) { return graph_free(graph); }

/* ----------------------------------------------------------------- errors */

CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; return OK;
    case E_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case E_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case E_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
    case E_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return OK;
    case E_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case E_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case E_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case E_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return OK;
    case E_CAPTURE_INVALIDATED: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; return OK;
    }
    *s = NULL;
    return E_INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    const char *name;
    if (cuGetErrorName(r, &name) != OK) return E_INVALID_VALUE;
    *s = "(mock driver)";
    return OK;
}
