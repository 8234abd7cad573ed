#!/usr/bin/env bash
# The CUDA backend's check, for a machine with an NVIDIA GPU (never needed for CI, which only
# compiles the backend). Builds prefixd-server and prefixd-hybrid with CUDA, then:
#   1. `prefixd-hybrid compare`: the CUDA backend against the CPU backend on the tiny, small and
#      Qwen3.5-4B shapes (logits and every layer's state within tolerance, greedy tokens, and the
#      CUDA backend repeating itself bit for bit, also after a state pull / reset / push);
#   2. the Qwen3.5-4B-shape warm-vs-cold sweep on the GPU through a local prefixd-server.
# Everything it prints and writes lands in OUT_DIR (default $OUT, else ./gpu-check-out).
#
# Usage: benchmarks/hybrid/scripts/gpu_check.sh [build-dir] [out-dir]
#   CUDA_ARCHS   CMake CUDA architectures (default "90-real;90-virtual": H100/H200 + PTX)
#   LENGTHS      4B sweep prefix lengths (default 512,1024,2048,4096,8192,16384,32768)
#   SKIP_4B_COMPARE=1  skip the 4B CPU-vs-CUDA comparison (it needs ~20 GB of host memory)
set -euo pipefail
cd "$(dirname "$0")/../../.."

BUILD=${1:-build-gpu}
OUT_DIR=${2:-${OUT:-gpu-check-out}}
ARCHS=${CUDA_ARCHS:-90-real;90-virtual}
LENGTHS=${LENGTHS:-512,1024,2048,4096,8192,16384,32768}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
exec > >(tee -a "$LOG") 2>&1

step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
echo "CPUs: $(nproc); memory: $(awk '/MemTotal/ {print int($2/1048576) " GiB"}' /proc/meminfo)"
for tool in cmake ninja pkg-config; do
  command -v "$tool" >/dev/null || { echo "missing $tool (scripts/install-deps.sh)"; exit 2; }
done
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "no nvcc (set CUDACXX)"; exit 2; }
"$NVCC" --version | tail -1

step "build ($BUILD, CUDA archs $ARCHS)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPREFIXD_BUILD_TESTS=OFF \
  -DPREFIXD_HYBRID_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" \
  > "$OUT_DIR/cmake.log"
ninja -C "$BUILD" -j "$(nproc)" prefixd-server prefixd-hybrid > "$OUT_DIR/build.log"
HYBRID="$BUILD/prefixd-hybrid"
SERVER="$BUILD/prefixd-server"

status=0
step "CUDA vs CPU: tiny"
"$HYBRID" compare --model tiny --lengths 40,300,2100 || status=1
step "CUDA vs CPU: small"
"$HYBRID" compare --model small --lengths 600,5000 || status=1
if [ "${SKIP_4B_COMPARE:-0}" != 1 ]; then
  step "CUDA vs CPU: qwen3.5-4b"
  "$HYBRID" compare --model qwen3.5-4b --lengths 300 || status=1
fi

step "4B sweep on the GPU"
DATA=$(mktemp -d)
PORT=$((20000 + RANDOM % 20000))
"$SERVER" --port "$PORT" --dir "$DATA" --appendonly no --loglevel warning \
  > "$OUT_DIR/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
"$HYBRID" sweep --model qwen3.5-4b --backend cuda --lengths "$LENGTHS" --port "$PORT" \
  --csv "$OUT_DIR/sweep-4b-cuda.csv" --chart "$OUT_DIR/sweep-4b-cuda.svg" \
  --markdown "$OUT_DIR/sweep-4b-cuda.md" || status=1

step "done: status $status; results in $OUT_DIR"
exit "$status"
