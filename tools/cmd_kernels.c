/* cmd_kernels.c -- `chunkgen build-kernels`: compile the CUDA kernels of a shape for
 * a list of architectures into the kernel cache, ahead of time and without a GPU
 * (NVRTC needs none). The entries are keyed exactly as the CUDA executor looks them up
 * (cg__cubin_key), so a process on a GPU of that arch finds them and compiles nothing;
 * `chunkgen export --with-kernels` carries them to other machines. Reports, per kernel,
 * the time spent rendering and compiling (the compile-latency benchmark's numbers). */
#include "chunkgen.h"
#include "cli.h"
#include "cli_args.h"
#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"
#include "cpu/cpu_isa.h"
#include "gen.h"

#include <jansson.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char k_usage[] =
    "usage: chunkgen build-kernels --shape KEY=N,... [--arch 80,90] [options]\n"
    "\n"
    "Renders and compiles (NVRTC, no GPU needed) the CUDA kernels of one shape for each\n"
    "architecture into the kernel cache (<cache dir>/kernels), keyed as the CUDA executor\n"
    "looks them up: a process on a GPU of that arch then loads them and compiles nothing.\n"
    "The config of each kernel is its default for the shape and arch (what an untuned call\n"
    "runs) or the --config pin. (The kernels of tuned configs: tune on the target, then\n"
    "`chunkgen export --with-kernels`.) Kernels already in the cache are kept\n"
    "(\"cached\") unless --force. The shape: SSD keys (B T G H dk dv) select ssd_fwd and\n"
    "ssd_bwd, selective-scan keys (B L D N G) sscan_fwd and sscan_bwd; both may be given\n"
    "(T and L are one key). Kernels compile in parallel (--threads). --json FILE writes\n"
    "the per-kernel times (render, compile) with the NVRTC version and the host CPU.\n";

typedef struct bk_opts {
    cg_kshape shape; /* first: cg_cli_kshape_opt and cg_cli_kflags_opt write it */
    const char *kernels, *archs, *config, *json, *cache_dir;
    int threads, force, verbose;
} bk_opts;

static const cg_cli_opt k_opts[] = {
    {"--shape", 0, CG_CLI_FN, 0, "KEY=N,...", "the shape (SSD: B T G H dk dv, defaults B=1,T=256,G=1,H=1;\n"
     "sscan: B L D N G)", 0, 0, cg_cli_kshape_opt},
    {"--flags", 0, CG_CLI_FN, 0, "a,b", "shape flags (listed above)", 0, 0, cg_cli_kflags_opt},
    {"--kernels", 0, CG_CLI_STR, offsetof(bk_opts, kernels), "LIST", "kernels to build (default: those the shape's keys select)", 0, 0, NULL},
    {"--arch", 0, CG_CLI_STR, offsetof(bk_opts, archs), "LIST", "target architectures, e.g. 80,90 (default 80,90)", 0, 0, NULL},
    CG_CLI_OPT_CONFIG(bk_opts, config),
    {"--force", 0, CG_CLI_FLAG, offsetof(bk_opts, force), NULL, "compile even what the cache holds (and replace it)", 0, 0, NULL},
    {"--json", 0, CG_CLI_STR, offsetof(bk_opts, json), "FILE", "write the per-kernel report as JSON (- for stdout)", 0, 0, NULL},
    {"--cache-dir", 0, CG_CLI_STR, offsetof(bk_opts, cache_dir), "DIR", "the cache directory (default $CHUNKGEN_CACHE_DIR)", 0, 0, NULL},
    CG_CLI_OPT_THREADS(bk_opts, threads),
    CG_CLI_OPT_VERBOSE(bk_opts, verbose, "print each kernel's compile log (ptxas resource usage)"),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_cmd = {"build-kernels", k_usage, k_opts, NULL, cg_cli_kflags_help};

typedef struct bk_job {
    char kernel[32], name[192], cfg[256];
    int arch, lines;
    cg_plan plan;
    char *key;
    double render_ms, compile_ms, compile_cpu_ms, compile_process_cpu_ms, lookup_ms;
    const char *how; /* "compiled", "cached", "failed" */
    char msg[1024];
    char *log;
} bk_job;

typedef struct bk_run {
    bk_job *jobs;
    const char *dir;
    int force;
    int split; /* NVRTC threads per module (cg__nvrtc_compile_threads) */
} bk_run;

/* One job: the cache, else NVRTC and a put. Each job writes only its own slot. */
static void build_one(void *arg, int64_t i, int tid) {
    (void)tid;
    bk_run *r = arg;
    bk_job *j = &r->jobs[i];
    void *bin = NULL;
    size_t len = 0;
    int64_t t0 = cg__jit_now_ns();
    if (!r->force && cg__kcache_get(r->dir, j->plan.name, j->key, &bin, &len, &j->log) == CG_OK) {
        j->lookup_ms = (double)(cg__jit_now_ns() - t0) / 1e6;
        j->how = "cached";
        free(bin);
        return;
    }
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) {
        j->how = "failed";
        snprintf(j->msg, sizeof j->msg, "cannot create a context");
        return;
    }
    /* wall time, and this thread's CPU time (NVRTC compiles in the calling thread: the
     * CPU time is the compile's cost without the other processes of a busy machine) */
    struct timespec c0, c1, p0, p1; /* NVRTC's split threads: in the process's time only */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
    t0 = cg__jit_now_ns();
    cg_status st = cg__nvrtc_compile_threads(ctx, j->plan.name, j->plan.source, j->arch, r->split, &bin, &len, &j->log);
    j->compile_ms = (double)(cg__jit_now_ns() - t0) / 1e6;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p1);
    j->compile_cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
    j->compile_process_cpu_ms = (double)(p1.tv_sec - p0.tv_sec) * 1e3 + (double)(p1.tv_nsec - p0.tv_nsec) / 1e6;
    if (st != CG_OK) {
        j->how = "failed";
        snprintf(j->msg, sizeof j->msg, "%s", cg_errmsg(ctx));
    } else if (cg__kcache_put(r->dir, j->plan.name, j->key, bin, len, j->log) != CG_OK) {
        j->how = "failed";
        snprintf(j->msg, sizeof j->msg, "cannot write the kernel cache %s", r->dir);
    } else {
        j->how = "compiled";
    }
    free(bin);
    cg_context_free(ctx);
}

static int is_sscan(const char *k) { return !strncmp(k, "sscan_", 6); }

/* The kernels and archs of the options; 0, else a usage message was printed (2). */
static int lists(const bk_opts *o, char kernels[8][32], int *nk, int archs[16], int *na) {
    *nk = *na = 0;
    if (o->kernels) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->kernels);
        for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, "ssd_fwd") && strcmp(t, "ssd_bwd") && strcmp(t, "sscan_fwd") && strcmp(t, "sscan_bwd"))
                return cg_cli_usage_err("build-kernels", "--kernels: unknown kernel '%s' (expected ssd_fwd, ssd_bwd, "
                                        "sscan_fwd, sscan_bwd)", t);
            if (*nk == 8) return cg_cli_usage_err("build-kernels", "--kernels: at most 8");
            snprintf(kernels[(*nk)++], 32, "%s", t);
        }
    } else {
        static const char *const all[] = {"ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"};
        for (int i = 0; i < 4; i++)
            if (is_sscan(all[i]) ? (o->shape.D && o->shape.N) : (o->shape.dk && o->shape.dv))
                snprintf(kernels[(*nk)++], 32, "%s", all[i]);
    }
    for (int i = 0; i < *nk; i++) {
        int ok = is_sscan(kernels[i]) ? (o->shape.D && o->shape.N) : (o->shape.dk && o->shape.dv);
        if (!ok)
            return cg_cli_usage_err("build-kernels", "--shape: %s needs %s", kernels[i],
                                    is_sscan(kernels[i]) ? "D and N (e.g. B=1,L=256,D=128,N=16)" : "dk and dv (e.g. dk=64,dv=64)");
    }
    if (!*nk) return cg_cli_usage_err("build-kernels", "--shape: give dk,dv (SSD) and/or D,N (selective scan)");
    char buf[128];
    snprintf(buf, sizeof buf, "%s", o->archs ? o->archs : "80,90");
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long a = strtol(t, &end, 10);
        cg_devinfo d;
        if (*end || !cg__devinfo_arch((int)a, &d) || a < 80)
            return cg_cli_usage_err("build-kernels", "--arch: '%s' is not a known arch of sm_80 or newer (80 86 87 89 "
                                    "90 100 103 120)", t);
        if (*na == 16) return cg_cli_usage_err("build-kernels", "--arch: at most 16");
        archs[(*na)++] = (int)a;
    }
    return 0;
}

static void cfg_text(const cg_cfg *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < c->n && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s=%s", k ? "," : "", c->kv[k].key, c->kv[k].val);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int write_json(const char *path, const bk_job *jobs, int n, const char *nvrtc_id, int threads) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const bk_job *j = &jobs[i];
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:s}", "kernel",
                                             j->kernel, "name", j->plan.name, "config", j->cfg, "arch", j->arch,
                                             "source_lines", j->lines, "render_ms", j->render_ms, "compile_ms",
                                             j->compile_ms, "compile_cpu_ms", j->compile_cpu_ms,
                                             "compile_process_cpu_ms", j->compile_process_cpu_ms, "cache_lookup_ms",
                                             j->lookup_ms, "result", j->how));
    }
    const char *cpu = cg__cpu_model();
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:i, s:o}", "kind", "chunkgen-build-kernels", "chunkgen",
                            cg_version(), "nvrtc", nvrtc_id, "cpu", cpu, "threads", threads, "kernels", arr);
    int flags = JSON_INDENT(1) | JSON_SORT_KEYS;
    int bad = !doc || (strcmp(path, "-") ? json_dump_file(doc, path, flags) : json_dumpf(doc, stdout, flags)) != 0;
    if (!strcmp(path, "-")) putchar('\n');
    json_decref(doc);
    if (bad) fprintf(stderr, "chunkgen build-kernels: cannot write %s: %s\n", path, strerror(errno));
    return bad;
}

int cg_cmd_build_kernels(int argc, char **argv) {
    bk_opts o;
    memset(&o, 0, sizeof o);
    o.shape = (cg_kshape){.B = 1, .T = 256, .G = 1, .H = 1};
    int rc = cg_cli_parse(&k_cmd, argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    o.shape.L = o.shape.T;
    char kernels[8][32];
    int archs[16], nk, na;
    if ((rc = lists(&o, kernels, &nk, archs, &na))) return rc;
    const char *why;
    if (!cg__nvrtc_api(&why)) {
        fprintf(stderr, "chunkgen build-kernels: %s\n", why);
        return 1;
    }
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return fprintf(stderr, "chunkgen build-kernels: cannot create a context\n"), 1;
    if (o.cache_dir && cg_context_set_cache_dir(ctx, o.cache_dir) != CG_OK) {
        fprintf(stderr, "chunkgen build-kernels: --cache-dir: %s\n", cg_errmsg(ctx));
        cg_context_free(ctx);
        return 2;
    }
    char nvrtc_id[1024];
    if (cg__nvrtc_id(ctx, nvrtc_id, sizeof nvrtc_id) != CG_OK) {
        fprintf(stderr, "chunkgen build-kernels: %s\n", cg_errmsg(ctx));
        cg_context_free(ctx);
        return 1;
    }
    bk_job *jobs = calloc((size_t)(nk * na), sizeof *jobs);
    int nj = 0;
    rc = jobs ? 0 : 1;
    for (int a = 0; !rc && a < na; a++) {
        cg_devinfo dev;
        cg__devinfo_arch(archs[a], &dev);
        for (int k = 0; !rc && k < nk; k++) {
            bk_job *j = &jobs[nj];
            snprintf(j->kernel, sizeof j->kernel, "%.31s", kernels[k]);
            j->arch = archs[a];
            /* the config a call would run: --config, else the tuned one, else the default */
            cg_cfg pin = {0};
            char part[512], err[256];
            const char *cfg_text_in = NULL;
            if (o.config && cg_cli_config_for(o.config, kernels[k], part, sizeof part, &cfg_text_in, err, sizeof err)) {
                rc = cg_cli_usage_err("build-kernels", "--config: %s", err);
                break;
            }
            cg_status st = cfg_text_in ? cg__cfg_parse(ctx, cfg_text_in, &pin) : CG_OK;
            int64_t t0 = cg__jit_now_ns();
            if (st == CG_OK) st = cg__gen_plan(ctx, kernels[k], &o.shape, &dev, pin.n ? &pin : NULL, &j->plan);
            j->render_ms = (double)(cg__jit_now_ns() - t0) / 1e6;
            if (st == CG_OK) st = cg__cubin_key(ctx, nvrtc_id, archs[a], j->plan.name, j->plan.source, &j->key);
            if (st != CG_OK) {
                fprintf(stderr, "chunkgen build-kernels: %s for sm_%d: %s\n", kernels[k], archs[a], cg_errmsg(ctx));
                cg__plan_free(&j->plan);
                rc = 1;
                break;
            }
            cfg_text(&j->plan.params, j->cfg, sizeof j->cfg);
            j->lines = count_lines(j->plan.source);
            nj++;
        }
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/kernels", cg__cache_dir(ctx));
    int threads = o.threads > 0 ? o.threads : cg__online_cores();
    if (!rc && nj) {
        cg_pool *pool = cg__pool_create(threads);
        /* the pool's threads share the cores with NVRTC's split threads */
        bk_run run = {jobs, dir, o.force, cg__nvrtc_split_threads(cg__online_cores() / threads)};
        if (pool) cg__pool_run(pool, threads, nj, build_one, &run);
        else for (int i = 0; i < nj; i++) build_one(&run, i, 0);
        cg__pool_free(pool);
        printf("%-10s %-5s %-8s %6s %10s %11s %8s  %s\n", "kernel", "arch", "result", "lines", "render ms", "compile ms",
               "cpu ms", "name");
        for (int i = 0; i < nj; i++) {
            bk_job *j = &jobs[i];
            printf("%-10s sm_%-2d %-8s %6d %10.1f %11.1f %8.1f  %s\n", j->kernel, j->arch, j->how, j->lines,
                   j->render_ms, j->compile_ms, j->compile_cpu_ms, j->plan.name);
            if (!strcmp(j->how, "failed")) {
                fprintf(stderr, "chunkgen build-kernels: %s for sm_%d: %s\n", j->kernel, j->arch, j->msg);
                rc = 1;
            } else if (o.verbose && j->log) {
                fputs(j->log, stdout);
            }
        }
        printf("kernel cache: %s\n", dir);
        if (o.json && write_json(o.json, jobs, nj, nvrtc_id, threads)) rc = 1;
    }
    for (int i = 0; i < nj; i++) {
        cg__plan_free(&jobs[i].plan);
        free(jobs[i].key);
        free(jobs[i].log);
    }
    free(jobs);
    cg_context_free(ctx);
    return rc;
}
