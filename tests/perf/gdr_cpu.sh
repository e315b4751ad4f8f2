#!/usr/bin/env bash
# gdr_cpu.sh -- the gated delta rule's chunked CPU path (runtime/cpu/gdr_cpu_chunk*.c) on
# issue #35's cells, forward and forward + backward, on 1 and 2 threads (THREADS=1,2,...),
# with the FMA peak measured in the same run (tests/perf/gdr_cpu.c). JSON into bench/results/
# (gdr-cpu-<cpu>-<date>-<rev>[-TAG].json). Extra arguments go to cg_bench_gdr_cpu (--crossover:
# short sequences instead of the cells).
# Usage: tests/perf/gdr_cpu.sh [BUILD_DIR] [TAG] [-- cg_bench_gdr_cpu args]
set -euo pipefail
. "$(dirname "$0")/../../bench/jit_common.sh"
b="" t=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then b="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then t="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
jit_bench_setup gdr-cpu cg_bench_gdr_cpu "$b" "$t"
"$build/cg_bench_gdr_cpu" --threads "${THREADS:-1,2}" --out "$out" "$@"
echo "$out"
