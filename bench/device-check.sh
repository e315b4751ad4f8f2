#!/usr/bin/env bash
# device-check.sh -- one script for the GPU machine: build, GPU correctness, the seeds'
# matrix against fla and mamba_ssm, sanitizers, tune, the CPU suite; one tarball back.
#
#   bash bench/device-check.sh --prepare  (here: stage what the GPU machine lacks; prints
#                                         the `carry` list for the device tool)
#   bash bench/device-check.sh            (there; everything under $OUT)
#   DRY_RUN=1 BUILD=build bash bench/device-check.sh   (here, and in ctest: every step but
#                                         the GPU ones, on the existing build; checks the limits)
#
# The device tool returns at most 8 files from $OUT, each under 16 MiB, none more than two
# folders down, named in [A-Za-z0-9._-]; a GPU machine is held 15 minutes at most (its start
# included) and 10 minutes per command. So the check runs in $BUDGET_S (default 400 s),
# works in a temporary directory (build, kernel cache, logs) and writes only:
#   $OUT/summary.txt                  steps (status, seconds), the results' summary, limits check
#   $OUT/results-<gpu>-<date>-<commit>.json   the merged bench + peers rows (when the bench ran)
#   $OUT/device-check.tar.gz          logs/, every JSON, plots/ (cut to fit under 16 MiB)
# Steps, in order of value, each under its own timeout (min(its cap, time left - 15 s));
# every step leaves a log even when it fails, and none stops the script:
#   1. build (Release; Lua and jansson linked statically from bench/out/deps when the
#      machine has no headers)
#   2. GPU correctness: ctest -L gpu (every kernel and config on odd shapes against the
#      float64 reference)
#   3. the seeds' matrix: chunkgen bench --backend cuda,ref, the d = 128 shapes first
#      (seq 512 and 2048, then 8192), then the rest; fla (chunk_simple_gla) and mamba_ssm (mamba_chunk_scan_combined) on
#      the same cells (bench/peers/gpu_peers.py), torch's chunked form
#   4. compute-sanitizer racecheck and synccheck on the small conformance shapes
#   5. merge, plots, results; chunkgen tune; the CPU/emulator suite with the time left
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# ------------------------------------------------------------------ --prepare (here)
if [ "${1:-}" = "--prepare" ]; then
  set -e
  deps="$root/bench/out/deps"
  rm -rf "$deps" && mkdir -p "$deps/include/lua5.4" "$deps/lib"
  cp /usr/include/lua5.4/*.h "$deps/include/lua5.4/"
  cp /usr/include/jansson.h /usr/include/jansson_config.h "$deps/include/"
  for lib in liblua5.4.a libjansson.a; do
    f="$(find /usr/lib /usr/local/lib -name "$lib" 2>/dev/null | head -1)"
    [ -n "$f" ] && cp "$f" "$deps/lib/" || { echo "prepare: $lib not found (apt-get install liblua5.4-dev libjansson-dev)"; exit 1; }
  done
  # Python peers: fla is pure Python (PyPI fla-core / flash-linear-attention); mamba_ssm's
  # Triton SSD is pure Python too (its CUDA extension is not needed: gpu_peers.py skips
  # mamba_ssm/__init__). Copied from the shared venv when installed there, else from a
  # source download (pip download --no-deps --no-binary), without their tests.
  py="${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}/bin/python"; [ -x "$py" ] || py=python3
  pyd="$root/bench/out/pydeps"
  mkdir -p "$pyd"
  for spec in "fla fla-core" "mamba_ssm mamba-ssm"; do
    set -- $spec
    mod="$1" dist="$2"
    dl=""
    src="$("$py" -c "import importlib.util as u; s=u.find_spec('$mod'); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')" 2>/dev/null || true)"
    if [ -z "$src" ] && [ ! -d "$pyd/$mod" ]; then
      dl="$(mktemp -d)"
      # no build isolation (it would fetch torch to read setup.py); mamba's setup.py then
      # skips its CUDA build for the metadata
      if MAMBA_SKIP_CUDA_BUILD=TRUE timeout 300 "$py" -m pip download -q --no-deps --no-binary :all: \
          --no-build-isolation -d "$dl" "$dist" >/dev/null 2>&1; then
        (cd "$dl" && for a in *.tar.gz; do tar xzf "$a"; done) || true
        src="$(find "$dl" -mindepth 2 -maxdepth 2 -type d -name "$mod" | head -1)"
      fi
    fi
    if [ -n "$src" ]; then
      rm -rf "${pyd:?}/$mod"; cp -r "$src" "$pyd/"; echo "prepare: $mod from $src"
      find "$pyd/$mod" -name __pycache__ -type d -prune -exec rm -rf {} +
      [ -n "${dl:-}" ] && rm -rf "$dl"
    elif [ -d "$pyd/$mod" ]; then echo "prepare: $mod already in $pyd"
    else echo "prepare: $mod neither installed nor downloadable here (its peer rows will say so)"; fi
  done
  du -sh "$deps" "$pyd"
  echo 'carry: ["bench/out/deps", "bench/out/pydeps"]'
  echo 'run:   bash bench/device-check.sh   (timeout_s 480: BUDGET_S=400 plus start and packing)'
  exit 0
fi

# ------------------------------------------------------------------ the check
t_start=$(date +%s)
budget="${BUDGET_S:-400}"
dry="${DRY_RUN:-0}"
OUT="${OUT:-$root/bench/out/device-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
work="$(mktemp -d "${TMPDIR:-/tmp}/cg-device-check.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs"
steps="$work/steps.tsv"
printf 'step\tstatus\tseconds\n' >"$steps"
export PATH="/usr/local/cuda/bin:$PATH"
export CHUNKGEN_CACHE_DIR="$work/cache"
jobs="$(nproc 2>/dev/null || echo 4)"
build="${BUILD:-$work/build}"
bin="$build/chunkgen"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)"

left() { echo $(( budget - ($(date +%s) - t_start) )); }
note() { printf '%s\t%s\t0\n' "$1" "$2" >>"$steps"; echo "== $1: $2"; }

# step NAME MAX_SECONDS CMD...: runs CMD with a timeout of min(MAX, time left - 15 s),
# logs to logs/NAME.log, records the status; never stops the script.
step() {
  local name="$1" max="$2"; shift 2
  local t0 l to rc
  l="$(left)"; to=$(( max < l - 15 ? max : l - 15 ))
  if [ "$to" -lt 5 ]; then note "$name" "skipped: out of time"; return 0; fi
  echo "== $name (timeout ${to}s)"
  t0=$(date +%s)
  timeout -k 10 "$to" "$@" >"$work/logs/$name.log" 2>&1
  rc=$?
  local st="ok"
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && st="timeout"
  [ $rc -ne 0 ] && [ "$st" = ok ] && st="failed($rc)"
  printf '%s\t%s\t%s\n' "$name" "$st" "$(( $(date +%s) - t0 ))" >>"$steps"
  echo "   $st; last lines:"; tail -5 "$work/logs/$name.log" | sed 's/^/   | /'
  return $rc
}
# gpu_step: a step that needs the GPU; a dry run records it and runs nothing.
gpu_step() {
  if [ "$dry" = 1 ]; then note "$1" "dry run: not run"; return 0; fi
  step "$@"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $commit"
  echo "dry run: $dry"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -2 || true
  cmake --version 2>&1 | head -1 || true
  command -v compute-sanitizer || echo "compute-sanitizer: not found"
  python3 -c "import sys; print('python', sys.version.split()[0])" 2>&1 || true
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 || true
} >"$work/logs/env.log" 2>&1
cat "$work/logs/env.log"

# the tools every run needs
for t in cmake python3 tar gzip timeout git; do
  command -v "$t" >/dev/null 2>&1 || note "tools" "failed: missing $t"
done

# 1. build
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
deps="$root/bench/out/deps"
if [ ! -f /usr/include/lua5.4/lua.h ] && [ -f "$deps/include/lua5.4/lua.h" ]; then
  cmake_args+=(-DLUA_INCLUDE_DIR="$deps/include/lua5.4" -DLUA_STATIC_LIB="$deps/lib/liblua5.4.a")
fi
if [ ! -f /usr/include/jansson.h ] && [ -f "$deps/include/jansson.h" ]; then
  cmake_args+=(-DJANSSON_INCLUDE_DIR="$deps/include" -DJANSSON_STATIC_LIB="$deps/lib/libjansson.a")
fi
if [ "$dry" = 1 ]; then
  # the existing build is reused (the test suite's own): it must hold the CLI and the tests
  if [ -x "$bin" ] && [ -x "$build/cg_tests" ]; then step build 30 "$bin" version
  else note build "failed: dry run needs BUILD=<a build dir with chunkgen and cg_tests> ($build)"; fi
else
  step build 180 bash -c 'cmake -S "$1" -B "$2" "${@:4}" && cmake --build "$2" -j"$3"' build "$root" "$build" "$jobs" \
    "${cmake_args[@]}"
fi

export PYTHONPATH="$root/bench/out/pydeps${PYTHONPATH:+:$PYTHONPATH}"
has_torch_cuda=0
python3 -c "import torch, numpy; assert torch.cuda.is_available()" >/dev/null 2>&1 && has_torch_cuda=1

if [ -x "$bin" ]; then
  # 2. GPU correctness: every kernel on odd shapes
  export CHUNKGEN_TEST_KCACHE="$work/sweep-kernels"
  gpu_step test_gpu 100 ctest --test-dir "$build" -L gpu -j"$(( jobs < 8 ? jobs : 8 ))" --output-on-failure

  # 3. the seeds' matrix, d = 128 first, and the peers on its cells
  bench_args=(--threads "$jobs" --min-time "${BENCH_MIN_TIME:-0.2}" --ref-seq "${BENCH_REF_SEQ:-512}" --commit "$commit")
  if [ "$dry" = 1 ]; then
    # the CPU backend on one tiny cell: the JSON, merge and summary path stays exercised
    step bench_d128 30 "$bin" bench --backend cpu --preset g2h4_dk48_dv40 --seq 64 --min-time 0.01 --threads 1 \
      --commit "$commit" --out "$work/bench-d128.json"
  else
    # (bench writes its JSON at the end: the long seq runs apart, so a timeout there
    # keeps the rest)
    step bench_d128 100 "$bin" bench --backend cuda,ref --preset g2h8_d128,g1h24_dk128_dv64,g1h1_d128,sscan_d1024 \
      --seq 512,2048 "${bench_args[@]}" --out "$work/bench-d128.json"
  fi
  if [ -s "$work/bench-d128.json" ] && [ $has_torch_cuda = 1 ]; then
    gpu_step gpu_peers 70 python3 bench/peers/gpu_peers.py --matrix "$work/bench-d128.json" --chunkgen "$bin" \
      --out "$work/peers-gpu.json"
  else
    note gpu_peers "skipped: no bench rows or no torch with CUDA"
  fi
  gpu_step bench_d128_8192 60 "$bin" bench --backend cuda,ref --preset g2h8_d128,g1h24_dk128_dv64,g1h1_d128,sscan_d1024 \
    --seq 8192 "${bench_args[@]}" --out "$work/bench-d128-8192.json"
  gpu_step bench_rest 50 "$bin" bench --backend cuda,ref --preset g2h4_dk48_dv40,sscan_d256,sscan_d512 \
    "${bench_args[@]}" --out "$work/bench-rest.json"
  if [ -s "$work/bench-d128.json" ] && [ $has_torch_cuda = 1 ]; then
    gpu_step torch_peers_cuda 40 python3 bench/peers/torch_peers.py --matrix "$work/bench-d128.json" --device cuda \
      --chunkgen "$bin" --impls torch_chunked --max-call-s 5 --out "$work/peers-torch-cuda.json"
  fi

  # 4. sanitizers on the small conformance shapes (every kernel once, default configs)
  if command -v compute-sanitizer >/dev/null 2>&1 || [ "$dry" = 1 ]; then
    for tool in racecheck synccheck; do
      gpu_step "sanitizer_$tool" 45 compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/cg_tests" conformance_cuda
    done
  else
    note sanitizer "skipped: compute-sanitizer not found"
  fi
else
  note tests "skipped: no chunkgen binary in $build"
fi

# 5. merge, plots, results file
results=""
if [ -s "$work/bench-d128.json" ]; then
  inputs=("$work/bench-d128.json")
  for f in "$work/bench-d128-8192.json" "$work/bench-rest.json" "$work"/peers-*.json; do [ -s "$f" ] && inputs+=("$f"); done
  step merge 30 python3 bench/merge.py "${inputs[@]}" -o "$work/merged.json"
  if [ -s "$work/merged.json" ]; then
    if python3 -c "import matplotlib" >/dev/null 2>&1 && [ "$dry" != 1 ]; then
      step plot 45 python3 bench/plot "$work/merged.json" --out "$work/plots"
    fi
    python3 bench/summary.py "$work/merged.json" >"$work/results-summary.txt" 2>&1 || true
    gpu="$(python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['device']; print(d.get('gpu') or d.get('cpu') or 'device')" \
      "$work/merged.json" 2>/dev/null | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/^-//; s/-$//')"
    results="results-${gpu:-device}-$(date -u +%Y%m%d)-$commit.json"
    cp "$work/merged.json" "$OUT/$results"
  fi
fi
if [ -x "$bin" ] && "$bin" tune --help >/dev/null 2>&1; then
  gpu_step tune 60 "$bin" tune --backend cuda --budget "${TUNE_BUDGET_S:-40}"
fi
if [ -x "$build/cg_tests" ]; then
  gpu_step test_other 150 ctest --test-dir "$build" -LE gpu -j"$jobs" --output-on-failure
fi

# ------------------------------------------------------------------ what comes back
# The tarball: logs and every JSON and plot; cut (logs to their last 4000 lines, then
# without plots) until it is under 15 MiB.
pack() {
  local lim=$((15 * 1024 * 1024)) stage="$work/pack/device-check"
  rm -rf "$work/pack"; mkdir -p "$stage"
  cp -r "$work/logs" "$steps" "$stage/"
  for f in "$work"/*.json "$work"/results-summary.txt; do [ -f "$f" ] && cp "$f" "$stage/"; done
  [ -d "$work/plots" ] && cp -r "$work/plots" "$stage/"
  tar czf "$OUT/device-check.tar.gz" -C "$work/pack" device-check
  if [ "$(stat -c %s "$OUT/device-check.tar.gz")" -gt $lim ]; then
    for f in "$stage"/logs/*.log; do tail -4000 "$f" >"$f.t" && mv "$f.t" "$f"; done
    tar czf "$OUT/device-check.tar.gz" -C "$work/pack" device-check
  fi
  if [ "$(stat -c %s "$OUT/device-check.tar.gz")" -gt $lim ]; then
    rm -rf "$stage/plots"; tar czf "$OUT/device-check.tar.gz" -C "$work/pack" device-check
  fi
}
# The device tool's limits on $OUT: prints the violations, returns 1 when there are any.
check_limits() {
  local n bad=0
  n="$(find "$OUT" -type f | wc -l)"
  [ "$n" -le 8 ] || { echo "limits: $n files in $OUT (at most 8)"; bad=1; }
  while IFS= read -r f; do
    local rel="${f#"$OUT"/}" depth
    depth="$(printf '%s' "$rel" | tr -cd '/' | wc -c)"
    [ "$depth" -le 2 ] || { echo "limits: $rel is more than two folders down"; bad=1; }
    [ "$(stat -c %s "$f")" -lt $((16 * 1024 * 1024)) ] || { echo "limits: $rel is 16 MiB or more"; bad=1; }
    printf '%s' "$rel" | grep -q '^[A-Za-z0-9._/-]*$' || { echo "limits: $rel has characters outside [A-Za-z0-9._-]"; bad=1; }
  done < <(find "$OUT" -type f)
  find "$OUT" ! -type f ! -type d | grep -q . && { echo "limits: $OUT holds links or special files"; bad=1; }
  return $bad
}

pack
{
  echo "chunkgen device check, commit $commit, $(date -u +%FT%TZ), dry run $dry, budget ${budget} s"
  grep -v '^\(date\|commit\|dry run\):' "$work/logs/env.log"
  echo
  column -t -s $'\t' "$steps" 2>/dev/null || cat "$steps"
  echo
  [ -f "$work/results-summary.txt" ] && head -60 "$work/results-summary.txt"
  echo
  echo "files: summary.txt${results:+, $results}, device-check.tar.gz (logs/, JSON, plots/)"
  echo "total $(( $(date +%s) - t_start )) s"
} >"$OUT/summary.txt"
if check_limits >"$work/limits.txt"; then echo "limits: ok (at most 8 files, 2 folders, 16 MiB each)" >>"$OUT/summary.txt"
else cat "$work/limits.txt" >>"$OUT/summary.txt"; fi
cat "$OUT/summary.txt"
rc=0
check_limits >/dev/null || rc=1
# a dry run fails when a step that runs here failed (build reuse, the CPU bench, merge)
if [ "$dry" = 1 ] && grep -P '\t(failed|timeout)' "$steps" >/dev/null; then rc=1; fi
exit $rc
