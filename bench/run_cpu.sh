#!/usr/bin/env bash
# run_cpu.sh -- the CPU benchmark, side by side with the PyTorch and JAX peers, in one run.
#
#   bench/run_cpu.sh [--save] [--quick] [--no-peers] [--dtype bf16|f16] [-- extra `chunkgen bench` args]
#
# 1. builds chunkgen (Release) in $BUILD (default build-bench/), unless $CHUNKGEN names a binary;
# 2. uses the venv $CHUNKGEN_VENV (default ~/.cache/chunkgen-venv, outside the tree; created
#    with python3 -m venv when missing) and pip-installs into it what is missing of torch,
#    numpy, matplotlib, jax, fla-core and einops (torch's wheel is large);
# 3. runs `chunkgen bench --backend cpu,ref` on $THREADS threads (default: all cores), one (op, seq)
#    group at a time, each followed by
# 4. bench/peers/torch_peers.py (torch_chunked: mamba's minimal SSD; fla_naive_chunk: fla-core's
#    naive chunk; torch_scan) and bench/peers/jax_peers.py (jax_scan: a plain lax.scan;
#    jax_chunked) on the same cells and threads (and on 1 thread too, rows IMPL_1t: a
#    thread pool can lose far more than it gains on a small, busy machine);
#    CHUNKGEN_CPU_ISA=avx512|avx2|baseline forces chunkgen's CPU variant (recorded as cpu_isa);
# 5. merges the rows with ratios (bench/merge.py) and draws the charts (bench/plot).
# 6. with --dtype bf16|f16: bench/cpu_dtype.c (cg_bench_cpu_dtype) on the same cells, float32 and
#    the 16-bit dtype interleaved call by call, with bytes moved and the time ratios ($out/cpu-dtype.json;
#    --dtype-only skips steps 3-5).
# Everything lands in $OUT (default bench/out/cpu-DATE/). --save also copies the merged JSON
# to bench/results/<device>-<date>-<commit>.json. --quick runs a small subset (seq 512).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

save=0 quick=0 peers=1 dtype="" dtype_only=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --quick) quick=1 ;;
    --no-peers) peers=0 ;;
    --dtype) shift; dtype="${1:-}"; case "$dtype" in bf16|f16) ;; *) echo "run_cpu: --dtype bf16|f16"; exit 2 ;; esac ;;
    --dtype-only) dtype_only=1 peers=0 ;;
    --) shift; extra+=("$@"); break ;;
    *) extra+=("$1") ;;
  esac
  shift
done

stamp="$(date -u +%Y%m%d-%H%M%S)"
out="${OUT:-$root/bench/out/cpu-$stamp}"
mkdir -p "$out"
threads="${THREADS:-$(nproc)}"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo uncommitted)"
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null | grep -v '^??' || true)" ]; then commit="$commit-dirty"; fi

# 1. chunkgen
if [ -z "${CHUNKGEN:-}" ]; then
  build="${BUILD:-$root/build-bench}"
  echo "== build ($build)"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1
  targets=(--target chunkgen); [ -n "$dtype" ] && targets+=(--target cg_bench_cpu_dtype)
  cmake --build "$build" -j"$(nproc)" "${targets[@]}" >>"$out/cmake.log" 2>&1 || {
    tail -30 "$out/cmake.log"; exit 1; }
  CHUNKGEN="$build/chunkgen"
fi
if [ "$dtype_only" = 1 ] && [ -z "$dtype" ]; then echo "run_cpu: --dtype-only needs --dtype bf16|f16"; exit 2; fi

# 2. the peers' environment
venv="${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}"
if [ "$peers" = 1 ]; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "== python3 -m venv $venv"
    python3 -m venv "$venv"
  fi
  missing=()
  for m in torch:torch numpy:numpy matplotlib:matplotlib jax:jax fla:fla-core einops:einops; do
    "$venv/bin/python" -c "import ${m%%:*}" 2>/dev/null || missing+=("${m#*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== pip install ${missing[*]} into $venv (PyPI; torch is large)"
    "$venv/bin/pip" install --progress-bar off "${missing[@]}" >"$out/pip.log" 2>&1 || {
      tail -20 "$out/pip.log"; echo "run_cpu: the peers cannot be installed; rerun with --no-peers"; exit 1; }
  fi
fi

# 3.-4. chunkgen bench and the peers, alternating per (op, seq) group, so that each peer
# row is measured minutes, not an hour, after chunkgen's row of the same cell (the machine
# may be shared). With --op/--seq/--preset/--config among the extra args: one group.
base=(--backend cpu,ref --threads "$threads" --commit "$commit")
[ "$quick" = 1 ] && base+=(--min-time 0.3 --repeats 3)
groups=()
if [ "$dtype_only" = 1 ]; then :
elif printf '%s\n' "${extra[@]:-}" | grep -qE '^--(op|seq|preset|config|ssd-shape|sscan-shape)'; then
  groups=("all:")
else
  seqs="512 2048 8192"; [ "$quick" = 1 ] && seqs="512"
  for op in ssd sscan; do for s in $seqs; do groups+=("$op:$s"); done; done
fi
status=0
inputs=()
for g in "${groups[@]}"; do
  op="${g%%:*}" seq="${g#*:}"
  tag="$op${seq:+-$seq}"
  gargs=("${base[@]}" --out "$out/chunkgen-$tag.json")
  [ "$op" != all ] && gargs+=(--op "$op" --seq "$seq")
  # the default CPU subset: fwd_bwd at seq > 2048 only with --all
  if [ "$op" != all ] && [ "${seq:-0}" -gt 2048 ] && ! printf '%s\n' "${extra[@]:-}" | grep -qx -- '--all'; then
    gargs+=(--mode fwd)
  fi
  echo "== chunkgen bench ${gargs[*]} ${extra[*]:-}"
  "$CHUNKGEN" bench "${gargs[@]}" "${extra[@]}" 2>&1 | tee -a "$out/chunkgen.log" || status=1
  [ -s "$out/chunkgen-$tag.json" ] || continue
  inputs+=("$out/chunkgen-$tag.json")
  if [ "$peers" = 1 ]; then
    echo "== torch peers ($tag)"
    "$venv/bin/python" bench/peers/torch_peers.py --matrix "$out/chunkgen-$tag.json" --chunkgen "$CHUNKGEN" \
      --threads "$threads" --also-threads 1 --out "$out/peers-$tag.json" 2>&1 | tee -a "$out/peers.log" || status=1
    [ -s "$out/peers-$tag.json" ] && inputs+=("$out/peers-$tag.json")
    if [ -n "$op" ]; then # every op: the SSD peers, and jax_sscan_* on selective-scan cells
      echo "== jax peers ($tag)"
      "$venv/bin/python" bench/peers/jax_peers.py --matrix "$out/chunkgen-$tag.json" --chunkgen "$CHUNKGEN" \
        --threads "$threads" --out "$out/jax-$tag.json" 2>&1 | tee -a "$out/peers.log" || status=1
      [ -s "$out/jax-$tag.json" ] && inputs+=("$out/jax-$tag.json")
      if [ "$threads" != 1 ]; then
        "$venv/bin/python" bench/peers/jax_peers.py --matrix "$out/chunkgen-$tag.json" --chunkgen "$CHUNKGEN" \
          --threads 1 --suffix _1t --out "$out/jax1-$tag.json" 2>&1 | tee -a "$out/peers.log" || status=1
        [ -s "$out/jax1-$tag.json" ] && inputs+=("$out/jax1-$tag.json")
      fi
    fi
  fi
done

# 5. merge, plots, summary
py="$venv/bin/python"; [ -x "$py" ] || py=python3
if [ ${#inputs[@]} -gt 0 ]; then
  sets=()
  if [ "${groups[0]}" != "all:" ] && ! printf '%s\n' "${extra[@]:-}" | grep -qx -- '--all'; then
    sets+=(--set "omitted=fwd_bwd at seq 8192 (the CPU default subset; bench/run_cpu.sh -- --all runs it)")
  fi
  "$py" bench/merge.py "${inputs[@]}" -o "$out/merged.json" "${sets[@]}"
  "$py" bench/plot "$out/merged.json" --out "$out/plots" || echo "run_cpu: plotting failed (matplotlib missing?)"
  "$py" bench/summary.py "$out/merged.json" | tee "$out/summary.txt" || true
fi

# 6. the 16-bit rows, interleaved with float32 on the same cells
if [ -n "$dtype" ]; then
  dbin="${CG_BENCH_CPU_DTYPE:-$(dirname "$CHUNKGEN")/cg_bench_cpu_dtype}"
  dseq="512,2048"; [ "$quick" = 1 ] && dseq="512"
  echo "== $dbin --dtype $dtype --seq $dseq --threads $threads"
  "$dbin" --dtype "$dtype" --seq "$dseq" --threads "$threads" \
    --reps "${DTYPE_REPS:-7}" --json "$out/cpu-dtype.json" 2>&1 | tee -a "$out/chunkgen.log" || status=1
fi

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')"
if [ "$save" = 1 ] && [ -s "$out/cpu-dtype.json" ]; then
  isa="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"]["cpu_isa"])' "$out/cpu-dtype.json" 2>/dev/null || echo na)"
  dest="$root/bench/results/cpu-dtype-$dtype-${cpu:-unknown}-${isa}-${threads}t-$(date -u +%Y%m%d)-${commit}.json"
  mkdir -p "$root/bench/results" && cp "$out/cpu-dtype.json" "$dest" && echo "== saved $dest"
fi
if [ "$save" = 1 ] && [ -s "$out/merged.json" ]; then
  isa="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"].get("cpu_isa","na"))' "$out/merged.json" 2>/dev/null || echo na)"
  dest="$root/bench/results/cpu-${cpu:-unknown}-${isa}-${threads}t-$(date -u +%Y%m%d)-${commit}.json"
  mkdir -p "$root/bench/results"
  cp "$out/merged.json" "$dest"
  echo "== saved $dest"
fi
echo "== results in $out"
exit $status
