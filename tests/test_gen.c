/* test_gen.c -- the Lua generator: rendering, pins, spaces, errors, and every config
 * of every kernel compiled by NVRTC for sm_80 and sm_90 (ptxas: no spills, shared
 * memory within the arch's limit). */
#include "cg_test.h"
#include "cpu/ssd_cpu.h"
#include "cuda/cg_cuda.h"
#include "ptxas_log.h"
#include "gen.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>


/* Odd shapes: dk/dv not powers of two, T not a multiple of any chunk. Each also
 * carries a selective-scan shape (L = T, D channels, N states) and varied flags, so
 * every kernel family gets shapes. */
static const struct { int64_t B, T, G, H, dk, dv, D, N; int flags; } k_shapes[] = {
    {1, 5, 1, 1, 7, 7, 7, 16, 0},
    {2, 100, 1, 2, 40, 48, 40, 7, CG_KS_H0 | CG_KS_SOFTPLUS | CG_KS_HAS_D},
    {1, 193, 2, 4, 48, 40, 48, 5, CG_KS_HT | CG_KS_GROUPED | CG_KS_HAS_Z | CG_KS_HAS_BIAS},
    {1, 33, 1, 3, 130, 130, 130, 32,
     CG_KS_H0 | CG_KS_HT | CG_KS_DHT | CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS},
    {1, 1, 1, 1, 96, 200, 96, 1, CG_KS_HAS_D | CG_KS_DHT},
};
#define NSHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

static cg_kshape shape_of(int i) {
    cg_kshape s = {0};
    s.B = k_shapes[i].B;
    s.T = k_shapes[i].T;
    s.G = k_shapes[i].G;
    s.H = k_shapes[i].H;
    s.dk = k_shapes[i].dk;
    s.dv = k_shapes[i].dv;
    s.L = k_shapes[i].T;
    s.D = k_shapes[i].D;
    s.N = k_shapes[i].N;
    s.flags = k_shapes[i].flags;
    return s;
}

static const char *param(const cg_cfg *c, const char *key) {
    for (int k = 0; k < c->n; k++)
        if (!strcmp(c->kv[k].key, key)) return c->kv[k].val;
    return NULL;
}

/* A CPU space (generator/cpu/<name>.lua): core.lua holds every description there to
 * backend = "cpu" and every one in generator/kernels/ to none, so the directory says it. */
static int is_cpu_space(cg_context *ctx, const char *name) {
    char rel[128], *text = NULL;
    snprintf(rel, sizeof rel, "generator/cpu/%s.lua", name);
    cg_status st = cg__gen_read_file(ctx, rel, &text, NULL);
    free(text);
    if (st != CG_OK) ctx->errmsg[0] = '\0';
    return st == CG_OK;
}

/* ----------------------------------------------------------- rendering */

CG_TEST(gen_kernels_listed) {
    const char **names;
    int n;
    cg_context *ctx = cg_test_gen_kernels(&names, &n);
    if (!ctx) return;
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
    cg_kshape s = shape_of(2);
    cg_plan p1, p2, p3;
    /* the three-phase strategy: several launches and a workspace */
    cg_cfg pin = {0};
    pin.n = 3;
    snprintf(pin.kv[0].key, sizeof pin.kv[0].key, "precision"), snprintf(pin.kv[0].val, sizeof pin.kv[0].val, "ieee");
    snprintf(pin.kv[1].key, sizeof pin.kv[1].key, "strategy"), snprintf(pin.kv[1].val, sizeof pin.kv[1].val, "3phase");
    snprintf(pin.kv[2].key, sizeof pin.kv[2].key, "stages"), snprintf(pin.kv[2].val, sizeof pin.kv[2].val, "1");
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s, &dev, &pin, &p1));
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s, &dev, &pin, &p2));
    CG_CHECK_OK(b, cg__gen_plan(b, "ssd_fwd", &s, &dev, &pin, &p3));
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
    cg_kshape s2 = s;
    s2.T = 1000;
    cg_plan p4;
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s2, &dev, &p1.params, &p4));
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
    cg_kshape s = shape_of(3);
    cg_context *a, *b;
    CG_CHECK_OK(NULL, cg_context_create(&a));
    cg_plan p1, p2;
    unsetenv("CHUNKGEN_LUA_PATH");
    CG_CHECK_OK(a, cg__gen_plan(a, "ssd_fwd", &s, &dev, NULL, &p1));
    setenv("CHUNKGEN_LUA_PATH", CG_SOURCE_DIR, 1);
    CG_CHECK_OK(NULL, cg_context_create(&b));
    CG_CHECK_OK(b, cg__gen_plan(b, "ssd_fwd", &s, &dev, NULL, &p2));
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
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    cg_kshape s = shape_of(0); /* dk = dv = 7 */
    cg_plan p;
    cg_cfg c = pins("chunk=64,colour=red");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &s, &dev, &c, &p) == CG_EINVAL, "unknown key");
    CG_CHECK(strstr(cg_errmsg(ctx), "colour"), "message names the key: %s", cg_errmsg(ctx));
    c = pins("chunk=48");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &s, &dev, &c, &p) == CG_EINVAL, "value outside the space");
    CG_CHECK(strstr(cg_errmsg(ctx), "chunk=48") && strstr(cg_errmsg(ctx), "16, 32"), "message: %s", cg_errmsg(ctx));
    c = pins("chunk=64,block_dv=32,warps=4,stages=2,precision=ieee,strategy=seq");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &s, &dev, &c, &p) == CG_EUNSUPPORTED, "invalid config");
    CG_CHECK(strstr(cg_errmsg(ctx), "block_dv=32") && strstr(cg_errmsg(ctx), "dk=7"), "reason: %s", cg_errmsg(ctx));
    c = pins("chunk=64");
    CG_CHECK(cg__gen_plan(ctx, "no_such_kernel", &s, &dev, &c, &p) == CG_ENOTFOUND, "unknown kernel");
    /* shared memory beyond the device: two 128-token stages of q, k, v at dk = dv = 130
     * (about 480 KB) > sm_86's 99 KB */
    cg_devinfo d86;
    CG_CHECK(cg__devinfo_arch(86, &d86), "sm_86 known");
    cg_kshape big = shape_of(3);
    c = pins("chunk=128,block_dv=64,warps=8,stages=2,precision=ieee,strategy=seq");
    CG_CHECK(cg__gen_plan(ctx, "ssd_fwd", &big, &d86, &c, &p) == CG_EUNSUPPORTED, "smem over the limit");
    CG_CHECK(strstr(cg_errmsg(ctx), "shared memory"), "reason: %s", cg_errmsg(ctx));
    /* a partial pin: the rest comes from the default, or the nearest valid config */
    c = pins("warps=2");
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_fwd", &big, &dev, &c, &p));
    if (p.source) {
        CG_CHECK(!strcmp(param(&p.params, "warps"), "2"), "pin kept");
        CG_CHECK(p.params.n == 6, "every parameter resolved (%d)", p.params.n);
        cg_cfg *cfgs;
        int n;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_fwd", &big, &dev, &cfgs, &n));
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
    const char **names;
    int nk;
    cg_context *ctx = cg_test_gen_kernels(&names, &nk);
    if (!ctx) return;
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    for (int k = 0; k < nk; k++) {
        for (int si = 0; si < NSHAPES; si++) {
            cg_kshape s = shape_of(si);
            cg_cfg *cfgs = NULL;
            int n = 0;
            cg_status st = cg__gen_space(ctx, names[k], &s, &dev, &cfgs, &n);
            CG_CHECK(st == CG_OK, "%s space: %s", names[k], cg_errmsg(ctx));
            if (st == CG_OK) CG_CHECK(n > 0, "%s: no valid config for shape %d", names[k], si);
            if (is_cpu_space(ctx, names[k])) { /* nothing to plan: gen_cpu_spaces covers them */
                free(cfgs);
                continue;
            }
            /* every accepted config plans with exactly its own params; spot-check one in 7 */
            for (int i = si % 7; i < n; i += 7) {
                cg_plan p;
                st = cg__gen_plan(ctx, names[k], &s, &dev, &cfgs[i], &p);
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
    const char **names;
    int nk;
    cg_context *ctx = cg_test_gen_kernels(&names, &nk);
    if (!ctx) return;
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
    cg_kshape ks = {0};
    ks.B = 2, ks.T = 100, ks.G = 2, ks.H = 4, ks.dk = 48, ks.dv = 40;
    for (int bwd = 0; bwd < 2; bwd++) {
        ks.flags = CG_KS_H0 | (bwd ? CG_KS_DHT | CG_KS_BWD : CG_KS_HT);
        cg_cfg *cfgs = NULL;
        int n = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "ssd_cpu", &ks, &dev, &cfgs, &n));
        CG_CHECK(n > 4, "ssd_cpu %s: %d configs", bwd ? "bwd" : "fwd", n);
        for (int i = 0; i < n; i++)
            CG_CHECK(cfgs[i].n == 3 && !strcmp(cfgs[i].kv[0].key, "chunk") && !strcmp(cfgs[i].kv[1].key, "block_dv") &&
                         !strcmp(cfgs[i].kv[2].key, "threads"),
                     "config %d: keys in the space's order", i);
        CG_CHECK(enumeration_nested(cfgs, n), "ssd_cpu: enumeration is nested in order and has no duplicates");
        /* shape.bwd reaches Lua: the backward has no dv tiling, the forward tries several */
        int nbdv = n ? distinct_values(cfgs, n, "block_dv") : 0;
        CG_CHECK(bwd ? nbdv == 1 : nbdv > 1, "%s: %d block_dv values", bwd ? "bwd" : "fwd", nbdv);
        cg_cfg def, got;
        CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "ssd_cpu", &ks, &dev, NULL, &def));
        CG_CHECK(def.n == 3 && cfg_in(&def, cfgs, n), "default is a config of the space");
        cg_cfg pin = pins("chunk=32");
        CG_CHECK_OK(ctx, cg__gen_resolve(ctx, "ssd_cpu", &ks, &dev, &pin, &got));
        CG_CHECK(!strcmp(param(&got, "chunk"), "32") && cfg_in(&got, cfgs, n), "partial pin resolved in the space");
        /* every config of the space passes the C path's guard for user pins */
        cg_ssd_prob prob;
        memset(&prob, 0, sizeof prob);
        prob.B = ks.B, prob.T = ks.T, prob.G = ks.G, prob.H = ks.H, prob.dk = ks.dk, prob.dv = ks.dv;
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
    CG_CHECK(cg__gen_resolve(ctx, "ssd_cpu", &ks, &dev, &pin, &got) == CG_EINVAL, "value outside the space");
    pin = pins("colour=red");
    CG_CHECK(cg__gen_resolve(ctx, "ssd_cpu", &ks, &dev, &pin, &got) == CG_EINVAL && strstr(cg_errmsg(ctx), "colour"),
             "unknown key: %s", cg_errmsg(ctx));
    cg_kshape shortT = ks;
    shortT.T = 5;
    pin = pins("chunk=128");
    CG_CHECK(cg__gen_resolve(ctx, "ssd_cpu", &shortT, &dev, &pin, &got) == CG_EUNSUPPORTED &&
                 strstr(cg_errmsg(ctx), "T = 5"),
             "invalid pin: valid()'s reason: %s", cg_errmsg(ctx));
    cg_plan plan;
    CG_CHECK(cg__gen_plan(ctx, "ssd_cpu", &ks, &dev, NULL, &plan) == CG_EUNSUPPORTED &&
                 strstr(cg_errmsg(ctx), "CPU"),
             "a CPU space does not plan: %s", cg_errmsg(ctx));
    CG_CHECK(cg__gen_resolve(ctx, "no_such_space", &ks, &dev, NULL, &got) == CG_ENOTFOUND, "unknown name");

    /* selective scan: segment only varies in the backward */
    cg_kshape ss = {0};
    ss.B = 1, ss.L = 300, ss.D = 96, ss.N = 16, ss.G = 1;
    for (int bwd = 0; bwd < 2; bwd++) {
        ss.flags = bwd ? CG_KS_BWD : 0;
        cg_cfg *cfgs = NULL;
        int n = 0;
        CG_CHECK_OK(ctx, cg__gen_space(ctx, "sscan_cpu", &ss, &dev, &cfgs, &n));
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
                    cg_kshape s = shape_of(si);
                    s.flags |= bwd ? CG_KS_BWD : 0;
                    dev.sm_count = threads[ti];
                    cg_cfg *cfgs = NULL, def;
                    int n = 0;
                    CG_CHECK_OK(ctx, cg__gen_space(ctx, names[k], &s, &dev, &cfgs, &n));
                    cg_status st = cg__gen_resolve(ctx, names[k], &s, &dev, NULL, &def);
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
    cg_kshape s = shape_of(1);
    cg_plan p;
    cg_status st = cg__gen_plan(ctx, "zz_broken", &s, &dev, NULL, &p);
    CG_CHECK(st == CG_ELUA, "runtime error -> ELUA, got %s", cg_status_str(st));
    const char *m = cg_errmsg(ctx);
    CG_CHECK(strstr(m, "zz_broken.lua:1:") && strstr(m, "stack traceback") && strstr(m, "attempt to index"),
             "message with position and traceback: %s", m);
    st = cg__gen_plan(ctx, "zz_syntax", &s, &dev, NULL, &p);
    CG_CHECK(st == CG_ELUA, "syntax error -> ELUA, got %s", cg_status_str(st));
    CG_CHECK(strstr(cg_errmsg(ctx), "zz_syntax.lua"), "names the file: %s", cg_errmsg(ctx));
    /* the context still works after Lua errors */
    CG_CHECK_OK(ctx, cg__gen_plan(ctx, "ssd_fwd", &s, &dev, NULL, &p));
    cg__plan_free(&p);
    cg_context_free(ctx);

    /* a broken core.lua: the state cannot be created, ELUA names it */
    snprintf(cmd, sizeof cmd, "sed -i '1i error([[core is broken on purpose]])' '%s/generator/core.lua'", dir);
    CG_CHECK(run(cmd) == 0, "break core.lua");
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    st = cg__gen_plan(ctx, "ssd_fwd", &s, &dev, NULL, &p);
    CG_CHECK(st == CG_ELUA && strstr(cg_errmsg(ctx), "broken on purpose") && strstr(cg_errmsg(ctx), "core.lua"),
             "core error: %s", cg_errmsg(ctx));
    cg_context_free(ctx);
    unsetenv("CHUNKGEN_LUA_PATH");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    run(cmd);
}

/* ------------------------------------------------- NVRTC, every config */

typedef struct job {
    char *source;
    char name[192];
    char cfg[256];
    int shape;
    int kernel; /* index into cg__gen_kernels' list */
    int threads;
    int64_t dyn_smem;
    /* results */
    cg_status st;
    char msg[1024];
    cg_ptxas_info info;
    double ms;  /* compile time (wall), 0 for a cache hit */
    int cached; /* the ptxas log came from the kernel cache */
    int same_as; /* -1, or an earlier job with the same rendered source (name included):
                  * compiled once, its CUBIN's ptxas facts checked for both */
    uint64_t hash[2];
} job;

typedef struct pool_arg {
    job *jobs;
    const int *order; /* the jobs longest source first: the slow compiles do not trail */
    int n;
    int arch;
    int next;
    pthread_mutex_t mu;
    const char *kdir;     /* the kernel cache ($CHUNKGEN_CACHE_DIR/kernels) */
    char nvrtc_id[1024];
} pool_arg;

static void *worker(void *arg) {
    pool_arg *pa = arg;
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return NULL;
    for (;;) {
        pthread_mutex_lock(&pa->mu);
        int i = pa->next++;
        pthread_mutex_unlock(&pa->mu);
        if (i >= pa->n) break;
        job *j = &pa->jobs[pa->order[i]];
        if (j->same_as >= 0) continue;
        void *bin = NULL;
        size_t len = 0;
        char *log = NULL, *key = NULL;
        /* With CHUNKGEN_TEST_KCACHE=dir, a kernel cache keyed as the executor keys CUBINs
         * (source, options, compiler build, arch): an entry is the result of this very
         * compile, ptxas log included, so the same checks hold. scripts/test.sh gives
         * the release and sanitizer runs one such dir: the second compiles nothing the
         * first did. Unset: everything is compiled. */
        if (pa->kdir && cg__cubin_key(ctx, pa->nvrtc_id, pa->arch, j->name, j->source, &key) == CG_OK &&
            cg__kcache_get(pa->kdir, j->name, key, &bin, &len, &log) == CG_OK) {
            j->st = CG_OK;
            j->cached = 1;
        } else {
            double t0 = (double)cg__jit_now_ns();
            /* every module splits in 2 threads (the same SASS as any split count the
             * executor uses: one cache key); the pool keeps the cores busy */
            j->st = cg__nvrtc_compile_threads(ctx, j->name, j->source, pa->arch, 2, &bin, &len, &log);
            j->ms = ((double)cg__jit_now_ns() - t0) / 1e6;
            if (j->st == CG_OK && key) (void)cg__kcache_put(pa->kdir, j->name, key, bin, len, log);
        }
        if (j->st != CG_OK) snprintf(j->msg, sizeof j->msg, "%s", cg_errmsg(ctx));
        else cg__ptxas_parse(log, &j->info);
        if (j->st == CG_OK && len < 16) j->st = CG_EINTERNAL;
        free(key);
        free(bin);
        free(log);
    }
    cg_context_free(ctx);
    return NULL;
}

/* qsort order of job indices: longer source first (a proxy for compile time), then index */
static const job *g_sort_jobs;
static int longer_first(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    size_t li = strlen(g_sort_jobs[i].source), lj = strlen(g_sort_jobs[j].source);
    return li != lj ? (li < lj ? 1 : -1) : (i > j) - (i < j);
}

/* Under the sanitizers the release run has already compiled every config: compiling
 * them all again checks nothing new in our code and doubles the suite's time, so
 * there only every 8th config (and every default) is compiled. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define CONFIG_STRIDE 8
#else
#define CONFIG_STRIDE 1
#endif

/* The jobs of one sweep: every config of every kernel (each config once, with the shapes
 * taking turns, plus each shape's default), every stride-th config only, and of those the
 * shard-th of every nshards (counted per kernel, defaults included: every shard holds its
 * part of every kernel's space, and the shards of one arch together hold every job
 * exactly once). *nfam gets the number of generated-kernel families. */
static int sweep_jobs(cg_context *ctx, const cg_devinfo *dev, int stride, int shard, int nshards, job **out,
                      int *nfam) {
    const char **names;
    int nk = 0;
    *out = NULL;
    *nfam = 0;
    CG_CHECK_OK(ctx, cg__gen_kernels(ctx, &names, &nk));
    int cap = 4096, nj = 0;
    job *jobs = calloc((size_t)cap, sizeof *jobs);
    if (!jobs) return 0;
    /* CHUNKGEN_TEST_KERNELS=a,b restricts the run to those kernels (local iteration) */
    const char *only = getenv("CHUNKGEN_TEST_KERNELS");
    *nfam = nk;
    for (int k = 0; k < nk; k++) {
        if (is_cpu_space(ctx, names[k])) { /* nothing to compile */
            --*nfam;
            continue;
        }
        if (only && *only) {
            char list[512];
            snprintf(list, sizeof list, ",%s,", only);
            char want[80];
            snprintf(want, sizeof want, ",%s,", names[k]);
            if (!strstr(list, want)) continue;
        }
        cg_cfg *sp[NSHAPES];
        int sn[NSHAPES];
        for (int si = 0; si < NSHAPES; si++) {
            cg_kshape s = shape_of(si);
            sp[si] = NULL;
            sn[si] = 0;
            CG_CHECK_OK(ctx, cg__gen_space(ctx, names[k], &s, dev, &sp[si], &sn[si]));
        }
        /* union of the configs, in order of first appearance */
        int seen_cap = 0;
        for (int si = 0; si < NSHAPES; si++) seen_cap += sn[si];
        char (*seen)[256] = calloc((size_t)seen_cap + 1, 256);
        int nseen = 0;
        for (int si = 0; si < NSHAPES; si++) {
            for (int i = 0; i < sn[si]; i++) {
                char t[256];
                cg__cfg_text(&sp[si][i], t, sizeof t);
                int dup = 0;
                for (int q = 0; q < nseen && !dup; q++) dup = !strcmp(seen[q], t);
                if (!dup) snprintf(seen[nseen++], 256, "%s", t);
            }
        }
        /* each config once, on the (idx mod count)-th shape that accepts it; then defaults */
        int kept = 0; /* this kernel's jobs before the shard split */
        for (int q = 0; q <= nseen + NSHAPES - 1 && nj < cap; q++) {
            int is_default = q >= nseen;
            if (!is_default && q % stride != 0) continue;
            if (kept++ % nshards != shard) continue;
            int shape = -1;
            const cg_cfg *pin = NULL;
            if (is_default) {
                shape = q - nseen;
            } else {
                int cands[NSHAPES], nc = 0;
                const cg_cfg *cc[NSHAPES];
                for (int si = 0; si < NSHAPES; si++)
                    for (int i = 0; i < sn[si]; i++) {
                        char t[256];
                        cg__cfg_text(&sp[si][i], t, sizeof t);
                        if (!strcmp(t, seen[q])) {
                            cc[nc] = &sp[si][i];
                            cands[nc++] = si;
                        }
                    }
                shape = cands[q % nc];
                pin = cc[q % nc];
            }
            cg_kshape s = shape_of(shape);
            cg_plan p;
            cg_status st = cg__gen_plan(ctx, names[k], &s, dev, pin, &p);
            if (is_default && st == CG_EUNSUPPORTED) continue; /* no default for this shape on this arch */
            CG_CHECK(st == CG_OK, "%s: %s", names[k], cg_errmsg(ctx));
            if (st != CG_OK) continue;
            job *j = &jobs[nj++];
            j->source = p.source;
            p.source = NULL;
            snprintf(j->name, sizeof j->name, "%s", p.name);
            cg__cfg_text(&p.params, j->cfg, sizeof j->cfg);
            j->shape = shape;
            j->kernel = k;
            j->threads = (int)(p.launch[0].block[0] * p.launch[0].block[1] * p.launch[0].block[2]);
            for (int l = 0; l < p.nlaunch; l++) {
                int t = (int)(p.launch[l].block[0] * p.launch[l].block[1] * p.launch[l].block[2]);
                if (t > j->threads) j->threads = t;
                if (p.launch[l].smem > j->dyn_smem) j->dyn_smem = p.launch[l].smem;
            }
            cg__plan_free(&p);
        }
        free(seen);
        for (int si = 0; si < NSHAPES; si++) free(sp[si]);
    }
    *out = jobs;
    return nj;
}

static void free_jobs(job *jobs, int nj) {
    for (int i = 0; i < nj; i++) free(jobs[i].source);
    free(jobs);
}

/* CHUNKGEN_TEST_CONFIG_STRIDE=n compiles every n-th config only (local iteration) */
static int sweep_stride(void) {
    const char *env = getenv("CHUNKGEN_TEST_CONFIG_STRIDE");
    return env && atoi(env) > 0 ? atoi(env) : CONFIG_STRIDE;
}

/* Compile the shard-th of nshards parts of the sweep for arch and check every job's
 * ptxas facts. ctest runs the parts as separate tests (gen_nvrtc_all_configs_smN_KofS),
 * so that ctest -j packs them with the other long tests; gen_nvrtc_shards_cover_all
 * checks that the parts of each arch are the whole sweep. */
static void nvrtc_all_configs(int arch, int shard, int nshards) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    CG_CHECK(cg__devinfo_arch(arch, &dev), "arch %d", arch);
    int stride = sweep_stride(), nfam = 0;
    job *jobs;
    int nj = sweep_jobs(ctx, &dev, stride, shard, nshards, &jobs, &nfam);
    /* Identical sources (configs whose parameters render the same text for the shape
     * they were given) are compiled once: the CUBIN is a function of source, options and
     * arch, so its ptxas facts are the other job's; the per-job limits are checked below. */
    int nunique = 0;
    for (int i = 0; i < nj; i++) {
        job *j = &jobs[i];
        j->same_as = -1;
        cg__hash128(j->source, strlen(j->source), j->hash);
        for (int q = 0; q < i && j->same_as < 0; q++)
            if (jobs[q].same_as < 0 && jobs[q].hash[0] == j->hash[0] && jobs[q].hash[1] == j->hash[1] &&
                !strcmp(jobs[q].name, j->name) && !strcmp(jobs[q].source, j->source))
                j->same_as = q;
        nunique += j->same_as < 0;
    }
    int *order = calloc((size_t)nj + 1, sizeof *order);
    g_sort_jobs = jobs;
    for (int i = 0; i < nj; i++) order[i] = i;
    qsort(order, (size_t)nj, sizeof *order, longer_first);
    int nthreads = cg__online_cores();
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 16) nthreads = 16;
    pool_arg pa = {.jobs = jobs, .order = order, .n = nj, .arch = arch};
    const char *kc = getenv("CHUNKGEN_TEST_KCACHE");
    pa.kdir = kc && *kc ? kc : NULL;
    CG_CHECK_OK(ctx, cg__nvrtc_id(ctx, pa.nvrtc_id, sizeof pa.nvrtc_id));
    pthread_mutex_init(&pa.mu, NULL);
    pthread_t th[16];
    for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, &pa);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&pa.mu);
    free(order);
    for (int i = 0; i < nj; i++) {
        job *j = &jobs[i], *o = j->same_as >= 0 ? &jobs[j->same_as] : NULL;
        if (!o) continue;
        j->st = o->st;
        snprintf(j->msg, sizeof j->msg, "%s", o->msg);
        j->info = o->info;
    }
    int maxreg = 0, ncached = 0;
    double total_ms = 0;
    int slow[5] = {-1, -1, -1, -1, -1}; /* the slowest compiles, for the log */
    for (int i = 0; i < nj; i++) {
        job *j = &jobs[i];
        ncached += j->cached;
        total_ms += j->ms;
        for (int r = 0; r < 5; r++)
            if (slow[r] < 0 || j->ms > jobs[slow[r]].ms) {
                memmove(slow + r + 1, slow + r, sizeof slow[0] * (size_t)(4 - r));
                slow[r] = i;
                break;
            }
        CG_CHECK(j->st == CG_OK, "sm_%d %s (%s, shape %d): %s", arch, j->name, j->cfg, j->shape, j->msg);
        if (j->st == CG_OK) {
            CG_CHECK(j->info.found, "sm_%d %s: no ptxas resource line in the log", arch, j->name);
            CG_CHECK(j->info.spill_stores == 0 && j->info.spill_loads == 0,
                     "sm_%d %s (%s): spills %lld/%lld bytes: tighten valid()", arch, j->name, j->cfg,
                     (long long)j->info.spill_stores, (long long)j->info.spill_loads);
            CG_CHECK(j->info.smem + j->dyn_smem <= dev.smem_per_block,
                     "sm_%d %s: %lld static + %lld dynamic bytes of shared memory > %lld", arch, j->name,
                     (long long)j->info.smem, (long long)j->dyn_smem, (long long)dev.smem_per_block);
            CG_CHECK((int64_t)j->info.registers * j->threads <= dev.regs_per_block,
                     "sm_%d %s: %d registers x %d threads", arch, j->name, j->info.registers, j->threads);
            if (j->info.registers > maxreg) maxreg = j->info.registers;
        }
    }
    fprintf(stderr, "  sm_%d part %d of %d: %d kernels compiled by NVRTC (%d kernel families, 1 config in %d + defaults; "
            "%d distinct sources), max %d registers\n", arch, shard + 1, nshards, nj, nfam, stride, nunique, maxreg);
    fprintf(stderr, "  sm_%d: %d of them from the kernel cache; %.1f s of compiling in %d threads; slowest:", arch,
            ncached, total_ms / 1000, nthreads);
    for (int r = 0; r < 5 && slow[r] >= 0 && jobs[slow[r]].ms > 0; r++)
        fprintf(stderr, "%s %s %.0f ms", r ? "," : "", jobs[slow[r]].name, jobs[slow[r]].ms);
    fprintf(stderr, "\n");
    /* where the part's compile time went, per kernel family (what the templates cost CI) */
    const char **names;
    int nk = 0;
    if (cg__gen_kernels(ctx, &names, &nk) == CG_OK) {
        fprintf(stderr, "  sm_%d: compile seconds (jobs) per kernel:", arch);
        for (int k = 0; k < nk; k++) {
            double ms = 0;
            int n = 0;
            for (int i = 0; i < nj; i++)
                if (jobs[i].kernel == k) {
                    ms += jobs[i].ms;
                    n++;
                }
            if (n) fprintf(stderr, " %s %.1f (%d)", names[k], ms / 1000, n);
        }
        fprintf(stderr, "\n");
    }
    free_jobs(jobs, nj);
    cg_context_free(ctx);
}

/* The parts of the sweeps (NVRTC_SHARDS per arch; CMakeLists.txt gives them their cost). */
#define NVRTC_SHARDS 6
CG_TEST(gen_nvrtc_all_configs_sm80_1of6) { nvrtc_all_configs(80, 0, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm80_2of6) { nvrtc_all_configs(80, 1, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm80_3of6) { nvrtc_all_configs(80, 2, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm80_4of6) { nvrtc_all_configs(80, 3, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm80_5of6) { nvrtc_all_configs(80, 4, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm80_6of6) { nvrtc_all_configs(80, 5, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm90_1of6) { nvrtc_all_configs(90, 0, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm90_2of6) { nvrtc_all_configs(90, 1, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm90_3of6) { nvrtc_all_configs(90, 2, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm90_4of6) { nvrtc_all_configs(90, 3, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm90_5of6) { nvrtc_all_configs(90, 4, NVRTC_SHARDS); }
CG_TEST(gen_nvrtc_all_configs_sm90_6of6) { nvrtc_all_configs(90, 5, NVRTC_SHARDS); }

/* The parts are the sweep: for each arch, the shards' jobs (rendered, not compiled) are
 * the unsharded sweep's, each exactly once, and every shard has jobs of every kernel
 * family the sweep has. Rendering only: no NVRTC needed. */
static void shards_cover(int arch) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    CG_CHECK(cg__devinfo_arch(arch, &dev), "arch %d", arch);
    int stride = sweep_stride(), nfam = 0;
    job *all;
    int nall = sweep_jobs(ctx, &dev, stride, 0, 1, &all, &nfam);
    CG_CHECK(nall > 0 && nfam > 0, "sm_%d: an empty sweep (%d jobs, %d families)", arch, nall, nfam);
    char *hit = calloc((size_t)nall + 1, 1);
    int per_kernel[64] = {0}; /* the sweep's jobs per kernel family */
    for (int a = 0; a < nall; a++)
        if (all[a].kernel < 64) per_kernel[all[a].kernel]++;
    int total = 0;
    for (int sh = 0; sh < NVRTC_SHARDS; sh++) {
        job *part;
        int f2 = 0, np = sweep_jobs(ctx, &dev, stride, sh, NVRTC_SHARDS, &part, &f2);
        total += np;
        int in_part[64] = {0};
        for (int i = 0; i < np; i++) {
            int found = -1;
            for (int a = 0; a < nall && found < 0; a++)
                if (!hit[a] && all[a].kernel == part[i].kernel && all[a].shape == part[i].shape &&
                    !strcmp(all[a].name, part[i].name) && !strcmp(all[a].cfg, part[i].cfg) &&
                    !strcmp(all[a].source, part[i].source))
                    found = a;
            CG_CHECK(found >= 0, "sm_%d part %d: %s (%s, shape %d) is not a job of the sweep, or twice in the parts",
                     arch, sh + 1, part[i].name, part[i].cfg, part[i].shape);
            if (found >= 0) hit[found] = 1;
            if (part[i].kernel < 64) in_part[part[i].kernel]++;
        }
        /* every family with a job for each part has one in this part */
        for (int k = 0; k < 64; k++)
            CG_CHECK(per_kernel[k] < NVRTC_SHARDS || in_part[k] > 0,
                     "sm_%d part %d: no job of kernel family %d (%d in the sweep)", arch, sh + 1, k, per_kernel[k]);
        free_jobs(part, np);
    }
    CG_CHECK(total == nall, "sm_%d: the parts hold %d jobs, the sweep %d", arch, total, nall);
    for (int a = 0; a < nall; a++)
        CG_CHECK(hit[a], "sm_%d: %s (%s, shape %d) is in no part", arch, all[a].name, all[a].cfg, all[a].shape);
    fprintf(stderr, "  sm_%d: %d jobs of %d kernel families, in %d parts; jobs per kernel:", arch, nall, nfam,
            NVRTC_SHARDS);
    const char **names;
    int nk = 0;
    CG_CHECK_OK(ctx, cg__gen_kernels(ctx, &names, &nk));
    for (int k = 0; k < nk && k < 64; k++)
        if (per_kernel[k]) fprintf(stderr, " %s %d", names[k], per_kernel[k]);
    fprintf(stderr, "\n");
    free(hit);
    free_jobs(all, nall);
    cg_context_free(ctx);
}

CG_TEST(gen_nvrtc_shards_cover_all) {
    shards_cover(80);
    shards_cover(90);
}
