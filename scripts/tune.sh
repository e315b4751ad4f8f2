#!/usr/bin/env bash
# tune.sh -- the main job: set up, build, and run `chunkgen tune` over the built-in
# shape set (CUDA kernels where a GPU and driver exist, else the CPU path), then show
# the store. Extra arguments go to `chunkgen tune` (e.g. --backend cpu --budget 120).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" "$root/build"
"$root/build/chunkgen" info || true
"$root/build/chunkgen" tune "$@"
"$root/build/chunkgen" show
