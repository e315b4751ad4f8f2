/* cmd_bench.h -- `chunkgen bench`: the seeds' benchmark matrix side by side, as JSON. */
#ifndef CG_CMD_BENCH_H
#define CG_CMD_BENCH_H

/* argv[0] is "bench"; returns the exit code (0 ok, 1 a failure, 2 usage). */
int cg_cmd_bench(int argc, char **argv);

#endif
