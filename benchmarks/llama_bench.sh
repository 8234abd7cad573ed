#!/usr/bin/env bash
# prefixd's prompt cache on llama.cpp (docs/llama.md), measured with prefixd-llama against a
# prefixd-server it starts on a free loopback port (its log on, as deployed): chat's three
# workloads and a sweep of prefix lengths, on a synthetic model scripts/llama/make_gguf.py writes
# (kept in the output folder and reused). Prints the CSVs and writes them with their SVG charts
# into OUT.
#
#   benchmarks/llama_bench.sh [--build DIR] [--out DIR] [--arch A] [--shape S] [--type f32|f16]
#       [--lengths L1,L2,...] [--turns N] [--threads N] [--block N] [--interval N]
#       [--socket] [--single-prefill] [--skip-chat] [--skip-sweep]
#
# Defaults: build/dev, out ./llama-bench, qwen35 tiny f32, lengths 512,2048,8192, 8 turns,
# 2 threads, block 256, interval 1024, TCP. --socket talks over a unix socket instead.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build/dev" out="$PWD/llama-bench" arch=qwen35 shape=tiny type=f32
lengths=512,2048,8192 turns=8 threads=2 block=256 interval=1024 socket=0 single=() chat=1 sweep=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --type) type="$2"; shift 2 ;;
    --lengths) lengths="$2"; shift 2 ;;
    --turns) turns="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --block) block="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    --socket) socket=1; shift ;;
    --single-prefill) single=(--single-prefill); shift ;;
    --skip-chat) chat=0; shift ;;
    --skip-sweep) sweep=0; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
source "$repo/benchmarks/bench_lib.sh" llama-bench

model="$out/$arch-$shape-$type.gguf"
if [[ ! -f $model ]]; then
  /usr/bin/python3 "$repo/scripts/llama/make_gguf.py" --arch "$arch" --shape "$shape" \
    --type "$type" --seed 1 --out "$model"
fi

port=$(free_port)
server_args=(--port "$port" --dir "$work/data")
target=(--port "$port")
if [[ $socket == 1 ]]; then
  server_args+=(--unixsocket "$work/prefixd.sock")
  target=(--socket "$work/prefixd.sock")
fi
mkdir -p "$work/data"
"$build/prefixd-server" "${server_args[@]}" >"$work/server.log" 2>&1 &
pids+=($!)
wait_ready "$port" prefixd-server

common=(--model "$model" "${target[@]}" --threads "$threads" --block "$block"
        --interval "$interval")
echo "# $(git -C "$repo" rev-parse --short HEAD), $arch $shape $type, $(nproc) CPUs," \
     "block $block, interval $interval, threads $threads, $([[ $socket == 1 ]] && echo unix || echo tcp)"
if [[ $chat == 1 ]]; then
  seed=0
  for workload in multiturn fanout branch; do
    seed=$((seed + 1))  # each workload its own conversation: none finds another's prompts
    echo "## chat --workload $workload --turns $turns --seed $seed"
    "$build/prefixd-llama" chat "${common[@]}" --workload "$workload" --turns "$turns" --seed "$seed" \
      --csv "$out/chat-$workload.csv" --chart "$out/chat-$workload.svg"
  done
fi
if [[ $sweep == 1 ]]; then
  echo "## sweep --lengths $lengths ${single[*]}"
  "$build/prefixd-llama" sweep "${common[@]}" --lengths "$lengths" "${single[@]}" \
    --csv "$out/sweep.csv" --chart "$out/sweep.svg"
fi
