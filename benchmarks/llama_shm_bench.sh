#!/usr/bin/env bash
# The prompt cache's restore over the unix socket against the same restore through the server's
# shared arenas (docs/shm-transport.md, "llama.cpp's prompt cache"), side by side in one run:
# prefixd-llama sweep --socket --compare-transports against a prefixd-server it starts with
# `--unixsocket` and `--shm-arenas yes` (log on, as deployed). The warm process restores each
# prefix over the socket and through the arenas in turn, --runs times each; the last of each is
# reported. Prints a table and writes the sweep's CSV into OUT.
#
#   benchmarks/llama_shm_bench.sh [--build DIR] [--out DIR] [--arch A] [--shape S] [--type T]
#       [--lengths L1,L2,...] [--threads N] [--block N] [--interval N] [--runs N]
#
# Defaults: build/dev, out ./llama-shm-bench, qwen35 tiny f32, lengths 512,2048, 2 threads,
# block 256, interval 1024, 3 runs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build/dev" out="$PWD/llama-shm-bench" arch=qwen35 shape=tiny type=f32
lengths=512,2048 threads=2 block=256 interval=1024 runs=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --type) type="$2"; shift 2 ;;
    --lengths) lengths="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --block) block="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
source "$repo/benchmarks/bench_lib.sh" llama-shm-bench

model="$out/$arch-$shape-$type.gguf"
if [[ ! -f $model ]]; then
  /usr/bin/python3 "$repo/scripts/llama/make_gguf.py" --arch "$arch" --shape "$shape" \
    --type "$type" --seed 1 --out "$model"
fi

port=$(free_port)
mkdir -p "$work/data"
"$build/prefixd-server" --port "$port" --dir "$work/data" --unixsocket "$work/prefixd.sock" \
  --shm-arenas yes >"$work/server.log" 2>&1 &
pids+=($!)
wait_ready "$port" prefixd-server

echo "# $(git -C "$repo" rev-parse --short HEAD), $arch $shape $type, $(nproc) CPUs," \
     "block $block, interval $interval, threads $threads, runs $runs, unix socket + shm-arenas"
"$build/prefixd-llama" sweep --model "$model" --socket "$work/prefixd.sock" --threads "$threads" \
  --block "$block" --interval "$interval" --lengths "$lengths" --runs "$runs" --single-prefill \
  --compare-transports --csv "$out/sweep.csv" >/dev/null
/usr/bin/python3 - "$out/sweep.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| prefix | state fetched | fetch: socket | fetch: shm | socket ÷ shm "
      "| restore: socket | restore: shm | transport | bit-exact |")
print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
for r in rows:
    fs, fm = float(r["socket_fetch_ms"]), float(r["fetch_ms"])
    print(f"| {int(r['prefix_tokens']):,} | {int(r['state_bytes']) / 1e6:.1f} MB | {fs:.2f} ms "
          f"| {fm:.2f} ms | {fs / fm if fm > 0 else 0:.2f}× | {float(r['socket_restore_ms']):.2f} ms "
          f"| {float(r['restore_ms']):.2f} ms | {r['transport']} | {r['states_bitexact']} |")
EOF
