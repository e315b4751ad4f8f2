/* nvrtc_testlib.c -- see nvrtc_testlib.h. No tests here. */
#include "nvrtc_testlib.h"

#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"
#include "ptxas_log.h"

#include <stdlib.h>

int cg_test_nvrtc_nospill(cg_context *ctx, const char *kdir, const char *nvrtc_id, int arch, const cg_plan *p,
                          int *maxreg) {
    void *bin = NULL;
    size_t len = 0;
    char *log = NULL, *key = NULL;
    cg_status st;
    if (kdir && cg__cubin_key(ctx, nvrtc_id, arch, p->name, p->source, &key) == CG_OK &&
        cg__kcache_get(kdir, p->name, key, &bin, &len, &log) == CG_OK) {
        st = CG_OK;
    } else {
        st = cg__nvrtc_compile_threads(ctx, p->name, p->source, arch, 2, &bin, &len, &log);
        if (st == CG_OK && key) (void)cg__kcache_put(kdir, p->name, key, bin, len, log);
    }
    free(key);
    CG_CHECK(st == CG_OK, "sm_%d %s: %s", arch, p->name, cg_errmsg(ctx));
    if (st == CG_OK) {
        cg_ptxas_info info;
        cg__ptxas_parse(log, &info);
        CG_CHECK(info.found && info.spill_stores == 0 && info.spill_loads == 0, "sm_%d %s: spills %lld/%lld bytes",
                 arch, p->name, (long long)info.spill_stores, (long long)info.spill_loads);
        if (info.registers > *maxreg) *maxreg = info.registers;
    }
    free(bin);
    free(log);
    return st == CG_OK;
}

cg_context *cg_test_nvrtc_begin(int arch, cg_devinfo *dev, const char **kdir, char *nvrtc_id, size_t cap) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return NULL;
    }
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (!ctx) return NULL;
    if (!cg__devinfo_arch(arch, dev)) {
        CG_CHECK(0, "arch %d", arch);
        cg_context_free(ctx);
        return NULL;
    }
    const char *kc = getenv("CHUNKGEN_TEST_KCACHE");
    *kdir = kc && *kc ? kc : NULL;
    nvrtc_id[0] = 0;
    if (*kdir) CG_CHECK_OK(ctx, cg__nvrtc_id(ctx, nvrtc_id, cap));
    return ctx;
}
