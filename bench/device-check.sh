#!/usr/bin/env bash
# device-check.sh -- the GPU check: three commands, each done within its budget (300 s, 250 s
# for command 3) on an H100 or H200, every phase's result line written to $OUT the moment the
# phase ends (a command cut off at its limit still returns every finished phase).
#
#   bench/device-check.sh --prepare     here: stage what the GPU machine lacks into ignored
#                                       folders of the checkout and print the device tool's
#                                       `carry` list and the three commands
#   OUT=DIR bench/device-check.sh [1]   there: command 1 (no argument: 1)
#   OUT=DIR bench/device-check.sh 2     there: command 2
#   OUT=DIR bench/device-check.sh 3     there: command 3 (after 2 it reuses 2's package)
#
# The GPU machine has nvcc, CMake, ninja, PyTorch, JAX, Triton, compute-sanitizer and
# scikit-build-core, but no Lua and no jansson (no headers, no archives, no liblua at all;
# only the linker's own libjansson.so.4), no apt and no network. --prepare copies Debian's
# Lua 5.4 and jansson (headers, static archives for the C library, CLI and tests; shared
# libraries for the Python modules, which cannot link Debian's non-PIC archives) into
# bench/out/deps, and the peers, pinned (fla-core 0.6.0 and einops 0.8.2 from their wheels,
# mamba_ssm 2.3.2.post1's package from its sdist, each checked against its sha256), into
# bench/out/pydeps. The build, the kernel cache, Triton's cache and the logs live in
# $DEVICE_CHECK_DIR (default bench/out/device, ignored, not carried): a rerun on a warm
# machine reuses them.
#
# Phases, most valuable first; each is skipped (with the reason) where it cannot run:
#   command 1: env, build, gpu_tests (ctest -L '^gpu$': every kernel family against the
#              float64 reference on odd shapes, fp32 and 16-bit, varlen), tune (two keys on
#              the GPU; the tuned configs verified and stored), san_memcheck, san_racecheck,
#              san_synccheck (compute-sanitizer on one small shape per kernel)
#   command 2: env, build (reused), py_build (the package, built there), py_gpu (torch ops on
#              CUDA tensors with gradients, torch.compile, a varlen call in a CUDA graph, JAX
#              under jit and grad), bench_d128 and bench_rest (the seeds' matrix, default and
#              tuned configs), peers (fla chunk_simple_gla, mamba mamba_chunk_scan_combined on
#              the same cells), results (the merged JSON)
#   command 3: env, py_build (reused when command 2 built the same sources), gdn (the gated
#              delta rule in bf16 on issue 35's three cells, fwd and fwd+bwd, against fla's
#              tolerances: bench/peers/gpu_gdn.py), decode (the step ops at batch 1, 16, 256
#              against a measured copy and mamba's Triton selective_state_update:
#              bench/peers/gpu_decode.py), gdn_fla (fla's chunk_gated_delta_rule on the same
#              cells), results (the merged JSON)
# $OUT/summary.txt: one line per phase, `PHASE STATUS SECONDS DETAIL`, STATUS ok, skipped or
# failed. Besides it at most 7 files (the device tool returns 8): logs.tar.gz (every phase's
# log, rewritten after each phase), and the phases' JSON. Each phase runs under a timeout of
# min(its cap, what is left of BUDGET_S (default 290 s; 240 s for command 3) less a reserve
# for packing); a phase that does not fit is skipped "out of time".
#
# tests/perf/device_check_rehearsal.sh runs --prepare and the three commands from a copy of
# the checkout in a mount namespace that hides Lua and jansson, without network or GPU (ctest
# device_check_rehearsal): every GPU phase must say "skipped: no GPU", gdn and decode run
# their code on the CPU at small sizes, and everything else passes, within the limits.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
deps="$root/bench/out/deps"
pyd="$root/bench/out/pydeps"
work="${DEVICE_CHECK_DIR:-$root/bench/out/device}"
py="${PYTHON:-python3}"

# ------------------------------------------------------------------ --prepare (here)
if [ "${1:-}" = "--prepare" ]; then
  set -e
  rm -rf "$deps" && mkdir -p "$deps/include/lua5.4" "$deps/lib"
  for h in /usr/include/lua5.4/lua.h /usr/include/jansson.h; do
    [ -f "$h" ] || { echo "prepare: $h missing (apt-get install liblua5.4-dev libjansson-dev, or scripts/setup.sh)"; exit 1; }
  done
  cp /usr/include/lua5.4/*.h "$deps/include/lua5.4/"
  # Debian's luaconf.h includes "lua5.4-deb-multiarch.h" from the multiarch include folder
  for h in /usr/include/*/lua5.4-deb-multiarch.h; do [ -f "$h" ] && cp "$h" "$deps/include/lua5.4/"; done
  cp /usr/include/jansson.h /usr/include/jansson_config.h "$deps/include/"
  # archives for the C library, CLI and tests (linked statically); shared libraries for the
  # Python modules, copied as plain files under both the SONAME and the link name
  for lib in liblua5.4.a libjansson.a liblua5.4.so.0 libjansson.so.4; do
    f="$(find /usr/lib /usr/local/lib -name "$lib" 2>/dev/null | head -1)"
    [ -n "$f" ] || { echo "prepare: $lib not found (apt-get install liblua5.4-dev libjansson-dev)"; exit 1; }
    cp -L "$f" "$deps/lib/$lib"
  done
  cp "$deps/lib/liblua5.4.so.0" "$deps/lib/liblua5.4.so"
  cp "$deps/lib/libjansson.so.4" "$deps/lib/libjansson.so"
  # the peers, pure Python + Triton, pinned (the versions and sha256 of tests/python/refs):
  # fla-core 0.6.0 (chunk_simple_gla, chunk_gated_delta_rule; its one requirement, einops,
  # staged too) from their wheels, unzipped; mamba_ssm 2.3.2.post1's package and licence from
  # its sdist (its Triton SSD and selective_state_update need no CUDA extension)
  if [ "${DEVICE_CHECK_PEERS:-1}" = 1 ]; then
    set +e
    vpy="${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}/bin/python"; [ -x "$vpy" ] || vpy=python3
    mkdir -p "$pyd"
    dl="$(mktemp -d)"
    while read -r mod file sha; do
      if [ -f "$pyd/.staged-$file" ]; then echo "prepare: $file already in $pyd"; continue; fi
      dist="${file%%-[0-9]*}" ver="${file#"$dist"-}"; ver="${ver%%-py3*}"; ver="${ver%.tar.gz}"
      if [ "${file%.whl}" != "$file" ]; then how=(--only-binary :all:); else how=(--no-binary :all: --no-build-isolation); fi
      MAMBA_SKIP_CUDA_BUILD=TRUE timeout 300 "$vpy" -m pip download -q --no-deps "${how[@]}" -d "$dl" \
        "${dist//_/-}==$ver" >"$dl/pip.log" 2>&1
      if [ ! -f "$dl/$file" ]; then echo "prepare: $file not downloadable here ($(tail -1 "$dl/pip.log")): its rows will say so"; continue; fi
      if [ "$(sha256sum "$dl/$file" | cut -d' ' -f1)" != "$sha" ]; then echo "prepare: $file: sha256 differs from $sha: not staged"; continue; fi
      rm -rf "${pyd:?}/$mod"
      if [ "${file%.whl}" != "$file" ]; then
        (cd "$pyd" && python3 -m zipfile -e "$dl/$file" .) || { echo "prepare: $file: cannot unzip"; continue; }
      else
        tar xzf "$dl/$file" -C "$dl" && cp -r "$dl/${file%.tar.gz}/$mod" "$pyd/" &&
          cp "$dl/${file%.tar.gz}/LICENSE" "$pyd/$mod/LICENSE" || { echo "prepare: $file: cannot unpack"; continue; }
      fi
      : >"$pyd/.staged-$file"
      echo "prepare: $mod from $file (sha256 ok)"
    done <<'PINS'
fla fla_core-0.6.0-py3-none-any.whl b0708b70e0b119cd58a0a5146ea56cb175cef6ed969d8ac60267e3e077ce3ebd
einops einops-0.8.2-py3-none-any.whl 54058201ac7087911181bfec4af6091bb59380360f069276601256a76af08193
mamba_ssm mamba_ssm-2.3.2.post1.tar.gz 104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028
PINS
    rm -rf "$dl"
    find "$pyd" -name __pycache__ -type d -prune -exec rm -rf {} +
    set -e
  fi
  du -sh "$deps" "$pyd" 2>/dev/null || true
  echo 'carry: ["bench/out/deps", "bench/out/pydeps"]'
  echo 'run 1: OUT=$OUT bash bench/device-check.sh 1   (timeout_s 320)'
  echo 'run 2: OUT=$OUT bash bench/device-check.sh 2   (timeout_s 320, at once after run 1: the machine stays warm 30 s)'
  echo 'run 3: OUT=$OUT bash bench/device-check.sh 3   (timeout_s 270, at once after run 2)'
  exit 0
fi

# ------------------------------------------------------------------ a command (there)
cmd="${1:-1}"
case "$cmd" in 1 | 2 | 3) ;; *) echo "usage: $0 --prepare | [1|2|3]" >&2; exit 2 ;; esac
t_start=$(date +%s)
budget="${BUDGET_S:-$([ "$cmd" = 3 ] && echo 240 || echo 290)}"
reserve=8 # seconds kept for the last packing
OUT="${OUT:-$work/out-$cmd}"
mkdir -p "$OUT" "$work"
logs="$work/logs-$cmd"
rm -rf "$logs" && mkdir -p "$logs"
summary="$OUT/summary.txt"
: >"$summary"
build="$work/build"
bin="$build/chunkgen"
export CHUNKGEN_CACHE_DIR="$work/cache"            # tuned configs and compiled kernels
export CHUNKGEN_TEST_KCACHE="$work/cache/sweep-kernels"
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR="$work/triton-cache"       # the peers' compiled kernels: a rerun reuses them
jobs="$(nproc 2>/dev/null || echo 4)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)"
date_tag="$(date -u +%Y%m%d)"

# Staged Lua / jansson where the machine has none (bench/out/deps, --prepare).
cmake_deps=()
if [ ! -f /usr/include/lua5.4/lua.h ] && [ -f "$deps/include/lua5.4/lua.h" ]; then
  cmake_deps+=(-DLUA_INCLUDE_DIR="$deps/include/lua5.4" -DLUA_STATIC_LIB="$deps/lib/liblua5.4.a"
    -DLUA_SHARED_LIB="$deps/lib/liblua5.4.so.0" -DCG_PY_LUA_LIB="$deps/lib/liblua5.4.so.0")
fi
if [ ! -f /usr/include/jansson.h ] && [ -f "$deps/include/jansson.h" ]; then
  cmake_deps+=(-DJANSSON_INCLUDE_DIR="$deps/include" -DJANSSON_STATIC_LIB="$deps/lib/libjansson.a"
    -DJANSSON_SHARED_LIB="$deps/lib/libjansson.so.4" -DCG_PY_JANSSON_LIB="$deps/lib/libjansson.so.4")
fi
# the Python modules load the staged shared libraries at import
[ ${#cmake_deps[@]} -eq 0 ] || export LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$work/py:$pyd:$root/tests/python${PYTHONPATH:+:$PYTHONPATH}"

# The GPU: nvidia-smi names it, or nothing does.
has_gpu=0
gpu_why="no GPU (nvidia-smi not found)"
gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1; then
  if gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" && [ -n "$gpu_name" ]; then
    has_gpu=1
  else
    gpu_why="no GPU (nvidia-smi lists none)"
  fi
fi

left() { echo $((budget - ($(date +%s) - t_start))); }
# record NAME STATUS SECONDS DETAIL: the phase's line in summary.txt (DETAIL on one line)
record() {
  local d="${4//$'\n'/ }"
  printf '%s %s %s %s\n' "$1" "$2" "$3" "${d:0:400}" >>"$summary"
  echo "== $1: $2 ($3 s) $d"
}
# logs.tar.gz: every phase's log so far (cut to its last 20000 lines when large)
pack() {
  local stage="$work/pack-$cmd"
  rm -rf "$stage" && mkdir -p "$stage/logs-$cmd"
  for f in "$logs"/*; do [ -f "$f" ] && tail -n 20000 "$f" >"$stage/logs-$cmd/$(basename "$f")"; done
  tar czf "$OUT/logs.tar.gz.tmp" -C "$stage" "logs-$cmd" && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
  rm -rf "$stage"
}
# phase NAME CAP host|gpu FUNCTION: runs FUNCTION (a function of this script) with a timeout of
# min(CAP, time left - reserve), its output in logs/NAME.log; the function may write a one-line
# detail into $PHASE_DETAIL, and exit 77 for "skipped" (what it needs is missing). A gpu phase
# without a GPU is skipped; a cpu_too phase runs there too, its code on the CPU at small sizes
# (the rehearsal), its cap counted as a GPU phase's.
phase() {
  local name="$1" cap="$2" kind="$3" fn="$4" l to t0 rc st detail
  if [ "$kind" = gpu ] && [ "$has_gpu" = 0 ]; then
    record "$name" skipped 0 "$gpu_why"
    printf '%s\n' "$cap" >>"$work/gpu-caps-$cmd"
    return 0
  fi
  [ "$kind" = cpu_too ] && [ "$has_gpu" = 0 ] && printf '%s\n' "$cap" >>"$work/gpu-caps-$cmd"
  l="$(left)"
  to=$((cap < l - reserve ? cap : l - reserve))
  if [ "$to" -lt 5 ]; then record "$name" skipped 0 "out of time (budget ${budget} s)"; return 0; fi
  export PHASE_DETAIL="$logs/$name.detail" PHASE_TIMEOUT="$to"
  rm -f "$PHASE_DETAIL"
  t0=$(date +%s)
  timeout -k 5 "$to" bash -c "$fn" >"$logs/$name.log" 2>&1
  rc=$?
  detail="$(cat "$PHASE_DETAIL" 2>/dev/null || true)"
  if [ $rc -eq 0 ]; then st=ok
  elif [ $rc -eq 77 ]; then st=skipped # the function found what it needs missing and said why
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then st=failed; detail="timed out after ${to} s; $detail"
  else
    st=failed
    # the phase's own detail, else the first line that looks like the cause, else the last lines
    [ -n "$detail" ] || detail="$(grep -m1 -iE 'error|cannot|not found|no such|undefined' "$logs/$name.log")"
    detail="exit $rc; ${detail:-$(tail -n 3 "$logs/$name.log" | tr '\n' ' ')}"
  fi
  record "$name" "$st" "$(($(date +%s) - t0))" "$detail"
  pack
  return 0
}
export root work build bin deps pyd py jobs commit date_tag OUT has_gpu gpu_name
export CMAKE_DEPS="${cmake_deps[*]:-}"
rm -f "$work/gpu-caps-$cmd"

# ------------------------------------------------------------------ the phases' bodies
# (each runs in `bash -c`: exported functions)
ph_env() {
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $commit"
  echo "host: $(uname -n) $(uname -r), $(nproc) cores"
  grep -m1 'model name' /proc/cpuinfo || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,compute_cap --format=csv 2>&1 || true
  nvidia-smi 2>&1 | head -20 || true
  nvcc --version 2>&1 | tail -2 || true
  cmake --version 2>&1 | head -1 || true
  command -v compute-sanitizer || echo "compute-sanitizer: not found"
  # the Python side in one interpreter (importing torch and jax takes seconds each)
  local pyv
  pyv="$("$py" - 2>&1 <<'PY'
import importlib, sys
out = ["python %s" % sys.version.split()[0]]
import os
for m in ("torch", "triton") if os.environ.get("cmd") == "3" else ("torch", "jax", "triton"):  # 3 needs no JAX
    try:
        mod = importlib.import_module(m)
        extra = ""
        if m == "torch":
            extra = " (cuda %s, available %s)" % (mod.version.cuda, mod.cuda.is_available())
        elif m == "jax":
            extra = " (backend %s)" % mod.default_backend()
        out.append("%s %s%s" % (m, mod.__version__, extra))
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        out.append("%s none (%s)" % (m, type(e).__name__))
print(", ".join(out))
PY
)"
  echo "$pyv"
  local drv
  drv="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  printf 'gpu %s, driver %s, %s cores, nvcc %s, %s, lua/jansson %s' "${gpu_name:-none}" "${drv:-none}" "$(nproc)" \
    "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)" "$(echo "$pyv" | tail -1)" \
    "$([ -n "$CMAKE_DEPS" ] && echo staged || echo system)" >"$PHASE_DETAIL"
}
ph_build() {
  set -e
  local how=reused
  if [ ! -f "$build/CMakeCache.txt" ]; then
    how=configured
    # shellcheck disable=SC2086
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release $CMAKE_DEPS
  fi
  cmake --build "$build" -j"$jobs" --target chunkgen cg_tests
  "$bin" info || true
  echo "$how; $("$bin" version 2>/dev/null | head -1); $("$bin" info 2>/dev/null | grep -m1 '^device:' | tr -s ' ')" \
    >"$PHASE_DETAIL"
}
ph_gpu_tests() {
  local rc=0 t="$work/ctest-gpu.txt"
  ctest --test-dir "$build" -L '^gpu$' -j"$((jobs < 8 ? jobs : 8))" --timeout 90 --output-on-failure >"$t" 2>&1 || rc=$?
  cat "$t"
  # "100% tests passed, 0 tests failed out of 18", and how many of them skipped: on the GPU
  # machine a skip means the library saw no device, which fails the phase
  local skipped
  skipped="$(grep -c '(Skipped)' "$t")"
  echo "$(grep -h 'tests passed' "$t" | tail -1); $skipped skipped$([ "$skipped" != 0 ] && echo ": $(grep '(Skipped)' "$t" | awk '{print $3}' | tr '\n' ' ')")" >"$PHASE_DETAIL"
  [ "$skipped" = 0 ] || rc=1
  return $rc
}
ph_tune() {
  set -e
  local ex="$work/tune-export.json"
  "$bin" tune --backend cuda --shape ssd:4,2048,2,4,48,40 --shape sscan:4,2048,256,16 --max-candidates 12 \
    --budget 30 --min-time 0.05
  "$bin" export --json "$ex"
  cp "$ex" "$OUT/tune-export.json"
  # every key tuned on the GPU has a verified best config (verdict ok, finite error)
  "$py" - "$ex" "$PHASE_DETAIL" <<'PY'
import json, math, sys
doc = json.load(open(sys.argv[1]))
entries = doc.get("entries", doc if isinstance(doc, list) else [])
bad, good = [], []
for e in entries:
    best = e.get("best") or {}
    cands = {c["config"]: c for c in e.get("candidates", [])}
    c = cands.get(best.get("config"))
    ok = c is not None and c.get("verdict") == "ok" and c.get("err") is not None and math.isfinite(c["err"])
    (good if ok else bad).append("%s %s" % (e.get("kernel"), e.get("key", {}).get("backend", "")))
open(sys.argv[2], "w").write("%d keys with a verified tuned config, %d without%s" % (
    len(good), len(bad), (": " + ", ".join(bad)) if bad else ""))
sys.exit(0 if len(good) >= 4 and not bad else 1)
PY
}
san() {
  local tool="$1" rc=0
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found" >"$PHASE_DETAIL"; return 77; }
  compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/cg_tests" cuda_gpu_each_kernel || rc=$?
  echo "compute-sanitizer --tool $tool on cuda_gpu_each_kernel: rc $rc" >"$PHASE_DETAIL"
  return $rc
}
ph_san_memcheck() { san memcheck; }
ph_san_racecheck() { san racecheck; }
ph_san_synccheck() { san synccheck; }
# the Python package's sources (what scikit-build-core builds from): py_build reuses
# $work/py when it was installed from the same ones (command 3 after command 2, a rerun)
src_stamp() {
  (cd "$root" && find autotune cmake emulator generator include python runtime templates tools CMakeLists.txt \
    pyproject.toml -type f ! -name '*.pyc' 2>/dev/null | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
}
ph_py_build() {
  set -e
  local stamp
  stamp="$(src_stamp)"
  # (the stamp is written only after the installed package imported)
  if [ "$(cat "$work/py/.cg-stamp" 2>/dev/null)" = "$stamp" ] && [ -f "$work/py/chunkgen/torch.py" ]; then
    echo "chunkgen reused from $work/py (sources $stamp, as installed)" >"$PHASE_DETAIL"
    return 0
  fi
  "$py" -c "import scikit_build_core" 2>/dev/null || { echo "no scikit-build-core for $py" >"$PHASE_DETAIL"; return 77; }
  local args=""
  for a in $CMAKE_DEPS; do args="${args:+$args;}$a"; done
  SKBUILD_CMAKE_ARGS="$args" "$py" -m pip install --no-build-isolation --no-deps --no-index --upgrade \
    --target "$work/py" "$root"
  "$py" -c "import chunkgen, chunkgen.torch; print(chunkgen.__file__)"
  echo "$stamp" >"$work/py/.cg-stamp"
  echo "chunkgen installed into $work/py ($("$py" -c 'import sys; print(sys.version.split()[0])'), sources $stamp)" >"$PHASE_DETAIL"
}
ph_py_gpu() {
  local rc=0 t="$work/pytest-gpu.txt"
  (cd "$root" && "$py" -m pytest -q -p no:cacheprovider tests/python/test_gpu.py tests/python/test_torch_ssd.py \
    tests/python/test_torch_sscan.py -k "gpu or cuda" -rs) >"$t" 2>&1 || rc=$?
  cat "$t"
  tail -1 "$t" >"$PHASE_DETAIL"
  return $rc
}
bench_cells() {
  local name="$1"; shift
  rm -f "$work/$name.json"
  "$bin" bench --impls chunkgen_cuda,chunkgen_cuda_default,ref --threads "$jobs" --min-time 0.1 --repeats 3 \
    --ref-seq 512 --commit "$commit" --out "$work/$name.json" "$@"
  cp "$work/$name.json" "$OUT/$name.json"
  "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['results']; print('%d rows, %d with rel_err' % (len(r), sum(1 for x in r if x.get('rel_err') is not None)))" \
    "$work/$name.json" >"$PHASE_DETAIL"
}
ph_bench_d128() { bench_cells bench-d128 --preset g2h8_d128,g1h24_dk128_dv64,g1h1_d128,sscan_d1024 --seq 512,2048; }
ph_bench_rest() { bench_cells bench-rest --preset g2h8_d128,g1h24_dk128_dv64,g2h4_dk48_dv40,sscan_d256,sscan_d512 --seq 8192,2048; }
ph_peers() {
  set -e
  [ -s "$work/bench-d128.json" ] || { echo "no bench_d128 rows to run the peers on" >"$PHASE_DETAIL"; return 77; }
  "$py" "$root/bench/peers/gpu_peers.py" --matrix "$work/bench-d128.json" --chunkgen "$bin" --max-call-s 5 \
    --out "$work/peers-gpu.json"
  cp "$work/peers-gpu.json" "$OUT/peers-gpu.json"
  "$py" -c "import json,sys; r=json.load(open(sys.argv[1]))['results']; print('%d peer rows' % len(r))" \
    "$work/peers-gpu.json" >"$PHASE_DETAIL"
}
# command 3: the GDN and decode phases (bench/peers/gpu_gdn.py, gpu_decode.py); without a GPU
# their code runs on the CPU at small sizes (the rehearsal), fla's rows saying why not
gpu_script() { # the JSON straight into $OUT, rewritten after each row: a phase cut off keeps its rows
  local script="$1" json="$2"; shift 2
  "$py" "$root/bench/peers/$script" --out "$OUT/$json" --detail "$PHASE_DETAIL" "$@"
}
ph_gdn() {
  if [ "$has_gpu" = 1 ]; then gpu_script gpu_gdn.py gdn-gpu.json --impls chunkgen
  else gpu_script gpu_gdn.py gdn-gpu.json --impls chunkgen,fla --min-time 0.02; fi
}
ph_decode() {
  if [ "$has_gpu" = 1 ]; then gpu_script gpu_decode.py decode-gpu.json
  else gpu_script gpu_decode.py decode-gpu.json --min-time 0.02; fi
}
# fla's first calls compile and autotune (tens of seconds a cell): the cells in order, its
# JSON rewritten after each row, no cell started in the last 20 s of the phase's time
ph_gdn_fla() { gpu_script gpu_gdn.py gdn-fla-gpu.json --impls fla --deadline-s "$((PHASE_TIMEOUT - 20))"; }
ph_results() {
  set -e
  local inputs=() f g
  local files="bench-d128.json bench-rest.json peers-gpu.json" stem=results
  [ "$cmd" = 3 ] && files="gdn-gpu.json decode-gpu.json gdn-fla-gpu.json" stem=results-gdn-decode
  local dir="$work"
  [ "$cmd" = 3 ] && dir="$OUT"
  for f in $files; do [ -s "$dir/$f" ] && inputs+=("$dir/$f"); done
  [ ${#inputs[@]} -gt 0 ] || { echo "no bench rows" >"$PHASE_DETAIL"; return 77; }
  "$py" "$root/bench/merge.py" "${inputs[@]}" -o "$work/merged.json"
  g="$(echo "${gpu_name:-device}" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/^-//; s/-$//')"
  cp "$work/merged.json" "$OUT/$stem-$g-$date_tag-$commit.json"
  [ "$cmd" = 3 ] || "$py" "$root/bench/summary.py" "$work/merged.json" | head -60 || true
  echo "$stem-$g-$date_tag-$commit.json (${#inputs[@]} inputs)" >"$PHASE_DETAIL"
}
export -f ph_env ph_build ph_gpu_tests ph_tune san ph_san_memcheck ph_san_racecheck ph_san_synccheck ph_py_build \
  ph_py_gpu bench_cells ph_bench_d128 ph_bench_rest ph_peers ph_results src_stamp gpu_script ph_gdn ph_decode ph_gdn_fla
export cmd

# ------------------------------------------------------------------ the commands
phase env 25 host ph_env
[ "$cmd" = 3 ] || phase build 120 host ph_build
# Commands 2 and 3: this run's rows only (N stale files named first, and the merge), the
# package built once, then the phases given as "NAME SECONDS WHERE FUNCTION" words, then the
# merged results.
py_phases() {
  local n=$1; shift
  rm -f "${@:1:$n}" "$work"/merged.json; shift "$n"
  phase py_build 120 host ph_py_build
  while [ $# -ge 4 ]; do phase "$1" "$2" "$3" "$4"; shift 4; done
  if [ "$has_gpu" = 1 ]; then phase results 15 host ph_results
  else record results skipped 0 "$gpu_why"; fi
}
if [ "$cmd" = 3 ]; then
  py_phases 3 "$OUT"/gdn-gpu.json "$OUT"/decode-gpu.json "$OUT"/gdn-fla-gpu.json \
    gdn 75 cpu_too ph_gdn  decode 50 cpu_too ph_decode  gdn_fla 100 gpu ph_gdn_fla
elif [ "$cmd" = 1 ]; then
  phase gpu_tests 75 gpu ph_gpu_tests
  phase tune 45 gpu ph_tune
  phase san_memcheck 20 gpu ph_san_memcheck
  phase san_racecheck 25 gpu ph_san_racecheck
  phase san_synccheck 20 gpu ph_san_synccheck
else
  py_phases 3 "$work"/bench-d128.json "$work"/bench-rest.json "$work"/peers-gpu.json \
    py_gpu 60 gpu ph_py_gpu  bench_d128 45 gpu ph_bench_d128  bench_rest 35 gpu ph_bench_rest  peers 40 gpu ph_peers
fi
pack
echo "== $(wc -l <"$summary") phases in $(($(date +%s) - t_start)) s (budget $budget s); $OUT:"
cat "$summary"
ls -la "$OUT"
# failed phases make the command fail (a skipped one does not)
! grep -q '^[^ ]* failed ' "$summary"
