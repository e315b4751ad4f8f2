/* cli_common.h -- option parsing and messages shared by the tuner's and the cache's
 * subcommands (tools/cmd_tune.c, tools/cmd_cache.c) and `run`. */
#ifndef CG_CLI_COMMON_H
#define CG_CLI_COMMON_H

#include "chunkgen.h"
#include "internal.h"
#include "cli_args.h"

/* "chunkgen CMD: message" on stderr; returns 1 (the failure exit code). */
int cli_fail(const char *cmd, const char *fmt, ...) CG_PRINTF(2, 3);
/* The same plus a pointer to --help; returns 2 (the usage exit code): the CLI's one
 * usage-error printer (tools/cli_args.h). export and import do not use cli_args.h's
 * option table yet (show and cache do; its header says how to adopt it). */
#define cli_usage cg_cli_usage_err
/* argv[*i] is an option taking a value: "--name value" or "--name=value". Returns the
 * value (NULL when missing) and advances *i. */
const char *cli_opt_val(int argc, char **argv, int *i, const char *name);
/* argv value a is --name or --name=... */
int cli_is_opt(const char *a, const char *name);
/* Integer in [lo, hi]: 0, else -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);

/* Common options of every command here: --cache-dir DIR, --threads N. Returns 1 when
 * argv[*i] was one of them, -1 on a bad value. */
typedef struct cli_common {
    const char *cache_dir;
    long threads;
} cli_common;
int cli_common_opt(const char *cmd, int argc, char **argv, int *i, cli_common *c);
/* A context with the common options applied; NULL (message printed) on failure. */
cg_context *cli_make_ctx(const char *cmd, const cli_common *c);

#endif /* CG_CLI_COMMON_H */
