/* test_aot.c -- kernels built ahead of time: `chunkgen build-kernels` fills a kernel
 * cache without a GPU, `chunkgen export --with-kernels` bundles it, `chunkgen import`
 * puts it into an empty cache, and a process on an sm_90 device (the mock driver of
 * tests/cuda_mock, which loads real CUBINs) then prepares those shapes without
 * compiling anything (the JIT counters of runtime/gen.h). */
#include "cg_test.h"
#include "cli_testlib.h"
#include "cuda_testlib.h"
#include "cuda/cg_cuda.h"
#include "gen.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHAPE_ARG "B=1,T=100,G=1,H=2,dk=48,dv=40"

/* Device memory (through the mock) for one contiguous f32 tensor. */
static cg_tensor dev_tensor(cg_context *ctx, int ndim, const int64_t *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    void *p = NULL;
    CG_CHECK_OK(ctx, cg__kexec_cuda.alloc(ctx, n * sizeof(float), &p));
    return cg_tensor_contiguous(p, CG_F32, ndim, shape);
}

/* cg_prepare of ssd_fwd at B=1, T=100, G=1, H=2, dk, dv (no h0/hT) on cuda. */
static cg_status prepare_fwd(cg_context *ctx, int64_t dk, int64_t dv) {
    const int64_t qk[4] = {1, 100, 1, dk}, vo[4] = {1, 100, 2, dv}, la[3] = {1, 100, 2};
    cg_ssd_fwd_args a = CG_SSD_FWD_ARGS_INIT;
    a.layout = CG_LAYOUT_TOKEN_MAJOR;
    a.q = dev_tensor(ctx, 4, qk);
    a.k = dev_tensor(ctx, 4, qk);
    a.v = dev_tensor(ctx, 4, vo);
    a.log_alpha = dev_tensor(ctx, 3, la);
    a.o = dev_tensor(ctx, 4, vo);
    cg_exec ex = {.backend = CG_BACKEND_CUDA};
    size_t bytes = 0;
    cg_status st = cg_prepare(ctx, CG_OP_SSD_FWD, &a, &ex, &bytes);
    cg_tensor *t[5] = {&a.q, &a.k, &a.v, &a.log_alpha, &a.o};
    for (int i = 0; i < 5; i++) cg__kexec_cuda.free(ctx, t[i]->data);
    return st;
}

/* The child: this process has the mock as its libcuda and the imported cache. */
static void child(const char *cache) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, cache));
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 0));
    cg_jit_stats a, b, c;
    cg__jit_stats(&a);
    CG_CHECK_OK(ctx, prepare_fwd(ctx, 48, 40));
    cg__jit_stats(&b);
    CG_CHECK(b.compiles == a.compiles, "the bundled shape compiled %lld kernels (expected none)",
             (long long)(b.compiles - a.compiles));
    CG_CHECK(b.disk_hits > a.disk_hits && b.loads > a.loads, "found %lld in the cache, loaded %lld",
             (long long)(b.disk_hits - a.disk_hits), (long long)(b.loads - a.loads));
    CG_CHECK(b.bundle_hits - a.bundle_hits == b.disk_hits - a.disk_hits, "%lld of %lld cache hits were the bundle's",
             (long long)(b.bundle_hits - a.bundle_hits), (long long)(b.disk_hits - a.disk_hits));
    /* the counters can see a compile: a shape that is not in the bundle */
    CG_CHECK_OK(ctx, prepare_fwd(ctx, 40, 48));
    cg__jit_stats(&c);
    CG_CHECK(c.compiles == b.compiles + 1, "another shape: %lld compiles", (long long)(c.compiles - b.compiles));
    fprintf(stderr, "  from the bundle: %lld disk hits, %lld loads, 0 compiles; then 1 compile for a new shape\n",
            (long long)(b.disk_hits - a.disk_hits), (long long)(b.loads - a.loads));
    cg_context_free(ctx);
}

static int count_kernels(const char *cache) {
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/kernels", cache);
    int64_t files = 0, bytes = 0;
    cg__kcache_stat(dir, &files, &bytes);
    return (int)files;
}

CG_TEST(aot_bundle_compiles_nothing) {
    const char *in_child = getenv("CG_AOT_CHILD");
    if (in_child) {
        child(in_child);
        return;
    }
    if (mock_driver_skip()) return;
    char root[4096], a[4200], b[4200], bundle[4200], so[4200];
    if (mk_tmpdir(root, sizeof root)) return;
    join(a, sizeof a, root, "built");
    join(b, sizeof b, root, "imported");
    join(bundle, sizeof bundle, root, "bundle.json");
    join(so, sizeof so, root, "libcuda_mock.so");
    /* 1. build for sm_90 here (no GPU), 2. bundle it, 3. import it into an empty cache */
    const char *build[] = {"build-kernels", "--shape", SHAPE_ARG, "--kernels", "ssd_fwd", "--arch", "90",
                           "--cache-dir", a, NULL};
    CG_CHECK(run_cli(root, build) == 0, "build-kernels: %s", cli_stderr(root));
    CG_CHECK(count_kernels(a) == 1, "build-kernels wrote %d entries", count_kernels(a));
    const char *exp[] = {"export", "--json", bundle, "--with-kernels", "--arch", "90", "--cache-dir", a, NULL};
    CG_CHECK(run_cli(root, exp) == 0, "export: %s", cli_stderr(root));
    /* --arch filters: no sm_80 kernel in this cache, so that bundle carries none */
    char b80[4200];
    join(b80, sizeof b80, root, "bundle80.json");
    const char *exp80[] = {"export", "--json", b80, "--with-kernels", "--arch", "80", "--cache-dir", a, NULL};
    CG_CHECK(run_cli(root, exp80) == 0, "export --arch 80: %s", cli_stderr(root));
    char *t80 = slurp(b80);
    CG_CHECK(strstr(t80, "\"kernels\": []") != NULL, "an sm_80 bundle of an sm_90 cache is empty: %.300s", t80);
    free(t80);
    const char *imp[] = {"import", bundle, "--cache-dir", b, NULL};
    CG_CHECK(run_cli(root, imp) == 0, "import: %s", cli_stderr(root));
    CG_CHECK(count_kernels(b) == 1, "import wrote %d entries", count_kernels(b));
    /* a tampered bundle: the kernel is refused (exit 1), nothing written */
    char *text = slurp(bundle), *d = strstr(text, "\"data\": \"");
    CG_CHECK(d != NULL, "bundle has kernel data");
    if (d) {
        d += 9 + 80;
        *d = *d == 'A' ? 'B' : 'A';
        char bad[4200], c[4200];
        join(bad, sizeof bad, root, "bad.json");
        join(c, sizeof c, root, "tampered");
        FILE *f = fopen(bad, "w");
        if (f) {
            fputs(text, f);
            fclose(f);
        }
        const char *impbad[] = {"import", bad, "--cache-dir", c, NULL};
        CG_CHECK(run_cli(root, impbad) == 1, "a corrupt kernel is rejected");
        char *err = cli_stderr(root);
        CG_CHECK(strstr(err, "rejected: corrupt") != NULL, "message: %s", err);
        free(err);
        CG_CHECK(count_kernels(c) == 0, "nothing imported from a corrupt bundle");
    }
    free(text);
    /* 4. a fresh process on the (mock) sm_90 device prepares the shape from that cache */
    mock_driver_build(so);
    const int status = mock_driver_run(so, "aot_bundle_compiles_nothing", "CG_AOT_CHILD", b);
    CG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the mock-driver process failed (status %d; see above)",
             status);
    rm_tree(root);
}

/* Bad arguments of build-kernels: exit status 2 and a message naming the option. */
CG_TEST(aot_build_kernels_bad_args) {
    char root[4096];
    if (mk_tmpdir(root, sizeof root)) return;
    static const struct { const char *args[8]; const char *want; } k_cases[] = {
        {{"build-kernels", "--shape", "dk=8,dv=8", "--arch", "75", NULL}, "--arch: '75'"},
        {{"build-kernels", "--shape", "dk=8,dv=8", "--arch", "90x", NULL}, "--arch: '90x'"},
        {{"build-kernels", "--shape", "dk=8,dv=8", "--kernels", "sscan_fwd", NULL}, "sscan_fwd needs D and N"},
        {{"build-kernels", "--shape", "dk=8,dv=8", "--kernels", "ssd_fwd,nope", NULL}, "unknown kernel 'nope'"},
        {{"build-kernels", "--shape", "B=2", NULL}, "give dk,dv"},
        {{"build-kernels", "--shape", "dk=8,dv=8", "--config", "zz:chunk=16", NULL}, "--config"},
        {{"export", "--json", "-", "--arch", "90", NULL}, "--arch selects the kernels of --with-kernels"},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        int rc = run_cli(root, k_cases[i].args);
        char *err = cli_stderr(root);
        CG_CHECK(rc == 2 && strstr(err, k_cases[i].want), "case %zu: rc %d, stderr: %s", i, rc, err);
        free(err);
    }
    rm_tree(root);
}
