#!/bin/sh
# tune-stress.sh -- N `chunkgen tune` processes on one config store at once, one of
# them killed with SIGKILL half-way; then the store must verify clean and a rerun must
# finish every key.
#   usage: scripts/tune-stress.sh [CHUNKGEN_BINARY] [N]   (default build/chunkgen, 8)
set -eu
bin=${1:-build/chunkgen}
n=${2:-8}
dir=$(mktemp -d /tmp/cg-tune-stress.XXXXXX)
trap 'rm -rf "$dir"' EXIT
# small shapes: every process tunes the same keys, so they race on every entry
shapes="--shape 1,64,1,2,16,16 --shape 1,100,2,4,7,40 --shape 1,96,20,3"
pids=""
i=0
while [ "$i" -lt "$n" ]; do
    "$bin" tune --backend cpu --cache-dir "$dir" --min-time 0.005 --quiet $shapes &
    pids="$pids $!"
    i=$((i + 1))
done

victim=${pids# }; victim=${victim%% *}
sleep 1
kill -9 "$victim" 2>/dev/null || true
fail=0
for p in $pids; do
    if [ "$p" = "$victim" ]; then wait "$p" || true; else wait "$p" || fail=1; fi
done
[ "$fail" = 0 ] || { echo "tune-stress: a tune process failed" >&2; exit 1; }
"$bin" cache verify --cache-dir "$dir"
"$bin" tune --backend cpu --cache-dir "$dir" --min-time 0.005 $shapes 2>&1 | tail -1
"$bin" show --cache-dir "$dir"
echo "tune-stress: ok ($n processes)"
