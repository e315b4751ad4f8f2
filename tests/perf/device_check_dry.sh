#!/bin/sh
# device_check_dry.sh BUILD_DIR -- ctest device_check_dry: bench/device-check.sh's dry run
# (every step but the GPU ones, on the existing build) into a temporary $OUT; the script
# itself fails when what it leaves there breaks the device tool's limits (8 files, two
# folders, 16 MiB each) or a step that runs here fails.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d "${TMPDIR:-/tmp}/cg-device-dry.XXXXXX")" || exit 1
DRY_RUN=1 BUILD="$1" OUT="$out" BUDGET_S=120 bash "$root/bench/device-check.sh"
rc=$?
rm -rf "$out"
exit $rc
