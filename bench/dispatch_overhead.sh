#!/usr/bin/env bash
# dispatch_overhead.sh -- host-side cost of a warm call on a tiny shape (SSD T=1,
# dk=dv=8; selective scan L=1, D=8, N=8), per call, on the CPU path, through the
# emulator's launch path, and (when cc can build tests/cuda_mock) through the CUDA
# launch path against the mock driver, which runs no kernel: host cost only. Also the
# Lua calls a warm call makes (must be 0). JSON into bench/results/.
# Usage: bench/dispatch_overhead.sh [BUILD_DIR] [TAG]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
tag="${2:-}"
[ -x "$build/cg_bench_dispatch" ] || { echo "dispatch_overhead: build $build first" >&2; exit 2; }
tmp="$(mktemp -d /tmp/chunkgen-dispatch-bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
export CHUNKGEN_CACHE_DIR="$tmp/cache"
cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/[^A-Za-z0-9]\+/-/g; s/-$//')"
rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
out="$root/bench/results/dispatch-${cpu}-$(date -u +%Y%m%d)-${rev}${tag:+-$tag}.json"
if cc -std=c11 -D_GNU_SOURCE -O1 -w -shared -fPIC -o "$tmp/libcuda_mock.so" "$root/tests/cuda_mock/libcuda_mock.c" -lpthread 2>/dev/null; then
  export CHUNKGEN_LIBCUDA="$tmp/libcuda_mock.so"
fi
"$build/cg_bench_dispatch" --json "$out"
echo "$out"
