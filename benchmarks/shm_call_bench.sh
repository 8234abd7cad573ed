#!/bin/bash
# Saves of a state layer (SSM.PREFIX.STORE of 1 and 16 MB) to a prefixd-server on this machine,
# with the log off and on: the layer over the unix socket, against the same store as SHM.CALL
# with the layer in a sealed memfd the server maps (docs/shm-transport.md, "Writes of any
# command"), timed with the memfd's making and filling. Prints one line per run (3 repetitions,
# interleaved).
#   benchmarks/shm_call_bench.sh [build-dir]   (default build/dev)
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build/dev}
work=$(mktemp -d /tmp/shm-call-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
for aof in no yes; do
  mkdir -p "$work/d-$aof"
  port=$((17000 + RANDOM % 1000))
  "$build/prefixd-server" --port $port --unixsocket "$work/s-$aof.sock" --dir "$work/d-$aof" \
    --appendonly $aof --shm-arenas yes >"$work/server-$aof.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  for rep in 1 2 3; do
    for size in 1m 16m; do
      requests=64
      [ $size = 16m ] && requests=16
      for how in socket call; do
        line=$("$build/prefixd-blob-bench" --mode prefixd --transport unix --store $how \
          --socket "$work/s-$aof.sock" --size $size --requests $requests --warmup 1 2>&1 |
          grep '"op":"store"')
        echo "appendonly=$aof rep=$rep size=$size store=$how" \
          "$(echo "$line" | grep -o '"gb_per_s":[0-9.]*\|"p50_ms":[0-9.]*' | tr '\n' ' ')"
      done
    done
  done
  kill $pid
  wait $pid 2>/dev/null
done
