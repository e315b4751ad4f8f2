#!/usr/bin/env bash
# device_check_rehearsal.sh [PYTHON] -- the GPU check (bench/device-check.sh) rehearsed here,
# where it fails where the GPU machine would. scripts/test.sh runs it in CI, alone (its timing
# check must not share the cores).
#
# From a copy of the checkout as the device tool sends it (tracked and untracked-not-ignored
# files: no build, no kernel cache), --prepare stages Lua and jansson (here, where they are
# installed); then the three commands run in a mount namespace whose overlays hide every file of
# Debian's Lua and jansson packages but the linker's own libjansson.so.4 (what the GPU
# machine lacks), with no network (a network namespace with loopback only) and no GPU. The
# checks:
#   - every phase has its line in summary.txt (PHASE STATUS SECONDS DETAIL), in order;
#   - every GPU phase is "skipped" with "no GPU" (never an error), every other phase "ok"
#     (py_build may be skipped only when no Python with scikit-build-core was given); command
#     3's gdn and decode run their code on the CPU at small sizes: "ok", detail "no GPU: ...",
#     their JSON in $OUT;
#   - what each command leaves in $OUT obeys the device tool's return limits (at most 8
#     plain files, each under 16 MiB, at most two folders down, names in [A-Za-z0-9._-]);
#   - the seconds spent before the GPU phases plus the GPU phases' caps (gdn's and decode's
#     too) fit a command's 300 s (250 s for command 3) (so the real run, whose GPU phases
#     take at most their caps, ends in time; the GPU machine builds on 16 cores, so this
#     2-core measurement is the pessimistic one).
# PYTHON: the interpreter for py_build (default: the test venv's, when it has
# scikit-build-core). Exit 77 (skipped) without root, mount namespaces or overlayfs: then
# nothing could be hidden and the rehearsal would prove nothing.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${1:-${CHUNKGEN_VENV:-$HOME/.cache/chunkgen-venv}/bin/python}"
[ -x "$py" ] && "$py" -c "import scikit_build_core" 2>/dev/null || py=""
tmp="$(mktemp -d "${TMPDIR:-/tmp}/cg-rehearsal.XXXXXX")" || exit 1
trap 'rm -rf "$tmp"' EXIT

if [ "$(id -u)" != 0 ] || ! unshare -m -n --propagation private true 2>/dev/null; then
  echo "device_check_rehearsal: SKIPPED: needs root and mount/network namespaces (unshare -m -n)"
  exit 77
fi
command -v git >/dev/null && git -C "$root" rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "device_check_rehearsal: SKIPPED: $root is not a git checkout"; exit 77; }

# 1. the copy the device tool would send
mkdir -p "$tmp/src"
(cd "$root" && git ls-files -z -co --exclude-standard | xargs -0 -r cp --parents -t "$tmp/src" 2>/dev/null)
cp -r "$root/.git" "$tmp/src/.git" # the commit id for the results' names
echo "== copy: $(du -sh "$tmp/src" | cut -f1) in $tmp/src"

# 2. --prepare here (Lua and jansson installed); the peers are not needed without a GPU
if ! (cd "$tmp/src" && DEVICE_CHECK_PEERS=0 bash bench/device-check.sh --prepare); then
  echo "device_check_rehearsal: FAILED: --prepare"
  exit 1
fi
[ -n "${REHEARSAL_BREAK:-}" ] && rm -rf "$tmp/src/bench/out/deps/$REHEARSAL_BREAK" &&
  echo "== REHEARSAL_BREAK: removed bench/out/deps/$REHEARSAL_BREAK (this run must fail)"

# 3. both commands where Lua and jansson are hidden, without network
hidden="$(dpkg -L liblua5.4-dev liblua5.4-0 libjansson-dev libjansson4 2>/dev/null |
  grep -E '^/usr/(include|lib)/' | grep -v '/libjansson\.so\.4' | while read -r f; do
    [ -e "$f" ] && [ ! -d "$f" ] && echo "$f"; done)"
[ -n "$hidden" ] || { echo "device_check_rehearsal: FAILED: no Lua/jansson files to hide (dpkg -L)"; exit 1; }
printf '%s\n' "$hidden" >"$tmp/hidden.txt"
echo "== hiding $(wc -l <"$tmp/hidden.txt") files of liblua5.4-dev, liblua5.4-0, libjansson-dev (libjansson.so.4 stays: ld needs it)"
export tmp py root
unshare -m -n --propagation private bash -c '
  set -e
  . "$root/tests/hide_files.sh"
  hide_files "$tmp/hidden.txt" "$tmp/ovl"
  set +e
  for f in $(cat "$tmp/hidden.txt"); do [ -e "$f" ] && { echo "still visible: $f"; exit 3; }; done
  ! curl -s -m 3 https://pypi.org >/dev/null 2>&1 || { echo "the network is reachable"; exit 3; }
  cd "$tmp/src"
  for c in 1 2 3; do
    OUT="$tmp/out$c" DEVICE_CHECK_DIR="$tmp/work" PYTHON="${py:-python3}" bash bench/device-check.sh $c \
      >"$tmp/cmd$c.log" 2>&1
    echo "$?" >"$tmp/rc$c"
  done
' || { echo "device_check_rehearsal: FAILED: the namespace (rc $?)"; exit 1; }

# 4. the checks
fail=0
bad() { echo "device_check_rehearsal: FAILED: $*"; fail=1; }
for c in 1 2 3; do
  out="$tmp/out$c"
  echo "== command $c (exit $(cat "$tmp/rc$c" 2>/dev/null)):"
  sed 's/^/   | /' "$out/summary.txt" 2>/dev/null || { bad "command $c wrote no summary.txt"; tail -20 "$tmp/cmd$c.log"; continue; }
  if [ "$c" = 1 ]; then want="env build gpu_tests tune san_memcheck san_racecheck san_synccheck"
  elif [ "$c" = 2 ]; then want="env build py_build py_gpu bench_d128 bench_rest peers results"
  else want="env py_build gdn decode gdn_fla results"; fi
  got="$(awk '{print $1}' "$out/summary.txt" | tr '\n' ' ' | sed 's/ $//')"
  [ "$got" = "$want" ] || bad "command $c phases: '$got', expected '$want'"
  grep -vE '^[a-z0-9_]+ (ok|skipped|failed) [0-9]+ ' "$out/summary.txt" | grep -q . &&
    bad "command $c: a line not PHASE STATUS SECONDS DETAIL"
  pre=0
  while read -r name st secs detail; do
    case "$name" in
      env | build) [ "$st" = ok ] || bad "command $c: $name is $st: $detail"; pre=$((pre + secs)) ;;
      py_build)
        if [ -n "$py" ]; then [ "$st" = ok ] || bad "command $c: py_build is $st: $detail"
        else [ "$st" != failed ] || bad "command $c: py_build failed: $detail"; fi
        pre=$((pre + secs)) ;;
      gdn | decode)
        if [ -n "$py" ]; then
          [ "$st" = ok ] && [ "${detail#no GPU}" != "$detail" ] || bad "command $c: $name is '$st $detail', expected 'ok no GPU: ...'"
          python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not (d["device"] and d["config"]
            and d["results"] and all("impl" in r and "op" in r for r in d["results"])))' "$out/$name-gpu.json" 2>/dev/null ||
            bad "command $c: $name left no $name-gpu.json in \$OUT in the seeds' schema (device, config, results)"
        else [ "$st" != failed ] || bad "command $c: $name failed: $detail"; fi ;;
      *) [ "$st" = skipped ] && [ "${detail#no GPU}" != "$detail" ] || bad "command $c: $name is '$st $detail', expected 'skipped no GPU ...'" ;;
    esac
  done <"$out/summary.txt"
  caps=$(awk '{s += $1} END {print s + 0}' "$tmp/work/gpu-caps-$c" 2>/dev/null || echo 0)
  limit=300
  [ "$c" = 3 ] && limit=250
  echo "   $pre s before the GPU phases + $caps s of GPU phase caps = $((pre + caps)) s (a command has $limit s)"
  [ $((pre + caps)) -le $limit ] || bad "command $c: $pre s before the GPU phases leaves less than the GPU phases' $caps s"
  n=$(find "$out" -type f | wc -l)
  [ "$n" -le 8 ] || bad "command $c left $n files in \$OUT (at most 8)"
  find "$out" ! -type f ! -type d | grep -q . && bad "command $c left links or special files in \$OUT"
  while IFS= read -r f; do
    rel="${f#"$out"/}"
    [ "$(printf '%s' "$rel" | tr -cd '/' | wc -c)" -le 2 ] || bad "$rel is more than two folders down"
    [ "$(stat -c %s "$f")" -lt $((16 * 1024 * 1024)) ] || bad "$rel is 16 MiB or more"
    printf '%s' "$rel" | grep -q '^[A-Za-z0-9._/-]*$' || bad "$rel has characters outside [A-Za-z0-9._-]"
  done < <(find "$out" -type f)
  tar tzf "$out/logs.tar.gz" >/dev/null 2>&1 || bad "command $c: no readable logs.tar.gz"
  [ "$fail" = 0 ] || { echo "   last lines of command $c:"; tail -30 "$tmp/cmd$c.log" | sed 's/^/   | /';
    for l in "$tmp"/work/logs-"$c"/*.log; do echo "   -- $l"; tail -15 "$l" | sed 's/^/   | /'; done; }
done
[ "$fail" = 0 ] && echo "device_check_rehearsal: passed (Lua and jansson hidden, no network, no GPU)"
exit $fail
