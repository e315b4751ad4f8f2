/* test_kernels_plan.c -- the public "kernels: plans, configs, ahead of time" calls of
 * include/chunkgen.h on a cg_shape: cg_kernel_plan_make (against the generator's own
 * plan), cg_kernel_config, cg_kernel_configs, cg_kernel_build (keyed as the cuda backend
 * looks a kernel up), each bad input's message naming the argument. */
#include "cg_test.h"
#include "cli_testlib.h"
#include "cuda/cg_cuda.h"
#include "gen.h"

#include <stdlib.h>
#include <string.h>

#define SSD "ssd_fwd:B=1,T=100,G=1,H=2,dk=48,dv=40"

static cg_context *with_shape(const char *text, cg_shape *s) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    *s = (cg_shape){.size = sizeof *s};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, text, s));
    return ctx;
}

CG_TEST(kernels_plan_make) {
    cg_shape s;
    cg_context *ctx = with_shape(SSD, &s);
    cg_kernel_plan p = CG_KERNEL_PLAN_INIT, q = CG_KERNEL_PLAN_INIT;
    CG_CHECK_OK(ctx, cg_kernel_plan_make(ctx, "ssd_fwd", &s, 90, NULL, &p));
    CG_CHECK(!strcmp(p.kernel, "ssd_fwd") && strstr(p.name, "dk48_dv40") && p.source && strstr(p.source, "__global__") &&
                 p.nlaunch >= 1 && p.config[0],
             "plan %s (%s), %d launches", p.name, p.config, p.nlaunch);
    /* the generator's own plan of the same shape and device: the same facts */
    cg_shape ks = {.size = sizeof ks};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "ssd_fwd:B=1,T=100,G=1,H=2,dk=48,dv=40", &ks));
    cg_devinfo dev;
    CG_CHECK(cg__devinfo_arch(90, &dev), "sm_90 known");
    cg_plan g;
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_fwd", &ks, 0, &dev, NULL, &g));
    char cfg[1024];
    cg__cfg_text(&g.params, cfg, sizeof cfg);
    CG_CHECK(!strcmp(g.name, p.name) && !strcmp(g.source, p.source) && !strcmp(cfg, p.config) &&
                 g.nlaunch == p.nlaunch && g.workspace_bytes == p.workspace_bytes,
             "public plan %s (%s) vs the generator's %s (%s)", p.name, p.config, g.name, cfg);
    for (int l = 0; l < g.nlaunch && l < p.nlaunch; l++)
        CG_CHECK(!strcmp(g.launch[l].entry, p.launch[l].entry) && g.launch[l].grid[0] == p.launch[l].grid[0] &&
                     g.launch[l].block[0] == p.launch[l].block[0] && g.launch[l].smem == p.launch[l].smem,
                 "launch %d differs", l);
    cg__plan_free(&g);
    /* kernel NULL: the shape's op's; a pin is kept, the rest completed */
    CG_CHECK_OK(ctx, cg_kernel_plan_make(ctx, NULL, &s, 90, "chunk=32", &q));
    CG_CHECK(!strcmp(q.kernel, "ssd_fwd") && strstr(q.config, "chunk=32"), "pinned: %s", q.config);
    cg_kernel_plan_free(&q);
    cg_kernel_plan_free(&p);
    CG_CHECK(p.source == NULL, "freed source reset");
    cg_kernel_plan_free(NULL);
    /* bad input: named */
    cg_kernel_plan b = CG_KERNEL_PLAN_INIT;
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, "sscan_fwd", &s, 90, NULL, &b), CG_EINVAL, "kernel", "other op's kernel");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, "nope", &s, 90, NULL, &b), CG_ENOTFOUND, "kernel", "unknown kernel");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, NULL, &s, 77, NULL, &b), CG_EINVAL, "arch", "unknown arch");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, NULL, &s, 90, "chunk", &b), CG_EINVAL, "config", "config not k=v");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, NULL, &s, 90, "chunk=7", &b), CG_EINVAL, "chunk",
                     "a value outside the space");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, "ssd_cpu", &s, 90, NULL, &b), CG_EUNSUPPORTED, "CPU space",
                     "a CPU space");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, NULL, NULL, 90, NULL, &b), CG_EINVAL, "shape", "NULL shape");
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, NULL, &s, 90, NULL, NULL), CG_EINVAL, "out", "NULL out");
    cg_shape z = s;
    z.dim[CG_SYM_DK] = 0;
    CG_CHECK_REFUSED(ctx, cg_kernel_plan_make(ctx, NULL, &z, 90, NULL, &b), CG_EINVAL, "shape", "a shape without dk");
    CG_CHECK(b.source == NULL, "no source after refusals");
    cg_context_free(ctx);
}

CG_TEST(kernels_plan_configs) {
    cg_shape s;
    cg_context *ctx = with_shape(SSD, &s);
    char *def = NULL, *all = NULL, *pinned = NULL;
    int n = 0;
    CG_CHECK_OK(ctx, cg_kernel_config(ctx, NULL, &s, 0, NULL, &def));
    CG_CHECK_OK(ctx, cg_kernel_configs(ctx, NULL, &s, 0, &all, &n));
    int lines = 0, has_def = 0;
    for (char *save, *l = all ? strtok_r(all, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        lines++;
        has_def |= def && !strcmp(l, def);
        if (lines % 17 == 1) { /* a sample: each valid config resolves to itself */
            CG_CHECK_OK(ctx, cg_kernel_config(ctx, NULL, &s, 0, l, &pinned));
            CG_CHECK(pinned && !strcmp(pinned, l), "%s resolved to %s", l, pinned ? pinned : "(null)");
            cg_free(pinned);
        }
    }
    CG_CHECK(n > 1 && lines == n && has_def, "%d configs, %d lines, the default %s among them: %d", n, lines,
             def ? def : "(null)", has_def);
    cg_free(all);
    cg_free(def);
    /* a CPU space: resolved for this machine; its shape is either direction */
    cg_shape b = {.size = sizeof b};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "ssd_bwd:B=2,T=1000,G=1,H=4,dk=48,dv=40", &b));
    CG_CHECK_OK(ctx, cg_kernel_config(ctx, "ssd_cpu", &b, 0, "chunk=32", &def));
    CG_CHECK(def && strstr(def, "chunk=32") && strstr(def, "block_dv="), "ssd_cpu: %s", def ? def : "(null)");
    cg_free(def);
    /* bad input: named */
    CG_CHECK_REFUSED(ctx, cg_kernel_config(ctx, NULL, &s, 0, NULL, NULL), CG_EINVAL, "out", "NULL out");
    CG_CHECK_REFUSED(ctx, cg_kernel_config(ctx, "sscan_cpu", &s, 0, NULL, &def), CG_EINVAL, "kernel",
                     "a CPU space of another op");
    CG_CHECK_REFUSED(ctx, cg_kernel_configs(ctx, NULL, &s, 0, NULL, &n), CG_EINVAL, "configs", "NULL configs");
    CG_CHECK_REFUSED(ctx, cg_kernel_configs(ctx, NULL, &s, 0, &all, NULL), CG_EINVAL, "n is NULL", "NULL n");
    CG_CHECK_REFUSED(ctx, cg_kernel_configs(ctx, NULL, &s, 31, &all, &n), CG_EINVAL, "arch", "unknown arch");
    cg_context_free(ctx);
}

CG_TEST(kernels_plan_build) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    char root[4096];
    if (mk_tmpdir(root, sizeof root)) return;
    cg_shape s;
    cg_context *ctx = with_shape("ssd_fwd:B=1,T=64,G=1,H=1,dk=16,dv=16", &s);
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, root));
    cg_kernel_build_info a = CG_KERNEL_BUILD_INFO_INIT, b = CG_KERNEL_BUILD_INFO_INIT;
    CG_CHECK_OK(ctx, cg_kernel_build(ctx, NULL, &s, 90, NULL, 0, 2, &a));
    CG_CHECK(!a.cached && a.compile_ms > 0 && a.log && a.source_lines > 10 && a.arch == 90 && strstr(a.name, "dk16"),
             "built %s: cached %d, %.1f ms, %d lines", a.name, a.cached, a.compile_ms, a.source_lines);
    CG_CHECK_OK(ctx, cg_kernel_build(ctx, NULL, &s, 90, NULL, 0, 2, &b));
    CG_CHECK(b.cached && b.compile_ms == 0 && !strcmp(a.name, b.name), "the second time: cached %d", b.cached);
    cg_free(b.log);
    b = (cg_kernel_build_info)CG_KERNEL_BUILD_INFO_INIT;
    CG_CHECK_OK(ctx, cg_kernel_build(ctx, NULL, &s, 90, NULL, 1, 2, &b));
    CG_CHECK(!b.cached, "force compiles again");
    cg_free(b.log);
    /* the entry is where the cuda backend looks: its key from the same plan */
    char id[1024], dir[4200], *key = NULL;
    cg_kernel_plan p = CG_KERNEL_PLAN_INIT;
    CG_CHECK_OK(ctx, cg_kernel_plan_make(ctx, NULL, &s, 90, NULL, &p));
    CG_CHECK_OK(ctx, cg__nvrtc_id(ctx, id, sizeof id));
    CG_CHECK_OK(ctx, cg__cubin_key(ctx, id, 90, p.name, p.source, &key));
    CG_CHECK_OK(ctx, cg_kcache_dir(ctx, dir, sizeof dir));
    void *bin = NULL;
    size_t len = 0;
    CG_CHECK(key && cg__kcache_get(dir, p.name, key, &bin, &len, NULL) == CG_OK && len > 0,
             "the executor's key finds the built kernel");
    free(bin);
    free(key);
    cg_kernel_plan_free(&p);
    cg_kcache_entry e = CG_KCACHE_ENTRY_INIT;
    int n = 0;
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, NULL, &e, 1, &n));
    CG_CHECK(n == 1 && e.arch == 90 && !strcmp(e.name, a.name), "the cache lists %d: %s sm_%d", n, e.name, e.arch);
    cg_free(a.log);
    /* bad input: named */
    CG_CHECK_REFUSED(ctx, cg_kernel_build(ctx, NULL, &s, 0, NULL, 0, 2, &a), CG_EINVAL, "arch", "arch 0");
    CG_CHECK_REFUSED(ctx, cg_kernel_build(ctx, "ssd_cpu", &s, 90, NULL, 0, 2, &a), CG_EUNSUPPORTED, "CPU space",
                     "a CPU space");
    CG_CHECK_REFUSED(ctx, cg_kernel_build(ctx, NULL, &s, 90, NULL, 0, 2, NULL), CG_EINVAL, "out", "NULL out");
    CG_CHECK_REFUSED(ctx, cg_kernel_build(ctx, NULL, &s, 90, "warps=3", 0, 2, &a), CG_EINVAL, "warps",
                     "a value outside the space");
    cg_context_free(ctx);
    rm_tree(root);
}
