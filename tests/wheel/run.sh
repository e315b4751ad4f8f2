#!/usr/bin/env bash
# run.sh [PYTHON] -- the wheel's check (scripts/test.sh runs it as a stage; runs alone too):
#  1. scripts/wheel.sh builds the manylinux wheel with PYTHON (default: the test
#     environment's, ${CHUNKGEN_VENV:-~/.cache/chunkgen-venv}/bin/python) and repairs it;
#  2. installs it into a fresh virtual environment (no pip, no index, no dependencies), then
#     gives that environment the test environment's site-packages through a .pth (torch,
#     jax, numpy: nothing is downloaded; the wheel's chunkgen comes first on sys.path, and
#     smoke.py checks that it is the one imported);
#  3. no path of the checkout or its build trees in any installed file;
#  4. in a mount namespace with no network, where overlays hide the C/C++ toolchain
#     (cc, gcc, g++, cpp, clang*, ld*, as, /usr/lib/gcc, /usr/include), CMake, every file
#     of Debian's Lua and jansson packages (interpreter, headers, liblua5.4.so.0,
#     libjansson.so.4), the CUDA toolkit (/usr/local/cuda-*: nvcc, NVRTC) and the checkout
#     itself (a tmpfs over it, build-py/ included): checks that they are gone, that the
#     package's ELF files need no liblua/libjansson/libnvrtc/libcuda at load time (readelf -d)
#     and that ldd resolves everything (Lua and jansson from the wheel's chunkgen.libs/), then
#     runs tests/wheel/smoke.py (with tests/python/ref.py) under a bare environment (env -i,
#     PATH = the venv's bin, /usr/bin, /bin).
# What it proves and what it cannot: README, "The wheel".
# WHEEL_BREAK=GLOB deletes the wheel's members matching GLOB before installing (that run
# must fail), e.g. WHEEL_BREAK='chunkgen.libs/*' or WHEEL_BREAK='chunkgen/compat/*'.
# Exit 77 (skipped) without root, mount namespaces or overlayfs (nothing could be hidden).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${1:-${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}/bin/python}"
if [ "$(id -u)" != 0 ] || ! unshare -m -n --propagation private true 2>/dev/null; then
  echo "wheel/run.sh: SKIPPED: needs root and mount/network namespaces (unshare -m -n)"
  exit 77
fi
tmp="$(mktemp -d "${TMPDIR:-/tmp}/cg-wheel.XXXXXX")" || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "wheel/run.sh: FAILED: $*"; exit 1; }

# 1. the wheel
PYTHON="$py" "$root/scripts/wheel.sh" "$tmp/dist" >"$tmp/wheel.log" 2>&1 || { cat "$tmp/wheel.log"; fail "scripts/wheel.sh"; }
grep -v '^/' "$tmp/wheel.log"
whl="$(tail -1 "$tmp/wheel.log")"
echo "== $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB)"
if [ -n "${WHEEL_BREAK:-}" ]; then
  "$py" - "$whl" "$WHEEL_BREAK" <<'PY' || fail "WHEEL_BREAK"
import fnmatch, os, sys, zipfile
src, pat = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(src + ".tmp", "w", zipfile.ZIP_DEFLATED) as zo:
    gone = [i.filename for i in zi.infolist() if fnmatch.fnmatch(i.filename, pat)]
    for i in zi.infolist():
        if i.filename not in gone:
            zo.writestr(i, zi.read(i.filename))
os.replace(src + ".tmp", src)
print(f"== WHEEL_BREAK: removed {len(gone)} members matching {pat} (this run must fail)")
PY
fi

# 2. a fresh environment: the wheel alone first, then the test environment's packages
venv="$tmp/venv"
python3 -m venv --without-pip "$venv" || fail "python3 -m venv"
"$py" -m pip --python "$venv/bin/python" install -q --no-deps --no-index "$whl" || fail "pip install of the wheel"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# (every site-packages folder of the test environment's sys.path: a .pth there may add more)
"$py" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' >"$site/test-env.pth"
mkdir -p "$tmp/smoke" "$tmp/home" "$tmp/cache"
cp "$root/tests/wheel/smoke.py" "$root/tests/python/ref.py" "$tmp/smoke/"

# 3. relocatable: nothing of this checkout or its build trees in the installed files
# (a string that is the checkout's path or starts with it: strings -a of every file)
leaks=0
while IFS= read -r f; do
  strings -a "$f" | awk -v r="$root" '$0 == r || index($0, r "/") == 1 {print "   " $0; n++} END {exit n > 0}' ||
    { echo "   ^ in $f"; leaks=1; }
done < <(find "$site/chunkgen" "$site/chunkgen.libs" -type f)
[ "$leaks" = 0 ] || fail "installed files name the checkout $root"
echo "== no installed file names the checkout ($root) or its build trees"

# 4. what to hide
hide_re='^(cc|c\+\+|cpp.*|gcc.*|g\+\+.*|clang.*|tcc|ld|ld\.(bfd|gold|lld.*)|ld64\..*|lld.*|as|cmake|ccmake|ctest|cpack|lua.*|luac.*|nvcc|x86_64-linux-gnu-(gcc|g\+\+|cpp|c\+\+|ld|as|gfortran|gnat|lto).*)$'
{
  for d in /usr/bin /usr/local/bin /usr/sbin; do
    [ -d "$d" ] && ls -A "$d" | grep -E "$hide_re" | sed "s|^|$d/|"
  done
  dpkg -L liblua5.4-dev liblua5.4-0 lua5.4 libjansson-dev libjansson4 2>/dev/null | while read -r f; do
    [ -e "$f" ] && [ ! -d "$f" ] && echo "$(readlink -f "$(dirname "$f")")/$(basename "$f")"; done
} | sort -u >"$tmp/hidden.txt"
grep -q liblua "$tmp/hidden.txt" && grep -q libjansson "$tmp/hidden.txt" || fail "no Lua/jansson files to hide (dpkg -L)"
emptied="/usr/lib/gcc /usr/include"
for d in /usr/local/cuda*; do [ -d "$d" ] && emptied="$emptied $(readlink -f "$d")"; done
case " $venv $("$py" -c 'import sys; print(sys.prefix)') $(tr '\n' ' ' <"$site/test-env.pth")" in
  *" $root"/*) echo "== (an environment is inside the checkout: the checkout stays visible)" ;;
  *) emptied="$emptied $root" ;;
esac
emptied="$(printf '%s\n' $emptied | sort -u | tr '\n' ' ')"
echo "== hiding $(wc -l <"$tmp/hidden.txt") files (compilers, linkers, CMake, Lua, jansson) and emptying $emptied"
export tmp venv site emptied root
unshare -m -n --propagation private bash -c '
  set -e
  . "$root/tests/hide_files.sh"
  hide_files "$tmp/hidden.txt" "$tmp/ovl"
  for d in $emptied; do mount -t tmpfs -o ro,size=4k tmpfs "$d"; done
  set +e
  bad=0
  for f in $(cat "$tmp/hidden.txt"); do [ -e "$f" ] && { echo "still visible: $f"; bad=1; }; done
  export PATH="$venv/bin:/usr/bin:/bin"
  for t in cc c++ gcc g++ cpp clang ld as cmake lua5.4 nvcc; do
    command -v "$t" >/dev/null && { echo "still on PATH: $t ($(command -v "$t"))"; bad=1; }
  done
  ls /usr/lib/x86_64-linux-gnu 2>/dev/null | grep -E "^lib(lua|jansson)" && { echo "Lua/jansson still visible"; bad=1; }
  [ -e "$root/CMakeLists.txt" ] && case " $emptied " in *" $root "*) echo "the checkout is still visible"; bad=1 ;; esac
  ! curl -s -m 3 https://pypi.org >/dev/null 2>&1 || { echo "the network is reachable"; bad=1; }
  [ "$bad" = 0 ] || exit 3
  echo "== hidden: no cc/gcc/g++/clang/ld/cmake/lua/nvcc on PATH, no Lua/jansson libraries, no network"

  # the package ELF files: what they need at load time, and where ldd finds it
  for f in $(find "$site/chunkgen" "$site/chunkgen.libs" -type f \( -name "*.so*" -o -path "*/bin/*" \)); do
    rel="${f#"$site"/}"
    need="$(readelf -d "$f" | sed -n "s/.*(NEEDED).*\[\(.*\)\]/\1/p" | tr "\n" " ")"
    echo "   $rel: NEEDED $need"
    echo " $need" | grep -E " (liblua5\.4\.so|libjansson\.so|libnvrtc|libcuda)" && { echo "   ^ needs a system library at load time"; bad=1; }
    l="$(ldd "$f" 2>&1)"
    echo "$l" | grep -q "not found" && { echo "$l"; echo "   ^ ldd: not found"; bad=1; }
    for lib in $(echo "$l" | grep -E "lua|jansson" | sed -n "s/.*=> \([^ ]*\) .*/\1/p"); do
      case "$(readlink -f "$lib")" in
        "$site/chunkgen.libs/"*) ;;
        *) echo "   ^ Lua/jansson from outside the wheel: $lib"; bad=1 ;;
      esac
    done
    echo "$l" | grep -E "nvrtc|libcuda" && { echo "   ^ NVRTC/libcuda at load time"; bad=1; }
  done
  [ "$bad" = 0 ] || exit 4
  echo "== readelf -d / ldd: Lua and jansson from chunkgen.libs/, no NVRTC or libcuda at load time"

  cd "$tmp/smoke" && env -i HOME="$tmp/home" PATH="$PATH" CHUNKGEN_CACHE_DIR="$tmp/cache" LANG=C.UTF-8 \
    "$venv/bin/python" smoke.py
' || fail "in the environment without compilers, CMake, Lua, jansson and the checkout (rc $?)"
echo "wheel/run.sh: passed"
