/* test_cuda.c -- NVRTC, the driver loader (without a driver here) and the CUBIN entries
 * of every plan. The kernel cache is in test_cuda_kcache.c; the executor running the
 * ops (CUDA graph capture on a GPU, a mock driver without one) in test_cuda_exec.c. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"
#include "ptxas_log.h"
#include "gen.h"
#include "cg_kernel_params.h"
#include "sscan_params.h"
#include "elf_section.h"

#include <unistd.h>

/* ----------------------------------------------------------------- driver */

CG_TEST(cuda_no_driver_is_enodev) {
    if (cg__cu_api(NULL)) {
        cg_test_skip("a CUDA driver is present: this checks the library without one");
        return;
    }
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK(&cg__kexec_cuda != NULL, "the cuda executor is linked");
    cg_devinfo d;
    cg_status st = cg__kexec_cuda.device(ctx, &d);
    CG_CHECK(st == CG_ENODEV, "device() -> %s", cg_status_str(st));
    CG_CHECK(strstr(cg_errmsg(ctx), "libcuda") != NULL, "message says why: %s", cg_errmsg(ctx));
    void *p = NULL;
    CG_CHECK(cg__kexec_cuda.alloc(ctx, 64, &p) == CG_ENODEV, "alloc");
    cg_plan plan = {0};
    void *mod = NULL;
    CG_CHECK(cg__kexec_cuda.load(ctx, &plan, &mod) == CG_ENODEV, "load");
    float host[4];
    CG_CHECK(cg__kexec_cuda.owns_ptr(ctx, host) == 0, "host memory is not a device pointer");
    cg__kexec_cuda.free(ctx, NULL);
    cg_device_info info = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_CUDA, &info));
    CG_CHECK(!info.gpu && !info.driver_version && strstr(info.driver_why, "libcuda"), "info: driver %d (%s)",
             info.driver_version, info.driver_why);
    cg_context_free(ctx);
}

/* ------------------------------------------------------------------ NVRTC */

CG_TEST(cuda_nvrtc_compile_and_errors) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    void *bin = NULL;
    size_t len = 0;
    char *log = NULL;
    CG_CHECK_OK(ctx, cg__nvrtc_compile(ctx, "tiny", k_tiny_src, 80, &bin, &len, &log));
    CG_CHECK(bin && len > 64 && !memcmp(bin, "\177ELF", 4), "a CUBIN is an ELF image");
    cg_ptxas_info info;
    cg__ptxas_parse(log, &info);
    CG_CHECK(info.found && info.registers > 0 && info.spill_stores == 0, "ptxas -v in the log: %s", log);
    free(bin);
    free(log);
    /* a syntax error: ECOMPILE with NVRTC's log in the message */
    cg_status st = cg__nvrtc_compile(ctx, "broken", "extern \"C\" __global__ void f() { this is not C++; }\n", 80,
                                     &bin, &len, &log);
    CG_CHECK(st == CG_ECOMPILE, "broken source -> %s", cg_status_str(st));
    CG_CHECK(strstr(cg_errmsg(ctx), "broken") && strstr(cg_errmsg(ctx), "error"), "log: %s", cg_errmsg(ctx));
    free(bin);
    free(log);
    /* an arch NVRTC does not know */
    st = cg__nvrtc_compile(ctx, "tiny", k_tiny_src, 12, &bin, &len, &log);
    CG_CHECK(st == CG_ECOMPILE && strstr(cg_errmsg(ctx), "sm_12"), "bad arch: %s", cg_errmsg(ctx));
    free(bin);
    free(log);
    char id[1024];
    CG_CHECK_OK(ctx, cg__nvrtc_id(ctx, id, sizeof id));
    CG_CHECK(!strncmp(id, "nvrtc ", 6) && strstr(id, "size="), "id: %s", id);
    cg_context_free(ctx);
}

CG_TEST(cuda_nvrtc_options) {
    const char *opts[CG_NVRTC_MAX_OPTS];
    char buf[512];
    int n = cg__nvrtc_options(90, k_tiny_src, opts, buf, sizeof buf);
    int arch = 0, fast = 0, std17 = 0;
    for (int i = 0; i < n; i++) {
        arch |= !strcmp(opts[i], "--gpu-architecture=sm_90");
        fast |= !strcmp(opts[i], "--use_fast_math");
        std17 |= !strcmp(opts[i], "-std=c++17");
    }
    CG_CHECK(arch && std17 && !fast, "default options");
    n = cg__nvrtc_options(80, "// k.cu\n// nvrtc-options: --use_fast_math\n#define X 1\n", opts, buf, sizeof buf);
    fast = 0;
    for (int i = 0; i < n; i++) fast |= !strcmp(opts[i], "--use_fast_math");
    CG_CHECK(fast, "a kernel may ask for --use_fast_math");
}

CG_TEST(cuda_ptxas_parse) {
    /* the shape of ptxas -v output; numbers chosen to be distinguishable */
    const char *log = "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
                      "ptxas info    : Function properties for k\n"
                      "    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
                      "ptxas info    : Used 77 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]\n";
    cg_ptxas_info info;
    cg__ptxas_parse(log, &info);
    CG_CHECK(info.found && info.registers == 77 && info.smem == 4096, "regs %d smem %lld", info.registers,
             (long long)info.smem);
    CG_CHECK(info.spill_stores == 8 && info.spill_loads == 12 && info.stack == 24, "spills");
    cg__ptxas_parse("nothing here\n", &info);
    CG_CHECK(!info.found && info.spill_stores == 0, "empty log");
}

/* ------------------------------------------------- CUBIN entries and params */

/* Section `name` of a CUBIN with contents; NULL when absent. */
static const unsigned char *elf_section(const unsigned char *img, size_t len, const char *name, size_t *size) {
    const unsigned char *data = NULL;
    return cg_test_elf_find(img, len, name, &data, size) ? data : NULL;
}

/* Three entries of different weight: NVRTC's --split-compile hands them to its threads. */
static const char k_split_src[] =
    "extern \"C\" __global__ void split_a(float *x, int n) {\n"
    "    float s = 0.f;\n"
    "    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i] * x[i];\n"
    "    x[threadIdx.x] = s;\n"
    "}\n"
    "extern \"C\" __global__ void split_b(float *x, int n) {\n"
    "    float a[16];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 16; ++k) a[k] = x[k * n + threadIdx.x];\n"
    "    float s = 0.f;\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 16; ++k) s = fmaf(a[k], a[15 - k], s);\n"
    "    x[threadIdx.x] = s;\n"
    "}\n"
    "extern \"C\" __global__ void split_c(double *y) { y[blockIdx.x] = sqrt(y[blockIdx.x]) + 1.0; }\n";

/* The module's entries compile in parallel threads (--split-compile): the cache key
 * names the option without a thread count, and every count the compile may use gives
 * byte-identical code for each entry (one key, one code, on any machine). */
CG_TEST(cuda_nvrtc_split_compile) {
    CG_CHECK(cg__nvrtc_split_threads(1) == 2 && cg__nvrtc_split_threads(3) == 3, "at least 2 threads, else as asked");
    CG_CHECK(cg__nvrtc_split_threads(1000) == CG_NVRTC_SPLIT_MAX, "at most CG_NVRTC_SPLIT_MAX");
    CG_CHECK(cg__nvrtc_split_threads(0) >= 2 && cg__nvrtc_split_threads(0) <= CG_NVRTC_SPLIT_MAX, "0: the cores");
    const char *opts[CG_NVRTC_MAX_OPTS];
    char buf[512];
    int n = cg__nvrtc_options(80, k_split_src, opts, buf, sizeof buf), split = 0;
    for (int i = 0; i < n; i++) {
        CG_CHECK(strncmp(opts[i], "--split-compile=", 16) != 0, "the key's options carry no thread count: %s", opts[i]);
        split |= !strcmp(opts[i], "--split-compile");
    }
    CG_CHECK(split == cg__nvrtc_can_split(), "the key's options name --split-compile when NVRTC has it");
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    static const int counts[] = {2, 3, 8};
    unsigned char *bins[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++) {
        char *log = NULL;
        void *bin = NULL;
        CG_CHECK_OK(ctx, cg__nvrtc_compile_threads(ctx, "split", k_split_src, 80, counts[c], &bin, &lens[c], &log));
        bins[c] = bin;
        free(log);
    }
    static const char *const secs[] = {".text.split_a", ".text.split_b", ".text.split_c"};
    for (int e = 0; e < 3 && bins[0] && bins[1] && bins[2]; e++) {
        size_t sz0 = 0;
        const unsigned char *t0 = elf_section(bins[0], lens[0], secs[e], &sz0);
        CG_CHECK(t0 && sz0 > 0, "%s in the CUBIN", secs[e]);
        for (int c = 1; c < 3 && t0; c++) {
            size_t sz = 0;
            const unsigned char *t = elf_section(bins[c], lens[c], secs[e], &sz);
            CG_CHECK(t && sz == sz0 && !memcmp(t, t0, sz), "%s: the same code with %d and %d threads", secs[e],
                     counts[0], counts[c]);
        }
    }
    for (int c = 0; c < 3; c++) free(bins[c]);
    cg_context_free(ctx);
}

/* CHUNKGEN_NVRTC_TIME_TRACE=DIR: every compile writes DIR/<name>-sm<arch>.json (front end,
 * NVVM, ptxas per entry), and the CUBIN's code is the same as without it. */
CG_TEST(cuda_nvrtc_time_trace) {
    if (!cg__nvrtc_api(NULL) || !cg__nvrtc_can_trace()) {
        cg_test_skip("no NVRTC 13 or newer (--fdevice-time-trace)");
        return;
    }
    char dir[] = "/tmp/chunkgen-trace-XXXXXX";
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    unsigned char *bins[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    for (int traced = 0; traced < 2; traced++) {
        if (traced) setenv("CHUNKGEN_NVRTC_TIME_TRACE", dir, 1);
        char *log = NULL;
        void *bin = NULL;
        CG_CHECK_OK(ctx, cg__nvrtc_compile_threads(ctx, "traced", k_split_src, 80, 2, &bin, &lens[traced], &log));
        bins[traced] = bin;
        free(log);
    }
    unsetenv("CHUNKGEN_NVRTC_TIME_TRACE");
    char path[256];
    snprintf(path, sizeof path, "%s/traced-sm80.json", dir);
    FILE *f = fopen(path, "rb");
    CG_CHECK(f != NULL, "the trace %s was written", path);
    if (f) {
        static char text[1 << 20];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        CG_CHECK(strstr(text, "traceEvents") && strstr(text, "CUDA C++ Front-End") && strstr(text, "split_b"),
                 "a Chrome trace with the front end and the entries (%zu bytes)", n);
        remove(path);
    }
    static const char *const secs[] = {".text.split_a", ".text.split_b", ".text.split_c"};
    for (int e = 0; e < 3 && bins[0] && bins[1]; e++) {
        size_t sz0 = 0, sz1 = 0;
        const unsigned char *t0 = elf_section(bins[0], lens[0], secs[e], &sz0);
        const unsigned char *t1 = elf_section(bins[1], lens[1], secs[e], &sz1);
        CG_CHECK(t0 && t1 && sz0 == sz1 && sz0 > 0 && !memcmp(t0, t1, sz0), "%s: the same code with the trace", secs[e]);
    }
    rmdir(dir);
    free(bins[0]);
    free(bins[1]);
    cg_context_free(ctx);
}

/* What a function's .nv.info.<entry> section says about its parameters: the size of
 * the parameter bank (EIATTR_CBANK_PARAM_SIZE, 0x19) and one EIATTR_KPARAM_INFO (0x17)
 * per parameter (ordinal, size). Records are {format, attribute, value}: format 4
 * (EIFMT_SVAL) has a u16 length and that many bytes, the others 2 more bytes. */
typedef struct nv_params {
    int bank_size;  /* -1 when absent */
    int nparams;
    int ordinal0_size; /* size of the parameter with ordinal 0, -1 when absent */
    uint32_t max_threads[3]; /* __launch_bounds__ (EIATTR_MAX_THREADS, 0x05); 0 when absent */
} nv_params;

static void nv_info_params(const unsigned char *p, size_t n, nv_params *out) {
    out->bank_size = -1;
    out->nparams = 0;
    out->ordinal0_size = -1;
    memset(out->max_threads, 0, sizeof out->max_threads);
    size_t i = 0;
    while (i + 4 <= n) {
        int fmt = p[i], attr = p[i + 1];
        uint16_t v16;
        memcpy(&v16, p + i + 2, 2);
        if (fmt == 4) {
            if (i + 4 + v16 > n) break;
            if (attr == 0x17 && v16 >= 12) {
                uint16_t ordinal;
                uint32_t bits;
                memcpy(&ordinal, p + i + 8, 2);
                memcpy(&bits, p + i + 12, 4);
                out->nparams++;
                if (ordinal == 0) out->ordinal0_size = (int)((bits >> 18) & 0x3FFF);
            }
            if (attr == 0x05 && v16 == 12) memcpy(out->max_threads, p + i + 4, 12);
            i += 4 + (size_t)v16;
        } else {
            if (fmt == 3 && attr == 0x19) out->bank_size = v16;
            i += 4;
        }
    }
}

/* Every entry a plan launches is an unmangled (extern "C") function of the CUBIN
 * NVRTC makes from the plan's source, taking one parameter exactly as large as the
 * host struct the launcher passes (cuLaunchKernel copies the bytes the device
 * expects from the one pointer it gets). One plan per distinct set of entries of each
 * kernel's space (e.g. ssd_fwd's seq and 3phase strategies), for sm_90. No GPU needed. */
CG_TEST(cuda_cubin_entries_and_params) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    static const struct { const char *kernel; size_t params; int sscan; } k[] = {
        {"ssd_fwd", sizeof(cg_ssd_fwd_params), 0},
        {"ssd_bwd", sizeof(cg_ssd_bwd_params), 0},
        {"sscan_fwd", sizeof(cg_sscan_fwd_params), 1},
        {"sscan_bwd", sizeof(cg_sscan_bwd_params), 1},
        {"gdr_fwd", sizeof(cg_gdr_fwd_params), 0},
        {"gdr_bwd", sizeof(cg_gdr_bwd_params), 0},
        {"ssd_step", sizeof(cg_ssd_step_params), 0},
        {"sscan_step", sizeof(cg_sscan_step_params), 1},
        {"gdr_step", sizeof(cg_gdr_step_params), 0},
    };
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    CG_CHECK(cg__devinfo_arch(90, &dev), "sm_90 is known");
    /* every kernel that makes plans is in the table above */
    const char **names;
    int nnames = 0;
    CG_CHECK_OK(ctx, cg__gen_kernels(ctx, &names, &nnames));
    for (int i = 0; i < nnames; i++) {
        int known = 0;
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) known |= !strcmp(names[i], k[j].kernel);
        const cg_shape s0 = {.size = sizeof s0,
                             .dim = {[CG_SYM_B] = 1, [CG_SYM_T] = 37, [CG_SYM_G] = 1, [CG_SYM_H] = 2, [CG_SYM_DK] = 40,
                                     [CG_SYM_DV] = 48, [CG_SYM_L] = 37, [CG_SYM_D] = 24, [CG_SYM_N] = 16}};
        cg_plan plan;
        cg_status st = cg__gen_plan(ctx, names[i], &s0, 0, &dev, NULL, &plan);
        if (st == CG_OK) cg__plan_free(&plan);
        CG_CHECK(known || st == CG_EUNSUPPORTED, "kernel %s makes plans (%s) but has no params struct in this test",
                 names[i], cg_status_str(st));
    }
    int compiled = 0;
    for (size_t ki = 0; ki < sizeof k / sizeof k[0]; ki++) {
        cg_shape s = {.size = sizeof s, .dim = {[CG_SYM_B] = 1, [CG_SYM_G] = 1, [CG_SYM_S] = 5}};
        int sf = CG_KS_H0;
        if (k[ki].sscan) {
            s.dim[CG_SYM_L] = 300, s.dim[CG_SYM_D] = 24, s.dim[CG_SYM_N] = 16; /* L long enough for sscan_fwd's par */
            sf |= CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS;
        } else {
            s.dim[CG_SYM_T] = 70, s.dim[CG_SYM_H] = 2, s.dim[CG_SYM_DK] = 40, s.dim[CG_SYM_DV] = 48;
        }
        sf |= strstr(k[ki].kernel, "bwd") ? CG_KS_DHT : CG_KS_HT;
        cg_cfg *cfgs = NULL;
        int ncfg = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, k[ki].kernel, &s, sf, &dev, &cfgs, &ncfg));
        CG_CHECK(ncfg > 0, "%s: a config exists", k[ki].kernel);
        char seen[8][320];
        int nseen = 0;
        for (int ci = 0; ci < ncfg; ci++) {
            cg_plan plan;
            if (cg__gen_plan(ctx, k[ki].kernel, &s, sf, &dev, &cfgs[ci], &plan) != CG_OK) {
                CG_CHECK(0, "%s: plan of a config of the space: %s", k[ki].kernel, cg_errmsg(ctx));
                continue;
            }
            /* the Lua argument list packs into the params struct (runtime/launch.c) */
            size_t packed = 0;
            for (int a = 0; a < plan.narg; a++)
                packed += plan.arg[a].kind == CG_KARG_TENSOR ? sizeof(cg_ktensor) : sizeof(int64_t);
            CG_CHECK(packed == k[ki].params, "%s: %d arguments pack into %zu bytes, the params struct has %zu",
                     plan.name, plan.narg, packed, k[ki].params);
            char sig[320] = "";
            for (int l = 0; l < plan.nlaunch; l++) {
                size_t n = strlen(sig);
                snprintf(sig + n, sizeof sig - n, "%s ", plan.launch[l].entry);
            }
            int dup = 0;
            for (int j = 0; j < nseen; j++) dup |= !strcmp(seen[j], sig);
            if (dup || nseen == 8) {
                cg__plan_free(&plan);
                continue;
            }
            snprintf(seen[nseen++], sizeof seen[0], "%s", sig);
            void *bin = NULL;
            size_t len = 0;
            char *log = NULL;
            CG_CHECK_OK(ctx, cg__nvrtc_compile(ctx, plan.name, plan.source, 90, &bin, &len, &log));
            compiled++;
            for (int l = 0; bin && l < plan.nlaunch; l++) {
                const char *e = plan.launch[l].entry;
                char sec[128];
                size_t sz = 0;
                snprintf(sec, sizeof sec, ".text.%s", e);
                CG_CHECK(elf_section(bin, len, sec, &sz) && sz > 0, "%s: entry %s is not an unmangled function of "
                         "the CUBIN (extern \"C\" __global__ missing?)", plan.name, e);
                snprintf(sec, sizeof sec, ".nv.info.%s", e);
                const unsigned char *info = elf_section(bin, len, sec, &sz);
                CG_CHECK(info != NULL, "%s: %s has no %s section", plan.name, e, sec);
                if (!info) continue;
                nv_params np;
                nv_info_params(info, sz, &np);
                CG_CHECK(np.nparams == 1, "%s: %s takes %d parameters (expected one params struct)", plan.name, e,
                         np.nparams);
                CG_CHECK(np.bank_size == (int)k[ki].params && np.ordinal0_size == (int)k[ki].params,
                         "%s: %s: device parameter %d bytes (bank %d), host struct %zu bytes", plan.name, e,
                         np.ordinal0_size, np.bank_size, k[ki].params);
                /* a block larger than __launch_bounds__ fails the launch (CUDA_ERROR_INVALID_VALUE) */
                const unsigned *blk = plan.launch[l].block;
                if (np.max_threads[0])
                    CG_CHECK((uint64_t)blk[0] * blk[1] * blk[2] <=
                                 (uint64_t)np.max_threads[0] * np.max_threads[1] * np.max_threads[2],
                             "%s: %s: block %ux%ux%u exceeds its __launch_bounds__ %ux%ux%u", plan.name, e, blk[0],
                             blk[1], blk[2], np.max_threads[0], np.max_threads[1], np.max_threads[2]);
            }
            free(bin);
            free(log);
            cg__plan_free(&plan);
        }
        free(cfgs);
    }
    CG_CHECK(compiled >= 5, "%d CUBINs checked", compiled);
    cg_context_free(ctx);
}


/* The raw NVRTC compile of source with opts; the CUBIN (malloc'd) or NULL. */
static unsigned char *raw_cubin(const char *source, int nopt, const char **opts, size_t *len) {
    const cg_nvrtc_api *nv = cg__nvrtc_api(NULL);
    nvrtcProgram prog;
    unsigned char *bin = NULL;
    *len = 0;
    if (nv->nvrtcCreateProgram(&prog, source, "raw.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return NULL;
    if (nv->nvrtcCompileProgram(prog, nopt, opts) == NVRTC_SUCCESS && nv->nvrtcGetCUBINSize(prog, len) == NVRTC_SUCCESS &&
        (bin = malloc(*len ? *len : 1)) && nv->nvrtcGetCUBIN(prog, (char *)bin) != NVRTC_SUCCESS) {
        free(bin);
        bin = NULL;
    }
    nv->nvrtcDestroyProgram(&prog);
    return bin;
}

/* Every compile passes --minimal (NVRTC 12.4+: a cheaper front end), and it changes no
 * code: a real kernel's entries (sscan_fwd's default plan, the templates' helpers and
 * all) are byte-identical with and without it. */
CG_TEST(cuda_nvrtc_minimal) {
    const char *opts[CG_NVRTC_MAX_OPTS];
    char buf[512];
    int n = cg__nvrtc_options(90, k_tiny_src, opts, buf, sizeof buf), minimal = 0;
    for (int i = 0; i < n; i++) minimal |= !strcmp(opts[i], "--minimal");
    CG_CHECK(minimal == cg__nvrtc_can_minimal(), "the options name --minimal exactly when NVRTC has it");
    if (!cg__nvrtc_api(NULL) || !cg__nvrtc_can_minimal()) {
        cg_test_skip("no NVRTC 12.4 or newer (--minimal)");
        return;
    }
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    CG_CHECK(cg__devinfo_arch(90, &dev), "sm_90 is known");
    const cg_shape s = {.size = sizeof s,
                        .dim = {[CG_SYM_B] = 1, [CG_SYM_G] = 1, [CG_SYM_L] = 300, [CG_SYM_D] = 24, [CG_SYM_N] = 16}};
    cg_plan plan;
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "sscan_fwd", &s, CG_KS_SOFTPLUS | CG_KS_HAS_D, &dev, NULL, &plan));
    void *with = NULL;
    size_t wlen = 0, olen = 0;
    char *log = NULL;
    CG_CHECK_OK(ctx, cg__nvrtc_compile_threads(ctx, plan.name, plan.source, 90, 2, &with, &wlen, &log));
    free(log);
    /* the same options, as the compile passes them, less --minimal */
    n = cg__nvrtc_options(90, plan.source, opts, buf, sizeof buf);
    const char *raw[CG_NVRTC_MAX_OPTS];
    int nraw = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i], "--minimal")) raw[nraw++] = strcmp(opts[i], "--split-compile") ? opts[i] : "--split-compile=2";
    CG_CHECK(nraw == n - 1, "--minimal dropped once");
    unsigned char *without = raw_cubin(plan.source, nraw, raw, &olen);
    CG_CHECK(with && without, "both compiles give a CUBIN");
    for (int l = 0; with && without && l < plan.nlaunch; l++) {
        char sec[128];
        size_t sw = 0, so = 0;
        snprintf(sec, sizeof sec, ".text.%s", plan.launch[l].entry);
        const unsigned char *tw = elf_section(with, wlen, sec, &sw), *to = elf_section(without, olen, sec, &so);
        CG_CHECK(tw && to && sw == so && sw > 0 && !memcmp(tw, to, sw), "%s: %s the same code with and without "
                 "--minimal (%zu and %zu bytes)", plan.name, sec, sw, so);
    }
    free(with);
    free(without);
    cg__plan_free(&plan);
    cg_context_free(ctx);
}
