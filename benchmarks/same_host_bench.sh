#!/usr/bin/env bash
# Same-host fetch: one client on the machine that holds the value reads it over loopback TCP, over
# the unix socket and (where the build has it) through the shared arena, against one thread's
# memcpy of the same sizes in the same run (issue 33's reference).
#
#   benchmarks/same_host_bench.sh [--build-dir DIR] [--server BIN] [--quick] [--reps N] [--no-write]
#
# One prefixd-server (--appendonly no, so the disk is not measured) listens on a loopback port and
# a unix socket. For each size (1, 16, 64 MiB) prefixd-blob-bench SETs a value and GETs it back
# --requests times with one client; each phase's GB/s (10^9 bytes) is kept, and the median over
# --reps runs is shown. memcpy is prefixd-blob-bench --mode memcpy: one thread copying a blob of the
# same size into a private, pre-faulted buffer. The table goes to stdout and, unless --no-write,
# into docs/benchmarks.md as the section "<date>: same-host transport, fetch against memcpy"
# (a rerun on the same day replaces it). The binaries are those of --build-dir (default build/dev).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command_line="benchmarks/same_host_bench.sh${*:+ $*}"
source "$repo/benchmarks/bench_lib.sh" same-host-bench
bench_parse_options build/dev "$@"

declare -A requests
if ((quick)); then
  requests=([1]=256 [16]=24 [64]=8)
  ((reps > 1)) && reps=1
else
  requests=([1]=1024 [16]=96 [64]=32)
fi
sizes=(1 16 64)
transports=(tcp unix)
# The shared path needs a build whose blob bench knows --transport shm.
if "$bench_bin" --help 2>&1 | grep -q 'tcp|unix|shm'; then transports+=(shm); fi

port=$(free_port)
sock=$work/prefixd.sock
mkdir -p "$work/data"
"$server_bin" --port "$port" --unixsocket "$sock" --dir "$work/data" --appendonly no \
  >"$work/server.log" 2>&1 &
pids+=($!)
wait_ready "$port" prefixd-server

results=$work/results.tsv  # kind  row  server  rep  value  p50  p99
: >"$results"
elapsed() { printf '%ds' $((SECONDS - start_seconds)); }
start_seconds=$SECONDS
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

for rep in $(seq 1 "$reps"); do
  for mb in "${sizes[@]}"; do
    timeout 120 "$bench_bin" --mode memcpy --size "${mb}m" --requests "${requests[$mb]}" |
      jq -r --arg rep "$rep" '
        if .verified != true then error("memcpy copied wrong bytes") else . end |
        ["fetch", "\(.size / 1048576)", "memcpy", $rep, .gb_per_s, .p50_ms, .p99_ms] | @tsv' \
      >>"$results"
    for transport in "${transports[@]}"; do
      timeout 120 "$bench_bin" --mode strings --transport "$transport" --port "$port" \
        --socket "$sock" --size "${mb}m" --requests "${requests[$mb]}" --seconds 30 |
        jq -r --arg rep "$rep" '
          if .verified != true then error("\(.transport) returned wrong bytes") else . end |
          select(.op != "store") |
          ["fetch", "\(.size / 1048576)", "\(.transport) \(.op)", $rep, .gb_per_s, .p50_ms,
           .p99_ms] | @tsv' >>"$results"
    done
  done
  echo "rep $rep done ($(elapsed))" >&2
done

median() { bench_median "$results" "$@"; }
columns=(memcpy "tcp fetch" "unix fetch")
if [[ " ${transports[*]} " == *" shm "* ]]; then columns+=("shm view" "shm copy"); fi
table=$work/table.md
title="$(date -u +%F): same-host transport, fetch against memcpy"
{
  echo "## $title"
  echo
  echo "$(date -u +%F), $(bench_machine), commit $commit, build $(basename "$build_dir"), load" \
    "average before $load_before; median of $reps runs; GB/s = 10^9 bytes/s, one client."
  echo "Command: \`$command_line\`."
  echo
  echo "memcpy copies the same source every time: at 1 MiB both buffers stay in the CPU's cache, so"
  echo "that row is an upper bound; from 16 MiB it is a copy through memory, as a fetch is."
  echo
  header="| size |"
  rule="|---:|"
  for c in "${columns[@]}"; do header+=" $c GB/s |"; rule+="---:|"; done
  for c in "${columns[@]:1}"; do header+=" $c / memcpy |"; rule+="---:|"; done
  echo "$header"
  echo "$rule"
  for mb in "${sizes[@]}"; do
    row="| $mb MiB |"
    base=$(median fetch "$mb" memcpy 5)
    for c in "${columns[@]}"; do row+=" $(bench_fmt "$(median fetch "$mb" "$c" 5)" %.2f) |"; done
    for c in "${columns[@]:1}"; do
      row+=" $(bench_ratio "$(median fetch "$mb" "$c" 5)" "$base") |"
    done
    echo "$row"
  done
  echo
  echo "p50 latency (ms) per fetch:"
  echo
  echo "| size |$(printf ' %s |' "${columns[@]}")"
  echo "|---:|$(printf -- '---:|%.0s' "${columns[@]}")"
  for mb in "${sizes[@]}"; do
    row="| $mb MiB |"
    for c in "${columns[@]}"; do row+=" $(bench_fmt "$(median fetch "$mb" "$c" 6)" %.3f) |"; done
    echo "$row"
  done
} >"$table"
bench_show_table "$table"
if ((write_doc)); then
  bench_write_section "$repo/docs/benchmarks.md" "$title" "$table"
fi
