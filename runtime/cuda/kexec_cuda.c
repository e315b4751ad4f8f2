/* kexec_cuda.c -- run generated kernels with the CUDA driver (cg__kexec_cuda).
 *
 * Modules are compiled by NVRTC straight to CUBIN for the device's arch, through two
 * caches: per context key -> loaded module (the context's CG_PART_CUDA part), and on disk
 * (<cache dir>/kernels, kcache.c). Every driver call goes through CG_CU_CHECK, which
 * records the call, file and line on the context and returns a status. Calls run with
 * the device's primary context pushed (the one the CUDA runtime and PyTorch use). */
#include "cg_cuda.h"
#include "kcache.h"

#include <string.h>

typedef struct cuda_fn {
    char entry[64];
    CUfunction fn;
    int64_t smem_max;    /* dynamic shared memory the function is allowed so far (its
                          * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) */
    int64_t smem_static; /* its static __shared__ bytes */
    int params_checked;  /* the parameter layout was compared with the host struct */
} cuda_fn;

typedef struct cuda_mod {
    uint64_t hash[2];
    char *key;
    CUmodule mod;
    int nfn;
    cuda_fn fn[CG_PLAN_MAX_LAUNCH];
} cuda_mod;

typedef struct cuda_timer {
    CUevent start, stop; /* created on first use, reused, destroyed with the context */
    int busy;            /* between timer_start and timer_stop */
} cuda_timer;

typedef struct cuda_state {
    int probed; /* device() ran once: status and info below are final */
    cg_status dev_status;
    char dev_msg[512];
    cg_devinfo info;
    CUdevice dev;
    CUcontext cuctx;
    int retained;
    int driver_version; /* cuDriverGetVersion, e.g. 13000 */
    char nvrtc_id[1024];
    cuda_mod **mods;
    int nmods, cap;
    cuda_timer timers[CG_KEXEC_TIMERS];
    CUdeviceptr flush_buf; /* flush_l2's buffer, 2x the L2 size; 0 until first use */
    size_t flush_bytes;
    unsigned flush_count;
} cuda_state;

static void cuda_ctx_free(cg_context *ctx);

static cuda_state *state(cg_context *ctx) {
    if (!ctx->part[CG_PART_CUDA].p && (ctx->part[CG_PART_CUDA].p = calloc(1, sizeof(cuda_state))))
        ctx->part[CG_PART_CUDA].free = cuda_ctx_free;
    return (cuda_state *)ctx->part[CG_PART_CUDA].p;
}

/* ----------------------------------------------------------------- device */

static cg_status probe(cg_context *ctx, cuda_state *s) {
    const char *why;
    const cg_cu_api *cg__cu = cg__cu_api(&why);
    if (!cg__cu) return cg__err(ctx, CG_ENODEV, "CUDA: %s", why);
    CG_CU_CHECK(ctx, cuInit(0));
    int count = 0;
    CG_CU_CHECK(ctx, cuDeviceGetCount(&count));
    if (count < 1) return cg__err(ctx, CG_ENODEV, "CUDA: the driver sees no GPU (cuDeviceGetCount = 0)");
    /* The device of the calling thread's current context (e.g. set by PyTorch); else
     * the first device whose primary context is already active (the process works
     * there, maybe from another thread); else device 0. */
    CUcontext cur = NULL;
    CUdevice dev = 0;
    if (cg__cu->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur || cg__cu->cuCtxGetDevice(&dev) != CUDA_SUCCESS) {
        int found = 0;
        for (int i = 0; i < count && !found; i++) {
            CUdevice d = 0;
            unsigned flags = 0;
            int active = 0;
            if (cg__cu->cuDeviceGet(&d, i) == CUDA_SUCCESS &&
                cg__cu->cuDevicePrimaryCtxGetState(d, &flags, &active) == CUDA_SUCCESS && active) {
                dev = d;
                found = 1;
            }
        }
        if (!found) CG_CU_CHECK(ctx, cuDeviceGet(&dev, 0));
    }
    s->dev = dev;
    if (cg__cu->cuDriverGetVersion(&s->driver_version) != CUDA_SUCCESS) s->driver_version = 0;
    cg_devinfo *d = &s->info;
    memset(d, 0, sizeof *d);
    CG_CU_CHECK(ctx, cuDeviceGetName(d->name, (int)sizeof d->name, dev));
    int major = 0, minor = 0, v = 0;
    CG_CU_CHECK(ctx, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CG_CU_CHECK(ctx, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    d->arch = major * 10 + minor;
    CG_CU_CHECK(ctx, cuDeviceGetAttribute(&d->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CG_CU_CHECK(ctx, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    d->smem_per_block = v;
    CG_CU_CHECK(ctx, cuDeviceGetAttribute(&d->regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, dev));
    if (d->arch < 80)
        return cg__err(ctx, CG_ENODEV, "CUDA: %s is sm_%d; the generated kernels need sm_80 or newer", d->name,
                       d->arch);
    CG_CU_CHECK(ctx, cuDevicePrimaryCtxRetain(&s->cuctx, dev));
    s->retained = 1;
    return CG_OK;
}

static cg_status cuda_device(cg_context *ctx, cg_devinfo *out) {
    cuda_state *s = state(ctx);
    if (!s) return cg__err(ctx, CG_ENOMEM, "CUDA: out of memory");
    if (!s->probed) {
        s->dev_status = probe(ctx, s);
        snprintf(s->dev_msg, sizeof s->dev_msg, "%s", s->dev_status == CG_OK ? "" : cg_errmsg(ctx));
        s->probed = 1;
    }
    if (s->dev_status != CG_OK) return cg__err(ctx, s->dev_status, "%s", s->dev_msg);
    if (out) *out = s->info;
    return CG_OK;
}

/* Run body with the primary context current on this thread. */
#define WITH_CTX(ctx, s, body)                                                                                         \
    do {                                                                                                               \
        const cg_cu_api *cu_ = cg__cu_api(NULL);                                                                       \
        CUcontext popped_;                                                                                             \
        cg_status wst_ = cg__cu_check((ctx), cu_->cuCtxPushCurrent((s)->cuctx), CG_ELAUNCH, "cuCtxPushCurrent(ctx)",   \
                                      __FILE__, __LINE__);                                                             \
        if (wst_ != CG_OK) return wst_;                                                                                \
        wst_ = (body);                                                                                                 \
        cu_->cuCtxPopCurrent(&popped_);                                                                                \
        return wst_;                                                                                                   \
    } while (0)

/* ------------------------------------------------------------------- load */

static cg_status key_text(cg_context *ctx, cuda_state *s, const cg_plan *plan, char **out) {
    if (!s->nvrtc_id[0]) {
        cg_status st = cg__nvrtc_id(ctx, s->nvrtc_id, sizeof s->nvrtc_id);
        if (st != CG_OK) return st;
    }
    return cg__cubin_key(ctx, s->nvrtc_id, s->info.arch, plan->name, plan->source, out);
}

/* Allow f `smem` bytes of dynamic shared memory. The default allowance is the
 * device's non-opt-in limit (48 KB) minus the function's static shared memory; above
 * it cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) opts in, up to the opt-in
 * limit minus the static part (cuda.h, CUfunction_attribute). Not a stream operation:
 * allowed while the stream is being captured. */
static cg_status allow_smem(cg_context *ctx, cuda_state *s, cuda_fn *f, int64_t smem) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    if (smem <= f->smem_max) return CG_OK;
    if (smem + f->smem_static > s->info.smem_per_block)
        return cg__err(ctx, CG_EUNSUPPORTED,
                       "CUDA: entry %s needs %lld bytes of dynamic shared memory besides its %lld static bytes; %s "
                       "allows %lld per block",
                       f->entry, (long long)smem, (long long)f->smem_static, s->info.name,
                       (long long)s->info.smem_per_block);
    CG_CU_CHECK(ctx, cuFuncSetAttribute(f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
    f->smem_max = smem;
    return CG_OK;
}

static cg_status get_functions(cg_context *ctx, cuda_state *s, cuda_mod *m, const cg_plan *plan) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    for (int i = 0; i < plan->nlaunch; i++) {
        const cg_launch *l = &plan->launch[i];
        int j = 0;
        while (j < m->nfn && strcmp(m->fn[j].entry, l->entry) != 0) j++;
        if (j == m->nfn) {
            if (m->nfn == CG_PLAN_MAX_LAUNCH)
                return cg__err(ctx, CG_EINTERNAL, "CUDA: module of %s: more than %d entries", plan->name,
                               CG_PLAN_MAX_LAUNCH);
            cuda_fn *f = &m->fn[m->nfn];
            memset(f, 0, sizeof *f);
            snprintf(f->entry, sizeof f->entry, "%s", l->entry);
            cg_status st = cg__cu_check(ctx, cg__cu->cuModuleGetFunction(&f->fn, m->mod, l->entry), CG_ELAUNCH,
                                        "cuModuleGetFunction", __FILE__, __LINE__);
            if (st != CG_OK) {
                char why[CG_ERRMSG_CAP]; /* cg__err writes ctx->errmsg: not its own argument */
                snprintf(why, sizeof why, "%s", cg_errmsg(ctx));
                return cg__err(ctx, st,
                               "%s (entry \"%s\" of %s: is it an extern \"C\" __global__ function of "
                               "the source?)",
                               why, l->entry, plan->name);
            }
            int v = 0;
            CG_CU_CHECK(ctx, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f->fn));
            f->smem_max = v;
            v = 0;
            CG_CU_CHECK(ctx, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f->fn));
            f->smem_static = v;
            m->nfn++;
        }
        cg_status st = allow_smem(ctx, s, &m->fn[j], l->smem);
        if (st != CG_OK) return st;
    }
    return CG_OK;
}

static cg_status load_image(cg_context *ctx, CUmodule *mod, const void *image) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    int64_t t0 = cg__jit_now_ns();
    CG_CU_CHECK(ctx, cuModuleLoadData(mod, image));
    cg__jit_count(CG_JIT_LOAD, cg__jit_now_ns() - t0);
    return CG_OK;
}

static cg_status load_in_ctx(cg_context *ctx, cuda_state *s, const cg_plan *plan, void **module) {
    char *key = NULL;
    cg_status st = key_text(ctx, s, plan, &key);
    if (st != CG_OK) return st;
    uint64_t h[2];
    cg__hash128(key, strlen(key), h);
    for (int i = 0; i < s->nmods; i++) {
        cuda_mod *m = s->mods[i];
        if (m->hash[0] == h[0] && m->hash[1] == h[1] && strcmp(m->key, key) == 0) {
            free(key);
            st = get_functions(ctx, s, m, plan); /* a plan may name more entries or more smem */
            if (st == CG_OK) *module = m;
            return st;
        }
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/kernels", cg__cache_dir(ctx));
    void *bin = NULL;
    size_t len = 0;
    char *log = NULL;
    CUmodule mod = NULL;
    int64_t t0 = cg__jit_now_ns();
    if (cg__kcache_get(dir, plan->name, key, &bin, &len, &log) == CG_OK) {
        cg__jit_count(CG_JIT_DISK_HIT, cg__jit_now_ns() - t0);
        if (log && !strncmp(log, CG_BUNDLE_LOG_TAG, strlen(CG_BUNDLE_LOG_TAG)))
            cg__jit_count(CG_JIT_BUNDLE_HIT, cg__jit_now_ns() - t0);
        if (load_image(ctx, &mod, bin) != CG_OK) {
            cg__log(CG_LOG_WARN, "cached kernel %s does not load (%s); rebuilding it", plan->name, cg_errmsg(ctx));
            mod = NULL;
        }
        free(bin);
        free(log);
        bin = NULL;
        log = NULL;
    }
    if (!mod) {
        st = cg__nvrtc_compile(ctx, plan->name, plan->source, s->info.arch, &bin, &len, &log);
        if (st == CG_OK) {
            st = load_image(ctx, &mod, bin);
            if (st != CG_OK) {
                /* A fresh CUBIN the driver refuses: most often a driver older than NVRTC. */
                char why[CG_ERRMSG_CAP];
                snprintf(why, sizeof why, "%s", cg_errmsg(ctx));
                st = cg__err(ctx, st,
                             "%s (loading %s for sm_%d; driver CUDA %d.%d, compiler %s: an NVRTC newer "
                             "than the driver can emit CUBINs it cannot load; CHUNKGEN_NVRTC or CUDA_HOME can "
                             "select an older NVRTC)",
                             why, plan->name, s->info.arch, s->driver_version / 1000, s->driver_version % 1000 / 10,
                             s->nvrtc_id);
            }
        }
        if (st == CG_OK) (void)cg__kcache_put(dir, plan->name, key, bin, len, log); /* EIO: memory-only */
        free(bin);
        free(log);
        if (st != CG_OK) {
            free(key);
            return st;
        }
    }
    cuda_mod *m = calloc(1, sizeof *m);
    if (m && s->nmods == s->cap) {
        int cap = s->cap * 2 + 8;
        cuda_mod **mods = realloc(s->mods, sizeof *mods * (size_t)cap);
        if (mods) {
            s->mods = mods;
            s->cap = cap;
        } else {
            free(m);
            m = NULL;
        }
    }
    if (!m) {
        free(key);
        cg__cu_api(NULL)->cuModuleUnload(mod);
        return cg__err(ctx, CG_ENOMEM, "CUDA: out of memory");
    }
    m->hash[0] = h[0];
    m->hash[1] = h[1];
    m->key = key;
    m->mod = mod;
    s->mods[s->nmods++] = m;
    st = get_functions(ctx, s, m, plan);
    if (st == CG_OK) *module = m;
    return st;
}

static cg_status cuda_load(cg_context *ctx, const cg_plan *plan, void **module) {
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    WITH_CTX(ctx, s, load_in_ctx(ctx, s, plan, module));
}

/* ----------------------------------------------------------------- launch */

/* Once per function: its one parameter must be exactly the host struct (size) the
 * launcher fills (cuFuncGetParamInfo, driver 12.4+; skipped with older drivers). */
static cg_status check_params(cg_context *ctx, cuda_fn *f, size_t params_size) {
    const cg_cu_api *cu = cg__cu_api(NULL);
    if (f->params_checked || !cu->cuFuncGetParamInfo) return CG_OK;
    size_t off = 0, size = 0;
    CUresult r = cu->cuFuncGetParamInfo(f->fn, 0, &off, &size);
    if (r == CUDA_SUCCESS) {
        if (size != params_size)
            return cg__err(ctx, CG_EINTERNAL,
                           "CUDA: entry %s takes a %zu-byte parameter but the host passes a "
                           "%zu-byte params struct (device and host struct layouts differ)",
                           f->entry, size, params_size);
        size_t off1 = 0, size1 = 0;
        if (cu->cuFuncGetParamInfo(f->fn, 1, &off1, &size1) == CUDA_SUCCESS)
            return cg__err(ctx, CG_EINTERNAL,
                           "CUDA: entry %s takes more than one parameter (expected one params "
                           "struct by value)",
                           f->entry);
    } else if (r != CUDA_ERROR_INVALID_VALUE) {
        return cg__cu_check(ctx, r, CG_ELAUNCH, "cuFuncGetParamInfo", __FILE__, __LINE__);
    } /* INVALID_VALUE for index 0: the entry takes no parameter, or the query is not
       * supported for it; the launch itself will tell */
    f->params_checked = 1;
    return CG_OK;
}

/* Launch l's entry of module on stream with the packed params, the primary context
 * current for the call (pushed and popped here, as WITH_CTX does for the other calls). */
static cg_status cuda_launch(cg_context *ctx, void *module, const cg_launch *l, const void *params, size_t params_size,
                             void *stream) {
    cuda_state *s = ctx ? (cuda_state *)ctx->part[CG_PART_CUDA].p : NULL;
    if (!s || !s->retained || !module) return cg__err(ctx, CG_ENODEV, "CUDA: launch before a module was loaded");
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    cuda_mod *m = (cuda_mod *)module;
    cuda_fn *f = NULL;
    for (int i = 0; i < m->nfn; i++)
        if (strcmp(m->fn[i].entry, l->entry) == 0) f = &m->fn[i];
    if (!f) return cg__err(ctx, CG_EINTERNAL, "CUDA: entry %s was not loaded with its plan", l->entry);
    cg_status st =
        cg__cu_check(ctx, cg__cu->cuCtxPushCurrent(s->cuctx), CG_ELAUNCH, "cuCtxPushCurrent(ctx)", __FILE__, __LINE__);
    if (st != CG_OK) return st;
    st = allow_smem(ctx, s, f, l->smem);
    if (st == CG_OK) st = check_params(ctx, f, params_size);
    if (st == CG_OK) {
        /* kernelParams: one pointer per parameter, to its value; the driver copies the
         * struct when the launch is enqueued (or captured), so params may be on the stack. */
        void *args[1] = {(void *)params};
        CUresult r = cg__cu->cuLaunchKernel(f->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                            l->block[2], (unsigned)l->smem, (CUstream)stream, args, NULL);
        if (r != CUDA_SUCCESS) {
            char call[320];
            snprintf(call, sizeof call, "cuLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u, %lld bytes smem, stream %p)",
                     l->entry, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                     (long long)l->smem, stream);
            st = cg__cu_check(ctx, r, CG_ELAUNCH, call, __FILE__, __LINE__);
        }
    }
    CUcontext popped;
    cg__cu->cuCtxPopCurrent(&popped);
    return st;
}

/* ----------------------------------------------------------------- memory */

static cg_status alloc_in_ctx(cg_context *ctx, size_t bytes, void **out) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    CUdeviceptr p = 0;
    CG_CU_CHECK(ctx, cuMemAlloc(&p, bytes ? bytes : 1));
    *out = (void *)(uintptr_t)p;
    return CG_OK;
}

static cg_status cuda_alloc(cg_context *ctx, size_t bytes, void **out) {
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    WITH_CTX(ctx, s, alloc_in_ctx(ctx, bytes, out));
}

static cg_status free_in_ctx(cg_context *ctx, void *ptr) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    CG_CU_CHECK(ctx, cuMemFree((CUdeviceptr)(uintptr_t)ptr));
    return CG_OK;
}

static cg_status free_wrapped(cg_context *ctx, cuda_state *s, void *ptr) { WITH_CTX(ctx, s, free_in_ctx(ctx, ptr)); }

static void cuda_free(cg_context *ctx, void *ptr) {
    cuda_state *s = ctx ? (cuda_state *)ctx->part[CG_PART_CUDA].p : NULL;
    if (!ptr || !s || !s->retained) return;
    (void)free_wrapped(ctx, s, ptr);
}

/* cuMemcpyAsync infers each side's kind from the pointer (unified addressing, every
 * 64-bit platform): staging copies "host" tensors that are in fact device memory (a
 * mix of host and device pointers in one call) without a special case. dir is
 * informational. */
static cg_status copy_in_ctx(cg_context *ctx, void *dst, const void *src, size_t bytes, int dir, void *stream) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    (void)dir;
    if (bytes == 0) return CG_OK;
    CG_CU_CHECK(ctx, cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, (CUstream)stream));
    return CG_OK;
}

/* Asynchronous on stream: sync() before reading host memory a copy wrote. */
static cg_status cuda_copy(cg_context *ctx, void *dst, const void *src, size_t bytes, int dir, void *stream) {
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    WITH_CTX(ctx, s, copy_in_ctx(ctx, dst, src, bytes, dir, stream));
}

static cg_status sync_in_ctx(cg_context *ctx, void *stream) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    CG_CU_CHECK(ctx, cuStreamSynchronize((CUstream)stream));
    return CG_OK;
}

static cg_status cuda_sync(cg_context *ctx, void *stream) {
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    WITH_CTX(ctx, s, sync_in_ctx(ctx, stream));
}

/* 1 when stream is being captured into a CUDA graph (or its capture was invalidated):
 * then nothing may load, allocate or synchronize. 0 when the driver cannot say. */
static int cuda_capturing(cg_context *ctx, void *stream) {
    const cg_cu_api *cu = cg__cu_api(NULL);
    if (!cu || !cu->cuStreamIsCapturing || cuda_device(ctx, NULL) != CG_OK) return 0;
    cuda_state *s = state(ctx);
    int status = 0;
    CUcontext popped;
    if (cu->cuCtxPushCurrent(s->cuctx) != CUDA_SUCCESS) return 0;
    const CUresult r = cu->cuStreamIsCapturing((CUstream)stream, &status);
    cu->cuCtxPopCurrent(&popped);
    return r == CUDA_SUCCESS && status != 0;
}

/* Some primary context is active: device memory of the runtime's kind can exist. */
static int any_primary_active(const cg_cu_api *cu) {
    int count = 0;
    if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
    for (int i = 0; i < count; i++) {
        CUdevice d = 0;
        unsigned flags = 0;
        int active = 0;
        if (cu->cuDeviceGet(&d, i) == CUDA_SUCCESS &&
            cu->cuDevicePrimaryCtxGetState(d, &flags, &active) == CUDA_SUCCESS && active)
            return 1;
    }
    return 0;
}

/* Device (or managed) memory? Host memory CUDA never saw gives CUDA_ERROR_INVALID_VALUE:
 * "host", not a failure. Registered or pinned host memory is CU_MEMORYTYPE_HOST: host
 * too (staged). The query can need a current context (CUDA_ERROR_INVALID_CONTEXT on a
 * thread that has none): then it is asked again inside the primary context, when one
 * is active; a process where none is active has no such device memory, and no context
 * is created just to find that out. Not a stream operation: fine during capture. */
static int cuda_owns_ptr(cg_context *ctx, const void *ptr) {
    const cg_cu_api *cu = cg__cu_api(NULL);
    if (!cu || !ptr || cu->cuInit(0) != CUDA_SUCCESS) return 0;
    unsigned int type = 0;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    CUresult r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_INVALID_CONTEXT && ctx) {
        cuda_state *s = (cuda_state *)ctx->part[CG_PART_CUDA].p;
        if (!(s && s->retained) && any_primary_active(cu)) {
            char saved[CG_ERRMSG_CAP];
            snprintf(saved, sizeof saved, "%s", ctx->errmsg); /* a query: leave the message alone */
            (void)cuda_device(ctx, NULL);
            snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", saved);
            s = (cuda_state *)ctx->part[CG_PART_CUDA].p;
        }
        CUcontext popped;
        if (s && s->retained && cu->cuCtxPushCurrent(s->cuctx) == CUDA_SUCCESS) {
            r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
            cu->cuCtxPopCurrent(&popped);
        }
    }
    if (r != CUDA_SUCCESS) return 0;
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
}

/* ------------------------------------------------------------------ timing */

static cg_status timer_start_in_ctx(cg_context *ctx, cuda_state *s, CUstream stream, void **token) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    cuda_timer *t = NULL;
    for (int i = 0; i < CG_KEXEC_TIMERS && !t; i++)
        if (!s->timers[i].busy) t = &s->timers[i];
    if (!t)
        return cg__err(ctx, CG_EINVAL,
                       "CUDA: timer_start: all %d timers of this context are running (timer_stop "
                       "releases one)",
                       CG_KEXEC_TIMERS);
    if (!t->start) CG_CU_CHECK(ctx, cuEventCreate(&t->start, CU_EVENT_DEFAULT));
    if (!t->stop) CG_CU_CHECK(ctx, cuEventCreate(&t->stop, CU_EVENT_DEFAULT));
    CG_CU_CHECK(ctx, cuEventRecord(t->start, stream));
    t->busy = 1;
    *token = t;
    return CG_OK;
}

static cg_status cuda_timer_start(cg_context *ctx, void *stream, void **token) {
    if (!token) return cg__err(ctx, CG_EINVAL, "CUDA: timer_start: token is NULL (expected a void ** to fill)");
    *token = NULL;
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    WITH_CTX(ctx, s, timer_start_in_ctx(ctx, s, (CUstream)stream, token));
}

static cg_status timer_stop_in_ctx(cg_context *ctx, cuda_timer *t, CUstream stream, double *ms) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    CG_CU_CHECK(ctx, cuEventRecord(t->stop, stream));
    CG_CU_CHECK(ctx, cuEventSynchronize(t->stop));
    float f = 0;
    CG_CU_CHECK(ctx, cuEventElapsedTime(&f, t->start, t->stop));
    *ms = (double)f;
    return CG_OK;
}

static cg_status cuda_timer_stop(cg_context *ctx, void *stream, void *token, double *ms) {
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    cuda_timer *t = NULL;
    for (int i = 0; i < CG_KEXEC_TIMERS; i++)
        if (token == (void *)&s->timers[i]) t = &s->timers[i];
    if (!t || !t->busy)
        return cg__err(ctx, CG_EINVAL,
                       "CUDA: timer_stop: token %p is not a running timer of this context "
                       "(expected one from timer_start)",
                       token);
    t->busy = 0; /* released whatever happens below */
    if (!ms) return cg__err(ctx, CG_EINVAL, "CUDA: timer_stop: ms is NULL (expected a double * to fill)");
    if (!s->retained) return cg__err(ctx, CG_ENODEV, "CUDA: timer_stop: no device context");
    WITH_CTX(ctx, s, timer_stop_in_ctx(ctx, t, (CUstream)stream, ms));
}

static cg_status flush_in_ctx(cg_context *ctx, cuda_state *s, CUstream stream) {
    const cg_cu_api *cg__cu = cg__cu_api(NULL);
    if (!s->flush_buf) {
        int l2 = 0;
        CG_CU_CHECK(ctx, cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, s->dev));
        /* Twice the L2 (at least 64 MiB when the driver reports none), in whole MiB. */
        size_t bytes = l2 > 0 ? 2 * (size_t)l2 : (size_t)64 << 20;
        bytes = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
        CUdeviceptr p = 0;
        CG_CU_CHECK(ctx, cuMemAlloc(&p, bytes));
        s->flush_buf = p;
        s->flush_bytes = bytes;
    }
    /* A different byte each time: every line of the buffer is rewritten. */
    CG_CU_CHECK(ctx, cuMemsetD8Async(s->flush_buf, (unsigned char)(s->flush_count++ & 0xFF), s->flush_bytes, stream));
    return CG_OK;
}

static cg_status cuda_flush_l2(cg_context *ctx, void *stream) {
    cg_status st = cuda_device(ctx, NULL);
    if (st != CG_OK) return st;
    cuda_state *s = state(ctx);
    WITH_CTX(ctx, s, flush_in_ctx(ctx, s, (CUstream)stream));
}

const cg_kexec cg__kexec_cuda = {
    .name = "cuda",
    .device = cuda_device,
    .load = cuda_load,
    .launch = cuda_launch,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .owns_ptr = cuda_owns_ptr,
    .capturing = cuda_capturing,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
    .flush_l2 = cuda_flush_l2,
};

static void cuda_ctx_free(cg_context *ctx) {
    cuda_state *s = ctx ? (cuda_state *)ctx->part[CG_PART_CUDA].p : NULL;
    if (!s) return;
    const cg_cu_api *cu = cg__cu_api(NULL);
    if (cu && s->retained) {
        CUcontext popped;
        int pushed = cu->cuCtxPushCurrent(s->cuctx) == CUDA_SUCCESS;
        /* Kernels of these modules may still run on the caller's streams: unloading a
         * module (or freeing memory) under them is undefined. Teardown may wait. */
        if (pushed && (s->nmods || s->flush_buf)) (void)cu->cuCtxSynchronize();
        for (int i = 0; i < s->nmods; i++) cu->cuModuleUnload(s->mods[i]->mod);
        for (int i = 0; i < CG_KEXEC_TIMERS; i++) {
            if (s->timers[i].start) cu->cuEventDestroy(s->timers[i].start);
            if (s->timers[i].stop) cu->cuEventDestroy(s->timers[i].stop);
        }
        if (s->flush_buf) cu->cuMemFree(s->flush_buf);
        if (pushed) cu->cuCtxPopCurrent(&popped);
        cu->cuDevicePrimaryCtxRelease(s->dev);
    }
    for (int i = 0; i < s->nmods; i++) {
        free(s->mods[i]->key);
        free(s->mods[i]);
    }
    free(s->mods);
    free(s);
    ctx->part[CG_PART_CUDA].p = NULL;
}
