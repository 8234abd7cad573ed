#!/usr/bin/env bash
# User-space instructions a prefixd-server build spends per request, counted by valgrind's
# callgrind over the connection coroutine (Connection::Process and all it calls: parsing,
# dispatch, the command, the log append, queuing the reply), for one redis-benchmark run. Unlike
# throughput or CPU time on a shared machine, the count hardly moves between runs, so it shows
# what a change to the request path saves. The kernel's share (socket and log writes) is not in it.
#
#   benchmarks/instructions_per_request.sh [--tests set,get,...] [--requests N] BIN [BIN...]
#
# Defaults: tests set,get,incr,mset, 50000 requests (redis-benchmark -P 16 -c 50), one io thread.
# GET reads a key SET first, so it measures hits. Needs valgrind (apt-get install valgrind).
set -euo pipefail

tests=set,get,incr,mset
requests=50000
bins=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --tests) tests=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[[ ${#bins[@]} -gt 0 ]] || { echo "usage: $0 [--tests LIST] [--requests N] BIN [BIN...]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
IFS=, read -ra test_list <<<"$tests"
for test in "${test_list[@]}"; do
  for bin in "${bins[@]}"; do
    dir=$(mktemp -d "$work/run.XXXX")
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    valgrind --tool=callgrind --callgrind-out-file="$dir/out" --collect-atstart=no \
      --toggle-collect='*Connection*::Process*' "$bin" --port "$port" --dir "$dir" \
      --io-threads 1 >/dev/null 2>"$dir/valgrind.log" &
    pid=$!
    for _ in $(seq 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
    redis-cli -p "$port" set key:__rand_int__ xxx >/dev/null
    redis-benchmark -p "$port" -t "$test" -P 16 -c 50 -n "$requests" -q >/dev/null 2>&1
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" || true
    total=$(awk '/^(summary|totals):/ { print $2; exit }' "$dir/out")
    printf '%-6s %-40s %8d instructions per request\n' "$test" "$bin" $((total / requests))
  done
done
