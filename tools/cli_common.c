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

int cli_parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

cg_context *cli_make_ctx(const char *cmd, const cli_common *c) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) {
        cli_fail(cmd, "out of memory");
        return NULL;
    }
    if ((c->cache_dir && cg_context_set_cache_dir(ctx, c->cache_dir) != CG_OK) ||
        (c->threads > 0 && cg_context_set_threads(ctx, c->threads) != CG_OK)) {
        cli_fail(cmd, "%s", cg_errmsg(ctx));
        cg_context_free(ctx);
        return NULL;
    }
    return ctx;
}
