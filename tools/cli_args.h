/* cli_args.h -- the CLI's one argument table.
 *
 * A command describes its options as a table of cg_cli_opt rows (name, kind, where the
 * value goes in the command's options struct, placeholder, help). cg_cli_parse reads
 * argv against it ("--name value", "--name=value", short "-v"; "--" ends the options)
 * and prints a message naming the option and what was expected on a bad value;
 * cg_cli_help prints the usage text generated from the same table. Options that mean
 * the same in every command come from the CG_CLI_OPT_* rows below.
 *
 * Shapes: the one syntax of docs/shapes.md, parsed by the library (cg_shape_parse,
 * include/chunkgen.h) for every command that takes one. */
#ifndef CG_CLI_ARGS_H
#define CG_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>

typedef enum cg_cli_kind {
    CG_CLI_FLAG,   /* no value: stores 1 (int) */
    CG_CLI_INT,    /* an integer in [lo, hi] (int) */
    CG_CLI_I64,    /* an integer in [lo, hi] (int64_t) */
    CG_CLI_F64,    /* a number in [lo, hi] (double) */
    CG_CLI_STR,    /* the text (const char *, pointing into argv) */
    CG_CLI_CHOICE, /* one of the '|'-separated words of meta: stores lo + its index (int) */
    CG_CLI_FN      /* fn(opts, value): anything else (lists, enums, shapes); value NULL for a flag */
} cg_cli_kind;

/* Parse `value` into opts; 0 on success, else write what was expected into err. */
typedef int (*cg_cli_fn)(void *opts, const char *value, char *err, size_t errlen);

typedef struct cg_cli_opt {
    const char *name; /* "--threads"; NULL ends a table */
    char short_name;  /* 'v' for -v, or 0 */
    cg_cli_kind kind;
    size_t off;       /* where the value goes in the options struct */
    const char *meta; /* value placeholder in --help ("N", "LIST"); NULL: a flag */
    const char *help; /* '\n' starts a continuation line */
    double lo, hi;    /* INT, I64, F64 */
    cg_cli_fn fn;     /* FN */
} cg_cli_opt;

typedef struct cg_cli_cmd {
    const char *name;       /* "bench": messages start with "chunkgen bench: " */
    const char *usage;      /* the text above the options in --help */
    const cg_cli_opt *opts; /* ends with a row whose name is NULL */
    /* A non-option argument; NULL: none allowed. 0 ok, else err says why. */
    int (*positional)(void *opts, const char *arg, char *err, size_t errlen);
    /* More of the usage text, printed after `usage` (facts kept elsewhere); NULL: none. */
    void (*usage_more)(FILE *f);
} cg_cli_cmd;

/* Parse argv[1..] into opts (which the caller has set to its defaults). Returns 0,
 * -1 after printing --help to stdout, or 2 after printing a usage error to stderr. */
int cg_cli_parse(const cg_cli_cmd *cmd, int argc, char **argv, void *opts);
/* The usage text followed by the options table. */
void cg_cli_help(const cg_cli_cmd *cmd, FILE *f);
/* "chunkgen CMD: message" and the --help hint on stderr; returns 2. */
int cg_cli_usage_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "chunkgen CMD: " and the message on stderr (no newline): the one writer of both. */
void cg_cli_vmsg(const char *cmd, const char *fmt, va_list ap);

/* ---------------------------------------------------- options shared by commands */
#define CG_CLI_HELP_CONFIG                                                                                             \
    "pin a kernel/CPU config, e.g. chunk=64,threads=2 (the keys:\n"                                                    \
    "`chunkgen gen KERNEL --space`); per op with scopes, e.g.\n"                                                       \
    "'ssd_fwd:chunk=64;ssd_bwd:recompute=4' (the first part whose scope is\n"                                          \
    "the op, its family (see chunkgen run --help), or none, applies)"
/* The part of a --config value that applies to op ("ssd_fwd", "ssd_bwd", "sscan_fwd",
 * "sscan_bwd"): the whole value when it has no scopes; else the first ';'-separated part
 * whose scope ("op:" or the family "ssd:"/"sscan:") matches or that has none, copied into
 * buf; *out = NULL when no part applies. -1 (err says why) for an unknown scope. */
int cg_cli_config_for(const char *cfg, const char *op, char *buf, size_t cap, const char **out, char *err,
                      size_t errlen);
#define CG_CLI_OPT_CONFIG(type, field)                                                                                 \
    { "--config", 0, CG_CLI_STR, offsetof(type, field), "k=v,...", CG_CLI_HELP_CONFIG, 0, 0, NULL }
#define CG_CLI_OPT_THREADS(type, field)                                                                                \
    { "--threads", 0, CG_CLI_INT, offsetof(type, field), "N", "CPU threads (0 = all cores)", 0, 4096, NULL }
#define CG_CLI_OPT_VERBOSE(type, field, help)                                                                          \
    { "--verbose", 'v', CG_CLI_FLAG, offsetof(type, field), NULL, help, 0, 0, NULL }
#define CG_CLI_OPT_JSON(type, field, help)                                                                             \
    { "--json", 0, CG_CLI_FLAG, offsetof(type, field), NULL, help, 0, 0, NULL }
#define CG_CLI_OPT_CACHE_DIR(type, field)                                                                              \
    {                                                                                                                  \
        "--cache-dir", 0, CG_CLI_STR, offsetof(type, field), "DIR",                                                    \
            "the cache (default $CHUNKGEN_CACHE_DIR or the XDG cache)", 0, 0, NULL                                     \
    }
#define CG_CLI_OPT_END                                                                                                 \
    { NULL, 0, CG_CLI_FLAG, 0, NULL, NULL, 0, 0, NULL }

#endif
