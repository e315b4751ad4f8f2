/* nvrtc.c -- compile rendered kernels straight to CUBIN with NVRTC. */
#include "cg_cuda.h"
#include "env.h"

#include "kcache.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/stat.h>

cg_status cg__nvrtc_id(cg_context *ctx, char *buf, size_t cap) {
    const char *why;
    const cg_nvrtc_api *cg__nv = cg__nvrtc_api(&why);
    if (!cg__nv) return cg__err(ctx, CG_ENODEV, "%s", why);
    int major = 0, minor = 0;
    CG_NVRTC_CHECK(ctx, nvrtcVersion(&major, &minor));
    /* nvrtcVersion has no build number: the library file's identity stands in for it. */
    Dl_info info;
    void *fp;
    memcpy(&fp, &cg__nv->nvrtcCompileProgram, sizeof fp);
    struct stat st;
    /* the resolved file: the same library reached through a symlink (/usr/local/cuda ->
     * cuda-13.0) keeps one identity, so its cache entries are shared */
    char real[4096];
    if (dladdr(fp, &info) && info.dli_fname && stat(info.dli_fname, &st) == 0)
        snprintf(buf, cap, "nvrtc %d.%d %s size=%lld mtime=%lld.%09ld", major, minor,
                 realpath(info.dli_fname, real) ? real : info.dli_fname, (long long)st.st_size,
                 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else snprintf(buf, cap, "nvrtc %d.%d (library file unknown)", major, minor);
    return CG_OK;
}

int cg__nvrtc_split_threads(int threads) {
    if (threads <= 0) threads = cg__online_cores();
    return threads < 2 ? 2 : threads > CG_NVRTC_SPLIT_MAX ? CG_NVRTC_SPLIT_MAX : threads;
}

/* The loaded NVRTC's version as major * 100 + minor; 0 when none is loaded. */
static int nvrtc_version(void) {
    const cg_nvrtc_api *nv = cg__nvrtc_api(NULL);
    int major = 0, minor = 0;
    if (!nv || nv->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 100 + minor;
}

int cg__nvrtc_can_split(void) { return nvrtc_version() >= 1204; }

int cg__nvrtc_can_trace(void) { return nvrtc_version() >= 1300; }

int cg__nvrtc_can_minimal(void) { return nvrtc_version() >= 1204; }

/* split > 0: --split-compile=<split> (what the compile passes); split == 0: the
 * count-free "--split-compile" of the cache key (any count >= 2 gives the same SASS). */
static int options(int arch, int split, const char *source, const char **opts, char *buf, size_t cap) {
    int n = 0;
    size_t used = 0;
    opts[n++] = "-std=c++17";
    int k = snprintf(buf, cap, "--gpu-architecture=sm_%d", arch);
    opts[n++] = buf;
    used = (size_t)k + 1;
    opts[n++] = "--ptxas-options=-v"; /* resource usage goes into the log (and the cache entry) */
    /* The entries of the module (one per launch) are optimized and assembled in parallel
     * threads inside NVRTC: a module's compile takes about its slowest entry's time. */
    if (cg__nvrtc_can_split()) {
        k = split > 0 ? snprintf(buf + used, cap - used, "--split-compile=%d", split)
                      : snprintf(buf + used, cap - used, "--split-compile");
        opts[n++] = buf + used;
        used += (size_t)k + 1;
    }
    /* --minimal: the front end leaves out what the rendered sources never use (texture and
     * surface functions, device-side runtime calls and launches, the runtime API's types):
     * about 15-20 ms less CPU per compile (a third of an empty program's), and the same SASS
     * for the default kernels (docs/jit.md). A kernel that needs those would fail to compile
     * in every sweep test, never silently. */
    if (cg__nvrtc_can_minimal()) opts[n++] = "--minimal";
    /* Kernel-requested options: a `// nvrtc-options: ...` line among the header comments. */
    const char *p = source;
    for (int line = 0; p && *p && line < 8; line++) {
        if (strncmp(p, "// nvrtc-options:", 17) == 0) {
            const char *q = p + 17;
            while (*q && *q != '\n' && n < CG_NVRTC_MAX_OPTS) {
                while (*q == ' ') q++;
                const char *e = q;
                while (*e && *e != ' ' && *e != '\n') e++;
                size_t len = (size_t)(e - q);
                if (len && used + len + 1 <= cap) {
                    memcpy(buf + used, q, len);
                    buf[used + len] = '\0';
                    opts[n++] = buf + used;
                    used += len + 1;
                }
                q = e;
            }
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

int cg__nvrtc_options(int arch, const char *source, const char **opts, char *buf, size_t cap) {
    return options(arch, 0, source, opts, buf, cap);
}

cg_status cg__cubin_key(cg_context *ctx, const char *nvrtc_id, int arch, const char *name, const char *source,
                        char **out) {
    *out = NULL;
    const char *opts[CG_NVRTC_MAX_OPTS];
    char optbuf[512], optline[1024] = "";
    int n = cg__nvrtc_options(arch, source, opts, optbuf, sizeof optbuf);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(optline);
        snprintf(optline + l, sizeof optline - l, "%s%s", i ? " " : "", opts[i]);
    }
    size_t srclen = strlen(source), cap = srclen + strlen(nvrtc_id) + 2048;
    char *k = malloc(cap);
    if (!k) return cg__err(ctx, CG_ENOMEM, "NVRTC: out of memory for the cache key of %s", name);
    snprintf(k, cap,
             CG_CUBIN_KEY_HEAD "\nkind cubin\ntarget sm_%d\ncompiler %s\noptions %s\nname %s\n"
                               "source %zu bytes\n%s",
             arch, nvrtc_id, optline, name, srclen, source);
    *out = k;
    return CG_OK;
}

static cg_status compile(cg_context *ctx, const cg_nvrtc_api *cg__nv, nvrtcProgram prog, int nopt, const char **opts,
                         const char *name, void **cubin, size_t *cubin_len, char **log) {
    nvrtcResult rc = cg__nv->nvrtcCompileProgram(prog, nopt, opts);
    size_t loglen = 0;
    CG_NVRTC_CHECK(ctx, nvrtcGetProgramLogSize(prog, &loglen));
    char *text = malloc(loglen + 1);
    if (!text) return cg__err(ctx, CG_ENOMEM, "NVRTC: out of memory for the log of %s", name);
    text[0] = '\0';
    if (loglen) {
        cg_status st = cg__nvrtc_check(ctx, cg__nv->nvrtcGetProgramLog(prog, text), "nvrtcGetProgramLog(prog, text)",
                                       __FILE__, __LINE__);
        if (st != CG_OK) {
            free(text);
            return st;
        }
        text[loglen] = '\0';
    }
    *log = text;
    if (rc != NVRTC_SUCCESS)
        return cg__err(ctx, CG_ECOMPILE, "NVRTC: compiling %s for %s failed (%s):\n%s", name, opts[1],
                       cg__nv->nvrtcGetErrorString(rc), text);
    size_t n = 0;
    CG_NVRTC_CHECK(ctx, nvrtcGetCUBINSize(prog, &n));
    char *bin = malloc(n ? n : 1);
    if (!bin) return cg__err(ctx, CG_ENOMEM, "NVRTC: out of memory for the CUBIN of %s", name);
    cg_status st =
        cg__nvrtc_check(ctx, cg__nv->nvrtcGetCUBIN(prog, bin), "nvrtcGetCUBIN(prog, bin)", __FILE__, __LINE__);
    if (st != CG_OK) {
        free(bin);
        return st;
    }
    *cubin = bin;
    *cubin_len = n;
    return CG_OK;
}

cg_status cg__nvrtc_compile(cg_context *ctx, const char *name, const char *source, int arch, void **cubin,
                            size_t *cubin_len, char **log) {
    return cg__nvrtc_compile_threads(ctx, name, source, arch, 0, cubin, cubin_len, log);
}

cg_status cg__nvrtc_compile_threads(cg_context *ctx, const char *name, const char *source, int arch, int threads,
                                    void **cubin, size_t *cubin_len, char **log) {
    *cubin = NULL;
    *cubin_len = 0;
    *log = NULL;
    const char *why;
    const cg_nvrtc_api *cg__nv = cg__nvrtc_api(&why);
    if (!cg__nv) return cg__err(ctx, CG_ENODEV, "%s", why);
    int na = 0, archs[128];
    CG_NVRTC_CHECK(ctx, nvrtcGetNumSupportedArchs(&na));
    /* nvrtcGetSupportedArchs writes na ints: never more than the buffer holds */
    if (na < 0 || na > (int)(sizeof archs / sizeof archs[0]))
        return cg__err(ctx, CG_ECOMPILE, "NVRTC reports %d supported architectures (expected 0 to %d)", na,
                       (int)(sizeof archs / sizeof archs[0]));
    if (na > 0) CG_NVRTC_CHECK(ctx, nvrtcGetSupportedArchs(archs));
    int ok = 0;
    char list[512] = "";
    for (int i = 0; i < na; i++) {
        ok |= archs[i] == arch;
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%d", i ? " " : "", archs[i]);
    }
    if (!ok) return cg__err(ctx, CG_ECOMPILE, "NVRTC cannot compile for sm_%d (it supports sm: %s)", arch, list);

    const char *opts[CG_NVRTC_MAX_OPTS];
    char optbuf[512];
    int nopt = options(arch, cg__nvrtc_split_threads(threads), source, opts, optbuf, sizeof optbuf);
    /* CHUNKGEN_NVRTC_TIME_TRACE=DIR: where the compile's time goes (cg_cuda.h). Not in the
     * cache key: the entries' code is the same with it (cuda_nvrtc_time_trace). */
    char trace[1100];
    const char *tdir = cg__env(CG_ENV_NVRTC_TIME_TRACE);
    if (tdir && nopt < CG_NVRTC_MAX_OPTS && cg__nvrtc_can_trace()) {
        int k = snprintf(trace, sizeof trace, "--fdevice-time-trace=%s/%.200s-sm%d", tdir, name, arch);
        if (k > 0 && (size_t)k < sizeof trace) opts[nopt++] = trace;
    }
    char file[256];
    snprintf(file, sizeof file, "%.200s.cu", name);
    int64_t t0 = cg__jit_now_ns();
    nvrtcProgram prog;
    CG_NVRTC_CHECK(ctx, nvrtcCreateProgram(&prog, source, file, 0, NULL, NULL));
    cg_status st = compile(ctx, cg__nv, prog, nopt, opts, name, cubin, cubin_len, log);
    cg__nv->nvrtcDestroyProgram(&prog);
    cg__jit_count(CG_JIT_COMPILE, cg__jit_now_ns() - t0);
    return st;
}

int cg__devinfo_arch(int arch, cg_devinfo *out) {
    /* opt-in shared memory per block (bytes) and SM counts of a typical part */
    static const struct {
        int arch;
        int64_t smem;
        int sms;
        const char *part;
    } t[] = {
        {75, 64 * 1024, 40, "sm_75"},     {80, 163 * 1024, 108, "sm_80 (A100)"}, {86, 99 * 1024, 84, "sm_86"},
        {87, 163 * 1024, 16, "sm_87"},    {89, 99 * 1024, 128, "sm_89"},         {90, 227 * 1024, 132, "sm_90 (H100)"},
        {100, 227 * 1024, 148, "sm_100"}, {103, 227 * 1024, 148, "sm_103"},      {120, 99 * 1024, 170, "sm_120"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].arch != arch) continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", t[i].part);
        out->arch = arch;
        out->sm_count = t[i].sms;
        out->smem_per_block = t[i].smem;
        out->regs_per_block = 65536;
        return 1;
    }
    return 0;
}
