#!/usr/bin/env bash
# aot_bundle.sh -- kernels built ahead of time on this host (no GPU needed), carried in a
# bundle and imported into an empty cache, then used by a process on an sm_90 device
# that compiles nothing for those shapes (issue 19's "Done when").
#
# 1. `chunkgen build-kernels` at the seeds' shapes for sm_80 and sm_90 into cache A;
# 2. `chunkgen export --with-kernels` of A: the bundle (and an sm_80-only bundle);
# 3. `chunkgen import` of the bundle into an empty cache B (and the sm_80 one into D);
# 4. at each shape, `chunkgen run --backend cuda --grad --verbose` on the mock sm_90 driver
#    of tests/cuda_mock (it loads the real CUBINs and runs no kernel: the host side is
#    real, the outputs are not) with cache B: every kernel's `kernel_from` must be
#    `bundle(...)` and B must hold no new entry; the same run with an empty cache C
#    (`compiled`, so the report can see a compile) and with D (sm_80 kernels only:
#    `compiled`, a kernel of another arch is never loaded).
# One JSON in bench/results/ (aot-<cpu>-<date>-<rev>[-TAG].json). Exit status 1 when a
# bundled kernel was compiled or an expectation failed.
# Usage: bench/aot_bundle.sh [BUILD_DIR] [TAG]
set -euo pipefail
. "$(dirname "$0")/jit_common.sh"
jit_bench_setup aot chunkgen "${1:-}" "${2:-}"
cli="$build/chunkgen"
unset CHUNKGEN_CACHE_DIR
A="$tmp/built" B="$tmp/imported" C="$tmp/empty" D="$tmp/imported-sm80"
mock="$tmp/libcuda_mock.so"
cc -std=c11 -D_GNU_SOURCE -O1 -shared -fPIC -o "$mock" "$root/tests/cuda_mock/libcuda_mock.c" -lpthread
# The seeds' shapes (as in compile_latency.sh) and the op that runs each.
shapes=("ssd:B=1,T=2048,G=2,H=8,dk=128,dv=128" "ssd:B=1,T=2048,G=2,H=4,dk=48,dv=40" "sscan:B=1,L=2048,D=128,N=16")
log="$tmp/steps.tsv"
: >"$log"
step() { # step NAME CMD...: runs CMD, appends "NAME rc wall_ms" to the log
  local name="$1"; shift
  local t0 t1 rc=0
  t0=$(date +%s%N)
  "$@" || rc=$?
  t1=$(date +%s%N)
  printf '%s\t%d\t%.1f\n' "$name" "$rc" "$(( (t1 - t0) / 1000 ))e-3" >>"$log"
  return 0
}
i=0
for s in "${shapes[@]}"; do
  step "build-kernels ${s#*:}" "$cli" build-kernels --shape "${s#*:}" --arch 80,90 --threads 1 --cache-dir "$A" \
    --json "$tmp/build-$i.json" >&2
  i=$((i + 1))
done
step "export --with-kernels" "$cli" export --json "$tmp/bundle.json" --with-kernels --cache-dir "$A"
step "export --with-kernels --arch 80" "$cli" export --json "$tmp/bundle80.json" --with-kernels --arch 80 --cache-dir "$A"
step "import bundle" "$cli" import "$tmp/bundle.json" --cache-dir "$B" >&2
step "import bundle80" "$cli" import "$tmp/bundle80.json" --cache-dir "$D" >&2
# Inputs: .npy files written with the standard library (no numpy on a bare host).
python3 - "$tmp/in" "${shapes[@]}" <<'EOF'
import array, os, random, sys
def save(path, shape, lo=-1.0, hi=1.0):
    n = 1
    for d in shape:
        n *= d
    rnd = random.Random(hash(path) & 0xffff)
    a = array.array("f", (rnd.uniform(lo, hi) for _ in range(n)))
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join("%d, " % d for d in shape)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode() + a.tobytes())
base = sys.argv[1]
for i, s in enumerate(sys.argv[2:]):
    op, dims = s.split(":")
    d = dict((k, int(v)) for k, v in (kv.split("=") for kv in dims.split(",")))
    out = os.path.join(base, str(i))
    os.makedirs(out)
    if op == "ssd":
        B, T, G, H, dk, dv = d["B"], d["T"], d["G"], d["H"], d["dk"], d["dv"]
        for n, sh in (("q", (B, T, G, dk)), ("k", (B, T, G, dk)), ("v", (B, T, H, dv)), ("do", (B, T, H, dv))):
            save(os.path.join(out, n + ".npy"), sh)
        save(os.path.join(out, "log_alpha.npy"), (B, T, H), -0.1, 0.0)
    else:
        B, L, D, N = d["B"], d["L"], d["D"], d["N"]
        for n, sh in (("x", (B, L, D)), ("dy", (B, L, D)), ("B", (B, L, 1, N)), ("C", (B, L, 1, N))):
            save(os.path.join(out, n + ".npy"), sh)
        save(os.path.join(out, "delta.npy"), (B, L, D), 0.01, 0.1)
        save(os.path.join(out, "A.npy"), (D, N), -1.0, -0.1)
EOF
entries() { if [ -d "$1/kernels" ]; then find "$1/kernels" -type f | wc -l; else echo 0; fi; }
runs="$tmp/runs.tsv"
: >"$runs"
for cache in B C D; do
  dir="${!cache}"
  i=0
  for s in "${shapes[@]}"; do
    before=$(entries "$dir")
    rc=0
    CHUNKGEN_LIBCUDA="$mock" CHUNKGEN_CACHE_DIR="$dir" "$cli" run "${s%%:*}" --backend cuda --grad --verbose \
      --in "$tmp/in/$i" --out "$tmp/out-$cache-$i" >"$tmp/run-$cache-$i.out" 2>"$tmp/run-$cache-$i.err" || rc=$?
    printf '%s\t%s\t%d\t%d\t%d\t%s\n' "$cache" "${s#*:}" "$rc" "$before" "$(entries "$dir")" \
      "$tmp/run-$cache-$i.err" >>"$runs"
    i=$((i + 1))
  done
  CHUNKGEN_LIBCUDA="$mock" CHUNKGEN_CACHE_DIR="$dir" "$cli" info >"$tmp/info-$cache.txt" 2>&1 || true
done
python3 - "$out" "$(nproc)" "$(uptime | sed 's/.*load average: //')" "$tmp" <<'EOF'
import glob, json, os, re, sys
out, cores, load, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
steps = [dict(zip(("step", "rc", "wall_ms"), (n, int(rc), float(ms))))
         for n, rc, ms in (l.rstrip("\n").split("\t") for l in open(os.path.join(tmp, "steps.tsv")))]
built = []
for f in sorted(glob.glob(os.path.join(tmp, "build-*.json"))):
    d = json.load(open(f))
    for k in d["kernels"]:
        built.append({x: k.get(x) for x in ("kernel", "arch", "name", "config", "result", "compile_ms",
                                             "compile_process_cpu_ms", "source_lines")})
bundle = json.load(open(os.path.join(tmp, "bundle.json")))
bundle80 = json.load(open(os.path.join(tmp, "bundle80.json")))
caches = {"B": "imported: the bundle (sm_80 and sm_90) in an empty cache",
          "C": "empty: nothing imported (control: the counters see a compile)",
          "D": "imported: the sm_80-only bundle (a kernel of another arch is never loaded)"}
want = {"B": "bundle", "C": "compiled", "D": "compiled"}
runs, ok = [], True
for line in open(os.path.join(tmp, "runs.tsv")):
    cache, shape, rc, before, after, err = line.rstrip("\n").split("\t")
    text = open(err).read()
    ks = [{"kernel": m.group(1), "kernel_from": m.group(2), "detail": m.group(3)}
          for m in re.finditer(r"kernel=(\S+) .*?kernel_from=([a-z-]+)(\([^)]*\))?", text)]
    good = int(rc) == 0 and len(ks) == 2 and all(k["kernel_from"] == want[cache] for k in ks)
    if cache == "B":
        good = good and int(after) == int(before)
    ok = ok and good
    runs.append({"cache": cache, "cache_is": caches[cache], "shape": shape, "rc": int(rc),
                 "cache_entries_before": int(before), "cache_entries_after": int(after),
                 "kernels": ks, "expected_kernel_from": want[cache], "as_expected": good})
info = {c: open(os.path.join(tmp, "info-%s.txt" % c)).read().splitlines() for c in "BCD"}
d0 = json.load(open(sorted(glob.glob(os.path.join(tmp, "build-*.json")))[0]))
doc = {"kind": "chunkgen-aot-bundle", "chunkgen": d0["chunkgen"], "nvrtc": d0["nvrtc"], "cpu": d0["cpu"],
       "cores": cores, "load_average_at_end": load, "gpu": "none (built on a host without a GPU)",
       "device_for_runs": "tests/cuda_mock/libcuda_mock.c as libcuda (sm_90, 132 SMs): loads the real CUBINs, runs "
                          "no kernel, so the host side (config, plan, cache lookup, module load, launch) is real and "
                          "the outputs are not",
       "steps": steps, "built": built,
       "bundle": {"bytes": os.path.getsize(os.path.join(tmp, "bundle.json")), "kernels": len(bundle["kernels"]),
                  "tuned_entries": len(bundle.get("entries", []))},
       "bundle_sm80": {"bytes": os.path.getsize(os.path.join(tmp, "bundle80.json")),
                       "kernels": len(bundle80["kernels"])},
       "runs": runs, "info_after": info, "all_as_expected": ok,
       "note": "a process on the sm_90 device with the imported cache (B) finds every kernel of the bundled shapes "
               "there (kernel_from=bundle) and compiles nothing (no new cache entry); with an empty cache (C) or "
               "only sm_80 kernels (D) the same runs compile"}
json.dump(doc, open(out, "w"), indent=1, sort_keys=True)
print(out)
for s in steps:
    print("%-44s rc %d  %9.1f ms" % (s["step"], s["rc"], s["wall_ms"]))
print("bundle: %d kernels, %d bytes; sm_80 bundle: %d kernels" % (
    doc["bundle"]["kernels"], doc["bundle"]["bytes"], doc["bundle_sm80"]["kernels"]))
for r in runs:
    print("cache %s %-34s rc %d entries %d -> %d  %s  %s" % (
        r["cache"], r["shape"], r["rc"], r["cache_entries_before"], r["cache_entries_after"],
        " ".join("%s:%s%s" % (k["kernel"].split("_")[0] + "_" + k["kernel"].split("_")[1], k["kernel_from"],
                              k["detail"] or "") for k in r["kernels"]), "ok" if r["as_expected"] else "UNEXPECTED"))
sys.exit(0 if ok else 1)
EOF
