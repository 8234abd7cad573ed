#!/usr/bin/env bash
# What a Redis replica costs its primary's writes: redis-benchmark SET (-P 16 -c 50) against
# prefixd and against redis-server, each alone and then with a redis-server replica attached,
# rounds interleaved; prints each round and the median. Loopback only; everything it starts is
# stopped at exit. docs/benchmarks.md, "Replication".
#
# Usage: benchmarks/replication_bench.sh [rounds (default 3)] [requests (default 300000)]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
server="${PREFIXD_SERVER:-$repo/build/dev/prefixd-server}"
rounds="${1:-3}"
requests="${2:-300000}"
work="$(mktemp -d /tmp/prefixd-repl-bench.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done; }
redis_at() {  # port [replicaof-port]
  local extra=()
  [ -n "${2:-}" ] && extra=(--replicaof 127.0.0.1 "$2")
  redis-server --port "$1" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    --dbfilename "dump-$1.rdb" --loglevel warning "${extra[@]}" >/dev/null 2>&1 &
  pids+=($!)
  wait_up "$1"
}
set_rate() {
  # -q still prints progress lines ending in \r: the final figure is the last one.
  redis-benchmark -p "$1" -t set -P 16 -c 50 -n "$requests" -r 100000 -q 2>/dev/null |
    tr '\r' '\n' | grep -o 'SET: [0-9.]*' | tail -1 | cut -d' ' -f2
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

pp=$(port) rp=$(port)
"$server" --port "$pp" --dir "$work/prefixd" --appendonly no >/dev/null 2>&1 &
pids+=($!)
wait_up "$pp"
redis_at "$rp"
declare -A rates
measure() {  # label
  for _ in $(seq 1 "$rounds"); do
    rates["$1 prefixd"]+="$(set_rate "$pp") "
    rates["$1 redis-server"]+="$(set_rate "$rp") "
  done
}
measure alone
redis_at "$(port)" "$pp"
redis_at "$(port)" "$rp"
for p in "$pp" "$rp"; do
  for _ in $(seq 1 100); do
    redis-cli -p "$p" info replication | grep -q 'state=online' && break
    sleep 0.1
  done
done
measure "1 replica"
printf '%-28s %14s   %s\n' case "median SET/s" rounds
for key in "alone prefixd" "alone redis-server" "1 replica prefixd" "1 replica redis-server"; do
  printf '%-28s %14s   %s\n' "$key" "$(tr ' ' '\n' <<<"${rates[$key]}" | grep . | median)" \
    "${rates[$key]}"
done
