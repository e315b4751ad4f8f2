#!/usr/bin/env bash
# format.sh -- apply .clang-format (clang-format 14) to the tracked C, C++ and CUDA sources
# of the library, the CLI, the Python extension and the public headers (*.c *.h *.cc *.cu
# *.cuh outside tests/ and bench/).
# Usage: scripts/format.sh          format those files in place
#        scripts/format.sh --check  change nothing; list the files clang-format would
#                                   change and exit 1 if there is any (CI: scripts/test.sh)
#        scripts/format.sh [--check] FILE...   only these files
# CLANG_FORMAT=path picks the binary (default: clang-format-14, else clang-format).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
cf="${CLANG_FORMAT:-}"
if [ -z "$cf" ]; then
  if command -v clang-format-14 >/dev/null 2>&1; then cf=clang-format-14; else cf=clang-format; fi
fi
command -v "$cf" >/dev/null 2>&1 || { echo "format.sh: $cf not found (scripts/setup.sh installs clang-format)" >&2; exit 2; }
cd "$root"
if [ $# -gt 0 ]; then
  files=("$@")
else
  # tests/ and bench/ are left out: their long case tables read better hand-aligned (to be revisited).
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.cuh' ':!:tests/' ':!:bench/')
fi
if [ "$check" = 0 ]; then
  [ ${#files[@]} -eq 0 ] || "$cf" -i --style=file "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
    echo "not formatted: $f (scripts/format.sh $f)"
    bad=1
  fi
done
exit "$bad"
