#!/usr/bin/env bash
# cpu_gemm.sh -- chunkgen's CPU GEMM micro-kernels against small-GEMM libraries (issue 18,
# Deliver 1: "if a well-kept small-GEMM library does this better, measure it against your
# own kernels in the same run and take the faster"), on 1 thread.
#
#   tests/perf/cpu_gemm.sh [--save] [--rounds N] [--hybrid-rounds N]
#
# 1. installs from Debian what is missing of libxsmm-dev, libblis-serial-dev and
#    libopenblas-serial-dev (apt-get, as root; libxsmm is needed, a missing BLAS is
#    reported as not measured);
# 2. builds libchunkgen.a (Release) in $BUILD (default build-bench/) and tests/perf/cpu_gemm.c
#    against it: the SSD chunk's GEMMs at the seeds' shapes, chunkgen (the variant cpuid
#    picks; CHUNKGEN_CPU_ISA forces one) against BLIS, OpenBLAS and libxsmm, each result
#    checked against float64 before it is timed, the candidates interleaved ($OUT/gemm.json);
# 3. end to end (unless --hybrid-rounds 0): the tree's tracked files with
#    tests/perf/cpu_gemm_hybrid.patch applied (the dense, unscaled GEMMs of the CPU path -- the
#    state update and its gradient -- handed to libxsmm; the causal and row-scaled ones
#    stay chunkgen's), built beside step 2's chunkgen ("head"), and `chunkgen bench
#    --backend cpu --op ssd --seq 2048 --threads 1` of the two builds alternating, N rounds
#    each (default 4) ($OUT/hybrid.json: per cell, every round's median and the ratio of
#    the two builds' fastest rounds).
# --save copies the combined JSON to bench/results/cpu-gemm-<cpu>-<isa>-1t-<date>-<commit>.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

save=0 rounds=7 hrounds=4
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --rounds) shift; rounds="${1:?--rounds N}" ;;
    --hybrid-rounds) shift; hrounds="${1:?--hybrid-rounds N}" ;;
    *) echo "usage: tests/perf/cpu_gemm.sh [--save] [--rounds N] [--hybrid-rounds N]"; exit 2 ;;
  esac
  shift
done

stamp="$(date -u +%Y%m%d-%H%M%S)"
out="${OUT:-$root/bench/out/cpu-gemm-$stamp}"
mkdir -p "$out"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo uncommitted)"
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null | grep -v '^??' || true)" ]; then commit="$commit-dirty"; fi

# 1. the libraries (Debian's)
missing=()
[ -f /usr/include/libxsmm.h ] || missing+=(libxsmm-dev)
[ -f /usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4 ] || missing+=(libblis-serial-dev)
[ -f /usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3 ] || missing+=(libopenblas-serial-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install ${missing[*]}"
    apt-get install -y -q "${missing[@]}" >"$out/apt.log" 2>&1 || { tail -20 "$out/apt.log"; exit 1; }
  else
    echo "cpu_gemm: missing ${missing[*]} (install them from Debian)"
  fi
fi
[ -f /usr/include/libxsmm.h ] || { echo "cpu_gemm: libxsmm-dev is needed"; exit 1; }
xsmm_libs="/usr/lib/libxsmm.a /usr/lib/libxsmmnoblas.a -lpthread -ldl -lm"

# 2. the GEMM benchmark
build="${BUILD:-$root/build-bench}"
echo "== build ($build)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1
cmake --build "$build" -j"$(nproc)" --target chunkgen chunkgen_static >>"$out/cmake.log" 2>&1 || {
  tail -30 "$out/cmake.log"; exit 1; }
cc -std=c11 -D_GNU_SOURCE -O2 -I "$root/include" -I "$root/runtime" -I "$root/templates" -I /usr/include/lua5.4 \
  -o "$out/cg_bench_cpu_gemm" "$root/tests/perf/cpu_gemm.c" "$build/libchunkgen.a" $xsmm_libs
echo "== GEMMs, 1 thread, $rounds rounds"
"$out/cg_bench_cpu_gemm" --rounds "$rounds" --json "$out/gemm.json" | tee "$out/gemm.txt"

# 3. end to end: step 2's chunkgen and the same tree + the libxsmm patch, alternating
if [ "$hrounds" -gt 0 ]; then
  src="$out/hybrid-src"
  rm -rf "$src" && mkdir -p "$src"
  git -C "$root" ls-files -z | tar -C "$root" --null -T - -cf - | tar -x -C "$src"
  (cd "$src" && patch -p1 -s <"$root/tests/perf/cpu_gemm_hybrid.patch")
  echo "== build hybrid"
  cmake -S "$src" -B "$out/hybrid-build" -DCMAKE_BUILD_TYPE=Release -DCHUNKGEN_BUILD_TESTS=OFF \
    -DCMAKE_C_STANDARD_LIBRARIES="$xsmm_libs" >>"$out/cmake.log" 2>&1
  cmake --build "$out/hybrid-build" -j"$(nproc)" --target chunkgen >>"$out/cmake.log" 2>&1 || {
    tail -30 "$out/cmake.log"; exit 1; }
  declare -A bin=([head]="$build/chunkgen" [hybrid]="$out/hybrid-build/chunkgen")
  export CHUNKGEN_CACHE_DIR="$out/cache"
  for i in $(seq 1 "$hrounds"); do
    for v in head hybrid; do
      [ $((i % 2)) = 0 ] && v=$([ "$v" = head ] && echo hybrid || echo head) # alternate who goes first
      echo "== round $i: $v"
      "${bin[$v]}" bench --backend cpu --op ssd --seq 2048 --threads 1 --quiet \
        --commit "$commit-$v" --out "$out/e2e-$v-$i.json"
    done
  done
  python3 - "$out" "$hrounds" <<'EOF'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
cells, device = {}, None
for v in ("head", "hybrid"):
    for i in range(1, n + 1):
        d = json.load(open(f"{out}/e2e-{v}-{i}.json"))
        device = device or d["device"]
        for r in d["results"]:
            c = cells.setdefault((r["config"], r["mode"]), {"config": r["config"], "mode": r["mode"], "seq": r["seq"]})
            c.setdefault(v + "_median_ms", []).append(r["median_ms"])
            c.setdefault(v + "_rel_err", []).append(r["rel_err"])
rows = []
for c in cells.values():
    c["hybrid_over_head_min"] = round(min(c["hybrid_median_ms"]) / min(c["head_median_ms"]), 4)
    rows.append(c)
json.dump({"what": "chunkgen bench --backend cpu --op ssd --seq 2048 --threads 1, the tree against the tree + "
           "tests/perf/cpu_gemm_hybrid.patch (dense unscaled GEMMs through libxsmm), alternating rounds",
           "rounds": n, "device": device, "cells": rows}, open(f"{out}/hybrid.json", "w"), indent=1)
for c in rows:
    print(f"{c['config']:18s} {c['mode']:8s} head {min(c['head_median_ms']):8.1f} ms  hybrid "
          f"{min(c['hybrid_median_ms']):8.1f} ms  hybrid/head {c['hybrid_over_head_min']:.3f}")
EOF
fi

python3 - "$out" >"$out/cpu-gemm.json" <<'EOF'
import json, os, sys
out = sys.argv[1]
info = {}
for line in open("/proc/cpuinfo"):
    k, _, v = line.partition(":")
    k = k.strip()
    if k in ("model name", "cpu family", "model", "flags") and k not in info:
        info[k] = v.strip()
fl = info.pop("flags", "").split()
info["isa_flags"] = [f for f in ("avx2", "fma", "avx512f") if f in fl]
d = {"cpu": info, "gemm": json.load(open(f"{out}/gemm.json"))}
if os.path.exists(f"{out}/hybrid.json"):
    d["end_to_end"] = json.load(open(f"{out}/hybrid.json"))
json.dump(d, sys.stdout, indent=1)
EOF
if [ "$save" = 1 ]; then
  cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')"
  isa="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["isa"])' "$out/gemm.json")"
  dest="$root/bench/results/cpu-gemm-${cpu:-unknown}-${isa}-1t-$(date -u +%Y%m%d)-${commit}.json"
  cp "$out/cpu-gemm.json" "$dest" && echo "== saved $dest"
fi
echo "== results in $out"
