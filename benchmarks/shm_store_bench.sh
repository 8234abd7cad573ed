#!/bin/bash
# Store of 16 and 64 MB strings to a prefixd-server on this machine, with the log off and on:
# SET over the unix socket, against SHM.SET of a sealed memfd (docs/shm-transport.md, "Writes"),
# timed with the memfd's making and filling (--store memfd) and without (--store memfd-filled).
# Prints one line per run (3 repetitions, interleaved); figures in docs/benchmarks.md.
#   benchmarks/shm_store_bench.sh [build-dir]   (default build/dev)
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build/dev}
work=$(mktemp -d /tmp/shm-store-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
for aof in no yes; do
  mkdir -p "$work/d-$aof"
  port=$((17000 + RANDOM % 1000))
  "$build/prefixd-server" --port $port --unixsocket "$work/s-$aof.sock" --dir "$work/d-$aof" \
    --appendonly $aof --shm-arenas yes >"$work/server-$aof.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  for rep in 1 2 3; do
    for size in 16m 64m; do
      requests=32
      [ $size = 64m ] && requests=8
      for how in socket memfd memfd-filled; do
        if [ $how = socket ]; then t=(--transport unix); else t=(--transport shm --store $how); fi
        line=$("$build/prefixd-blob-bench" --mode strings "${t[@]}" --socket "$work/s-$aof.sock" \
          --size $size --requests $requests --warmup 1 2>&1 | grep '"op":"store"')
        echo "appendonly=$aof rep=$rep size=$size store=$how" \
          "$(echo "$line" | grep -o '"gb_per_s":[0-9.]*\|"p50_ms":[0-9.]*' | tr '\n' ' ')"
      done
    done
  done
  kill $pid
  wait $pid 2>/dev/null
done
