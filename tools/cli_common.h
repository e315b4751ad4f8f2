/* cli_common.h -- option parsing and messages shared by the tuner's and the cache's
 * subcommands (tools/cmd_tune.c, tools/cmd_cache.c) and `run`. */
#ifndef CG_CLI_COMMON_H
#define CG_CLI_COMMON_H

#include "chunkgen.h"
#include "cli_args.h"

/* "chunkgen CMD: message" on stderr; returns 1 (the failure exit code). */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same plus a pointer to --help; returns 2 (the usage exit code): the CLI's one
 * usage-error printer (tools/cli_args.h). */
#define cli_usage cg_cli_usage_err
/* Integer in [lo, hi]: 0, else -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);

/* Common options of every command here: --cache-dir DIR, --threads N (their option-table
 * rows: CG_CLI_OPT_CACHE_DIR(type, c.cache_dir), CG_CLI_OPT_THREADS(type, c.threads)). */
typedef struct cli_common {
    const char *cache_dir;
    int threads;
} cli_common;
/* A context with the common options applied; NULL (message printed) on failure. */
cg_context *cli_make_ctx(const char *cmd, const cli_common *c);

#endif /* CG_CLI_COMMON_H */
