/* cmd_tune.h -- the autotuner's subcommands (tools/cmd_tune.c). Each returns the
 * process exit code (0 ok, 1 failure, 2 usage); argv[0] is the subcommand's name. */
#ifndef CG_CMD_TUNE_H
#define CG_CMD_TUNE_H

int cg_cmd_tune(int argc, char **argv);   /* chunkgen tune: build the config store */
int cg_cmd_show(int argc, char **argv);   /* chunkgen show: table of tuned configs */
int cg_cmd_export(int argc, char **argv); /* chunkgen export --json FILE [filters] */
int cg_cmd_import(int argc, char **argv); /* chunkgen import FILE */
int cg_cmd_cache(int argc, char **argv);  /* chunkgen cache stats|verify|prune|clear */

#endif
