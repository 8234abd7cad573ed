#!/usr/bin/env bash
# The same-host private copy (SHM.GET, then a memcpy out of the arena into the client's buffer)
# against one thread's memcpy, with the kernel's shmem huge pages off and on: the one setting
# that decides whether an arena's pages are 4 KiB or 2 MiB (docs/shm-transport.md, "Huge
# pages"). The same server binary each time, started fresh after each change of
# /sys/kernel/mm/transparent_hugepage/shmem_enabled (so needs root); the setting found is put
# back on exit. The settings take turns rep by rep. Prints a markdown table of medians of the
# p50s; the huge MiB column is the server's ShmemPmdMapped, read after each run.
#
#   benchmarks/shm_huge_pages_bench.sh [--build-dir DIR] [--reps N] [--sizes "16 64"]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build/dev
reps=3
sizes=(16 64)
while (($#)); do
  case $1 in
    --build-dir) build_dir=$(cd "$2" && pwd); shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --sizes) read -r -a sizes <<<"$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
server_bin=$build_dir/prefixd-server
bench_bin=$build_dir/prefixd-blob-bench
knob=/sys/kernel/mm/transparent_hugepage/shmem_enabled
[[ -w $knob ]] || { echo "needs root: $knob is not writable" >&2; exit 1; }
found=$(sed -E 's/.*\[([a-z_]+)\].*/\1/' "$knob")
source "$repo/benchmarks/bench_lib.sh" shm-huge-pages
trap 'echo "$found" >"$knob"; bench_cleanup' EXIT
declare -A requests=([1]=1024 [16]=96 [64]=32 [256]=8)

results=$work/results.tsv  # setting size rep memcpy_p50 copy_p50 view_p50 huge_mib
: >"$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq 1 "$reps"); do
  for setting in never advise; do
    echo "$setting" >"$knob"
    port=$(free_port)
    dir=$work/$setting.$rep
    mkdir -p "$dir"
    "$server_bin" --port "$port" --unixsocket "$dir/s.sock" --dir "$dir" --appendonly no \
      --shm-arenas yes >"$dir/log" 2>&1 &
    pid=$!
    pids+=("$pid")
    wait_ready "$port" prefixd-server
    for mb in "${sizes[@]}"; do
      memcpy=$(timeout 120 "$bench_bin" --mode memcpy --size "${mb}m" --requests "${requests[$mb]}" |
        jq -r 'if .verified != true then error("memcpy copied wrong bytes") else .p50_ms end')
      shm=$(timeout 120 "$bench_bin" --mode strings --transport shm --socket "$dir/s.sock" \
        --port "$port" --size "${mb}m" --requests "${requests[$mb]}" --seconds 30 |
        jq -r 'if .verified != true then error("shm returned wrong bytes") else . end |
               select(.op == "copy" or .op == "view") | "\(.op) \(.p50_ms)"')
      huge=$(awk '/^ShmemPmdMapped:/ { s += $2 } END { printf "%d", s / 1024 }' "/proc/$pid/smaps")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$setting" "$mb" "$rep" "$memcpy" \
        "$(awk '$1 == "copy" { print $2 }' <<<"$shm")" "$(awk '$1 == "view" { print $2 }' <<<"$shm")" \
        "$huge" >>"$results"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
  echo "rep $rep done" >&2
done

median() {  # setting size column
  awk -F'\t' -v s="$1" -v m="$2" -v c="$3" '$1 == s && $2 == m { print $c }' "$results" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
echo "load average before: $load_before; commit $(git -C "$repo" rev-parse --short HEAD); median of $reps runs"
echo
echo "| size | shmem_enabled | memcpy p50 ms | shm view p50 ms | shm copy p50 ms | copy / memcpy (p50) | server's arenas on huge pages |"
echo "|---:|:--|---:|---:|---:|---:|---:|"
for mb in "${sizes[@]}"; do
  for setting in never advise; do
    m=$(median "$setting" "$mb" 4)
    c=$(median "$setting" "$mb" 5)
    printf '| %s MiB | %s | %.3f | %.3f | %.3f | %s | %s MiB |\n' "$mb" "$setting" "$m" \
      "$(median "$setting" "$mb" 6)" "$c" "$(bench_ratio "$m" "$c")" "$(median "$setting" "$mb" 7)"
  done
done
