/* test_kernels_cli.c -- `chunkgen gen`, `build-kernels` and `info` on the public kernels
 * API: --shape in the one syntax (docs/shapes.md) and in the kernel's op's KEY=N form
 * give the same plan; --flags are shape items; bad shapes and flags are usage errors
 * naming what is wrong; `info` reports the machine and the kernel cache. */
#include "cg_test.h"
#include "cli_testlib.h"

#include <stdlib.h>
#include <string.h>

/* `chunkgen args` in dir: exit code, and its stdout (caller frees) into *out. */
static int cli(const char *dir, const char *const *args, char **out) {
    int rc = run_cli(dir, args);
    char p[4200];
    join(p, sizeof p, dir, "stdout.txt");
    *out = slurp(p);
    return rc;
}

CG_TEST(kernels_cli_shape_forms) {
    char root[4096];
    if (mk_tmpdir(root, sizeof root)) return;
    /* the one syntax and the op-less historical form: the same source (it bakes in the
     * 16-bit tensors: without them it differs) */
    const char *one[] = {"gen", "sscan_fwd", "--shape", "sscan_fwd:B=2,L=100,D=64,N=16,dtype=bf16,D,z,delta_softplus",
                         NULL};
    const char *old[] = {"gen", "sscan_fwd", "--shape", "B=2,L=100,D=64,N=16,dtype=bf16", "--flags",
                         "softplus,has_D,has_z", NULL};
    const char *bare[] = {"gen", "sscan_fwd", "--shape", "B=2,L=100,D=64,N=16", NULL};
    char *a = NULL, *b = NULL, *c = NULL;
    int ra = cli(root, one, &a), rb = cli(root, old, &b), rc = cli(root, bare, &c);
    CG_CHECK(ra == 0 && rb == 0 && rc == 0, "exit %d %d %d: %s", ra, rb, rc, cli_stderr(root));
    CG_CHECK(a && b && !strcmp(a, b) && strstr(a, "__global__"), "the two forms differ:\n%.300s\n%.300s", a, b);
    CG_CHECK(a && c && strcmp(a, c) != 0, "bf16 tensors make no difference to the source");
    free(a), free(b), free(c);
    /* a CPU space: --flags bwd is its backward op; the one syntax names it */
    const char *cpu1[] = {"gen", "ssd_cpu", "--shape", "B=2,T=1000,H=4,dk=48,dv=40", "--flags", "bwd", "--space", NULL};
    const char *cpu2[] = {"gen", "ssd_cpu", "--shape", "ssd_bwd:B=2,T=1000,G=1,H=4,dk=48,dv=40", "--space", NULL};
    ra = cli(root, cpu1, &a), rb = cli(root, cpu2, &b);
    CG_CHECK(ra == 0 && rb == 0 && a && b && !strcmp(a, b) && strstr(a, "default for this shape on cpu"),
             "ssd_cpu backward: %d %d\n%s", ra, rb, a ? a : "");
    free(a), free(b);
    rm_tree(root);
}

CG_TEST(kernels_cli_bad_shapes) {
    char root[4096];
    if (mk_tmpdir(root, sizeof root)) return;
    static const struct {
        const char *args[10];
        int rc;
        const char *want;
    } k_cases[] = {
        {{"gen", "ssd_fwd", "--shape", "dk=48,dx=40", "--plan", NULL}, 2, "dx=40"},
        {{"gen", "ssd_fwd", "--shape", "ssd_fwd:B=1,T=8,G=1,H=1,dk=8", "--plan", NULL}, 2, "dv is missing"},
        {{"gen", "ssd_fwd", "--shape", "sscan_fwd:B=1,L=8,D=8,N=8", "--plan", NULL}, 1, "serves op ssd_fwd"},
        {{"gen", "ssd_fwd", "--shape", "dk=8,dv=8", "--flags", "seq_major", NULL}, 2, "seq_major"},
        {{"gen", "ssd_fwd", "--shape", "dk=8,dv=8", "--flags", "nope", NULL}, 2, "unknown flag 'nope'"},
        {{"gen", "ssd_fwd", "--shape", "dk=8,dv=8", "--arch", "77", "--plan", NULL}, 1, "sm_77"},
        {{"gen", "nope", "--shape", "ssd_fwd:B=1,T=8,G=1,H=1,dk=8,dv=8", "--plan", NULL}, 1, "nope"},
        {{"build-kernels", "--shape", "ssd_fwd:B=1,T=8,G=1,H=1,dk=8,dv=8", "--kernels", "sscan_fwd", NULL}, 1,
         "serves op sscan_fwd"},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        int rc = run_cli(root, k_cases[i].args);
        char *err = cli_stderr(root);
        CG_CHECK(rc == k_cases[i].rc && strstr(err, k_cases[i].want), "case %zu: rc %d (want %d), stderr: %s", i, rc,
                 k_cases[i].rc, err);
        free(err);
    }
    rm_tree(root);
}

CG_TEST(kernels_cli_info) {
    char root[4096], cache[4200];
    if (mk_tmpdir(root, sizeof root)) return;
    join(cache, sizeof cache, root, "cache");
    setenv("CHUNKGEN_CACHE_DIR", cache, 1);
    const char *args[] = {"info", NULL};
    char *out = NULL;
    int rc = cli(root, args, &out);
    unsetenv("CHUNKGEN_CACHE_DIR");
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_device_info d = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_CPU, &d));
    char line[512];
    snprintf(line, sizeof line, "cpu:     %s (%d cores; CPU path %s, this CPU runs %s)", d.cpu_model, d.cpu_cores,
             d.cpu_isa, d.cpu_isas);
    CG_CHECK(rc == 0 && out && strstr(out, line) && strstr(out, "driver:  ") && strstr(out, "nvrtc:   ") &&
                 strstr(out, "(0 entries, 0.0 MiB)") && strstr(out, "cubins:  none (0 from bundles); 0 other entries") &&
                 strstr(out, "kernels: ") && strstr(out, " ssd_fwd"),
             "info (rc %d):\n%s", rc, out ? out : "");
    cg_context_free(ctx);
    free(out);
    rm_tree(root);
}
