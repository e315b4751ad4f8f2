/* cmd_kernels.c -- `chunkgen build-kernels`: compile the CUDA kernels of a shape for
 * a list of architectures into the kernel cache, ahead of time and without a GPU (NVRTC
 * needs none), with cg_kernel_build: the entries are keyed exactly as the cuda backend
 * looks them up, so a process on a GPU of that arch finds them and compiles nothing;
 * `chunkgen export --with-kernels` carries them to other machines. Reports, per kernel,
 * the time spent rendering and compiling (the compile-latency benchmark's numbers). */
#include "chunkgen.h"
#include "cli.h"
#include "cli_args.h"
#include "kernel_shape.h"

#include <jansson.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char k_usage[] = "usage: chunkgen build-kernels --shape SHAPE [--arch 80,90] [options]\n"
                              "\n"
                              "Renders and compiles (NVRTC, no GPU needed) the CUDA kernels of one shape for each\n"
                              "architecture into the kernel cache (<cache dir>/kernels), keyed as the CUDA executor\n"
                              "looks them up: a process on a GPU of that arch then loads them and compiles nothing.\n"
                              "The config of each kernel is its default for the shape and arch (what an untuned call\n"
                              "runs) or the --config pin. (The kernels of tuned configs: tune on the target, then\n"
                              "`chunkgen export --with-kernels`.) Kernels already in the cache are kept\n"
                              "(\"cached\") unless --force. The shape: OP:ITEM,... (docs/shapes.md) builds OP's\n"
                              "kernel; without OP:, SSD keys (B T G H dk dv) select ssd_fwd and ssd_bwd,\n"
                              "selective-scan keys (B L D N G) sscan_fwd and sscan_bwd; both may be given (T and L\n"
                              "are one key). Kernels compile in parallel (--threads). --json FILE writes the\n"
                              "per-kernel times (render, compile) with the NVRTC version and the host CPU.\n";

typedef struct bk_opts {
    cg_cli_kshape shape; /* first: cg_cli_kshape_opt and cg_cli_kflags_opt write it */
    const char *kernels, *archs, *config, *json, *cache_dir;
    int threads, force, verbose;
} bk_opts;

static const cg_cli_opt k_opts[] = {
    {"--shape", 0, CG_CLI_FN, 0, "SHAPE",
     "the shape: OP:ITEM,... (docs/shapes.md), or KEY=N,... (SSD: B T G H\n"
     "dk dv, defaults B=1,T=256,G=1,H=1; sscan: B L D N G)",
     0, 0, cg_cli_kshape_opt},
    {"--flags", 0, CG_CLI_FN, 0, "a,b", "shape flags (listed above)", 0, 0, cg_cli_kflags_opt},
    {"--kernels", 0, CG_CLI_STR, offsetof(bk_opts, kernels), "LIST",
     "kernels to build (default: those the shape's keys select)", 0, 0, NULL},
    {"--arch", 0, CG_CLI_STR, offsetof(bk_opts, archs), "LIST", "target architectures, e.g. 80,90 (default 80,90)", 0,
     0, NULL},
    CG_CLI_OPT_CONFIG(bk_opts, config),
    {"--force", 0, CG_CLI_FLAG, offsetof(bk_opts, force), NULL, "compile even what the cache holds (and replace it)", 0,
     0, NULL},
    {"--json", 0, CG_CLI_STR, offsetof(bk_opts, json), "FILE", "write the per-kernel report as JSON (- for stdout)", 0,
     0, NULL},
    {"--cache-dir", 0, CG_CLI_STR, offsetof(bk_opts, cache_dir), "DIR",
     "the cache directory (default $CHUNKGEN_CACHE_DIR)", 0, 0, NULL},
    CG_CLI_OPT_THREADS(bk_opts, threads),
    CG_CLI_OPT_VERBOSE(bk_opts, verbose, "print each kernel's compile log (ptxas resource usage)"),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_cmd = {"build-kernels", k_usage, k_opts, NULL, cg_cli_kflags_help};

typedef struct bk_job {
    char kernel[32];
    int arch;
    cg_shape shape;
    char config[512]; /* the --config part for this kernel; "" none */
    cg_kernel_build_info info;
    cg_status st;
    char msg[1024];
} bk_job;

typedef struct bk_run {
    bk_job *jobs;
    int njobs, force, nvrtc_threads;
    const char *cache_dir;
    atomic_int next;
} bk_run;

/* A worker thread: its own context (a context serves one thread at a time), the jobs in
 * turn; each job writes only its own slot. */
static void *worker(void *arg) {
    bk_run *r = arg;
    cg_context *ctx = NULL;
    cg_status cst = cg_context_create(&ctx);
    if (cst == CG_OK && r->cache_dir) cst = cg_context_set_cache_dir(ctx, r->cache_dir);
    for (int i; (i = atomic_fetch_add(&r->next, 1)) < r->njobs;) {
        bk_job *j = &r->jobs[i];
        j->info = (cg_kernel_build_info)CG_KERNEL_BUILD_INFO_INIT;
        j->st = cst != CG_OK ? cst
                             : cg_kernel_build(ctx, j->kernel, &j->shape, j->arch, j->config, r->force,
                                               r->nvrtc_threads, &j->info);
        if (j->st != CG_OK) snprintf(j->msg, sizeof j->msg, "%s", ctx ? cg_errmsg(ctx) : "cannot create a context");
    }
    cg_context_free(ctx);
    return NULL;
}

static const char *result(const bk_job *j) {
    return j->st != CG_OK ? "failed" : j->info.cached ? "cached" : "compiled";
}

static int is_sscan(const char *k) { return !strncmp(k, "sscan_", 6); }

/* The kernels and archs of the options; 0, else a usage message was printed (2). */
static int lists(const bk_opts *o, char kernels[8][32], int *nk, int archs[16], int *na) {
    *nk = *na = 0;
    const cg_cli_kshape *s = &o->shape;
    const int ssd = cg_cli_kshape_gives(s, "dk") && cg_cli_kshape_gives(s, "dv");
    const int sscan = cg_cli_kshape_gives(s, "D") && cg_cli_kshape_gives(s, "N");
    const char *colon = strchr(s->text, ':');
    if (o->kernels) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->kernels);
        for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, "ssd_fwd") && strcmp(t, "ssd_bwd") && strcmp(t, "sscan_fwd") && strcmp(t, "sscan_bwd"))
                return cg_cli_usage_err("build-kernels",
                                        "--kernels: unknown kernel '%s' (expected ssd_fwd, ssd_bwd, "
                                        "sscan_fwd, sscan_bwd)",
                                        t);
            if (*nk == 8) return cg_cli_usage_err("build-kernels", "--kernels: at most 8");
            snprintf(kernels[(*nk)++], 32, "%s", t);
        }
    } else if (colon) { /* OP: names the kernel */
        snprintf(kernels[(*nk)++], 32, "%.*s", (int)(colon - s->text < 31 ? colon - s->text : 31), s->text);
    } else {
        static const char *const all[] = {"ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"};
        for (int i = 0; i < 4; i++)
            if (is_sscan(all[i]) ? sscan : ssd) snprintf(kernels[(*nk)++], 32, "%s", all[i]);
    }
    for (int i = 0; !colon && i < *nk; i++)
        if (!(is_sscan(kernels[i]) ? sscan : ssd))
            return cg_cli_usage_err("build-kernels", "--shape: %s needs %s", kernels[i],
                                    is_sscan(kernels[i]) ? "D and N (e.g. B=1,L=256,D=128,N=16)"
                                                         : "dk and dv (e.g. dk=64,dv=64)");
    if (!*nk) return cg_cli_usage_err("build-kernels", "--shape: give dk,dv (SSD) and/or D,N (selective scan)");
    char buf[128];
    snprintf(buf, sizeof buf, "%s", o->archs ? o->archs : "80,90");
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long a = strtol(t, &end, 10);
        if (*end || end == t || a < 80 || a > 999)
            return cg_cli_usage_err("build-kernels", "--arch: '%s' is not an arch of sm_80 or newer (e.g. 80,90)", t);
        if (*na == 16) return cg_cli_usage_err("build-kernels", "--arch: at most 16");
        archs[(*na)++] = (int)a;
    }
    return 0;
}

static int write_json(const char *path, const bk_job *jobs, int n, const cg_device_info *dev, int threads) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const bk_job *j = &jobs[i];
        const cg_kernel_build_info *b = &j->info;
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:s}", "kernel",
                                             j->kernel, "name", b->name, "config", b->config, "arch", j->arch,
                                             "source_lines", b->source_lines, "render_ms", b->render_ms, "compile_ms",
                                             b->compile_ms, "compile_cpu_ms", b->compile_cpu_ms,
                                             "compile_process_cpu_ms", b->compile_process_cpu_ms, "cache_lookup_ms",
                                             b->lookup_ms, "result", result(j)));
    }
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:i, s:o}", "kind", "chunkgen-build-kernels", "chunkgen", cg_version(), "nvrtc",
                  dev->nvrtc_id, "cpu", dev->cpu_model, "threads", threads, "kernels", arr);
    int flags = JSON_INDENT(1) | JSON_SORT_KEYS;
    int bad = !doc || (strcmp(path, "-") ? json_dump_file(doc, path, flags) : json_dumpf(doc, stdout, flags)) != 0;
    if (!strcmp(path, "-")) putchar('\n');
    json_decref(doc);
    if (bad) fprintf(stderr, "chunkgen build-kernels: cannot write %s: %s\n", path, strerror(errno));
    return bad;
}

/* The jobs: a shape and a config per kernel, for each arch; 0, else the exit code. */
static int make_jobs(cg_context *ctx, const bk_opts *o, char kernels[8][32], int nk, const int *archs, int na,
                     bk_job *jobs) {
    for (int k = 0; k < nk; k++) {
        cg_op op;
        cg_shape shape = {.size = sizeof shape};
        char err[256], part[512];
        const char *cfg = NULL;
        if (cg_cli_kshape_op(&o->shape, kernels[k], &op, err, sizeof err))
            return cg_cli_usage_err("build-kernels", "%s", err);
        if (cg_cli_kshape_make(ctx, &o->shape, op, &shape) != CG_OK)
            return cg_cli_usage_err("build-kernels", "--shape: %s", cg_errmsg(ctx));
        if (o->config && cg_cli_config_for(o->config, kernels[k], part, sizeof part, &cfg, err, sizeof err))
            return cg_cli_usage_err("build-kernels", "--config: %s", err);
        for (int a = 0; a < na; a++) {
            bk_job *j = &jobs[a * nk + k];
            snprintf(j->kernel, sizeof j->kernel, "%s", kernels[k]);
            j->arch = archs[a];
            j->shape = shape;
            snprintf(j->config, sizeof j->config, "%s", cfg ? cfg : "");
        }
    }
    return 0;
}

/* Run the jobs on `threads` worker threads (NVRTC's own split threads share the cores). */
static void run_jobs(bk_job *jobs, int nj, const bk_opts *o, int threads, int cores) {
    bk_run run = {.jobs = jobs, .njobs = nj, .force = o->force, .cache_dir = o->cache_dir};
    run.nvrtc_threads = cores / threads;
    atomic_init(&run.next, 0);
    pthread_t th[64];
    int started = 0;
    for (int t = 1; t < threads && t < 64; t++)
        if (pthread_create(&th[started], NULL, worker, &run) == 0) started++;
    worker(&run);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
}

int cg_cmd_build_kernels(int argc, char **argv) {
    bk_opts o;
    memset(&o, 0, sizeof o);
    int rc = cg_cli_parse(&k_cmd, argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    char kernels[8][32];
    int archs[16], nk, na;
    if ((rc = lists(&o, kernels, &nk, archs, &na))) return rc;
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK)
        return fprintf(stderr, "chunkgen build-kernels: cannot create a context\n"), 1;
    cg_device_info dev = CG_DEVICE_INFO_INIT;
    char dir[4200];
    if (o.cache_dir && cg_context_set_cache_dir(ctx, o.cache_dir) != CG_OK) {
        fprintf(stderr, "chunkgen build-kernels: --cache-dir: %s\n", cg_errmsg(ctx));
        cg_context_free(ctx);
        return 2;
    }
    if (cg_device_query(ctx, CG_BACKEND_CUDA, &dev) != CG_OK || !dev.nvrtc_id[0]) {
        fprintf(stderr, "chunkgen build-kernels: %s\n", dev.nvrtc_why[0] ? dev.nvrtc_why : cg_errmsg(ctx));
        cg_context_free(ctx);
        return 1;
    }
    bk_job *jobs = calloc((size_t)(nk * na), sizeof *jobs);
    rc = !jobs ? 1 : make_jobs(ctx, &o, kernels, nk, archs, na, jobs);
    const int nj = nk * na, cores = dev.cpu_cores > 0 ? dev.cpu_cores : 1;
    const int threads = o.threads > 0 ? o.threads : cores;
    if (!rc && cg_kcache_dir(ctx, dir, sizeof dir) != CG_OK) rc = 1;
    if (!rc) {
        run_jobs(jobs, nj, &o, threads, cores);
        printf("%-10s %-5s %-8s %6s %10s %11s %8s  %s\n", "kernel", "arch", "result", "lines", "render ms",
               "compile ms", "cpu ms", "name");
        for (int i = 0; i < nj; i++) {
            const bk_job *j = &jobs[i];
            const cg_kernel_build_info *b = &j->info;
            printf("%-10s sm_%-2d %-8s %6d %10.1f %11.1f %8.1f  %s\n", j->kernel, j->arch, result(j), b->source_lines,
                   b->render_ms, b->compile_ms, b->compile_cpu_ms, b->name);
            if (j->st != CG_OK) {
                fprintf(stderr, "chunkgen build-kernels: %s for sm_%d: %s\n", j->kernel, j->arch, j->msg);
                rc = 1;
            } else if (o.verbose && b->log) {
                fputs(b->log, stdout);
            }
        }
        printf("kernel cache: %s\n", dir);
        if (o.json && write_json(o.json, jobs, nj, &dev, threads)) rc = 1;
    }
    for (int i = 0; jobs && i < nj; i++) cg_free(jobs[i].info.log);
    free(jobs);
    cg_context_free(ctx);
    return rc;
}
