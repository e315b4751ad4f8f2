#!/bin/sh
# run.sh BUILD_DIR CC CXX -- install chunkgen from BUILD_DIR into a temporary prefix, then build
# tests/install/consumer.c against it four ways and run each: pkg-config chunkgen (shared),
# pkg-config chunkgen-static (the self-contained archive), and a CMake project using
# find_package(chunkgen) with chunkgen::chunkgen and chunkgen::chunkgen_static (and a C++
# program against the shared one). Also checks
# that the installed libchunkgen.so exports cg_ symbols only and has its SONAME.
set -eu
# A sanitized build (CHUNKGEN_SANITIZE) installs sanitized objects: its consumers are
# built with the same flags (CG_INSTALL_TEST_FLAGS, set by CMakeLists.txt).
san=${CG_INSTALL_TEST_FLAGS:-}
build=$(cd "$1" && pwd)
cc=${2:-cc}
cxx=${3:-c++}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chunkgen-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "install test: $*" >&2; exit 1; }
for tool in pkg-config readelf nm ldd; do
    command -v "$tool" >/dev/null 2>&1 || { echo "install test: skipped: no $tool on this machine" >&2; exit 77; }
done
export CHUNKGEN_CACHE_DIR="$tmp/cache"

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
so=$(find "$tmp/prefix" -name 'libchunkgen.so.0' | head -n 1)
[ -n "$so" ] || fail "no libchunkgen.so.0 installed"
libdir=$(dirname "$so")
[ -f "$libdir/libchunkgen.a" ] || fail "no libchunkgen.a installed in $libdir"
[ -f "$tmp/prefix/include/chunkgen.h" ] || fail "no include/chunkgen.h installed"
readelf -d "$so" | grep -q 'SONAME.*\[libchunkgen\.so\.0\]' || fail "$so: SONAME is not libchunkgen.so.0"
leaked=$(nm -D --defined-only "$so" | awk '{print $NF}' | grep -v '^cg_[a-z]' || true)
[ -z "$leaked" ] || fail "$so exports non-API symbols: $(echo $leaked | head -c 400)"
# ... and every function the header declares is exported (declared CG_API).
hdr="$tmp/prefix/include/chunkgen.h"
for fn in $(grep -E '^[A-Za-z]' "$hdr" | grep -oE '\bcg_[a-z][a-z0-9_]*\(' | tr -d '('); do
    nm -D --defined-only "$so" | awk '{print $NF}' | grep -qx "$fn" || fail "$so does not export $fn (declared in chunkgen.h without CG_API?)"
done

# pkg-config, shared (the default) and the static archive
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pkg-config --exists chunkgen || fail "pkg-config does not find chunkgen.pc in $libdir/pkgconfig"
pkg-config --static --libs chunkgen | grep -q -- '-ldl' || fail "pkg-config --static --libs chunkgen lacks -ldl"
# shellcheck disable=SC2046
"$cc" $san -o "$tmp/pc_shared" "$here/consumer.c" $(pkg-config --cflags --libs chunkgen) -lm -Wl,-rpath,"$libdir" \
    || fail "building against pkg-config chunkgen failed"
# shellcheck disable=SC2046
"$cc" $san -o "$tmp/pc_static" "$here/consumer.c" $(pkg-config --static --cflags --libs chunkgen-static) -lm \
    || fail "building against pkg-config chunkgen-static failed"
ldd "$tmp/pc_shared" | grep -q "$libdir/libchunkgen.so.0" || fail "pc_shared does not load $libdir/libchunkgen.so.0"
if readelf -d "$tmp/pc_static" | grep -q 'NEEDED.*libchunkgen'; then fail "pc_static needs libchunkgen.so"; fi
"$tmp/pc_shared" || fail "pc_shared failed"
"$tmp/pc_static" || fail "pc_static failed"
# the header from C++ with -I (not -isystem, as imported CMake targets give): no warnings
# shellcheck disable=SC2046
"$cxx" $san -Wall -Wextra -Werror -o "$tmp/pc_cxx" "$here/consumer_cxx.cpp" $(pkg-config --cflags --libs chunkgen) \
    -Wl,-rpath,"$libdir" || fail "building the C++ consumer against pkg-config chunkgen failed"
"$tmp/pc_cxx" || fail "pc_cxx failed"

# CMake find_package
cmake -S "$here" -B "$tmp/cm" -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "configuring the find_package(chunkgen) project failed"; }
cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "building the find_package(chunkgen) project failed"; }
ldd "$tmp/cm/consumer_shared" | grep -q "$libdir/libchunkgen.so.0" || fail "consumer_shared does not load the installed .so"
if readelf -d "$tmp/cm/consumer_static" | grep -q 'NEEDED.*libchunkgen'; then fail "consumer_static needs libchunkgen.so"; fi
"$tmp/cm/consumer_shared" || fail "consumer_shared failed"
"$tmp/cm/consumer_static" || fail "consumer_static failed"
"$tmp/cm/consumer_cxx" || fail "consumer_cxx (the header from C++) failed"
echo "install test: ok ($libdir)"
