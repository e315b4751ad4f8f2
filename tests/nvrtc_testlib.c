/* nvrtc_testlib.c -- see nvrtc_testlib.h. No tests here. */
#include "nvrtc_testlib.h"

#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"
#include "ops.h"
#include "ptxas_log.h"
#include "sweep_sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nospill(cg_context *ctx, const char *kdir, const char *nvrtc_id, int arch, const cg_plan *p, int *maxreg) {
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

int cg_test_nvrtc_begin(cg_test_nvrtc *n, int arch) {
    memset(n, 0, sizeof *n);
    n->arch = arch;
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return 0;
    }
    CG_CHECK_OK(n->ctx, cg_context_create(&n->ctx));
    if (!n->ctx) return 0;
    if (!cg__devinfo_arch(arch, &n->dev)) {
        CG_CHECK(0, "arch %d", arch);
        cg_context_free(n->ctx);
        return 0;
    }
    const char *kc = getenv("CHUNKGEN_TEST_KCACHE");
    n->kdir = kc && *kc ? kc : NULL;
    if (n->kdir) CG_CHECK_OK(n->ctx, cg__nvrtc_id(n->ctx, n->nvrtc_id, sizeof n->nvrtc_id));
    n->t0 = (double)cg__jit_now_ns() / 1e9;
    return 1;
}

void cg_test_shape_half(cg_shape *s, cg_dtype dt, const char *names) {
    const cg_op_desc *d = cg__op_desc(s->op);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", names);
    s->dtype = dt;
    for (char *save, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        int found = 0;
        for (int i = 0; i < d->nt; i++)
            if (!strcmp(d->t[i].name, w)) {
                s->half |= (uint64_t)1 << i;
                if (d->t[i].optional) s->given |= (uint64_t)1 << i;
                found = 1;
            }
        CG_CHECK(found, "%s has no tensor %s", d->name, w);
    }
}


int cg_test_nvrtc_plan(cg_test_nvrtc *n, const char *kernel, const cg_shape *s, int flags, const cg_cfg *cfg,
                       cg_plan *p) {
    cg_status st = cg__gen_plan(n->ctx, kernel, s, flags, &n->dev, cfg, p);
    CG_CHECK(st == CG_OK, "%s: %s", kernel, cg_errmsg(n->ctx));
    return st == CG_OK;
}

void cg_test_nvrtc_nospill(cg_test_nvrtc *n, cg_plan *p) {
    n->ncomp += nospill(n->ctx, n->kdir, n->nvrtc_id, n->arch, p, &n->maxreg);
    cg__plan_free(p);
}

void cg_test_nvrtc_sample(cg_test_nvrtc *n, const char *kernel, const cg_shape *s, int flags,
                          void (*dtypes)(cg_shape *s, void *arg), void *arg, const char *const *defines) {
    cg_cfg *space = NULL;
    int nc = 0;
    CG_CHECK_OK(n->ctx, cg__gen_space(n->ctx, kernel, s, flags, &n->dev, &space, &nc));
    CG_CHECK(nc > 0, "%s: no config", kernel);
    cg_sweep_sel sel;
    cg_sweep_select_array(space, nc, CG_SWEEP_VALUES, &sel);
    for (int q = 0; q < nc; q++) {
        if (!cg_sweep_keeps(&sel, q)) continue;
        cg_shape ps = *s;
        if (dtypes) dtypes(&ps, arg);
        cg_plan p;
        if (!cg_test_nvrtc_plan(n, kernel, &ps, flags, &space[q], &p)) continue;
        for (const char *const *d = defines; *d; d++) CG_CHECK(strstr(p.source, *d) != NULL, "%s: no %s", p.name, *d);
        cg_test_nvrtc_nospill(n, &p);
    }
    cg_sweep_sel_free(&sel);
    free(space);
}

void cg_test_nvrtc_end(cg_test_nvrtc *n, const char *what, const char *note) {
    fprintf(stderr, "  sm_%d: %d %s kernels compiled (%s%s%.0f s), max %d registers\n", n->arch, n->ncomp, what, note,
            *note ? "; " : "", (double)cg__jit_now_ns() / 1e9 - n->t0, n->maxreg);
    cg_context_free(n->ctx);
}
