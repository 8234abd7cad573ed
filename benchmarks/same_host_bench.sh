#!/usr/bin/env bash
# Same-host fetch: one client on the machine that holds the value reads it over loopback TCP, over
# the unix socket and (where the build has it) through the shared arenas, against one thread's
# memcpy of the same sizes in the same run (issue 33's reference).
#
#   benchmarks/same_host_bench.sh [--build-dir DIR] [--server BIN] [--quick] [--reps N] [--no-write]
#
# Two prefixd-servers (--appendonly no, so the disk is not measured), each on a loopback port and a
# unix socket: "off" with --shm-arenas no, "arenas" with --shm-arenas yes (the default); and redis-server on a unix
# socket of its own (no persistence), the store a user would pick instead. For each size (1, 16, 64, 256 MiB)
# prefixd-blob-bench SETs a value and reads it back --requests times with one client: GET over
# TCP and the unix socket (off), GET over the unix socket (arenas and redis-server), and SHM.GET (arenas): "shm
# view" is the time until the client holds a usable pointer, "shm copy" until it also has a
# private copy (SHM.RELEASE after each read, untimed). The store rows are SET over the unix socket
# to each server: what the arenas cost a write. Each phase's GB/s (10^9 bytes) is kept, with the
# server's CPU time over the fetch phase (INFO cpu), and the median over --reps runs is shown. memcpy is prefixd-blob-bench --mode memcpy: one thread copying a blob of the
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
  requests=([1]=256 [16]=24 [64]=8 [256]=4)
  ((reps > 1)) && reps=1
else
  requests=([1]=1024 [16]=96 [64]=32 [256]=8)
fi
sizes=(1 16 64 256)
transports=(tcp unix)
# The shared path needs a build whose blob bench knows --transport shm.
if "$bench_bin" --help 2>&1 | grep -q 'tcp|unix|shm'; then transports+=(shm); fi

declare -A port sock
start_server() {  # name flags...
  local name=$1
  shift
  port[$name]=$(free_port)
  sock[$name]=$work/$name.sock
  mkdir -p "$work/$name"
  "$server_bin" --port "${port[$name]}" --unixsocket "${sock[$name]}" --dir "$work/$name" \
    --appendonly no "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "${port[$name]}" "prefixd-server ($name)"
}
start_server off --shm-arenas no
# redis-server over its unix socket: what a same-host user of Redis gets for the same values.
port[redis]=$(free_port)
sock[redis]=$work/redis.sock
mkdir -p "$work/redis"
redis-server --port "${port[redis]}" --unixsocket "${sock[redis]}" --dir "$work/redis" \
  --save '' --appendonly no --proto-max-bulk-len 1gb >"$work/redis.log" 2>&1 &
pids+=($!)
wait_ready "${port[redis]}" redis-server
# Runs: server, transport, the label its rows get.
runs=("off tcp tcp" "off unix unix" "redis unix redis-unix")
if [[ " ${transports[*]} " == *" shm "* ]]; then
  start_server arenas --shm-arenas yes
  runs+=("arenas unix unix/arenas" "arenas shm shm")
fi

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
    for run in "${runs[@]}"; do
      read -r server transport label <<<"$run"
      timeout 120 "$bench_bin" --mode strings --transport "$transport" --port "${port[$server]}" \
        --socket "${sock[$server]}" --size "${mb}m" --requests "${requests[$mb]}" --seconds 30 |
        jq -r --arg rep "$rep" --arg row "$label" '
          if .verified != true then error("\($row) returned wrong bytes") else . end |
          (["fetch", "\(.size / 1048576)", "\($row) \(.op)", $rep, .gb_per_s, .p50_ms, .p99_ms]),
          (select(.server_cpu_ms != null and .op != "view") |
           ["cpu", "\(.size / 1048576)", $row, $rep,
            .server_cpu_ms / (.requests * .size / 1e9), 0, 0]) | @tsv' >>"$results"
    done
  done
  echo "rep $rep done ($(elapsed))" >&2
done

median() { bench_median "$results" "$@"; }
columns=(memcpy "tcp fetch" "unix fetch" "redis-unix fetch")
stores=("unix store" "redis-unix store")
if [[ " ${transports[*]} " == *" shm "* ]]; then
  columns+=("unix/arenas fetch" "shm view" "shm copy")
  stores+=("unix/arenas store")
fi
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
  echo "that row is an upper bound; from 16 MiB it is a copy through memory, as a fetch is. GB/s is"
  echo "each phase's mean (bytes over time); the ratios to memcpy compare p50 latencies (memcpy's p50"
  echo "over the path's), which preemption on a shared machine disturbs far less than a mean."
  if [[ " ${transports[*]} " == *" shm "* ]]; then
    echo "shm view: SHM.GET until the client holds a pointer it may read (one round trip, no bytes"
    echo "moved); shm copy: that plus a memcpy into a private, pre-faulted buffer. The SHM.RELEASE"
    echo "after each read is not timed. unix/arenas: plain GET from the server that keeps its values"
    echo "in arenas, beside GET from the one that does not (the socket path is the same)."
  fi
  echo
  header="| size |"
  rule="|---:|"
  for c in "${columns[@]}"; do header+=" $c GB/s |"; rule+="---:|"; done
  # A view moves no bytes: its GB/s only says how little the size matters (latencies below).
  ratios=()
  for c in "${columns[@]:1}"; do [[ $c == "shm view" ]] || ratios+=("$c"); done
  for c in "${ratios[@]}"; do header+=" $c / memcpy (p50) |"; rule+="---:|"; done
  echo "$header"
  echo "$rule"
  for mb in "${sizes[@]}"; do
    row="| $mb MiB |"
    base_p50=$(median fetch "$mb" memcpy 6)
    for c in "${columns[@]}"; do row+=" $(bench_fmt "$(median fetch "$mb" "$c" 5)" %.2f) |"; done
    # Against memcpy by p50 latency (memcpy's p50 over the path's): on a shared, loaded machine
    # a phase's mean takes in whatever preempted it, the median of its requests far less.
    for c in "${ratios[@]}"; do
      row+=" $(bench_ratio "$base_p50" "$(median fetch "$mb" "$c" 6)") |"
    done
    echo "$row"
  done
  if [[ " ${transports[*]} " == *" shm "* ]]; then
    echo
    echo "Against redis-server's GET over its unix socket, same values, same run (its p50 over the"
    echo "path's: above 1× the path is faster):"
    echo
    echo "| size | unix fetch | shm view | shm copy |"
    echo "|---:|---:|---:|---:|"
    for mb in "${sizes[@]}"; do
      redis_p50=$(median fetch "$mb" "redis-unix fetch" 6)
      row="| $mb MiB |"
      for c in "unix fetch" "shm view" "shm copy"; do
        row+=" $(bench_ratio "$redis_p50" "$(median fetch "$mb" "$c" 6)") |"
      done
      echo "$row"
    done
  fi
  echo
  echo "Stores (SET over the unix socket) GB/s, to prefixd without and with arenas, and to redis-server:"
  echo
  echo "| size |$(printf ' %s |' "${stores[@]}")"
  echo "|---:|$(printf -- '---:|%.0s' "${stores[@]}")"
  for mb in "${sizes[@]}"; do
    row="| $mb MiB |"
    for c in "${stores[@]}"; do row+=" $(bench_fmt "$(median fetch "$mb" "$c" 5)" %.2f) |"; done
    echo "$row"
  done
  echo
  echo "Server CPU per fetched GB (ms; INFO cpu over the fetch phase, every server thread):"
  echo
  cpu_rows=()
  for run in "${runs[@]}"; do read -r _ _ label <<<"$run"; cpu_rows+=("$label"); done
  echo "| size |$(printf ' %s |' "${cpu_rows[@]}")"
  echo "|---:|$(printf -- '---:|%.0s' "${cpu_rows[@]}")"
  for mb in "${sizes[@]}"; do
    row="| $mb MiB |"
    for c in "${cpu_rows[@]}"; do row+=" $(bench_fmt "$(median cpu "$mb" "$c" 5)" %.1f) |"; done
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
