#!/bin/bash
# Stores to a prefixd-server on this machine over the unix socket, against the same stores through
# a sealed memfd the server maps (docs/shm-transport.md, "Writes" and "Writes of any command"),
# with the log off and on, timed with the memfd's making and filling. Prints one line per run
# (3 repetitions, interleaved); figures in docs/benchmarks.md.
#   strings (default): SET of 16 and 64 MB against SHM.SET (--store memfd), and SHM.SET of a memfd
#     made and filled before the timer (--store memfd-filled);
#   --layers: SSM.PREFIX.STORE of a 1 and 16 MB layer against SHM.CALL carrying it.
#   benchmarks/shm_store_bench.sh [--layers] [build-dir]   (default build/dev)
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
layers=no
if [ "${1:-}" = --layers ]; then
  layers=yes
  shift
fi
build=${1:-$repo/build/dev}
# The scratch folder (`work`, removed on exit with the servers in `pids`), free_port, wait_ready.
source "$repo/benchmarks/bench_lib.sh" shm-store-bench

store() {  # aof size requests how: one run's line
  local t
  if [ $layers = yes ]; then
    t=(--mode prefixd --transport unix --store "$4")
  elif [ "$4" = socket ]; then
    t=(--mode strings --transport unix)
  else
    t=(--mode strings --transport shm --store "$4")
  fi
  line=$("$build/prefixd-blob-bench" "${t[@]}" --socket "$work/s-$1.sock" --size "$2" \
    --requests "$3" --warmup 1 2>&1 | grep '"op":"store"')
  echo "appendonly=$1 rep=$rep size=$2 store=$4" \
    "$(echo "$line" | grep -o '"gb_per_s":[0-9.]*\|"p50_ms":[0-9.]*' | tr '\n' ' ')"
}

for aof in no yes; do
  mkdir -p "$work/d-$aof"
  port=$(free_port)
  "$build/prefixd-server" --port "$port" --unixsocket "$work/s-$aof.sock" --dir "$work/d-$aof" \
    --appendonly $aof --shm-arenas yes >"$work/server-$aof.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_ready "$port" prefixd-server
  for rep in 1 2 3; do
    if [ $layers = yes ]; then
      for how in socket call; do store $aof 1m 64 $how; done
      for how in socket call; do store $aof 16m 16 $how; done
    else
      for how in socket memfd memfd-filled; do store $aof 16m 32 $how; done
      for how in socket memfd memfd-filled; do store $aof 64m 8 $how; done
    fi
  done
  kill "$pid"
  wait "$pid" 2>/dev/null
done
