#!/usr/bin/env bash
# setup.sh -- install what chunkgen needs (Debian packages) and build it.
# Usage: scripts/setup.sh BUILD_DIR [extra cmake args...]
# Idempotent; installs only what is missing. The CUDA toolkit is optional: without
# NVRTC the library builds and the CPU path runs, and the NVRTC tests skip.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
shift || true

need=()
for pkg in cmake g++ make liblua5.4-dev libjansson-dev clang-format; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -d /usr/local/cuda/bin ] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
