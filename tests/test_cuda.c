/* test_cuda.c -- NVRTC, the driver loader (without a driver here) and the on-disk
 * kernel cache: corrupt entries, read-only directories, 8 processes at once. The GPU
 * test runs only where a device is present. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "ptxas_log.h"
#include "cuda/kcache.h"
#include "gen.h"
#include "cg_kernel_params.h"
#include "sscan_params.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void rm_rf(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
}

static const char k_tiny_src[] =
    "// tiny.cu\n"
    "extern \"C\" __global__ void tiny(float *p) { p[threadIdx.x] = 2.0f * p[threadIdx.x]; }\n";

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
    char text[2048];
    cg__cuda_describe(ctx, text, sizeof text);
    CG_CHECK(strstr(text, "driver:  none"), "info: %s", text);
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

/* Section `name` of an ELF64 little-endian image (a CUBIN); NULL when absent. */
static const unsigned char *elf_section(const unsigned char *img, size_t len, const char *name, size_t *size) {
    if (len < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 /* ELFCLASS64 */) return NULL;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3A, 2);
    memcpy(&shnum, img + 0x3C, 2);
    memcpy(&shstrndx, img + 0x3E, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff > len || (uint64_t)shnum * shentsize > len - shoff) return NULL;
    const unsigned char *sh = img + shoff;
    uint64_t stroff, strsize;
    memcpy(&stroff, sh + (size_t)shstrndx * shentsize + 24, 8);
    memcpy(&strsize, sh + (size_t)shstrndx * shentsize + 32, 8);
    if (stroff > len || strsize > len - stroff) return NULL;
    for (unsigned i = 0; i < shnum; i++) {
        const unsigned char *h = sh + (size_t)i * shentsize;
        uint32_t nm;
        uint64_t off, sz;
        memcpy(&nm, h, 4);
        memcpy(&off, h + 24, 8);
        memcpy(&sz, h + 32, 8);
        if (nm >= strsize || strnlen((const char *)img + stroff + nm, strsize - nm) == strsize - nm) continue;
        if (strcmp((const char *)img + stroff + nm, name) != 0) continue;
        if (off > len || sz > len - off) return NULL;
        *size = (size_t)sz;
        return img + off;
    }
    return NULL;
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
        cg_kshape s0 = {.B = 1, .T = 37, .G = 1, .H = 2, .dk = 40, .dv = 48, .L = 37, .D = 24, .N = 16};
        cg_plan plan;
        cg_status st = cg__gen_plan(ctx, names[i], &s0, &dev, NULL, &plan);
        if (st == CG_OK) cg__plan_free(&plan);
        CG_CHECK(known || st == CG_EUNSUPPORTED, "kernel %s makes plans (%s) but has no params struct in this test",
                 names[i], cg_status_str(st));
    }
    int compiled = 0;
    for (size_t ki = 0; ki < sizeof k / sizeof k[0]; ki++) {
        cg_kshape s = {.B = 1, .G = 1, .flags = CG_KS_H0};
        if (k[ki].sscan) {
            s.L = 300, s.D = 24, s.N = 16; /* L long enough for sscan_fwd's par strategy */
            s.flags |= CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS;
        } else {
            s.T = 70, s.H = 2, s.dk = 40, s.dv = 48;
        }
        s.flags |= strstr(k[ki].kernel, "bwd") ? CG_KS_DHT : CG_KS_HT;
        cg_cfg *cfgs = NULL;
        int ncfg = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, k[ki].kernel, &s, &dev, &cfgs, &ncfg));
        CG_CHECK(ncfg > 0, "%s: a config exists", k[ki].kernel);
        char seen[8][320];
        int nseen = 0;
        for (int ci = 0; ci < ncfg; ci++) {
            cg_plan plan;
            if (cg__gen_plan(ctx, k[ki].kernel, &s, &dev, &cfgs[ci], &plan) != CG_OK) {
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

/* ------------------------------------------------------------------ cache */

static char *tmpdir(void) {
    char *d = strdup("/tmp/cg_kcacheXXXXXX");
    if (!mkdtemp(d)) {
        free(d);
        return NULL;
    }
    return d;
}

/* Warnings the library has sent to the log callback (installed by the kcache tests). */
static int g_kcache_warnings;
static void count_warning(cg_log_level level, const char *msg, void *user) {
    (void)msg;
    (void)user;
    if (level == CG_LOG_WARN) g_kcache_warnings++;
}
static int kcache_warnings(void) {
    cg_set_log_callback(count_warning, NULL);
    return g_kcache_warnings;
}

CG_TEST(cuda_kcache_roundtrip) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/a/b/kernels", dir); /* created on demand */
    unsigned char payload[300];
    for (int i = 0; i < 300; i++) payload[i] = (unsigned char)(i * 7 + 1);
    void *got = NULL;
    size_t len = 0;
    char *log = NULL;
    CG_CHECK(cg__kcache_get(sub, "k1", "key one", &got, &len, &log) == CG_ENOTFOUND, "empty cache misses");
    CG_CHECK_OK(NULL, cg__kcache_put(sub, "k1", "key one", payload, sizeof payload, "compile log"));
    CG_CHECK(cg__kcache_get(sub, "k1", "key one", &got, &len, &log) == CG_OK, "hit");
    CG_CHECK(got && len == sizeof payload && !memcmp(got, payload, len), "payload back");
    CG_CHECK(log && !strcmp(log, "compile log"), "log back");
    free(got);
    free(log);
    CG_CHECK(cg__kcache_get(sub, "k1", "key two", &got, &len, &log) == CG_ENOTFOUND, "other key misses");
    /* empty payload and no log */
    CG_CHECK_OK(NULL, cg__kcache_put(sub, "", "empty", "", 0, NULL));
    CG_CHECK(cg__kcache_get(sub, "", "empty", &got, &len, &log) == CG_OK && len == 0 && log && !log[0], "empty");
    free(got);
    free(log);
    int64_t files, bytes;
    cg__kcache_stat(sub, &files, &bytes);
    CG_CHECK(files == 2 && bytes > (int64_t)sizeof payload, "stat %lld files %lld bytes", (long long)files,
             (long long)bytes);
    uint64_t h1[2], h2[2];
    cg__hash128("key one", 7, h1);
    cg__hash128("key onf", 7, h2);
    CG_CHECK(h1[0] != h2[0] && h1[1] != h2[1], "hash sensitive to one bit in both halves");
    rm_rf(dir);
    free(dir);
}

static void flip_byte(const char *path, long off_from_end_or_start, int from_end) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, from_end ? -off_from_end_or_start : off_from_end_or_start, from_end ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x20, f);
    fclose(f);
}

CG_TEST(cuda_kcache_corrupt_entries_are_misses) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    const char *key = "chunkgen test key\nsource ...";
    char payload[1000];
    for (int i = 0; i < 1000; i++) payload[i] = (char)(i * 13);
    char path[4096];
    cg__kcache_path(dir, "lbl", key, path, sizeof path);
    void *got;
    size_t len;
    char *log;
    /* corruptions: a payload byte, the magic, the version, the key text, truncation */
    for (int kind = 0; kind < 5; kind++) {
        CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", key, payload, sizeof payload, "log"));
        struct stat st;
        stat(path, &st);
        if (kind == 0) flip_byte(path, 500, 0);
        if (kind == 1) flip_byte(path, 0, 0);
        if (kind == 2) flip_byte(path, 8, 0);
        if (kind == 3) flip_byte(path, 45, 0);
        if (kind == 4) CG_CHECK(truncate(path, st.st_size - 100) == 0, "truncate");
        char why[256];
        CG_CHECK(cg__kcache_verify_file(path, why, sizeof why) != 0, "kind %d: verify notices", kind);
        int w0 = kcache_warnings();
        CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_ENOTFOUND, "kind %d: a miss", kind);
        CG_CHECK(kcache_warnings() == w0 + 1, "kind %d: exactly one warning", kind);
        /* rebuilt: the next put replaces it and reads back good */
        CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", key, payload, sizeof payload, "log"));
        CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_OK && len == sizeof payload &&
                     !memcmp(got, payload, len),
                 "kind %d: rebuilt entry reads back", kind);
        CG_CHECK(kcache_warnings() == w0 + 1, "kind %d: no warning for a good entry", kind);
        free(got);
        free(log);
    }
    /* an entry of another key placed at this key's path (a collision) is a miss */
    char other[4096];
    CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", "another key", payload, 10, NULL));
    cg__kcache_path(dir, "lbl", "another key", other, sizeof other);
    CG_CHECK(rename(other, path) == 0, "rename");
    CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_ENOTFOUND, "key mismatch misses");
    rm_rf(dir);
    free(dir);
}

CG_TEST(cuda_kcache_unwritable_dir_degrades) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    /* a directory below a regular file can never be created (works as root too) */
    char file[512], below[600];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    snprintf(below, sizeof below, "%s/kernels", file);
    cg_status st = cg__kcache_put(below, "x", "k", "abc", 3, NULL);
    CG_CHECK(st == CG_EIO, "put into an impossible dir -> EIO (%s)", cg_status_str(st));
    void *got;
    size_t len;
    char *log;
    CG_CHECK(cg__kcache_get(below, "x", "k", &got, &len, &log) == CG_ENOTFOUND, "get misses");
    int w = kcache_warnings();
    CG_CHECK(cg__kcache_put(below, "x", "k", "abc", 3, NULL) == CG_EIO, "again EIO");
    CG_CHECK(kcache_warnings() == w, "the unwritable-directory warning is printed once");
    /* a read-only directory (not for root, who may write anyway) */
    if (geteuid() != 0) {
        char ro[600];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        mkdir(ro, 0555);
        CG_CHECK(cg__kcache_put(ro, "x", "k", "abc", 3, NULL) == CG_EIO, "read-only dir -> EIO");
        DIR *d = opendir(ro);
        int entries = 0;
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.' || strlen(e->d_name) > 2) entries++;
        if (d) closedir(d);
        CG_CHECK(entries == 0, "nothing left behind in the read-only dir");
    }
    rm_rf(dir);
    free(dir);
}

/* 8 processes compile the same keys into one directory at once. */
static int child_compile(const char *dir, int me, int have_nvrtc) {
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return 10;
    int rc = 0;
    for (int r = 0; r < 3 && !rc; r++) {
        int i = (r + me) % 3;
        char src[512], key[1024], name[32];
        snprintf(name, sizeof name, "tiny%d", i);
        snprintf(src, sizeof src, "// %s.cu\nextern \"C\" __global__ void %s(float *p) { p[threadIdx.x] *= %d.0f; }\n",
                 name, name, i + 2);
        snprintf(key, sizeof key, "test key %d\n%s", i, src);
        void *bin = NULL;
        size_t len = 0;
        char *log = NULL;
        if (cg__kcache_get(dir, name, key, &bin, &len, &log) != CG_OK) {
            if (have_nvrtc) {
                if (cg__nvrtc_compile(ctx, name, src, 80, &bin, &len, &log) != CG_OK) rc = 11;
            } else {
                len = 100000 + (size_t)i;
                bin = malloc(len);
                for (size_t b = 0; bin && b < len; b++) ((unsigned char *)bin)[b] = (unsigned char)(b * (size_t)(i + 3));
                log = strdup("synthetic");
            }
            if (!rc && cg__kcache_put(dir, name, key, bin, len, log) != CG_OK) rc = 12;
        }
        free(bin);
        free(log);
        /* whatever is in place now must read back whole */
        if (!rc && cg__kcache_get(dir, name, key, &bin, &len, &log) != CG_OK) rc = 13;
        if (!rc) {
            free(bin);
            free(log);
        }
    }
    cg_context_free(ctx);
    return rc;
}

CG_TEST(cuda_kcache_eight_processes) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    int have_nvrtc = cg__nvrtc_api(NULL) != NULL;
    int go[2];
    CG_CHECK(pipe(go) == 0, "pipe");
    fflush(NULL);
    pid_t pids[8];
    for (int c = 0; c < 8; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            char b;
            close(go[1]);
            while (read(go[0], &b, 1) > 0) {} /* start together when the parent closes */
            _exit(child_compile(dir, c, have_nvrtc));
        }
        CG_CHECK(pids[c] > 0, "fork");
    }
    close(go[0]);
    close(go[1]);
    for (int c = 0; c < 8; c++) {
        int status = 0;
        if (pids[c] <= 0) continue;
        waitpid(pids[c], &status, 0);
        CG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", c, status);
    }
    /* every file is a complete, valid entry; no temp file is left */
    DIR *d = opendir(dir);
    int entries = 0, temps = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (strstr(e->d_name, ".tmp.")) {
            temps++;
            continue;
        }
        char path[4400], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        CG_CHECK(cg__kcache_verify_file(path, why, sizeof why) == 0, "%s: %s", e->d_name, why);
        entries++;
    }
    if (d) closedir(d);
    CG_CHECK(entries == 3 && temps == 0, "%d entries (want 3), %d temp files", entries, temps);
    rm_rf(dir);
    free(dir);
}

/* --------------------------------------------- on a GPU: CUDA graph capture */

/* A float tensor on the device with a host copy (inputs random, outputs zero). */
typedef struct gtens {
    float *host;
    void *dev;
    size_t n;
    int output;
    cg_tensor t;
} gtens;

static void gt_new(cg_context *ctx, gtens *g, int ndim, const int64_t *shape, cg_rng *rng, double lo, double hi,
                   int output) {
    memset(g, 0, sizeof *g);
    g->n = 1;
    for (int i = 0; i < ndim; i++) g->n *= (size_t)shape[i];
    g->output = output;
    g->host = calloc(g->n, sizeof(float));
    for (size_t i = 0; !output && g->host && i < g->n; i++) g->host[i] = (float)cg_rng_uniform(rng, lo, hi);
    CG_CHECK_OK(ctx, cg__kexec_cuda.alloc(ctx, g->n * sizeof(float), &g->dev));
    CG_CHECK_OK(ctx, cg__kexec_cuda.copy(ctx, g->dev, g->host, g->n * sizeof(float), 0, NULL));
    g->t = cg_tensor_contiguous(g->dev, CG_F32, ndim, shape);
}

static void gt_free(cg_context *ctx, gtens *g) {
    cg__kexec_cuda.free(ctx, g->dev);
    free(g->host);
}

/* The driver calls the test needs beyond the library's (dlsym from the same libcuda). */
typedef struct graph_api {
    CUresult (*stream_create)(CUstream *s, unsigned flags);
    CUresult (*stream_destroy)(CUstream s);
    CUresult (*begin_capture)(CUstream s, int mode);
    CUresult (*end_capture)(CUstream s, void **graph);
    CUresult (*instantiate)(void **exec, void *graph, unsigned long long flags);
    CUresult (*graph_launch)(void *exec, CUstream s);
    CUresult (*exec_destroy)(void *exec);
    CUresult (*graph_destroy)(void *graph);
} graph_api;

static int graph_api_load(graph_api *g) {
    const char *path = getenv("CHUNKGEN_LIBCUDA"); /* the mock driver, or another libcuda */
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    struct { const char *name; void *fp; } t[] = {
        {"cuStreamCreate", &g->stream_create},          {"cuStreamDestroy_v2", &g->stream_destroy},
        {"cuStreamBeginCapture_v2", &g->begin_capture}, {"cuStreamEndCapture", &g->end_capture},
        {"cuGraphInstantiateWithFlags", &g->instantiate}, {"cuGraphLaunch", &g->graph_launch},
        {"cuGraphExecDestroy", &g->exec_destroy},       {"cuGraphDestroy", &g->graph_destroy},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        void *p = dlsym(lib, t[i].name);
        if (!p) return 0;
        memcpy(t[i].fp, &p, sizeof p);
    }
    return 1; /* the handle stays open: libcuda is never unloaded anyway */
}

enum { GT_Q, GT_K, GT_V, GT_LA, GT_H0, GT_O, GT_HT, GT_DOUT, GT_DHT, GT_DQ, GT_DK, GT_DV, GT_DLA, GT_DH0,
       ST_X, ST_DELTA, ST_A, ST_B, ST_C, ST_D, ST_Z, ST_BIAS, ST_H0, ST_Y, ST_HT, ST_DY, ST_DHT, ST_DX, ST_DDELTA,
       ST_DA, ST_DB, ST_DC, ST_DD, ST_DZ, ST_DBIAS, ST_DH0, GT_COUNT };

/* The four ops, in order, on ex->stream. */
/* The four ops' args over g. */
typedef struct four_args {
    cg_ssd_fwd_args f;
    cg_ssd_bwd_args b;
    cg_sscan_fwd_args sf;
    cg_sscan_bwd_args sb;
} four_args;

static void four_args_of(gtens *g, four_args *a) {
    a->f = (cg_ssd_fwd_args){.layout = CG_LAYOUT_TOKEN_MAJOR, .q = g[GT_Q].t, .k = g[GT_K].t, .v = g[GT_V].t,
                             .log_alpha = g[GT_LA].t, .h0 = g[GT_H0].t, .o = g[GT_O].t, .hT = g[GT_HT].t};
    a->b = (cg_ssd_bwd_args){.layout = CG_LAYOUT_TOKEN_MAJOR, .q = g[GT_Q].t, .k = g[GT_K].t, .v = g[GT_V].t,
                             .log_alpha = g[GT_LA].t, .h0 = g[GT_H0].t, .dout = g[GT_DOUT].t, .dhT = g[GT_DHT].t,
                             .dq = g[GT_DQ].t, .dk = g[GT_DK].t, .dv = g[GT_DV].t, .dlog_alpha = g[GT_DLA].t,
                             .dh0 = g[GT_DH0].t};
    a->sf = (cg_sscan_fwd_args){.x = g[ST_X].t, .delta = g[ST_DELTA].t, .A = g[ST_A].t, .B = g[ST_B].t,
                                .C = g[ST_C].t, .D = g[ST_D].t, .z = g[ST_Z].t, .delta_bias = g[ST_BIAS].t,
                                .h0 = g[ST_H0].t, .delta_softplus = 1, .y = g[ST_Y].t, .hT = g[ST_HT].t};
    a->sb = (cg_sscan_bwd_args){.x = g[ST_X].t, .delta = g[ST_DELTA].t, .A = g[ST_A].t, .B = g[ST_B].t,
                                .C = g[ST_C].t, .D = g[ST_D].t, .z = g[ST_Z].t, .delta_bias = g[ST_BIAS].t,
                                .h0 = g[ST_H0].t, .dy = g[ST_DY].t, .dhT = g[ST_DHT].t, .delta_softplus = 1,
                                .dx = g[ST_DX].t, .ddelta = g[ST_DDELTA].t, .dA = g[ST_DA].t, .dB = g[ST_DB].t,
                                .dC = g[ST_DC].t, .dD = g[ST_DD].t, .dz = g[ST_DZ].t, .ddelta_bias = g[ST_DBIAS].t,
                                .dh0 = g[ST_DH0].t};
}

static cg_status run_four(cg_context *ctx, gtens *g, const cg_exec *ex) {
    four_args a;
    four_args_of(g, &a);
    cg_status st;
    if ((st = cg_ssd_fwd(ctx, &a.f, ex)) || (st = cg_ssd_bwd(ctx, &a.b, ex)) || (st = cg_sscan_fwd(ctx, &a.sf, ex)))
        return st;
    return cg_sscan_bwd(ctx, &a.sb, ex);
}

/* cg_prepare of the four calls of run_four. */
static cg_status prepare_four(cg_context *ctx, gtens *g, const cg_exec *ex) {
    four_args a;
    four_args_of(g, &a);
    cg_status st;
    if ((st = cg_prepare(ctx, CG_OP_SSD_FWD, &a.f, ex, NULL)) || (st = cg_prepare(ctx, CG_OP_SSD_BWD, &a.b, ex, NULL)) ||
        (st = cg_prepare(ctx, CG_OP_SSCAN_FWD, &a.sf, ex, NULL)))
        return st;
    return cg_prepare(ctx, CG_OP_SSCAN_BWD, &a.sb, ex, NULL);
}

/* Outputs back to the host copies (synchronizing the stream). */
static void fetch_outputs(cg_context *ctx, gtens *g, CUstream s) {
    for (int i = 0; i < GT_COUNT; i++)
        if (g[i].output) CG_CHECK_OK(ctx, cg__kexec_cuda.copy(ctx, g[i].host, g[i].dev, g[i].n * 4, 1, s));
    CG_CHECK_OK(ctx, cg__kexec_cuda.sync(ctx, s));
}

/* After first use, the four ops capture into a CUDA graph (global capture mode, the
 * strictest: any allocation, host synchronization or use of another stream during
 * capture fails the capture), the capture itself runs nothing, and replays of the
 * graph give bit for bit what the direct calls gave, also replayed over their own
 * results (outputs are written, never accumulated into). */
CG_TEST(cuda_gpu_graph_capture) {
    const cg_cu_api *cu = cg__cu_api(NULL);
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    if (cg__kexec_cuda.device(ctx, &dev) != CG_OK || !cu) {
        static char why[600];
        snprintf(why, sizeof why, "no GPU: %s", cg_errmsg(ctx));
        cg_test_skip(why);
        cg_context_free(ctx);
        return;
    }
    graph_api ga;
    CG_CHECK(graph_api_load(&ga), "graph entry points of libcuda");
    /* The caller's side, as PyTorch has it: the device's primary context current on
     * this thread, a non-blocking stream of its own. */
    CUdevice d0 = 0;
    CUcontext pctx = NULL, popped;
    CG_CHECK(cu->cuDeviceGet(&d0, 0) == CUDA_SUCCESS && cu->cuDevicePrimaryCtxRetain(&pctx, d0) == CUDA_SUCCESS &&
                 cu->cuCtxPushCurrent(pctx) == CUDA_SUCCESS,
             "primary context of device 0 current");
    cg_context_free(ctx); /* a fresh context that finds device 0's context current */
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 0)); /* no tuning inside this test */
    char *dir = tmpdir();
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, dir));
    CUstream stream = NULL;
    CG_CHECK(ga.stream_create(&stream, 1 /* CU_STREAM_NON_BLOCKING */) == CUDA_SUCCESS, "stream");

    const int64_t B = 2, T = 67, G = 1, H = 2, DK = 40, DV = 48, L = 300, D = 24, N = 16;
    cg_rng rng = {7};
    gtens g[GT_COUNT];
    const int64_t qk[4] = {B, T, G, DK}, vo[4] = {B, T, H, DV}, la[3] = {B, T, H}, st[4] = {B, H, DK, DV};
    const int64_t bld[3] = {B, L, D}, dn[2] = {D, N}, bln[3] = {B, L, N}, dd[1] = {D}, bdn[3] = {B, D, N};
    struct { int id, ndim; const int64_t *shape; double lo, hi; int out; } spec[GT_COUNT] = {
        {GT_Q, 4, qk, -1, 1, 0},     {GT_K, 4, qk, -1, 1, 0},      {GT_V, 4, vo, -1, 1, 0},
        {GT_LA, 3, la, -0.5, 0, 0},  {GT_H0, 4, st, -1, 1, 0},     {GT_O, 4, vo, 0, 0, 1},
        {GT_HT, 4, st, 0, 0, 1},     {GT_DOUT, 4, vo, -1, 1, 0},   {GT_DHT, 4, st, -1, 1, 0},
        {GT_DQ, 4, qk, 0, 0, 1},     {GT_DK, 4, qk, 0, 0, 1},      {GT_DV, 4, vo, 0, 0, 1},
        {GT_DLA, 3, la, 0, 0, 1},    {GT_DH0, 4, st, 0, 0, 1},     {ST_X, 3, bld, -1, 1, 0},
        {ST_DELTA, 3, bld, -1, 1, 0}, {ST_A, 2, dn, -1, -0.1, 0},  {ST_B, 3, bln, -1, 1, 0},
        {ST_C, 3, bln, -1, 1, 0},    {ST_D, 1, dd, -1, 1, 0},      {ST_Z, 3, bld, -1, 1, 0},
        {ST_BIAS, 1, dd, -1, 1, 0},  {ST_H0, 3, bdn, -1, 1, 0},    {ST_Y, 3, bld, 0, 0, 1},
        {ST_HT, 3, bdn, 0, 0, 1},    {ST_DY, 3, bld, -1, 1, 0},    {ST_DHT, 3, bdn, -1, 1, 0},
        {ST_DX, 3, bld, 0, 0, 1},    {ST_DDELTA, 3, bld, 0, 0, 1}, {ST_DA, 2, dn, 0, 0, 1},
        {ST_DB, 3, bln, 0, 0, 1},    {ST_DC, 3, bln, 0, 0, 1},     {ST_DD, 1, dd, 0, 0, 1},
        {ST_DZ, 3, bld, 0, 0, 1},    {ST_DBIAS, 1, dd, 0, 0, 1},   {ST_DH0, 3, bdn, 0, 0, 1},
    };
    for (int i = 0; i < GT_COUNT; i++)
        gt_new(ctx, &g[spec[i].id], spec[i].ndim, spec[i].shape, &rng, spec[i].lo, spec[i].hi, spec[i].out);
    CG_CHECK_OK(ctx, cg__kexec_cuda.sync(ctx, NULL));
    cg_exec ex = {.backend = CG_BACKEND_CUDA, .stream = stream};

    /* first use: compiles, loads, sizes the workspace */
    CG_CHECK_OK(ctx, run_four(ctx, g, &ex));
    CG_CHECK(!strstr(cg_last_dispatch(ctx), "staged"), "device pointers are used in place: %s", cg_last_dispatch(ctx));
    fetch_outputs(ctx, g, stream);
    float *ref[GT_COUNT] = {0};
    for (int i = 0; i < GT_COUNT; i++) {
        if (!g[i].output) continue;
        ref[i] = malloc(g[i].n * 4);
        if (ref[i]) memcpy(ref[i], g[i].host, g[i].n * 4);
        double mx = 0;
        for (size_t j = 0; j < g[i].n; j++) mx = fmax(mx, fabs(g[i].host[j]));
        CG_CHECK(mx > 0 && isfinite(mx), "output %d written by the direct call (max |x| %g)", i, mx);
    }

    /* zero the outputs, then capture: nothing may run while capturing */
    for (int i = 0; i < GT_COUNT; i++)
        if (g[i].output)
            CG_CHECK(cu->cuMemsetD8Async((CUdeviceptr)(uintptr_t)g[i].dev, 0, g[i].n * 4, stream) == CUDA_SUCCESS,
                     "memset");
    CG_CHECK_OK(ctx, cg__kexec_cuda.sync(ctx, stream));
    void *graph = NULL, *gexec = NULL;
    CG_CHECK(ga.begin_capture(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */) == CUDA_SUCCESS, "begin capture");
    cg_status cst = run_four(ctx, g, &ex);
    CUresult er = ga.end_capture(stream, &graph); /* always ends the capture */
    CG_CHECK(cst == CG_OK, "the ops under capture: %s: %s", cg_status_str(cst), cg_errmsg(ctx));
    CG_CHECK(er == CUDA_SUCCESS && graph, "end capture: CUresult %d (901 = the capture was invalidated)", (int)er);
    fetch_outputs(ctx, g, stream);
    for (int i = 0; i < GT_COUNT; i++) {
        if (!g[i].output) continue;
        int zero = 1;
        for (size_t j = 0; j < g[i].n; j++) zero &= g[i].host[j] == 0.0f;
        CG_CHECK(zero, "output %d: capturing ran kernels", i);
    }
    if (graph) CG_CHECK(ga.instantiate(&gexec, graph, 0) == CUDA_SUCCESS && gexec, "instantiate the graph");
    for (int rep = 0; rep < 2 && gexec; rep++) {
        CG_CHECK(ga.graph_launch(gexec, stream) == CUDA_SUCCESS, "graph launch %d", rep);
        fetch_outputs(ctx, g, stream);
        for (int i = 0; i < GT_COUNT; i++)
            if (g[i].output && ref[i])
                CG_CHECK(!memcmp(ref[i], g[i].host, g[i].n * 4), "replay %d: output %d differs from the direct call",
                         rep, i);
    }
    if (gexec) ga.exec_destroy(gexec);
    if (graph) ga.graph_destroy(graph);
    for (int i = 0; i < GT_COUNT; i++) {
        free(ref[i]);
        gt_free(ctx, &g[i]);
    }
    ga.stream_destroy(stream);
    cg_context_free(ctx);
    cu->cuCtxPopCurrent(&popped);
    cu->cuDevicePrimaryCtxRelease(d0);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------ without a GPU: a mock driver */

/* tests/cuda_mock/libcuda_mock.c's counters (the same struct). */
typedef struct mock_stats {
    long long violations;
    char last_violation[512];
    long long launches, captured, smem_optins, param_checks, syncs, alloc_calls;
    int allocs_live, modules_live, events_live, streams_live, graphs_live;
    int primary_refs;
    int max_ctx_depth;
} mock_stats;

/* The child half of cuda_mock_driver: this process loaded the mock as its libcuda. */
static void mock_driver_child(void) {
    const char *lib = getenv("CHUNKGEN_LIBCUDA");
    const cg_cu_api *cu = cg__cu_api(NULL); /* loads it */
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    CG_CHECK(cu != NULL, "the mock driver loads as libcuda");
    void *fp = h ? dlsym(h, "mock_stats_get") : NULL;
    CG_CHECK(fp != NULL, "mock_stats_get");
    if (!cu || !fp) return;
    const mock_stats *(*stats_get)(void);
    memcpy(&stats_get, &fp, sizeof fp);
    const mock_stats *ms = stats_get();
    const cg_kexec *x = &cg__kexec_cuda;
    char *dir = tmpdir();

    /* A. owns_ptr on a thread with no current context (the mock then refuses the query) */
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, dir));
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 0));
    cg_devinfo dev;
    CG_CHECK_OK(ctx, x->device(ctx, &dev));
    CG_CHECK(dev.arch == 90 && dev.smem_per_block == 232448, "device: sm_%d, %lld", dev.arch,
             (long long)dev.smem_per_block);
    void *p = NULL;
    float host[8];
    CG_CHECK_OK(ctx, x->alloc(ctx, 256, &p));
    CUcontext cur = (CUcontext)1;
    CG_CHECK(cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "calls leave no context current");
    CG_CHECK(x->owns_ptr(ctx, p) == 1, "device pointer, no current context");
    CG_CHECK(x->owns_ptr(ctx, host) == 0, "host pointer, no current context");
    cg_context *ctx2;
    CG_CHECK_OK(NULL, cg_context_create(&ctx2));
    CG_CHECK(x->owns_ptr(ctx2, p) == 1, "device pointer seen from a context that never used the device");
    cg_context_free(ctx2);
    x->free(ctx, p);

    /* B. the caller's side, as PyTorch has it */
    graph_api ga;
    CG_CHECK(graph_api_load(&ga), "graph entry points of the mock");
    CUdevice d0 = 0;
    CUcontext pctx = NULL, popped;
    CG_CHECK(cu->cuDevicePrimaryCtxRetain(&pctx, d0) == CUDA_SUCCESS && cu->cuCtxPushCurrent(pctx) == CUDA_SUCCESS,
             "primary context current");
    CUstream stream = NULL;
    CG_CHECK(ga.stream_create(&stream, 1) == CUDA_SUCCESS, "stream");

    /* C. first use of the four ops on that stream */
    const int64_t B = 2, T = 67, G = 1, H = 2, DK = 40, DV = 48, L = 300, D = 24, N = 16;
    cg_rng rng = {11};
    gtens g[GT_COUNT];
    const int64_t qk[4] = {B, T, G, DK}, vo[4] = {B, T, H, DV}, la[3] = {B, T, H}, st[4] = {B, H, DK, DV};
    const int64_t bld[3] = {B, L, D}, dn[2] = {D, N}, bln[3] = {B, L, N}, dd[1] = {D}, bdn[3] = {B, D, N};
    struct { int id, ndim; const int64_t *shape; int out; } spec[GT_COUNT] = {
        {GT_Q, 4, qk, 0},     {GT_K, 4, qk, 0},      {GT_V, 4, vo, 0},      {GT_LA, 3, la, 0},
        {GT_H0, 4, st, 0},    {GT_O, 4, vo, 1},      {GT_HT, 4, st, 1},     {GT_DOUT, 4, vo, 0},
        {GT_DHT, 4, st, 0},   {GT_DQ, 4, qk, 1},     {GT_DK, 4, qk, 1},     {GT_DV, 4, vo, 1},
        {GT_DLA, 3, la, 1},   {GT_DH0, 4, st, 1},    {ST_X, 3, bld, 0},     {ST_DELTA, 3, bld, 0},
        {ST_A, 2, dn, 0},     {ST_B, 3, bln, 0},     {ST_C, 3, bln, 0},     {ST_D, 1, dd, 0},
        {ST_Z, 3, bld, 0},    {ST_BIAS, 1, dd, 0},   {ST_H0, 3, bdn, 0},    {ST_Y, 3, bld, 1},
        {ST_HT, 3, bdn, 1},   {ST_DY, 3, bld, 0},    {ST_DHT, 3, bdn, 0},   {ST_DX, 3, bld, 1},
        {ST_DDELTA, 3, bld, 1}, {ST_DA, 2, dn, 1},   {ST_DB, 3, bln, 1},    {ST_DC, 3, bln, 1},
        {ST_DD, 1, dd, 1},    {ST_DZ, 3, bld, 1},    {ST_DBIAS, 1, dd, 1},  {ST_DH0, 3, bdn, 1},
    };
    for (int i = 0; i < GT_COUNT; i++)
        gt_new(ctx, &g[spec[i].id], spec[i].ndim, spec[i].shape, &rng, -0.5, -0.1, spec[i].out);
    cg_exec ex = {.backend = CG_BACKEND_CUDA, .stream = stream};
    CG_CHECK_OK(ctx, run_four(ctx, g, &ex));
    long long eager = ms->launches;
    CG_CHECK(eager >= 4 && ms->param_checks > 0, "%lld launches, %lld parameter checks", eager, ms->param_checks);
    CG_CHECK(ms->violations == 0, "first use breaks no driver rule: %s", ms->last_violation);
    /* the same calls again: nothing new is loaded, allocated or synchronized */
    long long allocs0 = ms->alloc_calls, syncs0 = ms->syncs;
    int mods0 = ms->modules_live;
    CG_CHECK_OK(ctx, run_four(ctx, g, &ex));
    CG_CHECK(ms->launches == 2 * eager && ms->alloc_calls == allocs0 && ms->syncs == syncs0 &&
                 ms->modules_live == mods0,
             "repeat: %lld launches, %lld allocations, %lld syncs, %d modules", ms->launches - eager,
             ms->alloc_calls - allocs0, ms->syncs - syncs0, ms->modules_live - mods0);

    /* D. captured: no allocation, copy or synchronization may happen */
    void *graph = NULL, *gexec = NULL;
    CG_CHECK(ga.begin_capture(stream, 0) == CUDA_SUCCESS, "begin capture");
    cg_status cst = run_four(ctx, g, &ex);
    CUresult er = ga.end_capture(stream, &graph);
    CG_CHECK(cst == CG_OK, "the ops under capture: %s", cg_errmsg(ctx));
    CG_CHECK(er == CUDA_SUCCESS && graph, "end capture: %d (%s)", (int)er, ms->last_violation);
    CG_CHECK(ms->captured == eager, "%lld launches captured, %lld expected", ms->captured, eager);
    if (graph) CG_CHECK(ga.instantiate(&gexec, graph, 0) == CUDA_SUCCESS, "instantiate");
    if (gexec) CG_CHECK(ga.graph_launch(gexec, stream) == CUDA_SUCCESS, "graph launch");
    CG_CHECK(ms->launches == 3 * eager, "graph replay launches %lld", ms->launches - 2 * eager);
    if (gexec) ga.exec_destroy(gexec);
    if (graph) ga.graph_destroy(graph);

    /* E. host pointers: staged through device memory, all of it freed again */
    int live0 = ms->allocs_live;
    cg_ssd_fwd_args f = {.layout = CG_LAYOUT_TOKEN_MAJOR};
    cg_tensor *ft[7] = {&f.q, &f.k, &f.v, &f.log_alpha, &f.h0, &f.o, &f.hT};
    const int ids[7] = {GT_Q, GT_K, GT_V, GT_LA, GT_H0, GT_O, GT_HT};
    for (int i = 0; i < 7; i++) {
        *ft[i] = g[ids[i]].t;
        ft[i]->data = g[ids[i]].host;
    }
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &f, &ex));
    CG_CHECK(strstr(cg_last_dispatch(ctx), "staged") != NULL, "staged: %s", cg_last_dispatch(ctx));
    CG_CHECK(ms->allocs_live == live0, "staging frees what it allocates (%d -> %d)", live0, ms->allocs_live);

    /* F. timing and the L2 flush */
    void *token = NULL;
    double msec = 0;
    CG_CHECK_OK(ctx, x->timer_start(ctx, stream, &token));
    CG_CHECK_OK(ctx, x->flush_l2(ctx, stream));
    CG_CHECK_OK(ctx, x->timer_stop(ctx, stream, token, &msec));
    CG_CHECK(msec == 0.5, "elapsed %g ms (the mock says 0.5)", msec);
    CG_CHECK(ms->violations == 0, "no driver rule broken: %s", ms->last_violation);

    /* F2. cg_prepare instead of a first use: a fresh context's very first calls capture
     * (nothing compiles, loads, allocates or synchronizes under capture); a context not
     * prepared refuses under capture with a status that says so, and the capture holds. */
    for (int prepared = 1; prepared >= 0; prepared--) {
        cg_context *pc;
        CG_CHECK_OK(NULL, cg_context_create(&pc));
        CG_CHECK_OK(pc, cg_context_set_cache_dir(pc, dir));
        CG_CHECK_OK(pc, cg_context_set_tune_on_miss(pc, 0));
        if (prepared) CG_CHECK_OK(pc, prepare_four(pc, g, &ex));
        const long long cap0 = ms->captured, viol0 = ms->violations;
        void *pgraph = NULL;
        CG_CHECK(ga.begin_capture(stream, 0) == CUDA_SUCCESS, "begin capture (prepared %d)", prepared);
        cg_status pst = run_four(pc, g, &ex);
        CUresult per = ga.end_capture(stream, &pgraph);
        if (prepared) {
            CG_CHECK(pst == CG_OK, "prepared, captured: %s: %s", cg_status_str(pst), cg_errmsg(pc));
            CG_CHECK(ms->captured - cap0 == eager, "%lld launches captured, %lld expected", ms->captured - cap0, eager);
        } else {
            CG_CHECK(pst == CG_EUNSUPPORTED && strstr(cg_errmsg(pc), "cg_prepare"), "not prepared, captured: %s: %s",
                     cg_status_str(pst), cg_errmsg(pc));
        }
        CG_CHECK(per == CUDA_SUCCESS && ms->violations == viol0, "the capture holds (prepared %d): %d, %s", prepared,
                 (int)per, ms->last_violation);
        if (pgraph) ga.graph_destroy(pgraph);
        cg_context_free(pc);
    }

    /* G. teardown: everything the context made is gone, the caller's context stays */
    for (int i = 0; i < GT_COUNT; i++) gt_free(ctx, &g[i]);
    cg_context_free(ctx);
    CG_CHECK(ms->modules_live == 0 && ms->events_live == 0 && ms->allocs_live == 0,
             "after cg_context_free: %d modules, %d events, %d allocations live", ms->modules_live, ms->events_live,
             ms->allocs_live);
    CG_CHECK(ms->primary_refs == 1, "the primary context is retained by the caller only (%d)", ms->primary_refs);
    ga.stream_destroy(stream);
    cu->cuCtxPopCurrent(&popped);
    cu->cuDevicePrimaryCtxRelease(d0);
    CG_CHECK(ms->violations == 0 && ms->max_ctx_depth <= 2, "%lld violations (%s), context depth %d",
             ms->violations, ms->last_violation, ms->max_ctx_depth);
    fprintf(stderr, "  mock driver: %lld launches per pass, %lld shared-memory opt-ins, %lld syncs\n", eager,
            ms->smem_optins, ms->syncs);
    rm_rf(dir);
    free(dir);
}

/* The whole host side of the cuda executor against tests/cuda_mock/libcuda_mock.c, a
 * driver that runs no kernel but refuses what the real one refuses (no context,
 * shared memory not opted into, allocation or synchronization while capturing,
 * copies out of bounds, leaks at teardown). Runs in a fresh process (the driver is
 * loaded once per process), this binary again with CHUNKGEN_LIBCUDA set. */
CG_TEST(cuda_mock_driver) {
    if (getenv("CG_MOCK_CHILD")) {
        mock_driver_child();
        return;
    }
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded (the mock loads real CUBINs)");
        return;
    }
    if (system("command -v cc >/dev/null 2>&1") != 0) {
        cg_test_skip("no C compiler (cc) to build the mock driver");
        return;
    }
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    char so[600], cmd[2000];
    snprintf(so, sizeof so, "%s/libcuda_mock.so", dir);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror -shared -fPIC -o '%s' '%s' -lpthread", so,
             CG_SOURCE_DIR "/tests/cuda_mock/libcuda_mock.c");
    int rc = system(cmd);
    CG_CHECK(rc == 0, "building the mock driver: %s", cmd);
    /* the child's environment, made before fork (only exec is safe after it here) */
    extern char **environ;
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    char **envp = calloc(nenv + 3, sizeof *envp);
    char libvar[700];
    snprintf(libvar, sizeof libvar, "CHUNKGEN_LIBCUDA=%s", so);
    size_t k = 0;
    for (size_t i = 0; envp && i < nenv; i++)
        if (strncmp(environ[i], "CHUNKGEN_LIBCUDA=", 17) && strncmp(environ[i], "CG_MOCK_CHILD=", 14))
            envp[k++] = environ[i];
    if (envp) {
        envp[k++] = libvar;
        envp[k++] = (char *)"CG_MOCK_CHILD=1";
    }
    CG_CHECK(envp != NULL, "out of memory");
    if (rc == 0 && envp) {
        fflush(NULL);
        char *const argv[] = {(char *)"cg_tests", (char *)"cuda_mock_driver", NULL};
        pid_t pid = fork();
        if (pid == 0) {
            execve("/proc/self/exe", argv, envp);
            _exit(127);
        }
        int status = 0;
        CG_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
        CG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the mock-driver run failed (status %d; see above)",
                 status);
    }
    free(envp);
    rm_rf(dir);
    free(dir);
}
