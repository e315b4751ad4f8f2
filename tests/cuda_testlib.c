/* cuda_testlib.c -- helpers shared by the CUDA tests (see cuda_testlib.h). */
#include "cuda_testlib.h"
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int cg_test_device(cg_context *ctx, cg_backend be, cg_devinfo *dev) {
    if (be == CG_BACKEND_EMULATE) {
        cg__devinfo_emulated(dev);
        return 1;
    }
    const cg_kexec *volatile cuda = &cg__kexec_cuda; /* weak: NULL in a build without it */
    if (cuda && cuda->device(ctx, dev) == CG_OK) return 1;
    static char why[600];
    snprintf(why, sizeof why, "no CUDA device: %s", cg_errmsg(ctx));
    cg_test_skip(why);
    return 0;
}

cg_context *cg_test_device_context(cg_backend be, cg_devinfo *dev) {
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    if (ctx && !cg_test_device(ctx, be, dev)) {
        cg_context_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

void rm_rf(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
}

char *tmpdir(void) {
    char *d = strdup("/tmp/cg_kcacheXXXXXX");
    if (!mkdtemp(d)) {
        free(d);
        return NULL;
    }
    return d;
}

const char k_tiny_src[] =
    "// tiny.cu\n"
    "extern \"C\" __global__ void tiny(float *p) { p[threadIdx.x] = 2.0f * p[threadIdx.x]; }\n";

int mock_driver_skip(void) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded (the mock driver loads real CUBINs)");
        return 1;
    }
    if (system("command -v cc >/dev/null 2>&1") != 0) {
        cg_test_skip("no C compiler (cc) to build the mock driver");
        return 1;
    }
    return 0;
}

int mock_driver_build(const char *so) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror -shared -fPIC -o '%s' '%s' -lpthread", so,
             CG_SOURCE_DIR "/tests/cuda_mock/libcuda_mock.c");
    if (system(cmd) == 0) return 0;
    cg_test_fail(__FILE__, __LINE__, "building the mock driver: %s", cmd);
    return -1;
}

int mock_driver_run(const char *so, const char *test, const char *var, const char *value) {
    extern char **environ;
    size_t nenv = 0, k = 0, nvar = strlen(var);
    while (environ[nenv]) nenv++;
    char **envp = calloc(nenv + 3, sizeof *envp);
    char libvar[4300], setvar[4300];
    snprintf(libvar, sizeof libvar, "CHUNKGEN_LIBCUDA=%s", so);
    snprintf(setvar, sizeof setvar, "%s=%s", var, value);
    for (size_t i = 0; envp && i < nenv; i++)
        if (strncmp(environ[i], "CHUNKGEN_LIBCUDA=", 17) && !(!strncmp(environ[i], var, nvar) && environ[i][nvar] == '='))
            envp[k++] = environ[i];
    if (!envp) {
        cg_test_fail(__FILE__, __LINE__, "out of memory");
        return -1;
    }
    envp[k++] = libvar;
    envp[k++] = setvar;
    fflush(NULL);
    char *const argv[] = {(char *)"cg_tests", (char *)test, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    int status = 0;
    const int ok = pid > 0 && waitpid(pid, &status, 0) == pid;
    free(envp);
    if (!ok) cg_test_fail(__FILE__, __LINE__, "fork");
    return ok ? status : -1;
}
