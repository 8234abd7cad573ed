#!/bin/bash
# V.FETCH BATCH over the unix socket against V.SHMFETCH ... BATCH through the shared arenas
# (docs/shm-transport.md, "A batch of layers"): one prefixd-server (--appendonly no,
# --shm-arenas yes) and prefixd-vbatch-bench against it, 3 repetitions per shape, one JSON line
# per phase (socket, shm view, shm copy) and repetition, with the machine's load before and after.
#   benchmarks/vbatch_bench.sh [--quick] [build-dir]   (default build/dev)
# Shapes: 16 layers of 2048 fp32 rows of 1024 values (128 MiB a call) and 4 layers of 512 (8 MiB);
# --quick runs the small one once.
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=no
if [ "${1:-}" = --quick ]; then
  quick=yes
  shift
fi
build=${1:-$repo/build/dev}
# The scratch folder (`work`, removed on exit with the servers in `pids`), free_port, wait_ready.
source "$repo/benchmarks/bench_lib.sh" vbatch-bench

port=$(free_port)
"$build/prefixd-server" --port "$port" --unixsocket "$work/s.sock" --dir "$work" \
  --appendonly no --shm-arenas yes >"$work/server.log" 2>&1 &
pids+=($!)
wait_ready "$port" prefixd-server
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $quick = yes ]; then
  shapes=("4 512 8")
  reps=1
else
  shapes=("16 2048 8" "4 512 32")
  reps=3
fi
for rep in $(seq 1 $reps); do
  for shape in "${shapes[@]}"; do
    read -r layers tokens requests <<<"$shape"
    timeout 300 "$build/prefixd-vbatch-bench" --socket "$work/s.sock" --layers "$layers" \
      --tokens "$tokens" --requests "$requests" --warmup 2 | sed "s/^{/{\"rep\":$rep,/"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
