#!/usr/bin/env bash
# The prompt cache's save over the unix socket against the same save through memfds (SHM.CALL,
# docs/shm-transport.md, "Writes of any command"): prefixd-llama sweep --socket with and without
# --no-shm, alternating, against one prefixd-server it starts with `--unixsocket` and
# `--shm-arenas yes` (log on, as deployed), the keyspace flushed before each run so that every
# save stores. Prints the sweep CSV's save_ms (SaveReport::ms: the state read from llama.cpp, the
# match, the stores) per prefix and run.
#
#   benchmarks/llama_save_bench.sh [--build DIR] [--arch A] [--shape S] [--lengths L1,L2,...]
#       [--threads N] [--block N] [--runs N] [--appendonly yes|no]
#
# Defaults: build/dev, qwen35 tiny f32, lengths 512,2048, 2 threads, block 256, 3 runs (about
# 5 minutes on 2 CPUs: each run prefills every length cold).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build/dev" arch=qwen35 shape=tiny lengths=512,2048 threads=2 block=256 runs=3 appendonly=yes
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --lengths) lengths="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --block) block="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --appendonly) appendonly="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source "$repo/benchmarks/bench_lib.sh" llama-save-bench

model="$work/$arch-$shape.gguf"
/usr/bin/python3 "$repo/scripts/llama/make_gguf.py" --arch "$arch" --shape "$shape" --seed 1 \
  --out "$model" >/dev/null
port=$(free_port)
mkdir -p "$work/data"
"$build/prefixd-server" --port "$port" --dir "$work/data" --unixsocket "$work/prefixd.sock" \
  --shm-arenas yes --appendonly "$appendonly" >"$work/server.log" 2>&1 &
pids+=($!)
wait_ready "$port" prefixd-server

echo "# $(git -C "$repo" rev-parse --short HEAD), $arch $shape, $(nproc) CPUs, block $block," \
     "threads $threads, unix socket + shm-arenas, appendonly $appendonly"
echo "run,transport,prefix_tokens,state_bytes,save_ms"
for run in $(seq "$runs"); do
  for how in shm socket; do
    redis-cli -p "$port" flushall >/dev/null
    extra=()
    [[ $how == socket ]] && extra=(--no-shm)
    "$build/prefixd-llama" sweep --model "$model" --socket "$work/prefixd.sock" \
      --threads "$threads" --block "$block" --lengths "$lengths" --runs 1 --single-prefill \
      --csv "$work/sweep.csv" "${extra[@]}" >/dev/null 2>&1
    /usr/bin/python3 - "$work/sweep.csv" "$run" "$how" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    assert r["save_transport"] == sys.argv[3], r
    print(f"{sys.argv[2]},{sys.argv[3]},{r['prefix_tokens']},{r['state_bytes']},{r['save_ms']}")
PY
  done
done
