/* cli.h -- subcommands of the chunkgen CLI; each returns the process exit code
 * (0 ok, 1 failure, 2 usage). argv[0] is the subcommand's name. */
#ifndef CG_CLI_H
#define CG_CLI_H

#include <stddef.h>
#include <stdio.h>

int cg_cmd_run(int argc, char **argv);           /* tools/cmd_run.c */
int cg_cmd_gen(int argc, char **argv);           /* tools/cmd_gen.c */
int cg_cmd_info(int argc, char **argv);          /* tools/cmd_gen.c */
int cg_cmd_build_kernels(int argc, char **argv); /* tools/cmd_kernels.c */

#endif
