/* cmd_gen.c -- `chunkgen gen` (render a generated kernel) and `chunkgen info`. */
#include "cli.h"
#include "cli_args.h"
#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"
#include "gen.h"

#include <jansson.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static const char gen_usage[] =
    "usage: chunkgen gen KERNEL --shape dk=N,dv=N [options]   print the rendered CUDA source\n"
    "       chunkgen gen KERNEL --space [--shape ...]        its config keys: type, values, meaning, default\n"
    "       chunkgen gen --list                              list the kernels and their spaces\n"
    "KERNEL is a generated kernel (ssd_fwd, ssd_bwd, sscan_fwd, sscan_bwd, ...) or a CPU\n"
    "space (ssd_cpu, sscan_cpu): --space, --configs and the default work for both.\n";

typedef struct gen_opts {
    cg_kshape shape; /* first: cg_cli_kshape_opt and cg_cli_kflags_opt write it */
    const char *kernel;
    cg_cfg pins;
    const char *config;
    int arch, plan, space, configs, list, json, verbose;
} gen_opts;

static int gen_positional(void *opts, const char *arg, char *err, size_t errlen) {
    gen_opts *o = opts;
    if (o->kernel) return snprintf(err, errlen, "unexpected argument '%s' (one kernel at a time)", arg), -1;
    o->kernel = arg;
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

static int opt_param(void *opts, const char *v, char *err, size_t errlen) {
    if (add_pin(&((gen_opts *)opts)->pins, v) == 0) return 0;
    return snprintf(err, errlen, "expected k=v (short words), got '%s'", v), -1;
}

int cg_cli_kshape_opt(void *opts, const char *v, char *err, size_t errlen) {
    cg_cli_shape s;
    const unsigned all = CG_SHAPE_B | CG_SHAPE_T | CG_SHAPE_G | CG_SHAPE_H | CG_SHAPE_DK | CG_SHAPE_DV | CG_SHAPE_D |
                         CG_SHAPE_N;
    if (cg_cli_shape_parse(v, NULL, all, 0, -1, &s, err, errlen)) return -1;
    cg_kshape *k = opts;
    if (s.given & CG_SHAPE_B) k->B = s.B;
    if (s.given & CG_SHAPE_T) k->T = k->L = s.T;
    if (s.given & CG_SHAPE_G) k->G = s.G;
    if (s.given & CG_SHAPE_H) k->H = s.H;
    if (s.given & CG_SHAPE_DK) k->dk = s.dk;
    if (s.given & CG_SHAPE_DV) k->dv = s.dv;
    if (s.given & CG_SHAPE_D) k->D = s.D;
    if (s.given & CG_SHAPE_N) k->N = s.N;
    return 0;
}

int cg_cli_kflags_opt(void *opts, const char *v, char *err, size_t errlen) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int flag = cg__kflag_parse(tok);
        if (!flag) {
            size_t m = (size_t)snprintf(err, errlen, "unknown flag '%s' (expected ", tok);
            for (int i = 0; i < cg__nkflags && m < errlen; i++)
                m += (size_t)snprintf(err + m, errlen - m, "%s%s", i ? ", " : "", cg__kflags[i].name);
            if (m < errlen) snprintf(err + m, errlen - m, ")");
            return -1;
        }
        ((cg_kshape *)opts)->flags |= flag;
    }
    return 0;
}

void cg_cli_kflags_help(FILE *f) {
    fputs("\nshape flags (--flags a,b,...):\n ", f);
    int col = 1;
    for (int i = 0; i < cg__nkflags; i++) {
        char w[96];
        const cg_kflag_desc *k = &cg__kflags[i];
        int n = snprintf(w, sizeof w, " %s%s%s%s%s", k->name, k->note ? " (" : "", k->note ? k->note : "",
                         k->note ? ")" : "", i + 1 < cg__nkflags ? "," : "");
        if (col + n > 88) fputs("\n ", f), col = 1;
        fputs(w, f);
        col += n;
    }
    fputc('\n', f);
}

static const cg_cli_opt k_gen_opts[] = {
    {"--shape", 0, CG_CLI_FN, 0, "KEY=N,...", "the shape (" "SSD: B T G H dk dv, defaults B=1,T=256,G=1,H=1;\n"
     "sscan: B L D N G); dk, dv (SSD) and N, G (sscan) are baked into the source", 0, 0, cg_cli_kshape_opt},
    {"--flags", 0, CG_CLI_FN, 0, "a,b", "shape flags (listed above)", 0, 0, cg_cli_kflags_opt},
    {"--config", 0, CG_CLI_STR, offsetof(gen_opts, config), "k=v,...", "pin several parameters, e.g. chunk=64,warps=4 (as --config of run\n"
     "and bench, for this one kernel: no scopes)", 0, 0, NULL},
    {"--param", 0, CG_CLI_FN, 0, "k=v", "pin one parameter (repeatable); missing ones come from the default", 0, 0, opt_param},
    {"--arch", 0, CG_CLI_INT, offsetof(gen_opts, arch), "N", "render for sm_N's limits (default: the emulated sm_80 device)", 0, 1000, NULL},
    {"--plan", 0, CG_CLI_FLAG, offsetof(gen_opts, plan), NULL, "print the plan (name, config, launches) instead of the source", 0, 0, NULL},
    {"--space", 0, CG_CLI_FLAG, offsetof(gen_opts, space), NULL, "list the config keys: type, values, meaning, and the default\n"
     "for this shape", 0, 0, NULL},
    {"--configs", 0, CG_CLI_FLAG, offsetof(gen_opts, configs), NULL, "list every config the constraints accept for this shape", 0, 0, NULL},
    {"--list", 0, CG_CLI_FLAG, offsetof(gen_opts, list), NULL, "list the kernels and CPU spaces with their keys", 0, 0, NULL},
    CG_CLI_OPT_JSON(gen_opts, json, "--plan, --space and --configs as JSON"),
    CG_CLI_OPT_VERBOSE(gen_opts, verbose, "also print the plan's name and config to stderr"),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_gen_cmd = {"gen", gen_usage, k_gen_opts, gen_positional, cg_cli_kflags_help};

static int gen_fail(cg_context *ctx, const char *what) {
    fprintf(stderr, "chunkgen gen: %s: %s\n", what, cg_errmsg(ctx));
    return 1;
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

static void cfg_print(FILE *f, const cg_cfg *c) {
    char text[CG_CFG_MAX * 66];
    cg__cfg_text(c, text, sizeof text);
    fputs(text, f);
}

static json_t *cfg_json(const cg_cfg *c) {
    json_t *o = json_object();
    for (int k = 0; k < c->n; k++) {
        char *end;
        long long v = strtoll(c->kv[k].val, &end, 10);
        json_object_set_new(o, c->kv[k].key, *end || end == c->kv[k].val ? json_string(c->kv[k].val) : json_integer(v));
    }
    return o;
}

static int print_json(json_t *doc) {
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 ? 0 : 1;
    fputc('\n', stdout);
    json_decref(doc);
    return rc;
}

/* --space: the kernel's keys (type, values, meaning: generator/keys.lua) and the
 * default config for this shape. */
static int show_space(cg_context *ctx, const gen_opts *o, const cg_devinfo *dev) {
    char *text;
    if (cg__gen_describe(ctx, o->kernel, &text) != CG_OK) return gen_fail(ctx, o->kernel);
    cg_cfg def;
    const cg_cfg none = {0};
    cg_status s = cg__gen_resolve(ctx, o->kernel, &o->shape, dev, &none, &def);
    char why[CG_ERRMSG_CAP];
    snprintf(why, sizeof why, "%s", s == CG_OK ? "" : cg_errmsg(ctx));
    if (o->json) {
        json_t *doc = json_object(), *keys = json_array();
        json_object_set_new(doc, "kernel", json_string(o->kernel));
        json_object_set_new(doc, "device", json_string(dev->name));
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
                json_array_append_new(vals, !strcmp(type, "integer") ? json_integer(strtoll(v, NULL, 10)) : json_string(v));
                p += len;
                if (p[0] == ',' && p[1] == ' ') p += 2;
                else break;
            }
            while (*p == ' ') p++;
            json_object_set_new(k, "name", json_string(name));
            json_object_set_new(k, "type", json_string(type));
            json_object_set_new(k, "values", vals);
            json_object_set_new(k, "doc", json_string(p));
            for (int d = 0; s == CG_OK && d < def.n; d++)
                if (!strcmp(def.kv[d].key, name)) {
                    json_t *dv = cfg_json(&def);
                    json_object_set(k, "default", json_object_get(dv, name));
                    json_decref(dv);
                }
            json_array_append_new(keys, k);
        }
        json_object_set_new(doc, "keys", keys);
        json_object_set_new(doc, "default", s == CG_OK ? cfg_json(&def) : json_null());
        if (s != CG_OK) json_object_set_new(doc, "default_error", json_string(why));
        free(text);
        return print_json(doc);
    }
    printf("%s\n", text);
    free(text);
    if (s == CG_OK) {
        printf("  default for this shape on %s: ", dev->name);
        cfg_print(stdout, &def);
        printf("\n");
    } else {
        printf("  default: none for this shape (%s)\n", why);
    }
    return 0;
}

static int show_configs(cg_context *ctx, const gen_opts *o, const cg_devinfo *dev) {
    cg_cfg *cfgs;
    int n;
    if (cg__gen_space(ctx, o->kernel, &o->shape, dev, &cfgs, &n) != CG_OK) return gen_fail(ctx, o->kernel);
    json_t *arr = o->json ? json_array() : NULL;
    for (int c = 0; c < n; c++) {
        if (arr) {
            json_array_append_new(arr, cfg_json(&cfgs[c]));
        } else {
            cfg_print(stdout, &cfgs[c]);
            printf("\n");
        }
    }
    free(cfgs);
    fprintf(stderr, "%d valid configs for %s on %s\n", n, o->kernel, dev->name);
    return arr ? print_json(arr) : 0;
}

static int show_plan(const gen_opts *o, const cg_plan *plan) {
    if (o->json) {
        json_t *doc = json_object(), *ls = json_array();
        json_object_set_new(doc, "kernel", json_string(plan->kernel));
        json_object_set_new(doc, "name", json_string(plan->name));
        json_object_set_new(doc, "config", cfg_json(&plan->params));
        json_object_set_new(doc, "workspace_bytes", json_integer(plan->workspace_bytes));
        for (int l = 0; l < plan->nlaunch; l++) {
            const cg_launch *x = &plan->launch[l];
            json_array_append_new(ls, json_pack("{s:s, s:[I,I,I], s:[I,I,I], s:I}", "entry", x->entry, "grid",
                                                (json_int_t)x->grid[0], (json_int_t)x->grid[1], (json_int_t)x->grid[2],
                                                "block", (json_int_t)x->block[0], (json_int_t)x->block[1],
                                                (json_int_t)x->block[2], "smem", (json_int_t)x->smem));
        }
        json_object_set_new(doc, "launches", ls);
        return print_json(doc);
    }
    printf("kernel    %s\nname      %s\nconfig    ", plan->kernel, plan->name);
    cfg_print(stdout, &plan->params);
    printf("\nworkspace %lld bytes\n", (long long)plan->workspace_bytes);
    for (int l = 0; l < plan->nlaunch; l++) {
        const cg_launch *x = &plan->launch[l];
        printf("launch    %s grid (%u, %u, %u) block (%u, %u, %u) smem %lld\n", x->entry, x->grid[0], x->grid[1],
               x->grid[2], x->block[0], x->block[1], x->block[2], (long long)x->smem);
    }
    return 0;
}

static int gen_main(cg_context *ctx, int argc, char **argv) {
    gen_opts o;
    memset(&o, 0, sizeof o);
    o.shape = (cg_kshape){.B = 1, .T = 256, .G = 1, .H = 1};
    int rc = cg_cli_parse(&k_gen_cmd, argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.config) {
        char buf[512];
        if (strlen(o.config) >= sizeof buf) return cg_cli_usage_err("gen", "--config: too long");
        snprintf(buf, sizeof buf, "%s", o.config);
        for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (add_pin(&o.pins, tok) != 0) return cg_cli_usage_err("gen", "--config: expected k=v,k=v, got '%s'", o.config);
    }
    if (o.list) return list_kernels(ctx);
    if (!o.kernel) return cg_cli_usage_err("gen", "missing the kernel name (see `chunkgen gen --list`)");
    cg_devinfo dev;
    if (o.arch) {
        if (!cg__devinfo_arch(o.arch, &dev)) {
            fprintf(stderr, "chunkgen gen: unknown arch sm_%d (known: 75 80 86 87 89 90 100 103 120)\n", o.arch);
            return 2;
        }
    } else {
        cg__devinfo_emulated(&dev);
    }
    /* A CPU space (generator/cpu/) is resolved for this machine's cores, as the tuner does. */
    char *desc = NULL;
    if ((o.space || o.configs) && cg__gen_describe(ctx, o.kernel, &desc) == CG_OK && strstr(desc, "backend cpu")) {
        memset(&dev, 0, sizeof dev);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        dev.sm_count = cores > 0 ? (int)cores : 1;
        snprintf(dev.name, sizeof dev.name, "cpu (%d threads)", dev.sm_count);
    }
    free(desc);
    if (o.space) return show_space(ctx, &o, &dev);
    if (o.configs) return show_configs(ctx, &o, &dev);
    cg_plan plan;
    if (cg__gen_plan(ctx, o.kernel, &o.shape, &dev, &o.pins, &plan) != CG_OK) return gen_fail(ctx, o.kernel);
    if (o.verbose) {
        fprintf(stderr, "chunkgen gen: %s config ", plan.name);
        cfg_print(stderr, &plan.params);
        fprintf(stderr, "\n");
    }
    rc = 0;
    if (o.plan) rc = show_plan(&o, &plan);
    else fputs(plan.source, stdout);
    cg__plan_free(&plan);
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
    if (cg_kcache_dir(ctx, dir, sizeof dir) != CG_OK || cg_kcache_list(ctx, NULL, NULL, 0, &n) != CG_OK ||
        (n && !(es = calloc((size_t)n, sizeof *es))) || (n && cg_kcache_list(ctx, NULL, es, n, &n) != CG_OK)) {
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
