/* cli.h -- subcommands of the chunkgen CLI; each returns the process exit code
 * (0 ok, 1 failure, 2 usage). argv[0] is the subcommand's name. */
#ifndef CG_CLI_H
#define CG_CLI_H

#include <stddef.h>
#include <stdio.h>

int cg_cmd_run(int argc, char **argv);   /* tools/cmd_run.c */
int cg_cmd_gen(int argc, char **argv);   /* tools/cmd_gen.c */
int cg_cmd_info(int argc, char **argv);  /* tools/cmd_gen.c */
int cg_cmd_build_kernels(int argc, char **argv); /* tools/cmd_kernels.c */

/* cg_cli_opt parsers (tools/cmd_gen.c) of --shape KEY=N,... and --flags a,b into a
 * cg_kshape (runtime/gen.h) that must be the FIRST member of the options struct. */
int cg_cli_kshape_opt(void *opts, const char *v, char *err, size_t errlen);
int cg_cli_kflags_opt(void *opts, const char *v, char *err, size_t errlen);
/* The --flags words of the shape-flag table (cg__kflags) for --help (a usage_more). */
void cg_cli_kflags_help(FILE *f);

#endif
