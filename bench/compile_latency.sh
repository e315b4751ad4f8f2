#!/usr/bin/env bash
# compile_latency.sh -- first-call JIT latency of the default CUDA kernels, on this host
# (no GPU needed): `chunkgen build-kernels --force --threads 1` at the seeds' shapes for
# sm_80 and sm_90 into an empty cache (render and NVRTC compile per kernel: wall time,
# the calling thread's CPU time and the process's, which includes NVRTC's split-compile
# threads: one kernel at a time, so it is that kernel's whole cost), then the same again from that cache (the AOT path: what a process
# finds instead of compiling). One JSON per run in bench/results/.
# Usage: bench/compile_latency.sh [BUILD_DIR] [TAG]
set -euo pipefail
. "$(dirname "$0")/jit_common.sh"
jit_bench_setup compile chunkgen "${1:-}" "${2:-}"
cli="$build/chunkgen"
cache="$tmp"
# The seeds' shapes: SSD g2h8 d128, g2h4 dk48/dv40; selective scan D = 128 (a d_inner
# slice), N = 16.
shapes=("B=1,T=2048,G=2,H=8,dk=128,dv=128" "B=1,T=2048,G=2,H=4,dk=48,dv=40" "B=1,L=2048,D=128,N=16")
parts=()
for pass in cold warm; do
  for s in "${shapes[@]}"; do
    f="$cache/$pass-${#parts[@]}.json"
    force=(); [ "$pass" = cold ] && force=(--force)
    "$cli" build-kernels --shape "$s" --arch 80,90 --threads 1 "${force[@]}" --json "$f" >&2
    parts+=("$pass:$s:$f")
  done
done
python3 - "$out" "$(nproc)" "$(uptime | sed 's/.*load average: //')" "${parts[@]}" <<'EOF'
import json, sys
out, cores, load = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = []
for p in sys.argv[4:]:
    kind, shape, f = p.split(":", 2)
    d = json.load(open(f))
    runs.append({"pass": kind, "shape": shape, "kernels": d["kernels"]})
doc = {"kind": "chunkgen-compile-latency", "chunkgen": d["chunkgen"], "nvrtc": d["nvrtc"], "cpu": d["cpu"],
       "cores": cores, "load_average_at_end": load, "threads": 1,
       "note": "cold: render + NVRTC compile into an empty cache (--force); warm: the same kernels found in that "
               "cache (what a process with an AOT-built or imported cache does instead of compiling). compile_ms "
               "is wall time, compile_cpu_ms the calling thread's CPU time, compile_process_cpu_ms the process's "
               "(NVRTC's --split-compile threads included: the kernel's whole CPU cost; robust on a shared "
               "machine). With split-compile the latency on an idle machine with enough cores is about the "
               "slowest entry's compile, not the sum.",
       "runs": runs}
json.dump(doc, open(out, "w"), indent=1, sort_keys=True)
print(out)
for r in runs:
    for k in r["kernels"]:
        print("%-4s %-34s %-9s sm_%d %5d lines  render %6.1f ms  compile %8.1f ms (cpu %8.1f thread, %8.1f process)"
              "  lookup %5.2f ms  %s" % (
            r["pass"], r["shape"], k["kernel"], k["arch"], k["source_lines"], k["render_ms"], k["compile_ms"],
            k["compile_cpu_ms"], k.get("compile_process_cpu_ms", 0), k["cache_lookup_ms"], k["result"]))
EOF
