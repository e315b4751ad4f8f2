# hide_files.sh -- sourced by the scripts that rehearse a bare machine (tests/wheel/run.sh,
# tests/perf/device_check_rehearsal.sh) inside their private mount namespace (unshare -m).
#
# hide_files LIST WORK: hides every file named in LIST (one path a line): one overlay per
# folder that holds a listed file, mounted over that folder, with a whiteout (char 0:0) for
# each listed file; WORK is an empty folder for the overlays' upper and work dirs.
hide_files() {
  local list="$1" work="$2" i=0 d u f
  for d in $(xargs -n1 dirname <"$list" | sort -u); do
    i=$((i + 1)); u="$work/$i"; mkdir -p "$u/up" "$u/work"
    grep "^$d/[^/]*$" "$list" | while read -r f; do mknod "$u/up/$(basename "$f")" c 0 0; done
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$u/up,workdir=$u/work" "$d"
  done
}
