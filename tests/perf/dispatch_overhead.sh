#!/usr/bin/env bash
# dispatch_overhead.sh -- host-side cost of a warm call on a tiny shape (SSD T=1,
# dk=dv=8; selective scan L=1, D=8, N=8), per call, on the CPU path, through the
# emulator's launch path, and (when cc can build tests/cuda_mock) through the CUDA
# launch path against the mock driver, which runs no kernel: host cost only. Also the
# Lua calls a warm call makes (must be 0). JSON into bench/results/.
# Usage: tests/perf/dispatch_overhead.sh [BUILD_DIR] [TAG]
set -euo pipefail
. "$(dirname "$0")/../../bench/jit_common.sh"
jit_bench_setup dispatch cg_bench_dispatch "${1:-}" "${2:-}"
if cc -std=c11 -D_GNU_SOURCE -O1 -w -shared -fPIC -o "$tmp/libcuda_mock.so" "$root/tests/cuda_mock/libcuda_mock.c" -lpthread 2>/dev/null; then
  export CHUNKGEN_LIBCUDA="$tmp/libcuda_mock.so"
fi
"$build/cg_bench_dispatch" --json "$out"
echo "$out"
