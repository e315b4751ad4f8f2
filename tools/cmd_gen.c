/* cmd_gen.c -- `chunkgen gen` (render a generated kernel) and `chunkgen info`. */
#include "cli.h"
#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"
#include "gen.h"

#include <errno.h>
#include <string.h>


static const char gen_usage[] =
    "usage: chunkgen gen KERNEL --dk N --dv N [options]   print the rendered CUDA source\n"
    "       chunkgen gen --list                           list the kernels and their spaces\n"
    "\n"
    "options:\n"
    "  --dk N --dv N           head dimensions (baked into the source)\n"
    "  --B N --T N --G N --H N SSD shape (defaults 1, 256, 1, 1: they only affect validity)\n"
    "  --L N --D N --N N       selective-scan shape\n"
    "  --flags a,b             shape flags: h0, hT, dhT, softplus, has_D, has_z, has_bias, grouped\n"
    "  --param k=v             pin one parameter (repeatable); missing ones come from the default\n"
    "  --config k=v,k=v        pin several at once\n"
    "  --arch N                render for sm_N's limits (default: the emulated sm_80 device)\n"
    "  --plan                  print the plan (name, config, launches) instead of the source\n"
    "  --space                 list every config the constraints accept for this shape\n";

static int gen_fail(cg_context *ctx, const char *what) {
    fprintf(stderr, "chunkgen gen: %s: %s\n", what, cg_errmsg(ctx));
    return 1;
}

static int usage_err(const char *fmt, const char *arg) {
    fprintf(stderr, "chunkgen gen: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run `chunkgen gen --help` for the usage)\n");
    return 2;
}

static int parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0) return -1;
    *out = v;
    return 0;
}

static int add_pin(cg_cfg *cfg, const char *kv) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || !eq[1] || cfg->n == CG_CFG_MAX) return -1;
    size_t kl = (size_t)(eq - kv);
    if (kl >= sizeof cfg->kv[0].key || strlen(eq + 1) >= sizeof cfg->kv[0].val) return -1;
    memcpy(cfg->kv[cfg->n].key, kv, kl);
    cfg->kv[cfg->n].key[kl] = '\0';
    snprintf(cfg->kv[cfg->n].val, sizeof cfg->kv[0].val, "%s", eq + 1);
    cfg->n++;
    return 0;
}

static int list_kernels(cg_context *ctx) {
    const char **names;
    int n;
    if (cg__gen_kernels(ctx, &names, &n) != CG_OK) return gen_fail(ctx, "listing kernels");
    for (int i = 0; i < n; i++) {
        char *text;
        if (cg__gen_describe(ctx, names[i], &text) != CG_OK) return gen_fail(ctx, names[i]);
        printf("%s\n", text);
        free(text);
    }
    return 0;
}

static int gen_main(cg_context *ctx, int argc, char **argv) {
    const char *kernel = NULL;
    cg_kshape shape = {.B = 1, .T = 256, .G = 1, .H = 1};
    cg_cfg pins = {0};
    int arch = 0, want_plan = 0, want_space = 0, list = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(gen_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--list")) { list = 1; continue; }
        if (!strcmp(a, "--plan")) { want_plan = 1; continue; }
        if (!strcmp(a, "--space")) { want_space = 1; continue; }
        if (a[0] != '-') {
            if (kernel) return usage_err("unexpected argument '%s' (one kernel at a time)", a);
            kernel = a;
            continue;
        }
        if (i + 1 >= argc) return usage_err("option %s needs a value", a);
        const char *v = argv[++i];
        static const struct { const char *opt; size_t off; } dims[] = {
            {"--B", offsetof(cg_kshape, B)},   {"--T", offsetof(cg_kshape, T)},   {"--G", offsetof(cg_kshape, G)},
            {"--H", offsetof(cg_kshape, H)},   {"--dk", offsetof(cg_kshape, dk)}, {"--dv", offsetof(cg_kshape, dv)},
            {"--L", offsetof(cg_kshape, L)},   {"--D", offsetof(cg_kshape, D)},   {"--N", offsetof(cg_kshape, N)},
        };
        int done = 0;
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
            if (strcmp(a, dims[d].opt) != 0) continue;
            if (parse_i64(v, (int64_t *)((char *)&shape + dims[d].off)) != 0)
                return usage_err("expected a non-negative integer, got '%s'", v);
            done = 1;
        }
        if (done) continue;
        if (!strcmp(a, "--param")) {
            if (add_pin(&pins, v) != 0) return usage_err("--param expects k=v (short words), got '%s'", v);
        } else if (!strcmp(a, "--config")) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (add_pin(&pins, tok) != 0) return usage_err("--config expects k=v,k=v, got '%s'", v);
        } else if (!strcmp(a, "--arch")) {
            int64_t x;
            if (parse_i64(v, &x) != 0 || x > 1000) return usage_err("--arch expects e.g. 80 or 90, got '%s'", v);
            arch = (int)x;
        } else if (!strcmp(a, "--flags")) {
            static const struct { const char *name; int flag; } fl[] = {
                {"h0", CG_KS_H0},           {"hT", CG_KS_HT},        {"dhT", CG_KS_DHT},
                {"softplus", CG_KS_SOFTPLUS}, {"has_D", CG_KS_HAS_D}, {"has_z", CG_KS_HAS_Z},
                {"has_bias", CG_KS_HAS_BIAS}, {"grouped", CG_KS_GROUPED}};
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                size_t f = 0;
                while (f < sizeof fl / sizeof fl[0] && strcmp(fl[f].name, tok) != 0) f++;
                if (f == sizeof fl / sizeof fl[0]) return usage_err("unknown flag '%s'", tok);
                shape.flags |= fl[f].flag;
            }
        } else {
            return usage_err("unknown option '%s'", a);
        }
    }
    if (list) return list_kernels(ctx);
    if (!kernel) return usage_err("%s", "missing the kernel name (see `chunkgen gen --list`)");
    cg_devinfo dev;
    if (arch) {
        if (!cg__devinfo_arch(arch, &dev)) {
            fprintf(stderr, "chunkgen gen: unknown arch sm_%d (known: 75 80 86 87 89 90 100 103 120)\n", arch);
            return 2;
        }
    } else {
        cg__devinfo_emulated(&dev);
    }
    if (want_space) {
        cg_cfg *cfgs;
        int n;
        if (cg__gen_space(ctx, kernel, &shape, &dev, &cfgs, &n) != CG_OK) return gen_fail(ctx, kernel);
        for (int c = 0; c < n; c++) {
            for (int k = 0; k < cfgs[c].n; k++) printf("%s%s=%s", k ? "," : "", cfgs[c].kv[k].key, cfgs[c].kv[k].val);
            printf("\n");
        }
        free(cfgs);
        fprintf(stderr, "%d valid configs for %s on %s\n", n, kernel, dev.name);
        return 0;
    }
    cg_plan plan;
    if (cg__gen_plan(ctx, kernel, &shape, &dev, &pins, &plan) != CG_OK) return gen_fail(ctx, kernel);
    if (want_plan) {
        printf("kernel    %s\nname      %s\nconfig    ", plan.kernel, plan.name);
        for (int k = 0; k < plan.params.n; k++)
            printf("%s%s=%s", k ? "," : "", plan.params.kv[k].key, plan.params.kv[k].val);
        printf("\nworkspace %lld bytes\n", (long long)plan.workspace_bytes);
        for (int l = 0; l < plan.nlaunch; l++) {
            const cg_launch *x = &plan.launch[l];
            printf("launch    %s grid (%u, %u, %u) block (%u, %u, %u) smem %lld\n", x->entry, x->grid[0],
                   x->grid[1], x->grid[2], x->block[0], x->block[1], x->block[2], (long long)x->smem);
        }
    } else {
        fputs(plan.source, stdout);
    }
    cg__plan_free(&plan);
    return 0;
}

int cg_cmd_gen(int argc, char **argv) {
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) {
        fprintf(stderr, "chunkgen gen: cannot create a context\n");
        return 1;
    }
    int rc = gen_main(ctx, argc, argv);
    cg_context_free(ctx);
    return rc;
}

int cg_cmd_info(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: chunkgen info   print the device, driver, NVRTC and the kernel cache\n");
            return 0;
        }
        fprintf(stderr, "chunkgen info: unexpected argument '%s'\n", argv[i]);
        return 2;
    }
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) {
        fprintf(stderr, "chunkgen info: cannot create a context\n");
        return 1;
    }
    printf("chunkgen %s\n", cg_version());
    char text[4096];
    cg__cuda_describe(ctx, text, sizeof text);
    fputs(text, stdout);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/kernels", cg__cache_dir(ctx));
    int64_t files, bytes;
    cg__kcache_stat(dir, &files, &bytes);
    printf("cache:   %s (%lld entries, %.1f MiB)\n", dir, (long long)files, (double)bytes / (1024.0 * 1024.0));
    const char *lp = getenv("CHUNKGEN_LUA_PATH");
    printf("lua:     %s\n", lp && *lp ? lp : "embedded generator and templates");
    const char **names;
    int n;
    if (cg__gen_kernels(ctx, &names, &n) == CG_OK) {
        printf("kernels:");
        for (int i = 0; i < n; i++) printf(" %s", names[i]);
        printf("\n");
    } else {
        printf("kernels: generator error: %s\n", cg_errmsg(ctx));
    }
    cg_context_free(ctx);
    return 0;
}
