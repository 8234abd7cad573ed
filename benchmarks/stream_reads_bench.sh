#!/usr/bin/env bash
# Stream reads by id and a consumer group's reads, side by side: each prefixd-server build given
# and Debian's redis-server, started one after another in one sitting, each filled by the same
# redis-benchmark run (`XADD bench * field value`, --entries times) and read by the same runs:
# XRANGE from the start and from late in the stream, XREVRANGE newest first (from the end and
# from late), then XREADGROUP `>` with no XACK, so its pending list grows by one per request.
# Prints requests/s per command and server (docs/compatibility.md, Streams, quotes them).
#
#   benchmarks/stream_reads_bench.sh [--entries N] [--reads N] [--group-reads N] BIN [BIN...]
#
# Defaults: 100,000 entries, 3,000 requests per read (`redis-benchmark -c 10`), 20,000
# XREADGROUP requests. prefixd runs on its defaults in a fresh directory (appendonly yes,
# everysec); redis-server on its defaults with its RDB save points off (--save '').
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
entries=100000
reads=3000
group_reads=20000
bins=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --entries) entries=$2; shift 2 ;;
    --reads) reads=$2; shift 2 ;;
    --group-reads) group_reads=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) bins+=("$(realpath "$1")"); shift ;;
  esac
done
[[ ${#bins[@]} -gt 0 ]] || { echo "stream_reads_bench.sh: name a prefixd-server binary" >&2; exit 2; }

source "$repo/benchmarks/bench_lib.sh" stream-reads

# requests/s of one bounded redis-benchmark run: port, requests, command words.
rate() {
  local port=$1 n=$2
  shift 2
  timeout 300 redis-benchmark -p "$port" -n "$n" -c 10 -q "$@" |
    tr '\r' '\n' | awk -F': ' '/requests per second/ { split($2, a, " "); v = a[1] } END { print v }'
}

run_one() {  # name port
  local name=$1 port=$2 late
  rate "$port" "$entries" XADD bench '*' field value >/dev/null
  # The id of the entry 90% of the way in (the 90,000th of 100,000).
  late=$(timeout 60 redis-cli -p "$port" XREVRANGE bench + - COUNT $((entries / 10 + 1)) |
    awk '/^[0-9]+-[0-9]+$/ { id = $0 } END { print id }')
  printf '%-28s len %s, late id %s\n' "$name" "$(redis-cli -p "$port" XLEN bench)" "$late"
  printf '  %-40s %s\n' "XRANGE bench - + COUNT 10" "$(rate "$port" "$reads" XRANGE bench - + COUNT 10)"
  printf '  %-40s %s\n' "XRANGE bench <late> + COUNT 1" "$(rate "$port" "$reads" XRANGE bench "$late" + COUNT 1)"
  printf '  %-40s %s\n' "XREVRANGE bench + - COUNT 10" "$(rate "$port" "$reads" XREVRANGE bench + - COUNT 10)"
  printf '  %-40s %s\n' "XREVRANGE bench <late> - COUNT 1" "$(rate "$port" "$reads" XREVRANGE bench "$late" - COUNT 1)"
  printf '  %-40s %s\n' "XREAD COUNT 1 STREAMS bench <late>" "$(rate "$port" "$reads" XREAD COUNT 1 STREAMS bench "$late")"
  redis-cli -p "$port" XGROUP CREATE bench g 0 >/dev/null
  printf '  %-40s %s\n' "XREADGROUP ... COUNT 1 STREAMS bench >" \
    "$(rate "$port" "$group_reads" XREADGROUP GROUP g c COUNT 1 STREAMS bench '>')"
  printf '  %-40s %s\n' "  (pending after)" "$(redis-cli -p "$port" XPENDING bench g | head -1)"
}

echo "$(bench_machine), $(date -u +%F)"
for bin in "${bins[@]}"; do
  port=$(free_port)
  mkdir -p "$work/$port"
  (cd "$work/$port" && exec "$bin" --port "$port" --dir "$work/$port" >"$work/$port.log" 2>&1) &
  pids+=($!)
  wait_ready "$port" prefixd
  run_one "prefixd $bin" "$port"
  kill "${pids[-1]}" && wait "${pids[-1]}" 2>/dev/null || true
done
port=$(free_port)
mkdir -p "$work/redis"
redis-server --port "$port" --bind 127.0.0.1 --save '' --dir "$work/redis" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_ready "$port" redis-server
run_one "redis-server $(redis-server --version | awk '{ print $3 }')" "$port"
