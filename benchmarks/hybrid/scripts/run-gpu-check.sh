#!/usr/bin/env bash
# The CUDA backend's check on one GPU, run from a bundle that gpu_bundle.sh built elsewhere
# (bin/, lib/, this script, hf_reference.py). Sized for the device lease: at most ~8 minutes on
# one H200, each step under its own time limit, progress on stdout, and at most 7 result files
# (each well under 16 MiB) in $OUT (default ./gpu-check-out):
#   compare.txt          CUDA against CPU: tiny, small to 6,000 tokens, 0.8B to 5,200, 4B short
#   sweep-0.8b.{csv,md}  warm vs cold TTFT on the GPU through a local prefixd-server, 2K/8K/32K
#   sweep-4b.{csv,md}    the same on the 4B shape
#   transformers.md      transformers (Qwen3_5ForCausalLM) against our CUDA backend on the same
#                        checkpoints (logits, greedy tokens), and its prefill times at 2K/8K/32K
#   gpu-check.log        everything printed
# Weights are synthetic: each process generates them once, in parallel, in a second or two.
# The exit status is 0 only when every step passed.
#
# Env: OUT; SKIP_HF=1 skips transformers; SKIP_4B_COMPARE=1 skips the 4B CPU comparison.
set -uo pipefail
BUNDLE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu-check.log") 2>&1
START=$(date +%s)
HYBRID="$BUNDLE/bin/prefixd-hybrid"
SERVER="$BUNDLE/bin/prefixd-server"
status=0

step() { echo; echo "=== [$(($(date +%s) - START)) s] $*"; }
# The whole check stops within BUDGET_S (default 470 s) of its start, whatever each step takes.
DEADLINE=$((START + ${BUDGET_S:-470}))
# run LIMIT_S NAME CMD...: one step under a time limit (and the overall deadline); a failure or
# timeout fails the check, and the next step still runs.
run() {
  local limit=$1 name=$2
  shift 2
  local left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then
    echo "!!! $name: skipped, the time budget is spent"
    status=1
    return 0
  fi
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && echo "!!! $name: timed out after $limit s" || echo "!!! $name: exit $rc"
    status=1
  fi
  return 0
}

step "machine (bundle $(cat "$BUNDLE/VERSION" 2>/dev/null))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
echo "CPUs: $(nproc); memory: $(awk '/MemTotal/ {print int($2/1048576) " GiB"}' /proc/meminfo)"

# The bundled libstdc++ (GCC 12, Debian 12) needs glibc 2.36; the binaries themselves need 2.34
# and GLIBCXX_3.4.30. On an older glibc, set the bundled C++ runtime aside and use the host's.
if ldd "$HYBRID" 2>&1 | grep -q "GLIBC_[0-9.]*' not found"; then
  mkdir -p "$BUNDLE/lib/set-aside"
  mv "$BUNDLE"/lib/libstdc++.so.6 "$BUNDLE"/lib/libgcc_s.so.1 "$BUNDLE/lib/set-aside/" 2>/dev/null
  echo "glibc $(ldd --version | head -1 | awk '{print $NF}') is older than the bundled libstdc++" \
    "needs: using the host's libstdc++ and libgcc_s"
fi
if ldd "$HYBRID" 2>&1 | grep "' not found"; then
  echo "!!! a library version the binaries need is missing (above)"
  exit 2
fi

# cudart and cuBLAS come from the GPU image: the system's, a CUDA install, or PyTorch's wheels.
missing=$(ldd "$HYBRID" | awk '/not found/ {print $1}' | sort -u)
if [ -n "$missing" ]; then
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | xargs -n1 -I{} \
      find {}/nvidia -maxdepth 3 -type d -name lib 2>/dev/null); do
    for lib in $missing; do
      [ -e "$dir/$lib" ] && LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
    done
  done
  export LD_LIBRARY_PATH
  echo "CUDA libraries from: ${LD_LIBRARY_PATH:-nowhere}"
fi
if ldd "$HYBRID" | grep "not found"; then
  echo "!!! the bundle's binaries cannot find the libraries above"
  exit 2
fi
"$SERVER" --version

step "CUDA vs CPU (compare.txt)"
{
  run 20 "compare tiny" "$HYBRID" compare --model tiny --lengths 40,300,2100
  run 40 "compare small" "$HYBRID" compare --model small --lengths 600,6000
  run 50 "compare 0.8B" "$HYBRID" compare --model qwen3.5-0.8b --lengths 300,5200
  if [ "${SKIP_4B_COMPARE:-0}" != 1 ]; then
    run 50 "compare 4B" "$HYBRID" compare --model qwen3.5-4b --lengths 300 --decode-tokens 4
  fi
} 2>&1 | tee "$OUT/compare.txt"
grep -q "FAIL\|!!!" "$OUT/compare.txt" && status=1

step "warm vs cold sweeps on the GPU"
# Scratch next to the bundle (the checkout's disk), not /tmp, which may be a small tmpfs: the
# 0.8B checkpoint for transformers is 3.2 GB.
DATA=$(mktemp -d "$(dirname "$BUNDLE")/gpu-check-data.XXXXXX")
PORT=$((20000 + RANDOM % 20000))
"$SERVER" --port "$PORT" --dir "$DATA" --appendonly no --loglevel warning >"$DATA/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
for model in 0.8b 4b; do
  limit=70
  [ "$model" = 4b ] && limit=150
  step "sweep qwen3.5-$model, 2K/8K/32K (sweep-$model.{csv,md})"
  run "$limit" "sweep $model" "$HYBRID" sweep --model "qwen3.5-$model" --backend cuda \
    --lengths 2048,8192,32768 --port "$PORT" --loopback-mb 256 \
    --csv "$OUT/sweep-$model.csv" --markdown "$OUT/sweep-$model.md"
done
kill "$SERVER_PID" 2>/dev/null

if [ "${SKIP_HF:-0}" != 1 ]; then
  step "transformers: the same checkpoints, and its prefill times (transformers.md)"
  # Whatever time is left; the script skips what would not fit and still writes its report.
  run 400 "transformers" python3 "$BUNDLE/hf_reference.py" gpu --bin "$HYBRID" \
    --work "$DATA/hf" --out "$OUT/transformers.md" --budget $((DEADLINE - $(date +%s) - 15))
fi

step "done: status $status in $(($(date +%s) - START)) s; results in $OUT"
ls -l "$OUT"
exit "$status"
