#!/usr/bin/env bash
# fuzz.sh -- build the libFuzzer targets (tests/fuzz/) with clang, ASan and UBSan, and
# run each for a bounded time on its seed corpus (plus what it finds, in a temp dir).
# Usage: scripts/fuzz.sh [BUILD_DIR] [SECONDS_PER_TARGET]
# BUILD_DIR is a built release tree (scripts/setup.sh BUILD_DIR): the import target
# links its libchunkgen.a; the sources under test (tools/npy.c with runtime/dtype.c, its 16-bit conversions, and runtime/fsutil.c, its temp files;
# autotune/store.c, autotune/exchange.c) are compiled instrumented into the targets.
# Exit 0 when no target found a crash, leak or UB within the time; skips (exit 0, with
# a message) when clang or its libFuzzer runtime is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
secs="${2:-25}"
cc="${CLANG:-clang}"

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: skipped: clang not found (apt-get install clang to run the fuzz targets)"
  exit 0
fi
out="$(mktemp -d /tmp/chunkgen-fuzz.XXXXXX)"
trap 'rm -rf "$out"' EXIT
probe="$out/probe.c"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" 2>/dev/null; then
  echo "fuzz: skipped: $cc has no libFuzzer runtime (install clang's compiler-rt)"
  exit 0
fi
lib="$build/libchunkgen.a"
cache="$build/CMakeCache.txt"
if [ ! -f "$lib" ] || [ ! -f "$cache" ]; then
  echo "fuzz: $lib missing: build first (scripts/setup.sh $build)" >&2
  exit 1
fi
lua="$(sed -n 's/^LUA_STATIC_LIB:FILEPATH=//p' "$cache")"
jansson="$(sed -n 's/^JANSSON_STATIC_LIB:FILEPATH=//p' "$cache")"
luainc="$(sed -n 's/^LUA_INCLUDE_DIR:PATH=//p' "$cache")"
flags=(-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/runtime" -I"$root/tools" -I"$root/autotune" -I"$luainc")

echo "== fuzz: building the targets ($cc)"
"$cc" "${flags[@]}" "$root/tests/fuzz/fuzz_npy.c" "$root/tools/npy.c" "$root/runtime/dtype.c" \
  "$root/runtime/fsutil.c" -o "$out/fuzz_npy"
"$cc" "${flags[@]}" "$root/tests/fuzz/fuzz_import.c" "$root/autotune/store.c" "$root/autotune/exchange.c" \
  "$lib" "$lua" "$jansson" -lpthread -ldl -lm -o "$out/fuzz_import"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export CHUNKGEN_CACHE_DIR="$out/cache"
run() {
  local name="$1"; shift
  mkdir -p "$out/corpus-$name"
  echo "== fuzz: $name for ${secs} s"
  (cd "$out" && "$out/$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$build/fuzz-$name-" \
      -print_final_stats=1 "$out/corpus-$name" "$@" 2>"$out/$name.log") || {
    tail -60 "$out/$name.log" >&2
    echo "fuzz: $name found a problem; the reproducer is $build/fuzz-$name-* (run the target on it)" >&2
    exit 1
  }
  grep -E '^stat::number_of_executed_units|^Done' "$out/$name.log" | tr '\n' ' '; echo
}
run fuzz_npy "$root/tests/fuzz/corpus/npy"
run fuzz_import "$root/tests/fuzz/corpus/import" "$root/tests/data/json_corpus"
echo "== fuzz: no findings"
