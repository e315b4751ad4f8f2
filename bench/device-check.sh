#!/usr/bin/env bash
# device-check.sh -- one script for the GPU machine: build, GPU tests, tune, bench, plots.
#
#   bash bench/device-check.sh            (on the GPU machine; writes everything to $OUT)
#   bash bench/device-check.sh --prepare  (here, before: stage what the GPU machine lacks)
#
# The GPU machine has cmake, nvcc and a driver, but no internet, no apt and maybe no Lua or
# jansson headers. --prepare copies Lua's and jansson's headers and static libraries, and
# (if present) the fla / mamba_ssm sources, under bench/out/ (git-ignored), so the run
# tool carries them: carry ["bench/out/deps", "bench/out/pydeps"].
#
# Steps, each under its own timeout so the whole stays within about 8 minutes
# ($BUDGET_S, default 480) and never hangs; every step leaves a log even when it fails:
#   1. build (Release, Lua and jansson linked statically)
#   2. GPU tests (ctest -L gpu: every test with a GPU path)
#   3. chunkgen tune --backend cuda over the seed shapes, within a budget (skipped with a
#      message when `chunkgen tune` does not exist yet)
#   4. chunkgen bench --backend cuda,ref (tuned and default configs, the float64 reference cut)
#   5. GPU peers (fla, mamba: only if importable) and torch peers on the GPU (if torch has CUDA)
#   6. merge, plots, summary; a results JSON named after the device, date and commit
#   7. the other tests (ctest -LE gpu) with the time left
# Outputs under $OUT: steps.tsv (step, status, seconds), logs/*.log, bench-cuda.json,
# peers-*.json, merged.json, plots/*.png, summary.txt, results/<gpu>-<date>-<commit>.json.
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
    [ -n "$f" ] && cp "$f" "$deps/lib/" || echo "prepare: $lib not found"
  done
  py="$root/bench/.venv/bin/python"; [ -x "$py" ] || py=python3
  pyd="$root/bench/out/pydeps"
  mkdir -p "$pyd"   # kept: sources copied there by hand stay
  for pkg in fla mamba_ssm einops; do
    src="$("$py" -c "import importlib.util as u; s=u.find_spec('$pkg'); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')" 2>/dev/null || true)"
    if [ -n "$src" ]; then rm -rf "${pyd:?}/$pkg"; cp -r "$src" "$pyd/"; echo "prepare: $pkg from $src"
    elif [ -d "$pyd/$pkg" ]; then echo "prepare: $pkg already in $pyd"
    else echo "prepare: $pkg not installed here (GPU peer rows will say so)"; fi
  done
  du -sh "$deps" "$pyd"
  echo 'carry: ["bench/out/deps", "bench/out/pydeps"]'
  exit 0
fi

# ------------------------------------------------------------------ the check (GPU machine)
t_start=$(date +%s)
budget="${BUDGET_S:-480}"
OUT="${OUT:-$root/bench/out/device-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT/logs"
steps="$OUT/steps.tsv"
printf 'step\tstatus\tseconds\n' >"$steps"
export PATH="/usr/local/cuda/bin:$PATH"
export CHUNKGEN_CACHE_DIR="${CHUNKGEN_CACHE_DIR:-$OUT/cache}"
jobs="$(nproc 2>/dev/null || echo 4)"
build="${BUILD:-$root/build-device}"
bin="$build/chunkgen"

left() { echo $(( budget - ($(date +%s) - t_start) )); }

# step NAME MAX_SECONDS CMD...: runs CMD with a timeout of min(MAX, time left - 15 s),
# logs to logs/NAME.log, records the status; never stops the script.
step() {
  local name="$1" max="$2"; shift 2
  local t0 l to rc
  l="$(left)"; to=$(( max < l - 15 ? max : l - 15 ))
  if [ "$to" -lt 5 ]; then
    printf '%s\tskipped: out of time\t0\n' "$name" >>"$steps"
    echo "== $name: skipped (out of time)"
    return 0
  fi
  echo "== $name (timeout ${to}s)"
  t0=$(date +%s)
  timeout -k 10 "$to" "$@" >"$OUT/logs/$name.log" 2>&1
  rc=$?
  local st="ok"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && st="timeout"
  [ $rc -ne 0 ] && [ "$st" = ok ] && st="failed($rc)"
  printf '%s\t%s\t%s\n' "$name" "$st" "$(( $(date +%s) - t0 ))" >>"$steps"
  echo "   $st; last lines:"; tail -5 "$OUT/logs/$name.log" | sed 's/^/   | /'
  return $rc
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -2 || true
  cmake --version 2>&1 | head -1 || true
  python3 -c "import sys; print('python', sys.version.split()[0])" 2>&1 || true
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 || true
} >"$OUT/logs/env.log" 2>&1
cat "$OUT/logs/env.log"

# 1. build
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
deps="$root/bench/out/deps"
if [ ! -f /usr/include/lua5.4/lua.h ] && [ -f "$deps/include/lua5.4/lua.h" ]; then
  cmake_args+=(-DLUA_INCLUDE_DIR="$deps/include/lua5.4" -DLUA_STATIC_LIB="$deps/lib/liblua5.4.a")
fi
if [ ! -f /usr/include/jansson.h ] && [ -f "$deps/include/jansson.h" ]; then
  cmake_args+=(-DJANSSON_INCLUDE_DIR="$deps/include" -DJANSSON_STATIC_LIB="$deps/lib/libjansson.a")
fi
step build 240 bash -c 'cmake -S "$1" -B "$2" "${@:4}" && cmake --build "$2" -j"$3"' build "$root" "$build" "$jobs" \
  "${cmake_args[@]}"

if [ -x "$bin" ]; then
  # 2. tests
  step test_gpu 120 ctest --test-dir "$build" -L gpu -j4 --output-on-failure

  # 3. tune
  if "$bin" tune --help >/dev/null 2>&1; then
    step tune 120 "$bin" tune --backend cuda --budget "${TUNE_BUDGET_S:-90}"
  else
    printf 'tune\tskipped: chunkgen tune does not exist in this build\t0\n' >>"$steps"
    echo "== tune: skipped (chunkgen tune does not exist in this build)"
  fi

  # 4. bench
  if "$bin" bench --help >/dev/null 2>&1; then
    step bench 200 "$bin" bench --backend cuda,ref --threads "$jobs" --min-time "${BENCH_MIN_TIME:-0.3}" \
      --ref-seq "${BENCH_REF_SEQ:-1024}" --commit "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)" \
      --out "$OUT/bench-cuda.json"
  else
    printf 'bench\tskipped: chunkgen bench is not wired into this build\t0\n' >>"$steps"
  fi
else
  echo "== no chunkgen binary: tests, tune and bench skipped"
fi


# 5. peers (Python): only what is importable there
export PYTHONPATH="$root/bench/out/pydeps${PYTHONPATH:+:$PYTHONPATH}"
py=python3
if [ -s "$OUT/bench-cuda.json" ] && $py -c "import torch, numpy; assert torch.cuda.is_available()" >/dev/null 2>&1; then
  step gpu_peers 90 $py bench/peers/gpu_peers.py --matrix "$OUT/bench-cuda.json" --chunkgen "$bin" \
    --out "$OUT/peers-gpu.json"
  step torch_peers_cuda 60 $py bench/peers/torch_peers.py --matrix "$OUT/bench-cuda.json" --device cuda \
    --chunkgen "$bin" --impls torch_chunked --max-call-s 10 --out "$OUT/peers-torch-cuda.json"
else
  printf 'peers\tskipped: python3 with torch (CUDA) and numpy not available\t0\n' >>"$steps"
  echo "== peers: skipped (python3 with torch+CUDA and numpy not available)"
fi

# 6. merge, plots, results file
if [ -s "$OUT/bench-cuda.json" ]; then
  inputs=("$OUT/bench-cuda.json")
  for f in "$OUT"/peers-*.json; do [ -s "$f" ] && inputs+=("$f"); done
  step merge 30 python3 bench/merge.py "${inputs[@]}" -o "$OUT/merged.json"
  if python3 -c "import matplotlib" >/dev/null 2>&1; then
    step plot 60 python3 bench/plot "$OUT/merged.json" --out "$OUT/plots"
  else
    printf 'plot\tskipped: no matplotlib (plot later: bench/plot merged.json)\t0\n' >>"$steps"
  fi
  python3 bench/summary.py "$OUT/merged.json" >"$OUT/summary.txt" 2>&1 || true
  gpu="$(python3 -c "import json; print(json.load(open('$OUT/merged.json'))['device'].get('gpu') or 'gpu')" 2>/dev/null | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')"
  mkdir -p "$OUT/results"
  cp "$OUT/merged.json" "$OUT/results/${gpu:-gpu}-$(date -u +%Y%m%d)-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none).json" 2>/dev/null || true
fi

# 7. the CPU/emulator suite last, with the time that is left (CI runs it too)
if [ -x "$build/cg_tests" ]; then
  step test_other 150 ctest --test-dir "$build" -LE gpu -j"$jobs" --output-on-failure
fi

echo "== steps"
cat "$steps"
echo "== total $(( $(date +%s) - t_start )) s; outputs in $OUT"
exit 0
