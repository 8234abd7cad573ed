#!/usr/bin/env bash
# Pipelined small commands: one or more prefixd-server builds and Debian's redis-server, all
# started once and driven by the same redis-benchmark runs in rotating order, so a load change on
# a shared machine hits every server alike. Prints the median kops/s of each test per server and
# each prefixd build's ratio to redis-server, then each server's median CPU per request (its
# threads' schedstat around each run: steadier than throughput where the load generator shares
# the cores). Each test is a redis-benchmark run of its own.
#
#   benchmarks/side_by_side.sh [--tests LIST] [--requests N] [--rounds N] [--keyspace N]
#                              [--redis-aof] BIN [BIN...]
#
# Defaults: tests ping_inline,ping_mbulk,set,get,incr,mset, 300000 requests, 3 rounds,
# `redis-benchmark -P 16 -c 50`; --keyspace N spreads the keys over N random names (-r N).
# Every prefixd runs on its defaults in a fresh directory (appendonly yes, everysec);
# redis-server runs on its defaults with its RDB save points off (--save ''); --redis-aof adds a
# second one with `--appendonly yes --appendfsync everysec`, the log prefixd keeps by default, and
# a ratio column against it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tests=ping_inline,ping_mbulk,set,get,incr,mset
requests=300000
rounds=3
keyspace=()
redis_aof=0
bins=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --tests) tests=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --keyspace) keyspace=(-r "$2"); shift 2 ;;
    --redis-aof) redis_aof=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) bins+=("$(realpath "$1")"); shift ;;  # the servers start in folders of their own
  esac
done
[[ ${#bins[@]} -gt 0 ]] || { echo "side_by_side.sh: name at least one prefixd-server binary" >&2; exit 2; }

source "$repo/benchmarks/bench_lib.sh" side-by-side

names=()
declare -A port pid
for i in "${!bins[@]}"; do
  name="prefixd$i"
  names+=("$name")
  port[$name]=$(free_port)
  mkdir -p "$work/$name"
  (cd "$work/$name" && exec "${bins[$i]}" --port "${port[$name]}" --dir . >"$work/$name.log" 2>&1) &
  pids+=($!)
  pid[$name]=$!
  wait_ready "${port[$name]}" "$name"
  echo "$name: ${bins[$i]}"
done
port[redis]=$(free_port)
(cd "$work" && exec redis-server --port "${port[redis]}" --bind 127.0.0.1 --save '' >"$work/redis.log" 2>&1) &
pids+=($!)
pid[redis]=$!
wait_ready "${port[redis]}" redis
names+=(redis)
if ((redis_aof)); then
  port[redis-aof]=$(free_port)
  mkdir -p "$work/redis-aof"
  (cd "$work/redis-aof" && exec redis-server --port "${port[redis-aof]}" --bind 127.0.0.1 --save '' \
    --appendonly yes --appendfsync everysec >"$work/redis-aof.log" 2>&1) &
  pids+=($!)
  pid[redis-aof]=$!
  wait_ready "${port[redis-aof]}" redis-aof
  names+=(redis-aof)
fi

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
results=$work/results.csv
IFS=, read -ra test_list <<<"$tests"
for round in $(seq 1 "$rounds"); do
  for k in "${!names[@]}"; do
    name=${names[$(((k + round) % ${#names[@]}))]}
    for test in "${test_list[@]}"; do
      before=$(cpu_ns "${pid[$name]}")
      row=$(redis-benchmark -p "${port[$name]}" -t "$test" -P 16 -c 50 -n "$requests" \
        "${keyspace[@]}" --csv 2>/dev/null | tail -n 1)
      after=$(cpu_ns "${pid[$name]}")
      # name,"TEST","rps",... then the server's CPU ns per request
      echo "$name,$row,$(((after - before) / requests))" >>"$results"
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$results" "${names[@]}" <<'EOF'
import csv, statistics, sys
path, names = sys.argv[1], sys.argv[2:]
runs = {}
cpu = {}
order = []
for row in csv.reader(open(path)):
    server, test, rps = row[0], row[1], float(row[2])
    if test not in order:
        order.append(test)
    runs.setdefault((test, server), []).append(rps)
    cpu.setdefault((test, server), []).append(float(row[-1]))
prefixd = [n for n in names if not n.startswith("redis")]
against = [r for r in ("redis", "redis-aof") if r in names]
pairs = [(n, r) for r in against for n in prefixd]
print("| test | " + " | ".join(f"{n} kops/s" for n in names) + " | " +
      " | ".join(f"{n} / {r}" for n, r in pairs) + " |")
print("|---" * (1 + len(names) + len(pairs)) + "|")
for test in order:
    med = {n: statistics.median(runs.get((test, n), [0])) for n in names}
    ratios = [f"{med[n] / med[r]:.2f}x" if med[r] else "-" for n, r in pairs]
    print(f"| {test} | " + " | ".join(f"{med[n] / 1000:.0f}" for n in names) + " | " +
          " | ".join(ratios) + " |")
print()
print("| server CPU per request (ns) | " + " | ".join(names) + " |")
print("|---" * (1 + len(names)) + "|")
for test in order:
    print(f"| {test} | " + " | ".join(f"{statistics.median(cpu.get((test, n), [0])):.0f}"
                                      for n in names) + " |")
EOF
