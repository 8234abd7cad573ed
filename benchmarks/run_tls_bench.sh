#!/usr/bin/env bash
# TLS benchmark: 16 MiB store/fetch over TLS, prefixd-server against Debian's redis-server (both
# with a TLS port and a plain one), in one run, and each server's TLS throughput as a fraction of
# its own plain TCP throughput.
#
#   benchmarks/run_tls_bench.sh [--build-dir DIR] [--reps N] [--size 16m] [--requests N]
#
# prefixd-blob-bench drives both servers (prefixd: SSM.PREFIX.STORE/FETCH; redis: SET/GET), one
# and four clients, each phase verified. Certificates come from tests/integration/tls/make_certs.sh;
# both servers use tls-auth-clients no and OpenSSL's defaults (TLSv1.3, AES-256-GCM here).
# Servers and transports alternate; the table shows medians over --reps runs. Prints a markdown
# table on stdout; nothing is written to docs/.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build/dev
reps=3
size=16m
requests=
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_tls_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $build_dir = /* ]] || build_dir=$PWD/$build_dir
server_bin=$build_dir/prefixd-server
bench_bin=$build_dir/prefixd-blob-bench
for bin in "$server_bin" "$bench_bin"; do
  [[ -x $bin ]] || { echo "missing $bin" >&2; exit 2; }
done
for tool in redis-server redis-cli jq openssl timeout; do
  command -v "$tool" >/dev/null || { echo "run_tls_bench.sh needs $tool" >&2; exit 2; }
done

source "$repo/benchmarks/bench_lib.sh" tls-bench
"$repo/tests/integration/tls/make_certs.sh" "$work/certs"
certs=$work/certs
tls_flags=(--tls-cert-file "$certs/server.crt" --tls-key-file "$certs/server.key"
  --tls-ca-cert-file "$certs/ca.crt" --tls-auth-clients no)

declare -A port tls_port
port[prefixd]=$(free_port)
tls_port[prefixd]=$(free_port)
mkdir -p "$work/prefixd"
"$server_bin" --port "${port[prefixd]}" --tls-port "${tls_port[prefixd]}" --dir "$work/prefixd" \
  --appendonly no --loglevel warning "${tls_flags[@]}" >"$work/prefixd.log" 2>&1 &
pids+=($!)
port[redis]=$(free_port)
tls_port[redis]=$(free_port)
(cd "$work" && exec redis-server --port "${port[redis]}" --tls-port "${tls_port[redis]}" \
  --bind 127.0.0.1 --save '' --appendonly no --proto-max-bulk-len 1gb --loglevel warning \
  "${tls_flags[@]}" >"$work/redis.log" 2>&1) &
pids+=($!)
wait_ready "${port[prefixd]}" prefixd-server
wait_ready "${port[redis]}" redis-server

results=$work/results.tsv  # op|clients  server  transport  rep  gb_per_s  p50  p99
: >"$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start_seconds=$SECONDS
for rep in $(seq 1 "$reps"); do
  for clients in 1 4; do
    n=${requests:-$((clients == 1 ? 24 : 48))}
    for transport in tls plain; do
      for server in prefixd redis; do
        args=(--mode "$server" --size "$size" --clients "$clients" --requests "$n")
        if [[ $transport == tls ]]; then
          args+=(--port "${tls_port[$server]}" --tls-cacert "$certs/ca.crt")
        else
          args+=(--port "${port[$server]}")
        fi
        timeout 300 "$bench_bin" "${args[@]}" |
          jq -r --arg s "$server" --arg t "$transport" --arg rep "$rep" '
            if .verified != true then error("\($s) returned wrong bytes") else . end |
            ["\(.op)|\(.clients)", $s, $t, $rep, .gb_per_s, .p50_ms, .p99_ms] | @tsv' >>"$results"
      done
    done
  done
  echo "rep $rep done ($((SECONDS - start_seconds))s)" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

median() { bench_median "$results" "$@"; }  # row server transport column
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
percent() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "nan" }'; }

echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "- Commit: $(git -C "$repo" rev-parse --short HEAD); $("$server_bin" --version 2>/dev/null | head -1); $(redis-server --version | cut -d' ' -f1-3); $(openssl version)"
echo "- Command: \`benchmarks/run_tls_bench.sh --build-dir ${build_dir#"$repo"/} --reps $reps\` (medians; took $((SECONDS - start_seconds))s)"
echo "- Load average before / after: $load_before / $load_after"
echo
echo "| $size | clients | prefixd TLS GB/s | redis TLS GB/s | prefixd/redis (TLS) | prefixd TLS/plain | redis TLS/plain | prefixd TLS p50 / p99 ms | redis TLS p50 / p99 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for op in store fetch; do
  for clients in 1 4; do
    row="$op|$clients"
    pt=$(median "$row" prefixd tls 5)
    rt=$(median "$row" redis tls 5)
    pp=$(median "$row" prefixd plain 5)
    rp=$(median "$row" redis plain 5)
    printf '| %s | %s | %.2f | %.2f | **%s×** | %s | %s | %.1f / %.1f | %.1f / %.1f |\n' \
      "$op" "$clients" "$pt" "$rt" "$(ratio "$pt" "$rt")" "$(percent "$pt" "$pp")" \
      "$(percent "$rt" "$rp")" "$(median "$row" prefixd tls 6)" "$(median "$row" prefixd tls 7)" \
      "$(median "$row" redis tls 6)" "$(median "$row" redis tls 7)"
  done
done
