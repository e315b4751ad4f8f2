/* test_cuda.c -- NVRTC, the driver loader (without a driver here) and the on-disk
 * kernel cache: corrupt entries, read-only directories, 8 processes at once. The GPU
 * test runs only where a device is present. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"
#include "gen.h"
#include "ssd_chunk_state_params.h"

#include <dirent.h>
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

/* ------------------------------------------------------------------ cache */

static char *tmpdir(void) {
    char *d = strdup("/tmp/cg_kcacheXXXXXX");
    if (!mkdtemp(d)) {
        free(d);
        return NULL;
    }
    return d;
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
        int w0 = cg__kcache_warnings();
        CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_ENOTFOUND, "kind %d: a miss", kind);
        CG_CHECK(cg__kcache_warnings() == w0 + 1, "kind %d: exactly one warning", kind);
        /* rebuilt: the next put replaces it and reads back good */
        CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", key, payload, sizeof payload, "log"));
        CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_OK && len == sizeof payload &&
                     !memcmp(got, payload, len),
                 "kind %d: rebuilt entry reads back", kind);
        CG_CHECK(cg__kcache_warnings() == w0 + 1, "kind %d: no warning for a good entry", kind);
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
    int w = cg__kcache_warnings();
    CG_CHECK(cg__kcache_put(below, "x", "k", "abc", 3, NULL) == CG_EIO, "again EIO");
    CG_CHECK(cg__kcache_warnings() == w, "the unwritable-directory warning is printed once");
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

/* ------------------------------------------------------------ on a GPU */

CG_TEST(cuda_gpu_ssd_chunk_state) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    if (cg__kexec_cuda.device(ctx, &dev) != CG_OK) {
        static char why[600];
        snprintf(why, sizeof why, "no GPU: %s", cg_errmsg(ctx));
        cg_test_skip(why);
        cg_context_free(ctx);
        return;
    }
    char *dir = tmpdir();
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, dir));
    const int64_t B = 2, T = 193, G = 2, H = 4, dk = 48, dv = 40;
    cg_kshape s = {.B = B, .T = T, .G = G, .H = H, .dk = dk, .dv = dv};
    cg_cfg *cfgs;
    int ncfg;
    CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_chunk_state", &s, &dev, &cfgs, &ncfg));
    cg_rng rng = {42};
    size_t nk = (size_t)(B * T * G * dk), nv = (size_t)(B * T * H * dv), nl = (size_t)(B * T * H);
    float *k = malloc(nk * 4), *v = malloc(nv * 4), *la = malloc(nl * 4);
    for (size_t i = 0; i < nk; i++) k[i] = (float)cg_rng_uniform(&rng, -1, 1);
    for (size_t i = 0; i < nv; i++) v[i] = (float)cg_rng_uniform(&rng, -1, 1);
    for (size_t i = 0; i < nl; i++) la[i] = (float)cg_rng_uniform(&rng, -1, 0);
    const cg_kexec *x = &cg__kexec_cuda;
    void *dk_, *dv_, *dla, *dU, *dg;
    CG_CHECK_OK(ctx, x->alloc(ctx, nk * 4, &dk_));
    CG_CHECK_OK(ctx, x->alloc(ctx, nv * 4, &dv_));
    CG_CHECK_OK(ctx, x->alloc(ctx, nl * 4, &dla));
    CG_CHECK_OK(ctx, x->copy(ctx, dk_, k, nk * 4, 0, NULL));
    CG_CHECK_OK(ctx, x->copy(ctx, dv_, v, nv * 4, 0, NULL));
    CG_CHECK_OK(ctx, x->copy(ctx, dla, la, nl * 4, 0, NULL));
    CG_CHECK(x->owns_ptr(ctx, dk_) == 1 && x->owns_ptr(ctx, k) == 0, "owns_ptr");
    /* every 5th config, plus the default */
    for (int ci = -1; ci < ncfg; ci += (ci < 0 ? 1 : 5)) {
        cg_plan plan;
        if (cg__gen_plan(ctx, "ssd_chunk_state", &s, &dev, ci < 0 ? NULL : &cfgs[ci], &plan) != CG_OK) {
            CG_CHECK(0, "plan: %s", cg_errmsg(ctx));
            continue;
        }
        int64_t C = atoi(cg__cfg_str(&plan.params, "chunk", "0")), NC = (T + C - 1) / C;
        size_t nu = (size_t)(B * H * NC * dk * dv), ng = (size_t)(B * H * NC);
        CG_CHECK_OK(ctx, x->alloc(ctx, nu * 4, &dU));
        CG_CHECK_OK(ctx, x->alloc(ctx, ng * 4, &dg));
        void *mod = NULL, *mod2 = NULL;
        CG_CHECK_OK(ctx, x->load(ctx, &plan, &mod));
        CG_CHECK_OK(ctx, x->load(ctx, &plan, &mod2));
        CG_CHECK(mod == mod2, "the second load is an in-memory hit");
        cg_ssd_chunk_state_params p = {
            .k = dk_, .v = dv_, .la = dla, .U = dU, .gamma = dg,
            .k_sb = T * G * dk, .k_st = G * dk, .k_sg = dk,
            .v_sb = T * H * dv, .v_st = H * dv, .v_sh = dv,
            .la_sb = T * H, .la_st = H, .la_sh = 1,
            .U_sb = H * NC * dk * dv, .U_sh = NC * dk * dv, .U_sc = dk * dv, .U_si = dv,
            .gamma_sb = H * NC, .gamma_sh = NC,
            .B = B, .T = T, .G = G, .H = H, .dk = dk, .dv = dv, .nchunks = NC};
        for (int l = 0; l < plan.nlaunch; l++) CG_CHECK_OK(ctx, x->launch(ctx, mod, &plan.launch[l], &p, sizeof p, NULL));
        float *U = malloc(nu * 4), *gm = malloc(ng * 4);
        CG_CHECK_OK(ctx, x->copy(ctx, U, dU, nu * 4, 1, NULL));
        CG_CHECK_OK(ctx, x->copy(ctx, gm, dg, ng * 4, 1, NULL));
        CG_CHECK_OK(ctx, x->sync(ctx, NULL));
        double maxerr = 0, maxref = 0, gerr = 0, gref = 0; /* rel err = max|out - ref| / max|ref| */
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t c = 0; c < NC; c++) {
                    int64_t g = h / (H / G), t0 = c * C, len = T - t0 < C ? T - t0 : C;
                    double A[256], acc = 0;
                    for (int64_t j = 0; j < len; j++) A[j] = acc += la[(b * T + t0 + j) * H + h];
                    double ge = exp(A[len - 1]);
                    if (fabs(gm[(b * H + h) * NC + c] - ge) > gerr) gerr = fabs(gm[(b * H + h) * NC + c] - ge);
                    if (ge > gref) gref = ge;
                    for (int64_t i = 0; i < dk; i++)
                        for (int64_t jj = 0; jj < dv; jj++) {
                            double r = 0;
                            for (int64_t j = 0; j < len; j++)
                                r += exp(A[len - 1] - A[j]) * k[((b * T + t0 + j) * G + g) * dk + i] *
                                     v[((b * T + t0 + j) * H + h) * dv + jj];
                            double got = U[(((b * H + h) * NC + c) * dk + i) * dv + jj];
                            if (fabs(got - r) > maxerr) maxerr = fabs(got - r);
                            if (fabs(r) > maxref) maxref = fabs(r);
                        }
                }
        CG_CHECK(maxerr <= 1e-5 * maxref, "%s: U error %.3g (max |ref| %.3g)", plan.name, maxerr, maxref);
        CG_CHECK(gerr <= 1e-5 * gref, "%s: gamma error %.3g (max |ref| %.3g)", plan.name, gerr, gref);
        free(U);
        free(gm);
        x->free(ctx, dU);
        x->free(ctx, dg);
        cg__plan_free(&plan);
    }
    /* a fresh context loads the same kernels from disk: no new entries */
    char kdir[4200];
    snprintf(kdir, sizeof kdir, "%s/kernels", dir);
    int64_t files0, files1, bytes;
    cg__kcache_stat(kdir, &files0, &bytes);
    CG_CHECK(files0 > 0, "entries written to %s", kdir);
    cg_context *ctx2;
    CG_CHECK_OK(NULL, cg_context_create(&ctx2));
    CG_CHECK_OK(ctx2, cg_context_set_cache_dir(ctx2, dir));
    cg_plan plan;
    void *mod;
    CG_CHECK_OK(ctx2, cg__gen_plan(ctx2, "ssd_chunk_state", &s, &dev, NULL, &plan));
    CG_CHECK_OK(ctx2, x->load(ctx2, &plan, &mod));
    cg__kcache_stat(kdir, &files1, &bytes);
    CG_CHECK(files1 == files0, "disk hit: %lld -> %lld entries", (long long)files0, (long long)files1);
    cg__plan_free(&plan);
    cg_context_free(ctx2);
    x->free(ctx, dk_);
    x->free(ctx, dv_);
    x->free(ctx, dla);
    free(k);
    free(v);
    free(la);
    free(cfgs);
    cg_context_free(ctx);
    rm_rf(dir);
    free(dir);
}
