#!/usr/bin/env bash
# Server CPU time per request: prefixd-server against Debian's redis-server (its defaults), each
# driven by the same redis-benchmark run. Throughput on a machine shared with its load generator
# moves by tens of percent between runs; the CPU the server spent (every thread's time on a CPU,
# from /proc/<pid>/task/*/schedstat, in ns) per request moves much less, so it shows where a row
# loses.
#
#   benchmarks/cpu_per_request.sh [--server BIN] [--tests set,get,...] [--requests N] [--runs N]
#                                 [--keyspace N] [-- prefixd flags...]
#
# Defaults: build/release/prefixd-server with its defaults, tests set,get,incr,mset,ping_mbulk,
# 300000 requests per run (redis-benchmark -P 16 -c 50), 3 runs per server alternating; --keyspace N
# spreads the requests over N random keys (redis-benchmark -r N) instead of one. Prints
# one line per run: test, server, kops/s, server CPU µs per request, and the server's CPU share.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server_bin=$repo/build/release/prefixd-server
tests=set,get,incr,mset,ping_mbulk
requests=300000
runs=3
keyspace=()
prefixd_flags=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --server) server_bin=$(realpath "$2"); shift 2 ;;  # it starts in a folder of its own
    --tests) tests=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keyspace) keyspace=(-r "$2"); shift 2 ;;
    --) shift; prefixd_flags=("$@"); break ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "cpu_per_request.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x $server_bin ]] || { echo "missing $server_bin; build prefixd-server" >&2; exit 2; }

source "$repo/benchmarks/bench_lib.sh" cpu-per-request

declare -A port pid
start() {  # name command...
  local name=$1
  shift
  port[$name]=$(free_port)
  mkdir -p "$work/$name"
  (cd "$work/$name" && exec "$@" --port "${port[$name]}" >"$work/$name.log" 2>&1) &
  pids+=($!)
  pid[$name]=$!
  wait_ready "${port[$name]}" "$name"
}
start prefixd "$server_bin" --dir . "${prefixd_flags[@]}"
start redis redis-server --bind 127.0.0.1

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); prefixd flags: ${prefixd_flags[*]:-(defaults)}"
IFS=, read -ra test_list <<<"$tests"
for test in "${test_list[@]}"; do
  for run in $(seq 1 "$runs"); do
    order=(prefixd redis)
    ((run % 2)) || order=(redis prefixd)
    for name in "${order[@]}"; do
      before=$(cpu_ns "${pid[$name]}")
      start_ns=$(date +%s%N)
      rps=$(timeout 300 redis-benchmark -p "${port[$name]}" -t "$test" -P 16 -c 50 -n "$requests" \
        "${keyspace[@]}" --csv 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"')
      after=$(cpu_ns "${pid[$name]}")
      wall_ns=$(($(date +%s%N) - start_ns))
      awk -v t="$test" -v s="$name" -v rps="$rps" -v cpu=$((after - before)) \
        -v n="$requests" -v wall="$wall_ns" 'BEGIN {
          printf "%-10s %-8s %8.0f kops/s  %6.3f us/request  %4.0f%% of a core\n", t, s,
            rps / 1000, cpu / 1e3 / n, 100 * cpu / wall }'
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
