/* test_gen.c -- the Lua generator: rendering, pins, spaces, errors (every config of
 * every kernel through NVRTC: test_gen_nvrtc.c). */
#include "cg_test.h"
#include "cpu/ssd_cpu.h"
#include "cuda/cg_cuda.h"
#include "ptxas_log.h"
#include "gen.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>


#include "gen_shapes.h"

static const char *param(const cg_cfg *c, const char *key) {
    for (int k = 0; k < c->n; k++)
        if (!strcmp(c->kv[k].key, key)) return c->kv[k].val;
    return NULL;
}

/* ----------------------------------------------------------- rendering */

CG_TEST(gen_kernels_listed) {
    CG_TEST_KERNELS(ctx, names, n);
    int found = 0;
    for (int i = 0; i < n; i++) found |= !strcmp(names[i], "ssd_fwd");
    CG_CHECK(found, "ssd_fwd missing from %d kernels", n);
    CG_CHECK(names[n] == NULL, "list not NULL-terminated");
    for (int i = 0; i < n; i++) {
        char *text = NULL;
        CG_CHECK_OK(ctx, cg__gen_describe(ctx, names[i], &text));
        CG_CHECK(text && strstr(text, names[i]), "describe(%s)", names[i]);
        free(text);
    }
    cg_context_free(ctx);
}

CG_TEST(gen_render_deterministic) {
    cg_context *a, *b;
    CG_CHECK_OK(NULL, cg_context_create(&a));
    CG_CHECK_OK(NULL, cg_context_create(&b));
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_shape s = shape_of(2);
    const int sf = FLAGS_OF(2);
    cg_plan p1, p2, p3;
    /* the three-phase strategy: several launches and a workspace */
    cg_cfg pin = {0};
    pin.n = 3;
    snprintf(pin.kv[0].key, sizeof pin.kv[0].key, "precision"), snprintf(pin.kv[0].val, sizeof pin.kv[0].val, "ieee");
    snprintf(pin.kv[1].key, sizeof pin.kv[1].key, "strategy"), snprintf(pin.kv[1].val, sizeof pin.kv[1].val, "3phase");
    snprintf(pin.kv[2].key, sizeof pin.kv[2].key, "stages"), snprintf(pin.kv[2].val, sizeof pin.kv[2].val, "1");
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s, sf, &dev, &pin, &p1));
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s, sf, &dev, &pin, &p2));
    CG_CHECK_OK(b, cg__gen_plan(b, "ssd_fwd", &s, sf, &dev, &pin, &p3));
    CG_CHECK(p1.source && p2.source && p3.source, "sources");
    if (p1.source && p2.source && p3.source) {
        CG_CHECK(!strcmp(p1.source, p2.source) && !strcmp(p1.source, p3.source), "render differs between calls");
        CG_CHECK(!strcmp(p1.name, p3.name), "names differ");
        /* the header says who made it; shape constants and params are baked in */
        CG_CHECK(strstr(p1.source, "generator/core.lua") && strstr(p1.source, "do not edit"), "header comment");
        CG_CHECK(strstr(p1.source, "#define CG_DK 48\n") && strstr(p1.source, "#define CG_DV 40\n"), "shape defines");
        CG_CHECK(strstr(p1.source, "#define CG_P_PRECISION_IEEE 1\n"), "string param define");
        CG_CHECK(!strstr(p1.source, "#include \""), "project includes must be inlined");
        char want[64];
        snprintf(want, sizeof want, "#define CG_P_CHUNK %s\n", param(&p1.params, "chunk"));
        CG_CHECK(strstr(p1.source, want), "chunk define");
        CG_CHECK(!strncmp(p1.name, "ssd_fwd_dk48_dv40_c", 19), "name %s", p1.name);
        CG_CHECK(strstr(p1.name, "_ieee") != NULL, "name %s", p1.name);
    }
    CG_CHECK(p1.nlaunch == 3 && p1.launch[0].block[0] % 32 == 0 && p1.workspace_bytes > 0, "launch geometry");
    /* T does not change the source (only B, T, G, H validity and the grid) */
    cg_shape s2 = s;
    s2.dim[CG_SYM_T] = 1000;
    cg_plan p4;
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s2, sf, &dev, &p1.params, &p4));
    if (p4.source && p1.source) CG_CHECK(!strcmp(p4.source, p1.source), "source depends on T");
    CG_CHECK(p4.launch[0].grid[0] > p1.launch[0].grid[0], "grid grows with T");
    cg__plan_free(&p1);
    cg__plan_free(&p2);
    cg__plan_free(&p3);
    cg__plan_free(&p4);
    cg_context_free(a);
    cg_context_free(b);
}

/* The embedded copies and the source tree (CHUNKGEN_LUA_PATH) render the same. */
CG_TEST(gen_embedded_matches_source_tree) {
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_shape s = shape_of(3);
    const int sf = FLAGS_OF(3);
    cg_context *a, *b;
    CG_CHECK_OK(NULL, cg_context_create(&a));
    cg_plan p1, p2;
    unsetenv("CHUNKGEN_LUA_PATH");
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s, sf, &dev, NULL, &p1));
    setenv("CHUNKGEN_LUA_PATH", CG_SOURCE_DIR, 1);
    CG_CHECK_OK(NULL, cg_context_create(&b));
    CG_CHECK_OK(b, cg__gen_plan(b, "ssd_fwd", &s, sf, &dev, NULL, &p2));
    unsetenv("CHUNKGEN_LUA_PATH");
    if (p1.source && p2.source)
        CG_CHECK(!strcmp(p1.source, p2.source), "embedded copy is stale: rebuild (or the loader differs)");
    cg__plan_free(&p1);
    cg__plan_free(&p2);
    cg_context_free(a);
    cg_context_free(b);
}

/* ---------------------------------------------------------------- pins */

static cg_cfg pins(const char *text) {
    cg_cfg c = {0};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        snprintf(c.kv[c.n].key, sizeof c.kv[0].key, "%s", tok);
        snprintf(c.kv[c.n].val, sizeof c.kv[0].val, "%s", eq + 1);
        c.n++;
    }
    return c;
}

CG_TEST(gen_pins) {
    CG_TEST_CONTEXT(ctx);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_shape s = shape_of(0); /* dk = dv = 7 */
    const int sf = FLAGS_OF(0);
    cg_plan p;
    cg_cfg c = pins("chunk=64,colour=red");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &s, sf, &dev, &c, &p) == CG_EINVAL, "unknown key");
    CG_CHECK(strstr(cg_errmsg(ctx), "colour"), "message names the key: %s", cg_errmsg(ctx));
    c = pins("chunk=48");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &s, sf, &dev, &c, &p) == CG_EINVAL, "value outside the space");
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk=48") && strstr(cg_errmsg(ctx), "16, 32"), "message: %s", cg_errmsg(ctx));
    c = pins("chunk=64,block_dv=32,warps=4,stages=2,precision=ieee,strategy=seq");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &s, sf, &dev, &c, &p) == CG_EUNSUPPORTED, "invalid config");
    CG_CHECK(strstr(cg_errmsg(ctx), "block_dv=32") && strstr(cg_errmsg(ctx), "dk=7"), "reason: %s", cg_errmsg(ctx));
    c = pins("chunk=64");
    CG_CHECK(cg__gen_plan(ctx, "no_such_kernel", &s, sf, &dev, &c, &p) == CG_ENOTFOUND, "unknown kernel");
    /* shared memory beyond the device: two 128-token stages of q, k, v at dk = dv = 130
     * (about 480 KB) > sm_86's 99 KB */
    cg_devinfo d86;
    CG_CHECK(cg__devinfo_arch(86, &d86), "sm_86 known");
    cg_shape big = shape_of(3);
    const int bigf = FLAGS_OF(3);
    c = pins("chunk=128,block_dv=64,warps=8,stages=2,precision=ieee,strategy=seq");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &big, bigf, &d86, &c, &p) == CG_EUNSUPPORTED, "smem over the limit");
    CG_CHECK(strstr(cg_errmsg(ctx), "shared memory"), "reason: %s", cg_errmsg(ctx));
    /* a partial pin: the rest comes from the default, or the nearest valid config */
    c = pins("warps=2");
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_fwd", &big, bigf, &dev, &c, &p));
    if (p.source) {
        CG_CHECK(!strcmp(param(&p.params, "warps"), "2"), "pin kept");
        CG_CHECK(p.params.n == 6, "every parameter resolved (%d)", p.params.n);
        cg_cfg *cfgs;
        int n;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_fwd", &big, bigf, &dev, &cfgs, &n));
        int in_space = 0;
        char t1[256], t2[256];
        cg__cfg_text(&p.params, t1, sizeof t1);
        for (int i = 0; i < n; i++) {
            cg__cfg_text(&cfgs[i], t2, sizeof t2);
            in_space |= !strcmp(t1, t2);
        }
        CG_CHECK(in_space, "resolved config %s is not in the valid space", t1);
        free(cfgs);
    }
    cg__plan_free(&p);
    cg_context_free(ctx);
}

CG_TEST(gen_space_plans) {
    CG_TEST_KERNELS(ctx, names, nk);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    for (int k = 0; k < nk; k++) {
        for (int si = 0; si < NSHAPES; si++) {
            cg_shape s = shape_of(si);
            const int sf = FLAGS_OF(si);
            cg_cfg *cfgs = NULL;
            int n = 0;
            cg_status st = cg__gen_space(ctx, names[k], &s, sf, &dev, &cfgs, &n);
            CG_CHECK(st == CG_OK, "%s space: %s", names[k], cg_errmsg(ctx));
            if (st == CG_OK) CG_CHECK(n > 0, "%s: no valid config for shape %d", names[k], si);
            if (is_cpu_space(ctx, names[k])) { /* nothing to plan: gen_cpu_spaces covers them */
                free(cfgs);
                continue;
            }
            /* every accepted config plans with exactly its own params; spot-check one in 7 */
            for (int i = si % 7; i < n; i += 7) {
                cg_plan p;
                st = cg__gen_plan(ctx, names[k], &s, sf, &dev, &cfgs[i], &p);
                char t1[256], t2[256];
                cg__cfg_text(&cfgs[i], t1, sizeof t1);
                CG_CHECK(st == CG_OK, "%s %s: %s", names[k], t1, cg_errmsg(ctx));
                if (st != CG_OK) continue;
                cg__cfg_text(&p.params, t2, sizeof t2);
                CG_CHECK(!strcmp(t1, t2), "%s: asked %s got %s", names[k], t1, t2);
                CG_CHECK(p.nlaunch >= 1 && p.nlaunch <= CG_PLAN_MAX_LAUNCH, "launches");
                for (int l = 0; l < p.nlaunch; l++)
                    CG_CHECK(p.launch[l].smem <= dev.smem_per_block && p.launch[l].grid[0] >= 1, "launch %d", l);
                cg__plan_free(&p);
            }
            free(cfgs);
        }
    }
    cg_context_free(ctx);
}

/* ----------------------------------------------------------- CPU spaces */

static int cfg_in(const cg_cfg *c, const cg_cfg *list, int n) {
    char t1[256], t2[256];
    cg__cfg_text(c, t1, sizeof t1);
    for (int i = 0; i < n; i++) {
        cg__cfg_text(&list[i], t2, sizeof t2);
        if (!strcmp(t1, t2)) return 1;
    }
    return 0;
}

/* Configs i and j agree on the keys at positions 0..pos. */
static int same_prefix(const cg_cfg *a, const cg_cfg *b, int pos) {
    for (int q = 0; q <= pos; q++)
        if (strcmp(a->kv[q].val, b->kv[q].val) != 0) return 0;
    return 1;
}

/* The first key of the order outermost: configs that agree on the first pos + 1 keys
 * are contiguous in the list, for every pos; and no config repeats. */
static int enumeration_nested(const cg_cfg *c, int n) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (c[i].n != c[j].n || same_prefix(&c[i], &c[j], c[i].n - 1)) return 0;
            for (int pos = 0; pos < c[i].n; pos++) {
                if (!same_prefix(&c[i], &c[j], pos)) break;
                for (int m = i + 1; m < j; m++)
                    if (!same_prefix(&c[i], &c[m], pos)) return 0;
            }
        }
    return 1;
}

static int distinct_values(const cg_cfg *c, int n, const char *key) {
    int count = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(param(&c[i], key), param(&c[j], key));
        count += !seen;
    }
    return count;
}

/* generator/cpu/ descriptions: listed, described, enumerable and resolvable through the
 * generator core like kernels, but never planned. */
CG_TEST(gen_cpu_spaces) {
    CG_TEST_KERNELS(ctx, names, nk);
    int have_ssd = 0, have_sscan = 0, ncpu = 0;
    for (int k = 0; k < nk; k++) {
        have_ssd |= !strcmp(names[k], "ssd_cpu");
        have_sscan |= !strcmp(names[k], "sscan_cpu");
        if (!is_cpu_space(ctx, names[k])) continue;
        ncpu++;
        char *text = NULL;
        CG_CHECK_OK(ctx, cg__gen_describe(ctx, names[k], &text));
        CG_CHECK(text && strstr(text, names[k]) && strstr(text, "backend cpu"), "describe(%s): %s", names[k],
                 text ? text : "");
        free(text);
    }
    CG_CHECK(have_ssd && have_sscan && ncpu >= 2, "CPU spaces listed (%d of %d names)", ncpu, nk);

    cg_devinfo dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "test cpu");
    dev.sm_count = 8;
    cg_shape ks = {.size = sizeof ks};
    int ksf = 0;
    for (int bwd = 0; bwd < 2; bwd++) {
        CG_CHECK_OK(ctx, cg_shape_parse(ctx, bwd ? "ssd_bwd:B=2,T=100,G=2,H=4,dk=48,dv=40,h0,dhT"
                                                 : "ssd_fwd:B=2,T=100,G=2,H=4,dk=48,dv=40,h0,hT", &ks));
        ksf = bwd ? CG_KS_BWD : 0;
        cg_cfg *cfgs = NULL;
        int n = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_cpu", &ks, ksf, &dev, &cfgs, &n));
        CG_CHECK(n > 4, "ssd_cpu %s: %d configs", bwd ? "bwd" : "fwd", n);
        for (int i = 0; i < n; i++)
            CG_CHECK(cfgs[i].n == 4 && !strcmp(cfgs[i].kv[0].key, "chunk") && !strcmp(cfgs[i].kv[1].key, "block_dv") &&
                         !strcmp(cfgs[i].kv[2].key, "heads") && !strcmp(cfgs[i].kv[3].key, "threads"),
                     "config %d: keys in the space's order", i);
        CG_CHECK(enumeration_nested(cfgs, n), "ssd_cpu: enumeration is nested in order and has no duplicates");
        /* shape.bwd reaches Lua: the backward has no dv tiling, the forward tries several */
        int nbdv = n ? distinct_values(cfgs, n, "block_dv") : 0;
        CG_CHECK(bwd ? nbdv == 1 : nbdv > 1, "%s: %d block_dv values", bwd ? "bwd" : "fwd", nbdv);
        cg_cfg def, got;
        CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "ssd_cpu", &ks, ksf, &dev, NULL, &def));
        CG_CHECK(def.n == 4 && cfg_in(&def, cfgs, n), "default is a config of the space");
        cg_cfg pin = pins("chunk=32");
        CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "ssd_cpu", &ks, ksf, &dev, &pin, &got));
        CG_CHECK(!strcmp(param(&got, "chunk"), "32") && cfg_in(&got, cfgs, n), "partial pin resolved in the space");
        /* every config of the space passes the C path's guard for user pins */
        cg_ssd_prob prob;
        memset(&prob, 0, sizeof prob);
        CG_DIM(&prob, B) = ks.dim[CG_SYM_B], CG_DIM(&prob, T) = ks.dim[CG_SYM_T], CG_DIM(&prob, G) = ks.dim[CG_SYM_G], CG_DIM(&prob, H) = ks.dim[CG_SYM_H];
        CG_DIM(&prob, DK) = ks.dim[CG_SYM_DK], CG_DIM(&prob, DV) = ks.dim[CG_SYM_DV];
        for (int i = 0; i < n; i++) {
            cg_ssd_cpu_run run;
            char t[256];
            cg__cfg_text(&cfgs[i], t, sizeof t);
            CG_CHECK(cg__ssd_cpu_resolve(ctx, &prob, &cfgs[i], bwd, "test", &run) == CG_OK, "C guard refuses %s: %s", t,
                     cg_errmsg(ctx));
        }
        free(cfgs);
    }
    cg_cfg got, pin = pins("chunk=17");
    CG_CHECK(cg__gen_resolve(ctx, "ssd_cpu", &ks, ksf, &dev, &pin, &got) == CG_EINVAL, "value outside the space");
    pin = pins("colour=red");
    CG_CHECK(cg__gen_resolve(ctx, "ssd_cpu", &ks, ksf, &dev, &pin, &got) == CG_EINVAL && strstr(cg_errmsg(ctx), "colour"),
             "unknown key: %s", cg_errmsg(ctx));
    cg_shape shortT = ks;
    shortT.dim[CG_SYM_T] = 5;
    pin = pins("chunk=128");
    CG_CHECK(cg__gen_resolve(ctx, "ssd_cpu", &shortT, ksf, &dev, &pin, &got) == CG_EUNSUPPORTED &&
                 strstr(cg_errmsg(ctx), "T = 5"),
             "invalid pin: valid()'s reason: %s", cg_errmsg(ctx));
    cg_plan plan;
    CG_CHECK(cg__gen_plan(ctx, "ssd_cpu", &ks, ksf, &dev, NULL, &plan) == CG_EUNSUPPORTED &&
                 strstr(cg_errmsg(ctx), "CPU"),
             "a CPU space does not plan: %s", cg_errmsg(ctx));
    CG_CHECK(cg__gen_resolve(ctx, "no_such_space", &ks, ksf, &dev, NULL, &got) == CG_ENOTFOUND, "unknown name");

    /* selective scan: segment only varies in the backward */
    cg_shape ss = {.size = sizeof ss};
    CG_CHECK_OK(ctx, cg_shape_parse(ctx, "sscan_fwd:B=1,L=300,D=96,N=16", &ss));
    for (int bwd = 0; bwd < 2; bwd++) {
        const int ssf = bwd ? CG_KS_BWD : 0;
        cg_cfg *cfgs = NULL;
        int n = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "sscan_cpu", &ss, ssf, &dev, &cfgs, &n));
        CG_CHECK(n > 2 && enumeration_nested(cfgs, n), "sscan_cpu: %d configs, nested enumeration", n);
        int nseg = n ? distinct_values(cfgs, n, "segment") : 0;
        CG_CHECK(bwd ? nseg > 1 : nseg == 1, "%s: %d segment values", bwd ? "bwd" : "fwd", nseg);
        free(cfgs);
    }

    /* The default of every CPU space is a valid config for every shape, direction and
     * thread count (an unpinned resolve never fails where the space is not empty). */
    static const int threads[] = {1, 3, 8, 108};
    for (int k = 0; k < nk; k++) {
        if (!is_cpu_space(ctx, names[k])) continue;
        for (int si = 0; si < NSHAPES; si++)
            for (int bwd = 0; bwd < 2; bwd++)
                for (int ti = 0; ti < 4; ti++) {
                    cg_shape s = shape_of(si);
                    const int sf = FLAGS_OF(si) | (bwd ? CG_KS_BWD : 0);
                    dev.sm_count = threads[ti];
                    cg_cfg *cfgs = NULL, def;
                    int n = 0;
                    CG_CHECK_OK(ctx, cg__gen_space(ctx, names[k], &s, sf, &dev, &cfgs, &n));
                    cg_status st = cg__gen_resolve(ctx, names[k], &s, sf, &dev, NULL, &def);
                    CG_CHECK(st == CG_OK && cfg_in(&def, cfgs, n), "%s shape %d bwd %d threads %d: default: %s",
                             names[k], si, bwd, threads[ti], st == CG_OK ? "not in the space" : cg_errmsg(ctx));
                    free(cfgs);
                }
    }
    cg_context_free(ctx);
}

/* ------------------------------------------------------- Lua errors */

static int run(const char *cmd) { return system(cmd); }

CG_TEST(gen_lua_error_traceback) {
    char dir[] = "/tmp/cg_gen_luaXXXXXX";
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char cmd[1024], path[512];
    snprintf(cmd, sizeof cmd, "cp -r '%s/generator' '%s/templates' '%s/'", CG_SOURCE_DIR, CG_SOURCE_DIR, dir);
    CG_CHECK(run(cmd) == 0, "copy the generator");
    /* a kernel whose valid() fails at run time */
    snprintf(path, sizeof path, "%s/generator/kernels/zz_broken.lua", dir);
    FILE *f = fopen(path, "w");
    CG_CHECK(f != NULL, "write %s", path);
    if (f) {
        fputs("local function check(p) local t = nil; return t.field end\n"
              "return { name = 'zz_broken', op = 'x', template = 'ssd_fwd.cu',\n"
              "  space = { chunk = {16} }, order = {'chunk'},\n"
              "  valid = function(p, s, d) return check(p) end,\n"
              "  default = function() return { chunk = 16 } end,\n"
              "  launch = function() return {} end }\n",
              f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/generator/kernels/zz_syntax.lua", dir);
    f = fopen(path, "w");
    if (f) {
        fputs("return { name = 'zz_syntax',\n  space = { chunk = {16} \n", f); /* unclosed */
        fclose(f);
    }
    setenv("CHUNKGEN_LUA_PATH", dir, 1);
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_shape s = shape_of(1);
    const int sf = FLAGS_OF(1);
    cg_plan p;
    cg_status st = cg__gen_plan(ctx, "zz_broken", &s, sf, &dev, NULL, &p);
    CG_CHECK(st == CG_ELUA, "runtime error -> ELUA, got %s", cg_status_str(st));
    const char *m = cg_errmsg(ctx);
    CG_CHECK(strstr(m, "zz_broken.lua:1:") && strstr(m, "stack traceback") && strstr(m, "attempt to index"),
             "message with position and traceback: %s", m);
    st = cg__gen_plan(ctx, "zz_syntax", &s, sf, &dev, NULL, &p);
    CG_CHECK(st == CG_ELUA, "syntax error -> ELUA, got %s", cg_status_str(st));
    CG_CHECK(strstr(cg_errmsg(ctx), "zz_syntax.lua"), "names the file: %s", cg_errmsg(ctx));
    /* the context still works after Lua errors */
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_fwd", &s, sf, &dev, NULL, &p));
    cg__plan_free(&p);
    cg_context_free(ctx);

    /* a broken core.lua: the state cannot be created, ELUA names it */
    snprintf(cmd, sizeof cmd, "sed -i '1i error([[core is broken on purpose]])' '%s/generator/core.lua'", dir);
    CG_CHECK(run(cmd) == 0, "break core.lua");
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    st = cg__gen_plan(ctx, "ssd_fwd", &s, sf, &dev, NULL, &p);
    CG_CHECK(st == CG_ELUA && strstr(cg_errmsg(ctx), "broken on purpose") && strstr(cg_errmsg(ctx), "core.lua"),
             "core error: %s", cg_errmsg(ctx));
    cg_context_free(ctx);
    unsetenv("CHUNKGEN_LUA_PATH");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    run(cmd);
}
