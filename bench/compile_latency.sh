#!/usr/bin/env bash
# compile_latency.sh -- first-call JIT latency of the default CUDA kernels, on this host
# (no GPU needed): `chunkgen build-kernels --force --threads 1` at the seeds' shapes for
# sm_80 and sm_90 into an empty cache (render and NVRTC compile per kernel: wall time,
# the calling thread's CPU time and the process's, which includes NVRTC's split-compile
# threads: one kernel at a time, so it is that kernel's whole cost), then the same again from that cache (the AOT path: what a process
# finds instead of compiling), then each kernel once more for sm_90 with NVRTC's time trace
# (CHUNKGEN_NVRTC_TIME_TRACE: phases and per-entry NVVM/ptxas times, bench/compile_trace.py),
# and the floor (an empty and a trivial program through NVRTC, bench/nvrtc_floor.py).
# One JSON per run in bench/results/.
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
# NVRTC 13+ writes the trace (older ones compile as without it: no "trace" in the JSON).
mkdir -p "$cache/trace"
for s in "${shapes[@]}"; do
  CHUNKGEN_NVRTC_TIME_TRACE="$cache/trace" "$cli" build-kernels --shape "$s" --arch 90 --threads 1 --force \
    --json "$cache/trace-$(echo "$s" | tr -c 'A-Za-z0-9\n' _).json" >&2
done
python3 "$root/bench/nvrtc_floor.py" --arch 90 --reps 5 --json "$cache/floor.json" >&2
CG_BENCH_ROOT="$root" python3 - "$out" "$(nproc)" "$(uptime | sed 's/.*load average: //')" "${parts[@]}" <<'EOF'
import glob, json, os, sys
sys.path.insert(0, os.path.join(os.environ["CG_BENCH_ROOT"], "bench"))
import compile_trace
out, cores, load = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cache = os.path.dirname(sys.argv[4].split(":", 2)[2])
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
trace = []
for f in sorted(glob.glob(os.path.join(cache, "trace-*.json"))):
    for k in json.load(open(f))["kernels"]:
        tf = os.path.join(cache, "trace", "%s-sm%d.json" % (k["name"], k["arch"]))
        if not os.path.isfile(tf):
            continue
        total, nvvm, ptxas = compile_trace.summarize(tf)
        trace.append({"kernel": k["kernel"], "name": k["name"], "arch": k["arch"], "config": k.get("config"),
                      "compile_process_cpu_ms": k.get("compile_process_cpu_ms"), "compile_ms": k["compile_ms"],
                      "phases_ms": {label: round(total[key], 1) for label, key in compile_trace.PHASES},
                      "ptxas_per_entry_ms": {e: round(v, 1) for e, v in ptxas.items()},
                      "nvvm_opt_per_function_ms": {e: round(v, 1) for e, v in nvvm.most_common(8)}})
if trace:
    doc["trace_sm90"] = trace
    doc["trace_note"] = ("one more cold compile per kernel for sm_90 with --fdevice-time-trace: the phases and "
                         "ptxas per entry are wall times of NVRTC's threads (they overlap under --split-compile "
                         "and stretch with the load); compare shares, not milliseconds across runs")
fl = os.path.join(cache, "floor.json")
if os.path.isfile(fl):
    doc["floor"] = json.load(open(fl))
json.dump(doc, open(out, "w"), indent=1, sort_keys=True)
print(out)
for r in runs:
    for k in r["kernels"]:
        print("%-4s %-34s %-9s sm_%d %5d lines  render %6.1f ms  compile %8.1f ms (cpu %8.1f thread, %8.1f process)"
              "  lookup %5.2f ms  %s" % (
            r["pass"], r["shape"], k["kernel"], k["arch"], k["source_lines"], k["render_ms"], k["compile_ms"],
            k["compile_cpu_ms"], k.get("compile_process_cpu_ms", 0), k["cache_lookup_ms"], k["result"]))
for t in trace:
    print("trace sm_90 %-9s %s  ptxas per entry: %s" % (t["kernel"], ", ".join(
        "%s %.0f" % kv for kv in t["phases_ms"].items()), ", ".join(
        "%s %.0f" % kv for kv in sorted(t["ptxas_per_entry_ms"].items(), key=lambda x: -x[1]))))
EOF
