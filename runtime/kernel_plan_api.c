/* kernel_plan_api.c -- the public calls of include/chunkgen.h's "kernels: plans,
 * configs, ahead of time": a kernel planned for a cg_shape on a target, its configs, and
 * compiling it into the kernel cache without a GPU. The generator decides (gen.h); this
 * file turns the public shape and target into the generator's, and its answers into the
 * public structs. The cache key is the CUDA executor's (cg__cubin_key), so what is built
 * here is what a process on such a GPU finds. */
#include "abi.h"
#include "cpu/cpu_isa.h"
#include "cuda/cg_cuda.h"
#include "gen.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One kernel asked about: its name, the generator's shape and device, and whether it is
 * a CPU space (run-time config of the C path, nothing rendered). */
typedef struct target {
    const char *kernel;
    int cpu;
    cg_shape shape;
    int flags; /* the shape flags a call lacks (gen.h): CG_KS_BWD for a CPU space's backward */
    cg_devinfo dev;
    cg_cfg pin;
} target;

/* The known architectures, for messages: "75 80 86 ...". */
static void known_archs(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    cg_devinfo d;
    for (int a = 1; a < 1000 && n < cap; a++)
        if (cg__devinfo_arch(a, &d)) n += (size_t)snprintf(buf + n, cap - n, "%s%d", n ? " " : "", a);
}

/* ctx's message of a failed call of the generator or the shape, prefixed with the
 * public call and the argument it is about; st. */
static cg_status rewrap(cg_context *ctx, cg_status st, const char *fn, const char *arg) {
    char msg[CG_ERRMSG_CAP];
    snprintf(msg, sizeof msg, "%s", cg_errmsg(ctx));
    size_t al = strlen(arg);
    if (!strncmp(msg, arg, al) && msg[al] == ':') return cg__err(ctx, st, "%s: %s", fn, msg); /* it names it */
    return cg__err(ctx, st, "%s: %s: %s", fn, arg, msg);
}

/* Check the arguments common to every call below and fill t. */
static cg_status target_of(cg_context *ctx, const char *fn, const char *kernel, const cg_shape *shape, int arch,
                           const char *config, target *t) {
    memset(t, 0, sizeof *t);
    if (!shape) return cg__err(ctx, CG_EINVAL, "%s: shape is NULL (expected a cg_shape, e.g. from cg_shape_parse)", fn);
    char text[CG_SHAPE_TEXT_MAX], op[64];
    cg_status st = cg_shape_format(ctx, shape, text, sizeof text);
    if (st != CG_OK) return rewrap(ctx, st, fn, "shape");
    const cg_op_desc *d = cg__op_desc(shape->op);
    t->kernel = kernel ? kernel : d->name;
    if ((st = cg__gen_kernel_info(ctx, t->kernel, op, sizeof op, &t->cpu)) != CG_OK) {
        return st == CG_ENOTFOUND ? rewrap(ctx, st, fn, "kernel") : st;
    }
    size_t ol = strlen(op);
    if (strcmp(op, d->name) && !(strncmp(d->name, op, ol) == 0 && d->name[ol] == '_'))
        return cg__err(ctx, CG_EINVAL, "%s: kernel: %s serves op %s, not the shape's %s", fn, t->kernel, op, d->name);
    if (t->cpu) {
        cg__cpu_devinfo(&t->dev, ctx->threads > 0 ? ctx->threads : cg__online_cores());
    } else if (arch == 0) {
        cg__devinfo_emulated(&t->dev);
    } else if (!cg__devinfo_arch(arch, &t->dev)) {
        char known[128];
        known_archs(known, sizeof known);
        return cg__err(ctx, CG_EINVAL, "%s: arch: sm_%d is not a known architecture (known: %s; 0: the emulator's)", fn,
                       arch, known);
    }
    if (config && config[0] && (st = cg__cfg_parse(ctx, config, &t->pin)) != CG_OK)
        return rewrap(ctx, st, fn, "config");
    /* the shape (checked by cg_shape_format) as the launcher and the CPU path give it to the
     * generator, with the direction for a CPU space */
    if ((st = cg__abi_in(ctx, "shape", &t->shape, sizeof t->shape, shape)) != CG_OK)
        return rewrap(ctx, st, fn, "shape");
    t->flags = t->cpu && d->bwd ? CG_KS_BWD : 0;
    return CG_OK;
}

/* A malloc'd copy of text into *out. */
static cg_status give_text(cg_context *ctx, const char *text, char **out) {
    *out = strdup(text);
    return *out ? CG_OK : cg__err(ctx, CG_ENOMEM, "out of memory");
}

#define ENTER(fn)                                                                                                      \
    if (!ctx || cg__ctx_enter(ctx, fn) != CG_OK) return CG_EINVAL;                                                     \
    cg_status st = CG_OK

cg_status cg_kernel_config(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch, const char *config,
                           char **out) {
    ENTER("cg_kernel_config");
    target t;
    cg_cfg cfg;
    if (out) *out = NULL;
    if (!out) st = cg__err(ctx, CG_EINVAL, "cg_kernel_config: out is NULL (expected where to write the config)");
    if (st == CG_OK) st = target_of(ctx, "cg_kernel_config", kernel, shape, arch, config, &t);
    if (st == CG_OK) st = cg__gen_resolve(ctx, t.kernel, &t.shape, t.flags, &t.dev, &t.pin, &cfg);
    if (st == CG_OK) {
        char text[CG_CFG_MAX * 66];
        cg__cfg_text(&cfg, text, sizeof text);
        st = give_text(ctx, text, out);
    }
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_kernel_configs(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch, char **configs,
                            int *n) {
    ENTER("cg_kernel_configs");
    target t;
    cg_cfg *all = NULL;
    int count = 0;
    if (configs) *configs = NULL;
    if (n) *n = 0;
    if (!configs || !n)
        st = cg__err(ctx, CG_EINVAL, "cg_kernel_configs: %s is NULL (expected where to write the configs)",
                     !configs ? "configs" : "n");
    if (st == CG_OK) st = target_of(ctx, "cg_kernel_configs", kernel, shape, arch, NULL, &t);
    if (st == CG_OK) st = cg__gen_space(ctx, t.kernel, &t.shape, t.flags, &t.dev, &all, &count);
    if (st == CG_OK) {
        const size_t line = CG_CFG_MAX * 66;
        char *text = malloc((size_t)count * line + 1), *p = text;
        if (!text) st = cg__err(ctx, CG_ENOMEM, "cg_kernel_configs: out of memory for %d configs", count);
        for (int i = 0; text && i < count; i++) {
            cg__cfg_text(&all[i], p, line);
            p += strlen(p);
            *p++ = '\n';
        }
        if (text) {
            *p = '\0';
            *configs = text;
            *n = count;
        }
    }
    free(all);
    cg__ctx_leave(ctx);
    return st;
}

static void plan_out(const cg_plan *p, cg_kernel_plan *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    snprintf(o->kernel, sizeof o->kernel, "%s", p->kernel);
    snprintf(o->name, sizeof o->name, "%s", p->name);
    cg__cfg_text(&p->params, o->config, sizeof o->config);
    o->workspace_bytes = p->workspace_bytes;
    o->nlaunch = p->nlaunch < CG_KERNEL_MAX_LAUNCH ? p->nlaunch : CG_KERNEL_MAX_LAUNCH;
    for (int l = 0; l < o->nlaunch; l++) {
        const cg_launch *x = &p->launch[l];
        cg_kernel_launch *y = &o->launch[l];
        snprintf(y->entry, sizeof y->entry, "%s", x->entry);
        memcpy(y->grid, x->grid, sizeof y->grid);
        memcpy(y->block, x->block, sizeof y->block);
        y->smem = x->smem;
    }
}

cg_status cg_kernel_plan_make(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch, const char *config,
                              cg_kernel_plan *out) {
    ENTER("cg_kernel_plan_make");
    target t;
    cg_plan plan;
    cg_kernel_plan o;
    memset(&o, 0, sizeof o);
    size_t size = 0;
    int planned = 0;
    /* out checked (and cleared) first: nothing is made for a call that cannot hand it over */
    st = cg__abi_out(ctx, "cg_kernel_plan_make: out", out, &o, sizeof o);
    if (st == CG_OK) memcpy(&size, out, sizeof size);
    if (st == CG_OK && size < offsetof(cg_kernel_plan, source) + sizeof(char *))
        st = cg__err(ctx, CG_EINVAL, "cg_kernel_plan_make: out.size: %zu is too small to hold the source", size);
    if (st == CG_OK) st = target_of(ctx, "cg_kernel_plan_make", kernel, shape, arch, config, &t);
    if (st == CG_OK && t.cpu)
        st = cg__err(ctx, CG_EUNSUPPORTED,
                     "cg_kernel_plan_make: kernel: %s is a CPU space (a run-time config of the C path, nothing "
                     "rendered or launched): ask cg_kernel_config",
                     t.kernel);
    if (st == CG_OK) st = cg__gen_plan(ctx, t.kernel, &t.shape, t.flags, &t.dev, t.pin.n ? &t.pin : NULL, &plan);
    planned = st == CG_OK;
    if (st == CG_OK) {
        plan_out(&plan, &o);
        o.source = plan.source; /* the caller's now: cg_kernel_plan_free */
        plan.source = NULL;
        cg__abi_out(ctx, "cg_kernel_plan_make: out", out, &o, sizeof o);
    }
    if (planned) cg__plan_free(&plan);
    cg__ctx_leave(ctx);
    return st;
}

void cg_kernel_plan_free(cg_kernel_plan *plan) {
    if (!plan) return;
    free(plan->source);
    plan->source = NULL;
}

static double ms_since(const struct timespec *a, clockid_t clock) {
    struct timespec b;
    clock_gettime(clock, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* Compile plan for arch under key into dir (the cache held nothing, or force): o's times
 * and log. NVRTC compiles in the calling thread, so the thread's CPU time is the
 * compile's cost without the other processes of a busy machine; its split threads show
 * in the process's time only. */
static cg_status compile_into(cg_context *ctx, const char *dir, const cg_plan *plan, const char *key, int arch,
                              int threads, cg_kernel_build_info *o) {
    struct timespec w0, c0, p0;
    void *bin = NULL;
    size_t len = 0;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
    cg_status st = cg__nvrtc_compile_threads(ctx, plan->name, plan->source, arch, threads, &bin, &len, &o->log);
    o->compile_ms = ms_since(&w0, CLOCK_MONOTONIC);
    o->compile_cpu_ms = ms_since(&c0, CLOCK_THREAD_CPUTIME_ID);
    o->compile_process_cpu_ms = ms_since(&p0, CLOCK_PROCESS_CPUTIME_ID);
    if (st == CG_OK && cg__kcache_put(dir, plan->name, key, bin, len, o->log) != CG_OK)
        st = cg__err(ctx, CG_EIO, "cg_kernel_build: cannot write the kernel cache %s", dir);
    free(bin);
    return st;
}

cg_status cg_kernel_build(cg_context *ctx, const char *kernel, const cg_shape *shape, int arch, const char *config,
                          int force, int nvrtc_threads, cg_kernel_build_info *out) {
    ENTER("cg_kernel_build");
    target t;
    cg_plan plan;
    int planned = 0;
    size_t size = 0;
    char *key = NULL, nvrtc_id[1024], dir[4200];
    const char *why = NULL;
    cg_kernel_build_info o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    cg_kernel_build_info none;
    memset(&none, 0, sizeof none);
    st = cg__abi_out(ctx, "cg_kernel_build: out", out, &none, sizeof none);
    if (st == CG_OK) memcpy(&size, out, sizeof size);
    if (st == CG_OK && arch == 0)
        st = cg__err(ctx, CG_EINVAL,
                     "cg_kernel_build: arch: 0 (the emulator's device) compiles no CUBIN; expected "
                     "a GPU architecture such as 80 or 90");
    if (st == CG_OK) st = target_of(ctx, "cg_kernel_build", kernel, shape, arch, config, &t);
    if (st == CG_OK && t.cpu)
        st = cg__err(ctx, CG_EUNSUPPORTED, "cg_kernel_build: kernel: %s is a CPU space: there is nothing to compile",
                     t.kernel);
    if (st == CG_OK && !cg__nvrtc_api(&why)) st = cg__err(ctx, CG_ENODEV, "cg_kernel_build: %s", why);
    if (st == CG_OK) st = cg__nvrtc_id(ctx, nvrtc_id, sizeof nvrtc_id);
    struct timespec r0;
    clock_gettime(CLOCK_MONOTONIC, &r0);
    if (st == CG_OK) st = cg__gen_plan(ctx, t.kernel, &t.shape, t.flags, &t.dev, t.pin.n ? &t.pin : NULL, &plan);
    planned = st == CG_OK;
    o.render_ms = ms_since(&r0, CLOCK_MONOTONIC);
    if (st == CG_OK) st = cg__cubin_key(ctx, nvrtc_id, arch, plan.name, plan.source, &key);
    if (st == CG_OK) {
        snprintf(o.name, sizeof o.name, "%s", plan.name);
        cg__cfg_text(&plan.params, o.config, sizeof o.config);
        o.arch = arch;
        for (const char *p = plan.source; *p; p++) o.source_lines += *p == '\n';
        snprintf(dir, sizeof dir, "%s/kernels", cg__cache_dir(ctx));
        void *bin = NULL;
        size_t len = 0;
        struct timespec l0;
        clock_gettime(CLOCK_MONOTONIC, &l0);
        if (!force && cg__kcache_get(dir, plan.name, key, &bin, &len, &o.log) == CG_OK) {
            o.lookup_ms = ms_since(&l0, CLOCK_MONOTONIC);
            o.cached = 1;
            free(bin);
        } else {
            o.lookup_ms = ms_since(&l0, CLOCK_MONOTONIC);
            st = compile_into(ctx, dir, &plan, key, arch, nvrtc_threads, &o);
        }
    }
    if (size && size < offsetof(cg_kernel_build_info, log) + sizeof(char *)) {
        free(o.log); /* an older caller's struct without the log */
        o.log = NULL;
    }
    if (size) {
        cg_status ost = cg__abi_out(ctx, "cg_kernel_build: out", out, &o, sizeof o);
        (void)ost; /* checked above: the same out */
    } else {
        free(o.log);
    }
    free(key);
    if (planned) cg__plan_free(&plan);
    cg__ctx_leave(ctx);
    return st;
}
