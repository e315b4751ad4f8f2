#!/usr/bin/env bash
# sweep-full.sh -- every config of every generated kernel: through NVRTC and ptxas for sm_80
# and sm_90 (0 spills, shared memory and registers within the arch's limits) and through the
# SIMT emulator against the float64 reference (fp32 and 16-bit, varlen). Run it before you
# change templates/ or generator/ (and after), and say in the change that you did.
#
# CI runs the same tests on the covering sample of each space (tests/sweep_sample.h: every
# pair of values of every two parameters, and the Lua constraint boundary), in a few minutes;
# this runs every config: about 45 minutes on 2 cores (2026-12: ~1700 NVRTC compiles per arch
# pair, ~1500 emulated configs). The tests are the ctest label "sweep"; each prints how many
# configs it ran ("N of M configs (full)").
#
# Usage: scripts/sweep-full.sh [BUILD_DIR] [extra ctest args, e.g. -R ssd_bwd]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
shift || true
"$root/scripts/setup.sh" "$build"
export CHUNKGEN_TEST_SWEEP=full
export CHUNKGEN_CACHE_DIR="${CHUNKGEN_CACHE_DIR:-$(mktemp -d /tmp/chunkgen-sweep-cache.XXXXXX)}"
export CHUNKGEN_TEST_KCACHE="${CHUNKGEN_TEST_KCACHE:-$CHUNKGEN_CACHE_DIR/sweep-kernels}"
cd "$build"
ctest -L '^sweep$' -j"$(nproc)" --output-on-failure "$@"
