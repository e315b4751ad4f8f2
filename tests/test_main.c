/* test_main.c -- runner of the one test binary: `cg_tests [--list] [NAME_OR_PREFIX ...]`. */
#include "cg_test.h"

#include <stdarg.h>

#define MAX_TESTS 1024
static struct { const char *name; cg_test_fn fn; const char *file; } g_tests[MAX_TESTS];
static int g_ntests;
int cg_test_failures;
static const char *g_skip;

void cg_test_register(const char *name, cg_test_fn fn, const char *file) {
    if (g_ntests == MAX_TESTS) { fprintf(stderr, "too many tests\n"); abort(); }
    g_tests[g_ntests].name = name;
    g_tests[g_ntests].fn = fn;
    g_tests[g_ntests].file = file;
    g_ntests++;
}

void cg_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    cg_test_failures++;
    fprintf(stderr, "  FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cg_test_cond(const char *file, int line, const char *cond) {
    fprintf(stderr, "  FAIL %s:%d: check failed: %s\n", file, line, cond);
}

void cg_test_skip(const char *reason) { g_skip = reason; }

static int cmp_tests(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int matches(const char *name, int argc, char **argv) {
    if (argc <= 1) return 1;
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n && argv[i][n - 1] == '*' ? strncmp(name, argv[i], n - 1) == 0 : strcmp(name, argv[i]) == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    qsort(g_tests, (size_t)g_ntests, sizeof g_tests[0], cmp_tests);
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < g_ntests; i++) printf("%s\n", g_tests[i].name);
        return 0;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < g_ntests; i++) {
        if (!matches(g_tests[i].name, argc, argv)) continue;
        int before = cg_test_failures;
        g_skip = NULL;
        fprintf(stderr, "[ RUN  ] %s\n", g_tests[i].name);
        g_tests[i].fn();
        if (cg_test_failures != before) {
            failed++;
            fprintf(stderr, "[ FAIL ] %s\n", g_tests[i].name);
        } else if (g_skip) {
            skipped++;
            fprintf(stderr, "[ SKIP ] %s: %s\n", g_tests[i].name, g_skip);
        } else {
            passed++;
            fprintf(stderr, "[  OK  ] %s\n", g_tests[i].name);
        }
    }
    if (passed + failed + skipped == 0) {
        fprintf(stderr, "no test matched\n");
        return 2;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    /* ctest: exit 77 marks a skip (SKIP_RETURN_CODE) */
    if (failed) return 1;
    return (skipped && !passed) ? 77 : 0;
}
