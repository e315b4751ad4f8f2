#!/usr/bin/env bash
# test.sh -- the test command: set up, build, run the whole suite (the generated kernels'
# spaces on their covering sample: docs/testing.md), rehearse the GPU check
# (tests/perf/device_check_rehearsal.sh), run the suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer, then the fuzz targets for a bounded time when clang is
# present (scripts/fuzz.sh), then the Python tests, then the wheel (built from the same
# build-py/, installed into a fresh environment and run where no compiler, CMake, Lua or
# jansson is: tests/wheel/run.sh). Exit status 0 only if all pass.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="$(nproc)"
# Test runs must not reuse a user's caches, nor leave files in them.
export CHUNKGEN_CACHE_DIR="${CHUNKGEN_CACHE_DIR:-$(mktemp -d /tmp/chunkgen-test-cache.XXXXXX)}"
# The NVRTC sweeps (tests/test_gen.c) keep their CUBINs and ptxas logs here, keyed by
# source, options, compiler build and arch: the sanitizer run's sweep compiles nothing
# the release run's did.
export CHUNKGEN_TEST_KCACHE="${CHUNKGEN_TEST_KCACHE:-$CHUNKGEN_CACHE_DIR/sweep-kernels}"
t0=$(date +%s)
# each stage's line carries the minutes since the start (CI's 30-minute line: README)
stage() { echo "== [$(( ($(date +%s) - t0) / 60 ))m$(( ($(date +%s) - t0) % 60 ))s] $*"; }

stage "test environment (Python venv, disassemblers for the static report)"
"$root/scripts/test-python.sh" --setup-only
stage "build (release)"
"$root/scripts/setup.sh" "$root/build"
# The formatting check (.clang-format, scripts/format.sh, #34 item 5) runs right after the
# first setup.sh, which installs clang-format, and fails CI when a file of its scope (the
# library, the CLI, the Python extension, the public headers: docs/testing.md) is not
# formatted. Regions clang-format would spread or not format idempotently (tables) are
# fenced with `// clang-format off` / `// clang-format on`.
stage "formatting (scripts/format.sh --check)"
"$root/scripts/format.sh" --check
stage "tests (release)"
(cd "$root/build" && ctest -j"$jobs" --output-on-failure)
stage "the GPU check's rehearsal (Lua and jansson hidden, no network, no GPU: docs/bench.md)"
"$root/tests/perf/device_check_rehearsal.sh"

stage "build (ASan + UBSan)"
"$root/scripts/setup.sh" "$root/build-asan" -DCHUNKGEN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
stage "tests (ASan + UBSan)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$root/build-asan" && ctest -j"$jobs" --output-on-failure)

stage "fuzz (libFuzzer, 25 s per target; skipped without clang)"
"$root/scripts/fuzz.sh" "$root/build" 25
stage "Python package and tests"
"$root/scripts/test-python.sh"
stage "wheel (scripts/wheel.sh; installed and run where no compiler, CMake, Lua or jansson is: tests/wheel/run.sh)"
"$root/tests/wheel/run.sh"
stage "done"
