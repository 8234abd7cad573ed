#!/usr/bin/env bash
# User-space instructions a prefixd-server build spends per request, counted by valgrind's
# callgrind over the connection coroutine (Connection::Process and all it calls: parsing,
# dispatch, the command, the log append, queuing the reply), for one redis-benchmark run. Unlike
# throughput or CPU time on a shared machine, the count hardly moves between runs, so it shows
# what a change to the request path saves. The kernel's share (socket and log writes) is not in it.
#
#   benchmarks/instructions_per_request.sh [--tests set,get,...] [--requests N] [--whole]
#                                          [--redis] BIN [BIN...]
#
# Defaults: tests set,get,incr,mset, 50000 requests (redis-benchmark -P 16 -c 50), one io thread.
# GET reads a key SET first, so it measures hits. --whole counts the whole process instead (every
# thread: the log's writes and checksums too), less a run that starts, answers one PING and shuts
# down; --redis adds Debian's redis-server (--save '' --appendonly no), counted whole. Needs
# valgrind (apt-get install valgrind).
set -euo pipefail

tests=set,get,incr,mset
requests=50000
whole=0
bins=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --tests) tests=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --whole) whole=1; shift ;;
    --redis) bins+=(redis-server); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[[ ${#bins[@]} -gt 0 ]] || { echo "usage: $0 [--tests LIST] [--requests N] BIN [BIN...]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
IFS=, read -ra test_list <<<"$tests"
# Instructions of one server run: start BIN, PING, then (with a test) one redis-benchmark run,
# shut down. Whole process for redis-server and with --whole, else the connection coroutine.
count() {  # bin test-or-empty
  local bin=$1 test=$2 dir port pid
  dir=$(mktemp -d "$work/run.XXXX")
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local scope=(--collect-atstart=no --toggle-collect='*Connection*::Process*')
  [[ $whole == 1 || $bin == redis-server ]] && scope=()
  if [[ $bin == redis-server ]]; then
    (cd "$dir" && exec valgrind --tool=callgrind --callgrind-out-file="$dir/out" redis-server \
      --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>"$dir/valgrind.log") &
  else
    valgrind --tool=callgrind --callgrind-out-file="$dir/out" "${scope[@]}" "$bin" --port "$port" \
      --dir "$dir" --io-threads 1 >/dev/null 2>"$dir/valgrind.log" &
  fi
  pid=$!
  for _ in $(seq 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  if [[ -n $test ]]; then
    redis-cli -p "$port" set key:__rand_int__ xxx >/dev/null
    redis-benchmark -p "$port" -t "$test" -P 16 -c 50 -n "$requests" -q >/dev/null 2>&1
  fi
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  awk '/^(summary|totals):/ { print $2; exit }' "$dir/out"
}

declare -A idle
for bin in "${bins[@]}"; do
  idle[$bin]=0
  [[ $whole == 1 || $bin == redis-server ]] && idle[$bin]=$(count "$bin" "")
done
for test in "${test_list[@]}"; do
  for bin in "${bins[@]}"; do
    total=$(count "$bin" "$test")
    printf '%-6s %-40s %8d instructions per request\n' "$test" "$bin" \
      $(((total - idle[$bin]) / requests))
  done
done
