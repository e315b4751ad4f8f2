#!/usr/bin/env bash
# decode.sh -- the decode-step benchmark (issue #36 item 6, docs/bench.md "Decode steps"):
#   1. host overhead of a warm call: tests/perf/dispatch_overhead.sh (its step rows), JSON
#      bench/results/dispatch-<cpu>-<date>-<rev>-decode.json;
#   2. CPU throughput against a STREAM-style copy in the same run: cg_bench_decode at 1 and 2
#      threads, JSON bench/results/decode-cpu-<cpu>-<date>-<rev>.json;
#   3. side by side with mamba's selective_state_update_ref and a PyTorch GDN step:
#      bench/decode_peers.py (needs the chunkgen package: PY=/path/to/python),
#      JSON bench/results/decode-peers-<cpu>-<date>-<rev>.json.
# Usage: bench/decode.sh [BUILD_DIR] [TAG]   (PY=python3 by default; QUICK=1 for a smoke run)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
tag="${2:-}"
py="${PY:-python3}"
cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/[^A-Za-z0-9]\+/-/g; s/-$//')"
rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
stem="${cpu}-$(date -u +%Y%m%d)-${rev}${tag:+-$tag}"
quick=()
[ "${QUICK:-0}" = 1 ] && quick=(--quick)
lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3' || true
"$root/tests/perf/dispatch_overhead.sh" "$build" "decode${tag:+-$tag}"
"$build/cg_bench_decode" --threads 1,2 --json "$root/bench/results/decode-cpu-$stem.json" "${quick[@]}"
if [ "${QUICK:-0}" = 1 ]; then peers=(--batches 1,16 --min-time 0.1); else peers=(); fi
"$py" "$root/bench/decode_peers.py" --out "$root/bench/results/decode-peers-$stem.json" "${peers[@]}"
