/* main.c -- the command-line tool: one table of subcommands. */
#include "chunkgen.h"
#include "cli.h"
#include "cmd_bench.h"
#include "cmd_tune.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command k_commands[] = {
    {"run", cg_cmd_run, "run ssd|sscan on .npy files (forward, and backward with --grad)"},
    {"gen", cg_cmd_gen, "print a generated kernel's source, or --list the kernels and their spaces"},
    {"info", cg_cmd_info, "print the device, driver, NVRTC and cache location"},
    {"build-kernels", cg_cmd_build_kernels, "compile kernels into the cache ahead of time (no GPU needed)"},
    {"tune", cg_cmd_tune, "tune configs into the store (built-in shape set by default)"},
    {"show", cg_cmd_show, "table of tuned configs"},
    {"export", cg_cmd_export, "write tuned configs as JSON"},
    {"import", cg_cmd_import, "merge tuned configs from JSON"},
    {"cache", cg_cmd_cache, "cache stats|verify|prune|clear"},
    {"bench", cg_cmd_bench, "benchmark the seeds' matrix, JSON in the seeds' schema"},
};
#define NCOMMANDS (int)(sizeof k_commands / sizeof k_commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: chunkgen COMMAND [ARGS]   (chunkgen %s)\n\ncommands:\n", cg_version());
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-13s %s\n", k_commands[i].name, k_commands[i].help);
    fprintf(f, "  %-13s %s\n", "version", "print the version");
    fprintf(f, "\n`chunkgen COMMAND --help` describes a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("chunkgen %s\n", cg_version());
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "chunkgen: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
