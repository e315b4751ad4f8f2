#!/usr/bin/env bash
# test-python.sh -- build and install the Python package into a virtual environment and
# run its tests (tests/python). Called by scripts/test.sh after the C suites; runs alone too.
#
# The environment is ${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}, outside the build tree:
# created once (python3 -m venv) and reused; torch, numpy, pytest and scikit-build-core are
# installed from PyPI only when missing (torch brings several GB of CUDA libraries); jax (CPU)
# too: its jaxlib's FFI headers build chunkgen.jax's module (chunkgen._jax_ffi).
# Exit status: pytest's (0 only when every test passed; "no tests collected" is a failure).
# --setup-only: create/complete the environment and stop (scripts/test.sh calls it first, so
# that the C suite's static_report test finds the disassemblers on a fresh machine).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}"
export CHUNKGEN_CACHE_DIR="${CHUNKGEN_CACHE_DIR:-$(mktemp -d /tmp/chunkgen-test-cache.XXXXXX)}"

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating the virtual environment $venv"
    python3 -m venv "$venv"
fi
py="$venv/bin/python"
missing="$("$py" - <<'PY'
import importlib.util
mods = {"torch": "torch", "numpy": "numpy", "pytest": "pytest", "scikit_build_core": "scikit-build-core", "jax": "jax", "ml_dtypes": "ml_dtypes"}
print(" ".join(pkg for mod, pkg in mods.items() if importlib.util.find_spec(mod) is None))
PY
)"
# cuobjdump and nvdisasm (the static performance report, bench/static_report.py, and its
# ctest static_report) come as PyPI wheels into the same environment.
for tool in nvdisasm cuobjdump; do
    ls "$venv"/lib/python3*/site-packages/nvidia/*/bin/$tool >/dev/null 2>&1 || missing="$missing nvidia-cuda-$tool"
done
if [ -n "$missing" ]; then
    echo "== installing into $venv: $missing"
    "$py" -m pip install $missing
fi
[ "${1:-}" = "--setup-only" ] && exit 0

echo "== pip install . (the chunkgen package)"
# No build isolation: scikit-build-core comes from the environment, and the CMake build
# folder (build-py/) is kept between runs, so a rerun rebuilds only what changed.
"$py" -m pip install --no-build-isolation --no-deps -q "$root"

echo "== Python tests"
rc=0
(cd "$root" && "$py" -m pytest -q -p no:cacheprovider tests/python) || rc=$?
case "$rc" in
    0) ;;
    5) echo "test-python.sh: pytest collected no tests" >&2; exit 1 ;;
    *) echo "test-python.sh: pytest failed (exit $rc)" >&2; exit "$rc" ;;
esac
