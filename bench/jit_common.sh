# jit_common.sh -- sourced by bench/compile_latency.sh, bench/aot_bundle.sh and
# tests/perf/dispatch_overhead.sh:
# jit_bench_setup NAME TOOL BUILD_DIR TAG sets root, build, tmp (removed on exit; also
# CHUNKGEN_CACHE_DIR=$tmp/cache, empty) and out (bench/results/NAME-<cpu>-<date>-<rev>[-TAG].json),
# after checking that BUILD_DIR/TOOL was built.
jit_bench_setup() {
  local name="$1" tool="$2"
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  build="${3:-$root/build}"
  local tag="${4:-}"
  [ -x "$build/$tool" ] || { echo "$name: no $build/$tool (build first)" >&2; exit 2; }
  tmp="$(mktemp -d "/tmp/chunkgen-$name-bench.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  export CHUNKGEN_CACHE_DIR="$tmp/cache"
  local cpu rev
  cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/[^A-Za-z0-9]\+/-/g; s/-$//')"
  rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  out="$root/bench/results/$name-${cpu}-$(date -u +%Y%m%d)-${rev}${tag:+-$tag}.json"
}
