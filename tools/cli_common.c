/* cli_common.c -- option parsing and messages of the tuner's and cache's subcommands. */
#include "cli_common.h"
#include "cli_args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cg_cli_vmsg(cmd, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

/* argv[*i] is an option taking a value: "--name value" or "--name=value". Returns the
 * value (NULL when missing) and advances *i. */
const char *cli_opt_val(int argc, char **argv, int *i, const char *name) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n)) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] == '\0' && *i + 1 < argc) return argv[++*i];
    return NULL;
}

int cli_is_opt(const char *a, const char *name) {
    size_t n = strlen(name);
    return !strncmp(a, name, n) && (a[n] == '\0' || a[n] == '=');
}

int cli_parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_common_opt(const char *cmd, int argc, char **argv, int *i, cli_common *c) {
    const char *v;
    if (cli_is_opt(argv[*i], "--cache-dir")) {
        if (!(v = cli_opt_val(argc, argv, i, "--cache-dir"))) return cli_usage(cmd, "--cache-dir needs a directory"), -1;
        c->cache_dir = v;
        return 1;
    }
    if (cli_is_opt(argv[*i], "--threads")) {
        if (!(v = cli_opt_val(argc, argv, i, "--threads")) || cli_parse_int(v, 0, 4096, &c->threads))
            return cli_usage(cmd, "--threads expects an integer in 0..4096"), -1;
        return 1;
    }
    return 0;
}

cg_context *cli_make_ctx(const char *cmd, const cli_common *c) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) {
        cli_fail(cmd, "out of memory");
        return NULL;
    }
    if ((c->cache_dir && cg_context_set_cache_dir(ctx, c->cache_dir) != CG_OK) ||
        (c->threads > 0 && cg_context_set_threads(ctx, (int)c->threads) != CG_OK)) {
        cli_fail(cmd, "%s", cg_errmsg(ctx));
        cg_context_free(ctx);
        return NULL;
    }
    return ctx;
}

