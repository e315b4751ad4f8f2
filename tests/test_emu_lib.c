/* test_emu_lib.c -- helpers of the emulator's tests (test_emu*.c): a context whose
 * emulator compiles, a module from tests/emu_kernels/, a launch. */
#include "cg_test.h"
#include "gen.h"
#include "emu/emu.h"
#include "test_emu_lib.h"

char *emu_slurp(const char *rel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", CG_SOURCE_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* A context whose emulator can compile (skips the test when there is no compiler). */
cg_context *emu_ctx(void) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) return NULL;
    cg_context_set_threads(ctx, 2);
    cg_devinfo dev;
    cg_status st = cg__kexec_emu.device(ctx, &dev);
    if (st == CG_EUNSUPPORTED) {
        cg_test_skip("no host C++ compiler for the emulator");
        cg_context_free(ctx);
        return NULL;
    }
    CG_CHECK(st == CG_OK && dev.emulated == 1 && dev.arch == 80, "device: %s", cg_errmsg(ctx));
    return ctx;
}

void emu_with_module(const char *file, const char *const *entries, int n, void (*body)(cg_context *ctx, void *mod)) {
    cg_context *ctx = emu_ctx();
    if (!ctx) return;
    void *mod = emu_module(ctx, file, entries, n);
    if (mod) body(ctx, mod);
    cg_context_free(ctx);
}

/* Load tests/emu_kernels/<file> (after cg_device.cuh) with the given entries. */
void *emu_module(cg_context *ctx, const char *file, const char *const *entries, int n) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/emu_kernels/%s", file);
    char *dev = emu_slurp("templates/cg_device.cuh"), *k = emu_slurp(rel);
    CG_CHECK(dev && k, "cannot read %s or templates/cg_device.cuh", rel);
    if (!dev || !k) { free(dev); free(k); return NULL; }
    cg_plan plan;
    memset(&plan, 0, sizeof plan);
    snprintf(plan.kernel, sizeof plan.kernel, "emu_test");
    snprintf(plan.name, sizeof plan.name, "emu_test_%.*s", (int)strcspn(file, "."), file);
    /* a kernel that starts with #include "cg_device.cuh" gets it inlined there, marked as
     * generator/core.lua marks includes (so statistics name the kernel file's lines) */
    static const char inc[] = "#include \"cg_device.cuh\"\n";
    const int marked = strncmp(k, inc, sizeof inc - 1) == 0;
    const char *kb = marked ? k + sizeof inc - 1 : k;
    size_t ld = strlen(dev), lk = strlen(kb);
    plan.source = malloc(ld + lk + 64);
    snprintf(plan.source, ld + lk + 64, "%s%s%s%s%s", marked ? "// ---- begin cg_device.cuh\n" : "", dev,
             ld && dev[ld - 1] == '\n' ? "" : "\n", marked ? "// ---- end cg_device.cuh\n" : "\n", kb);
    plan.nlaunch = n;
    for (int i = 0; i < n; i++) snprintf(plan.launch[i].entry, sizeof plan.launch[i].entry, "%s", entries[i]);
    void *mod = NULL;
    cg_status st = cg__kexec_emu.load(ctx, &plan, &mod);
    CG_CHECK(st == CG_OK && mod, "load %s: %s: %s", file, cg_status_str(st), cg_errmsg(ctx));
    free(plan.source);
    free(dev);
    free(k);
    return st == CG_OK ? mod : NULL;
}

cg_status emu_launch(cg_context *ctx, void *mod, const char *entry, const unsigned grid[3],
                            const unsigned block[3], int64_t smem, const void *params, size_t psize) {
    cg_launch l;
    memset(&l, 0, sizeof l);
    snprintf(l.entry, sizeof l.entry, "%s", entry);
    for (int k = 0; k < 3; k++) {
        l.grid[k] = grid[k];
        l.block[k] = block[k];
    }
    l.smem = smem;
    return cg__kexec_emu.launch(ctx, mod, &l, params, psize, NULL);
}

