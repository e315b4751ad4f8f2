/* test_env.c -- the one table of environment variables (runtime/env.c): every row whole,
 * cg__env's reads (empty = unset; per call vs. once per process), and a reader that goes
 * through it (the cache directory). Its documentation is checked by ctest arch_env. */
#include "cg_test.h"
#include "env.h"
#include "internal.h"

CG_TEST(env_table_rows) {
    for (int v = 0; v < CG_ENV_COUNT; v++) {
        const cg_env_desc *d = cg__env_desc((cg_env_var)v);
        CG_CHECK(d && d->name && d->name[0] && d->dflt && d->dflt[0] && d->meaning && d->meaning[0],
                 "row %d is not whole", v);
        if (!d || !d->name) continue;
        CG_CHECK(cg__env_when_name(d->when)[0], "%s: when %d is not a cg_env_when", d->name, (int)d->when);
        for (int w = 0; w < v; w++)
            CG_CHECK(strcmp(cg__env_desc((cg_env_var)w)->name, d->name) != 0, "%s has two rows", d->name);
    }
    CG_CHECK(cg__env_desc(CG_ENV_COUNT) == NULL && cg__env(CG_ENV_COUNT) == NULL, "CG_ENV_COUNT has a row");
    CG_CHECK(!strcmp(cg__env_desc(CG_ENV_TMPDIR)->name, "TMPDIR"), "rows out of the enum's order");
}

CG_TEST(env_per_call_and_once) {
    /* per call: a change shows at the next read; empty is unset */
    CG_CHECK(cg__env_desc(CG_ENV_TMPDIR)->when == CG_ENV_PER_CALL, "TMPDIR is read per call");
    setenv("TMPDIR", "/tmp/cg-env-a", 1);
    const char *a = cg__env(CG_ENV_TMPDIR);
    CG_CHECK(a && !strcmp(a, "/tmp/cg-env-a"), "TMPDIR: got %s", a ? a : "(null)");
    setenv("TMPDIR", "/tmp/cg-env-b", 1);
    const char *b = cg__env(CG_ENV_TMPDIR);
    CG_CHECK(b && !strcmp(b, "/tmp/cg-env-b"), "TMPDIR after a change: got %s", b ? b : "(null)");
    setenv("TMPDIR", "", 1);
    CG_CHECK(cg__env(CG_ENV_TMPDIR) == NULL, "an empty TMPDIR is not unset");
    unsetenv("TMPDIR");
    CG_CHECK(cg__env(CG_ENV_TMPDIR) == NULL, "an unset TMPDIR");

    /* once per process: the value of the first read stays */
    CG_CHECK(cg__env_desc(CG_ENV_CUDA_PATH)->when == CG_ENV_ONCE, "CUDA_PATH is read once");
    const char *first = cg__env(CG_ENV_CUDA_PATH);
    char kept[512];
    snprintf(kept, sizeof kept, "%s", first ? first : "");
    setenv("CUDA_PATH", "/tmp/cg-env-changed-later", 1);
    const char *again = cg__env(CG_ENV_CUDA_PATH);
    CG_CHECK(strcmp(again ? again : "", kept) == 0, "CUDA_PATH changed after its first read: %s, then %s", kept,
             again ? again : "(null)");
}

CG_TEST(env_cache_dir_order) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    if (!ctx) return;
    setenv("CHUNKGEN_CACHE_DIR", "/tmp/cg-env-cache", 1);
    setenv("XDG_CACHE_HOME", "/tmp/cg-env-xdg", 1);
    setenv("HOME", "/tmp/cg-env-home", 1);
    CG_CHECK(!strcmp(cg__cache_dir(ctx), "/tmp/cg-env-cache"), "CHUNKGEN_CACHE_DIR: %s", cg__cache_dir(ctx));
    setenv("CHUNKGEN_CACHE_DIR", "", 1); /* empty: unset */
    CG_CHECK(!strcmp(cg__cache_dir(ctx), "/tmp/cg-env-xdg/chunkgen"), "XDG_CACHE_HOME: %s", cg__cache_dir(ctx));
    unsetenv("XDG_CACHE_HOME");
    CG_CHECK(!strcmp(cg__cache_dir(ctx), "/tmp/cg-env-home/.cache/chunkgen"), "HOME: %s", cg__cache_dir(ctx));
    unsetenv("HOME");
    CG_CHECK(!strcmp(cg__cache_dir(ctx), "/tmp/.cache/chunkgen"), "no HOME: %s", cg__cache_dir(ctx));
    cg_context_free(ctx);
}
