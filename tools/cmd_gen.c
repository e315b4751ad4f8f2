/* cmd_gen.c -- `chunkgen gen` (render a generated kernel, its plan, its configs) and
 * `chunkgen info`, on the public API's "kernels" section (include/chunkgen.h). */
#include "chunkgen.h"
#include "cli.h"
#include "cli_args.h"
#include "kbundle.h"
#include "kernel_shape.h"

#include <jansson.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char gen_usage[] =
    "usage: chunkgen gen KERNEL --shape SHAPE [options]   print the rendered CUDA source\n"
    "       chunkgen gen KERNEL --space [--shape ...]     its config keys: type, values, meaning, default\n"
    "       chunkgen gen --list                           list the kernels and their spaces\n"
    "KERNEL is a generated kernel (ssd_fwd, ssd_bwd, sscan_fwd, sscan_bwd, ...) or a CPU\n"
    "space (ssd_cpu, sscan_cpu): --space, --configs and the default work for both.\n"
    "SHAPE: OP:ITEM,... (docs/shapes.md), or without OP: the kernel's op, e.g. dk=48,dv=40\n"
    "(then B=1, T=256, G=1, H=1 unless given).\n";

typedef struct gen_opts {
    cg_cli_kshape shape; /* first: cg_cli_kshape_opt and cg_cli_kflags_opt write it */
    const char *kernel;
    char pins[512];
    const char *config;
    int arch, plan, space, configs, list, json, verbose;
} gen_opts;

static int gen_positional(void *opts, const char *arg, char *err, size_t errlen) {
    gen_opts *o = opts;
    if (o->kernel) return snprintf(err, errlen, "unexpected argument '%s' (one kernel at a time)", arg), -1;
    o->kernel = arg;
    return 0;
}

/* Append "k=v" pins to o->pins; -1 when one is not k=v or they do not fit. */
static int add_pins(gen_opts *o, const char *text) {
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ","), n = strlen(o->pins);
        const char *eq = memchr(p, '=', len);
        if (!eq || eq == p || eq + 1 == p + len || n + len + 2 > sizeof o->pins) return -1;
        snprintf(o->pins + n, sizeof o->pins - n, "%s%.*s", n ? "," : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    return 0;
}

static int opt_param(void *opts, const char *v, char *err, size_t errlen) {
    if (add_pins(opts, v) == 0) return 0;
    return snprintf(err, errlen, "expected k=v (short words), got '%s'", v), -1;
}

static const cg_cli_opt k_gen_opts[] = {
    {"--shape", 0, CG_CLI_FN, 0, "SHAPE",
     "the shape: OP:ITEM,... (docs/shapes.md), or the kernel's op's\n"
     "KEY=N,... (SSD: B T G H dk dv, defaults B=1,T=256,G=1,H=1; sscan: B L D N G);\n"
     "dk, dv (SSD) and N, G (sscan) are baked into the source",
     0, 0, cg_cli_kshape_opt},
    {"--flags", 0, CG_CLI_FN, 0, "a,b", "shape flags (listed above)", 0, 0, cg_cli_kflags_opt},
    {"--config", 0, CG_CLI_STR, offsetof(gen_opts, config), "k=v,...",
     "pin several parameters, e.g. chunk=64,warps=4 (as --config of run\n"
     "and bench, for this one kernel: no scopes)",
     0, 0, NULL},
    {"--param", 0, CG_CLI_FN, 0, "k=v", "pin one parameter (repeatable); missing ones come from the default", 0, 0,
     opt_param},
    {"--arch", 0, CG_CLI_INT, offsetof(gen_opts, arch), "N",
     "render for sm_N's limits (default: the emulated sm_80 device)", 0, 1000, NULL},
    {"--plan", 0, CG_CLI_FLAG, offsetof(gen_opts, plan), NULL,
     "print the plan (name, config, launches) instead of the source", 0, 0, NULL},
    {"--space", 0, CG_CLI_FLAG, offsetof(gen_opts, space), NULL,
     "list the config keys: type, values, meaning, and the default\n"
     "for this shape",
     0, 0, NULL},
    {"--configs", 0, CG_CLI_FLAG, offsetof(gen_opts, configs), NULL,
     "list every config the constraints accept for this shape", 0, 0, NULL},
    {"--list", 0, CG_CLI_FLAG, offsetof(gen_opts, list), NULL, "list the kernels and CPU spaces with their keys", 0, 0,
     NULL},
    CG_CLI_OPT_JSON(gen_opts, json, "--plan, --space and --configs as JSON"),
    CG_CLI_OPT_VERBOSE(gen_opts, verbose, "also print the plan's name and config to stderr"),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_gen_cmd = {"gen", gen_usage, k_gen_opts, gen_positional, cg_cli_kflags_help};

static int gen_fail(cg_context *ctx, const char *what) {
    fprintf(stderr, "chunkgen gen: %s: %s\n", what, cg_errmsg(ctx));
    return 1;
}

static int list_kernels(cg_context *ctx) {
    const char *const *names;
    int n;
    if (cg_kernel_list(ctx, &names, &n) != CG_OK) return gen_fail(ctx, "listing kernels");
    for (int i = 0; i < n; i++) {
        char *text;
        if (cg_kernel_describe(ctx, names[i], &text) != CG_OK) return gen_fail(ctx, names[i]);
        printf("%s\n", text);
        cg_free(text);
    }
    return 0;
}

/* A config's text "k=v,k=v" as a JSON object (integers as numbers). */
static json_t *cfg_json(const char *text) {
    json_t *o = json_object();
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ","), kl = strcspn(p, "=");
        if (kl < len) {
            char key[64], val[64], *end;
            snprintf(key, sizeof key, "%.*s", (int)kl, p);
            snprintf(val, sizeof val, "%.*s", (int)(len - kl - 1), p + kl + 1);
            long long v = strtoll(val, &end, 10);
            json_object_set_new(o, key, *end || end == val ? json_string(val) : json_integer(v));
        }
        p += len + (p[len] == ',');
    }
    return o;
}

static int print_json(json_t *doc) {
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 ? 0 : 1;
    fputc('\n', stdout);
    json_decref(doc);
    return rc;
}

/* What the default and the configs were resolved for: the arch, or this machine's CPU. */
static void target_name(cg_context *ctx, const char *kernel, int arch, char *buf, size_t cap) {
    char *desc = NULL;
    int cpu = cg_kernel_describe(ctx, kernel, &desc) == CG_OK && strstr(desc, "backend cpu");
    cg_free(desc);
    cg_device_info d = CG_DEVICE_INFO_INIT;
    if (cpu && cg_device_query(ctx, CG_BACKEND_CPU, &d) == CG_OK) snprintf(buf, cap, "cpu (%d threads)", d.cpu_cores);
    else if (arch) snprintf(buf, cap, "sm_%d", arch);
    else snprintf(buf, cap, "the emulated sm_80 device");
}

/* --space: the kernel's keys (type, values, meaning: generator/keys.lua) and the
 * default config for this shape. */
static int show_space(cg_context *ctx, const gen_opts *o, const cg_shape *shape, const char *target) {
    char *text, *def = NULL;
    if (cg_kernel_describe(ctx, o->kernel, &text) != CG_OK) return gen_fail(ctx, o->kernel);
    cg_status s = shape ? cg_kernel_config(ctx, o->kernel, shape, o->arch, NULL, &def) : CG_EINVAL;
    char why[1024];
    snprintf(why, sizeof why, "%s", s == CG_OK ? "" : shape ? cg_errmsg(ctx) : "no --shape");
    json_t *dflt = s == CG_OK ? cfg_json(def) : NULL;
    if (o->json) {
        json_t *doc = json_object(), *keys = json_array();
        json_object_set_new(doc, "kernel", json_string(o->kernel));
        json_object_set_new(doc, "device", json_string(target));
        /* describe's key lines: "  name  type  v1, v2, ...  meaning" */
        for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char name[64], type[16];
            int used = 0;
            if (line[0] != ' ' || sscanf(line, " %63s %15s %n", name, type, &used) != 2 ||
                (strcmp(type, "integer") && strcmp(type, "word")))
                continue;
            json_t *k = json_object(), *vals = json_array();
            const char *p = line + used;
            while (*p) {
                size_t len = strcspn(p, ", ");
                char v[64];
                snprintf(v, sizeof v, "%.*s", (int)len, p);
                json_array_append_new(vals,
                                      !strcmp(type, "integer") ? json_integer(strtoll(v, NULL, 10)) : json_string(v));
                p += len;
                if (p[0] == ',' && p[1] == ' ') p += 2;
                else break;
            }
            while (*p == ' ') p++;
            json_object_set_new(k, "name", json_string(name));
            json_object_set_new(k, "type", json_string(type));
            json_object_set_new(k, "values", vals);
            json_object_set_new(k, "doc", json_string(p));
            json_t *dv = dflt ? json_object_get(dflt, name) : NULL;
            if (dv) json_object_set(k, "default", dv);
            json_array_append_new(keys, k);
        }
        json_object_set_new(doc, "keys", keys);
        json_object_set_new(doc, "default", dflt ? json_incref(dflt) : json_null());
        if (!dflt) json_object_set_new(doc, "default_error", json_string(why));
        cg_free(text);
        cg_free(def);
        json_decref(dflt);
        return print_json(doc);
    }
    printf("%s\n", text);
    cg_free(text);
    if (s == CG_OK) printf("  default for this shape on %s: %s\n", target, def);
    else printf("  default: none for this shape (%s)\n", why);
    cg_free(def);
    json_decref(dflt);
    return 0;
}

static int show_configs(cg_context *ctx, const gen_opts *o, const cg_shape *shape, const char *target) {
    char *all;
    int n;
    if (cg_kernel_configs(ctx, o->kernel, shape, o->arch, &all, &n) != CG_OK) return gen_fail(ctx, o->kernel);
    json_t *arr = o->json ? json_array() : NULL;
    if (arr)
        for (char *save, *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            json_array_append_new(arr, cfg_json(line));
    else fputs(all, stdout);
    cg_free(all);
    fprintf(stderr, "%d valid configs for %s on %s\n", n, o->kernel, target);
    return arr ? print_json(arr) : 0;
}

static int show_plan(const gen_opts *o, const cg_kernel_plan *plan) {
    if (o->json) {
        json_t *doc = json_object(), *ls = json_array();
        json_object_set_new(doc, "kernel", json_string(plan->kernel));
        json_object_set_new(doc, "name", json_string(plan->name));
        json_object_set_new(doc, "config", cfg_json(plan->config));
        json_object_set_new(doc, "workspace_bytes", json_integer(plan->workspace_bytes));
        for (int l = 0; l < plan->nlaunch; l++) {
            const cg_kernel_launch *x = &plan->launch[l];
            json_array_append_new(ls, json_pack("{s:s, s:[I,I,I], s:[I,I,I], s:I}", "entry", x->entry, "grid",
                                                (json_int_t)x->grid[0], (json_int_t)x->grid[1], (json_int_t)x->grid[2],
                                                "block", (json_int_t)x->block[0], (json_int_t)x->block[1],
                                                (json_int_t)x->block[2], "smem", (json_int_t)x->smem));
        }
        json_object_set_new(doc, "launches", ls);
        return print_json(doc);
    }
    printf("kernel    %s\nname      %s\nconfig    %s\nworkspace %lld bytes\n", plan->kernel, plan->name, plan->config,
           (long long)plan->workspace_bytes);
    for (int l = 0; l < plan->nlaunch; l++) {
        const cg_kernel_launch *x = &plan->launch[l];
        printf("launch    %s grid (%u, %u, %u) block (%u, %u, %u) smem %lld\n", x->entry, x->grid[0], x->grid[1],
               x->grid[2], x->block[0], x->block[1], x->block[2], (long long)x->smem);
    }
    return 0;
}

static int gen_main(cg_context *ctx, int argc, char **argv) {
    gen_opts o;
    memset(&o, 0, sizeof o);
    int rc = cg_cli_parse(&k_gen_cmd, argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.config && add_pins(&o, o.config) != 0)
        return cg_cli_usage_err("gen", "--config: expected k=v,k=v, got '%s'", o.config);
    if (o.list) return list_kernels(ctx);
    if (!o.kernel) return cg_cli_usage_err("gen", "missing the kernel name (see `chunkgen gen --list`)");
    /* the shape of the kernel's op; --space without --shape lists the keys alone */
    cg_shape shape = {.size = sizeof shape};
    cg_op op;
    char err[256];
    int have_shape = o.shape.text[0] || !o.space;
    if (have_shape && cg_cli_kshape_op(&o.shape, o.kernel, &op, err, sizeof err))
        return cg_cli_usage_err("gen", "%s", err);
    if (have_shape && cg_cli_kshape_make(ctx, &o.shape, op, &shape) != CG_OK)
        return cg_cli_usage_err("gen", "--shape: %s", cg_errmsg(ctx));
    char target[160];
    target_name(ctx, o.kernel, o.arch, target, sizeof target);
    if (o.space) return show_space(ctx, &o, have_shape ? &shape : NULL, target);
    if (o.configs) return show_configs(ctx, &o, &shape, target);
    cg_kernel_plan plan = CG_KERNEL_PLAN_INIT;
    if (cg_kernel_plan_make(ctx, o.kernel, &shape, o.arch, o.pins, &plan) != CG_OK) return gen_fail(ctx, o.kernel);
    if (o.verbose) fprintf(stderr, "chunkgen gen: %s config %s\n", plan.name, plan.config);
    rc = o.plan ? show_plan(&o, &plan) : fputs(plan.source, stdout) < 0;
    cg_kernel_plan_free(&plan);
    return rc;
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

/* The kernel cache: its entries and bytes, its CUBINs per target arch, how many
 * `chunkgen import` brought. */
static void cache_census(cg_context *ctx) {
    char dir[4200];
    int n = 0;
    cg_kcache_entry *es = NULL;
    if (cg_kcache_dir(ctx, dir, sizeof dir) != CG_OK || cg_bundle_list(ctx, NULL, &es, &n) != CG_OK) {
        printf("cache:   %s\n", cg_errmsg(ctx));
        free(es);
        return;
    }
    int arch[64] = {0}, count[64] = {0}, na = 0, bundled = 0, other = 0;
    int64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        const cg_kcache_entry *e = &es[i];
        bytes += e->bytes;
        if (!e->usable || strcmp(e->kind, "cubin") || e->arch <= 0) {
            other++; /* emulator objects, other chunkgen versions, damaged entries */
            continue;
        }
        int k = 0;
        while (k < na && arch[k] != e->arch) k++;
        if (k == na && na < 64) arch[na++] = e->arch;
        if (k < na) count[k]++;
        bundled += e->bundled;
    }
    free(es);
    printf("cache:   %s (%d entries, %.1f MiB)\n", dir, n, (double)bytes / (1024.0 * 1024.0));
    printf("cubins: ");
    for (int i = 0; i < na; i++) printf(" sm_%d: %d%s", arch[i], count[i], i + 1 < na ? "," : "");
    printf("%s (%d from bundles); %d other entries\n", na ? "" : " none", bundled, other);
}

/* The driver, the device and NVRTC, or why each is absent. */
static void toolchain_lines(const cg_device_info *d) {
    if (d->driver_version) printf("driver:  CUDA %d.%d\n", d->driver_version / 1000, d->driver_version % 1000 / 10);
    else printf("driver:  none (%s)\n", d->driver_why);
    if (d->gpu)
        printf("device:  %s (sm_%d, %d SMs, %lld bytes shared memory per block, %d registers per block)\n", d->gpu_name,
               d->gpu_arch, d->gpu_sm_count, (long long)d->gpu_smem_per_block, d->gpu_regs_per_block);
    else printf("device:  none: %s\n", d->gpu_why);
    if (d->nvrtc_id[0]) printf("nvrtc:   %s\n", d->nvrtc_id);
    else printf("nvrtc:   none: %s\n", d->nvrtc_why);
    printf("cpu:     %s (%d cores; CPU path %s, this CPU runs %s)\n", d->cpu_model, d->cpu_cores, d->cpu_isa,
           d->cpu_isas);
}

int cg_cmd_info(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: chunkgen info   print the device, driver, NVRTC, the CPU and the kernel cache (its CUBINs\n"
                   "per arch, how many came from bundles). Per call, `--verbose` of run/bench prints kernel_from=:\n"
                   "compiled / disk-cache / bundle / process, with render, compile and load times.\n");
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
    cg_device_info dev = CG_DEVICE_INFO_INIT;
    if (cg_device_query(ctx, CG_BACKEND_CUDA, &dev) == CG_OK) toolchain_lines(&dev);
    else printf("device:  %s\n", cg_errmsg(ctx));
    cache_census(ctx);
    const char *lp = getenv("CHUNKGEN_LUA_PATH");
    printf("lua:     %s\n", lp && *lp ? lp : "embedded generator and templates");
    const char *const *names;
    int n;
    if (cg_kernel_list(ctx, &names, &n) == CG_OK) {
        printf("kernels:");
        for (int i = 0; i < n; i++) printf(" %s", names[i]);
        printf("\n");
    } else {
        printf("kernels: generator error: %s\n", cg_errmsg(ctx));
    }
    cg_context_free(ctx);
    return 0;
}
