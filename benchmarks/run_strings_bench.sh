#!/usr/bin/env bash
# Strings benchmark: prefixd-server against Debian's redis-server on loopback, in one run, with
# the rows issue 11 names.
#
#   benchmarks/run_strings_bench.sh [--build-dir DIR] [--server BIN] [--quick] [--reps N]
#                                   [--no-write]
#
# Rows:
#   - small: redis-benchmark -t ping_inline,ping_mbulk,set,get,incr,mset -P 16 -c 50, both servers
#     on their default settings (prefixd: appendonly yes, appendfsync everysec, one io thread per
#     core; redis-server: no config file, so its built-in save points); two more columns compare
#     at equal durability: prefixd against redis-server with the same log (--appendonly yes,
#     appendfsync everysec), and prefixd --appendonly no against redis-server's defaults;
#   - blobs: SET then GET of 1, 4, 16 and 64 MiB values with 1 and 4 clients (prefixd-blob-bench
#     --mode strings: raw sockets, gather writes, replies checked);
#   - LMCache: 12 workers each cycling SET <key>kv_bytes <4 MiB>, SET <key>metadata <28 B>,
#     EXISTS <key>metadata, GET <key>metadata, GET <key>kv_bytes (prefixd-blob-bench --mode
#     lmcache, every reply checked byte for byte).
# The blob and LMCache rows compare the servers with persistence off on both (prefixd
# --appendonly no; redis-server --save '' --appendonly no), as the wire benchmark does: what is
# measured is the server, not the disk; docs/benchmarks.md's durability section has persistence.
# Servers run alternately, each row repeated --reps times; the tables show medians and the
# prefixd/redis ratio. They go to stdout and, with the date, machine, commit, load average and
# this command line, replace the "Strings: prefixd vs redis-server" section of
# docs/benchmarks.md (other sections are left alone).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command_line="benchmarks/run_strings_bench.sh${*:+ $*}"
source "$repo/benchmarks/bench_lib.sh" strings-bench
bench_parse_options build/release "$@"

# Workload sizes: requests per redis-benchmark test; SET/GET requests per phase per blob size
# (split over the clients); LMCache chunk cycles per run (split over the workers).
declare -A blob_requests
if ((quick)); then
  small_requests=200000
  blob_requests=([1]=128 [4]=64 [16]=16 [64]=8)
  lmcache_cycles=120
  ((reps > 1)) && reps=1
else
  small_requests=500000
  blob_requests=([1]=512 [4]=256 [16]=64 [64]=24)
  lmcache_cycles=600
fi
small_tests=ping_inline,ping_mbulk,set,get,incr,mset
blob_sizes=(1 4 16 64)
blob_clients=(1 4)
lmcache_workers=12
lmcache_chunks=8  # chunk keys per worker: 12 x 8 x 4 MiB = 384 MiB held by each server

declare -A port
start_prefixd() {  # name flags...
  local name=$1
  shift
  port[$name]=$(free_port)
  mkdir -p "$work/$name"
  "$server_bin" --port "${port[$name]}" --dir "$work/$name" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "${port[$name]}" "prefixd-server ($name)"
}
start_redis() {  # name flags...
  local name=$1
  shift
  port[$name]=$(free_port)
  mkdir -p "$work/$name"
  (cd "$work/$name" && exec redis-server --port "${port[$name]}" --bind 127.0.0.1 "$@" \
    >"$work/$name.log" 2>&1) &
  pids+=($!)
  wait_ready "${port[$name]}" "redis-server ($name)"
}

# Defaults, for the small rows: only the port, the data folder and (for redis-server, which
# listens on every interface by default) loopback are set. Two variants of prefixd's defaults.
start_prefixd prefixd
start_redis redis
start_redis redis_aof --appendonly yes --appendfsync everysec
start_prefixd prefixd_noaof --appendonly no
# Persistence off on both, for the blob and LMCache rows.
start_prefixd prefixd_mem --appendonly no
start_redis redis_mem --save '' --appendonly no --proto-max-bulk-len 1gb
prefixd_threads=$(timeout 5 redis-cli -p "${port[prefixd]}" INFO server |
  awk -F: '/^io_threads_active:/ { print $2 + 0 }')

results=$work/results.tsv  # kind  row  server  rep  value  p50  p99
: >"$results"
elapsed() { printf '%ds' $((SECONDS - start_seconds)); }
start_seconds=$SECONDS
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# --- small pipelined ops: one redis-benchmark run of every test per server per rep -------------
small() {  # server rep
  local server=$1 rep=$2
  # CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",...
  timeout 300 redis-benchmark -p "${port[$server]}" -t "$small_tests" -P 16 -c 50 \
    -n "$small_requests" --csv 2>/dev/null | tail -n +2 | tr -d '"' |
    awk -F, -v s="$server" -v rep="$rep" \
      '{ printf "small\t%s\t%s\t%s\t%s\t%s\t%s\n", $1, s, rep, $2, $5, $7 }' >>"$results"
}
for rep in $(seq 1 "$reps"); do
  order=(prefixd redis redis_aof prefixd_noaof)
  ((rep % 2)) || order=(redis prefixd prefixd_noaof redis_aof)  # who goes first alternates
  for server in "${order[@]}"; do small "$server" "$rep"; done
  echo "small ops rep $rep done ($(elapsed))" >&2
done

# --- SET/GET of large values ---------------------------------------------------------------
for rep in $(seq 1 "$reps"); do
  for mb in "${blob_sizes[@]}"; do
    for clients in "${blob_clients[@]}"; do
      for server in prefixd_mem redis_mem; do
        timeout 120 "$bench_bin" --mode strings --port "${port[$server]}" --size "${mb}m" \
          --clients "$clients" --requests "${blob_requests[$mb]}" --seconds 30 |
          jq -r --arg s "$server" --arg rep "$rep" '
            if .verified != true then error("\($s) returned wrong bytes") else . end |
            ["blob", "\(if .op == "store" then "SET" else "GET" end) \(.size / 1048576) MiB|\(.clients)",
             $s, $rep, .gb_per_s, .p50_ms, .p99_ms] | @tsv' >>"$results"
      done
    done
  done
  echo "blobs rep $rep done ($(elapsed))" >&2
done

# --- LMCache-shaped chunk cycles -------------------------------------------------------------
for rep in $(seq 1 "$reps"); do
  for server in prefixd_mem redis_mem; do
    timeout 180 "$bench_bin" --mode lmcache --port "${port[$server]}" --size 4m \
      --clients "$lmcache_workers" --chunks "$lmcache_chunks" --requests "$lmcache_cycles" \
      --seconds 60 |
      jq -r --arg s "$server" --arg rep "$rep" '
        if .verified != true then error("\($s) returned wrong bytes") else . end |
        ["lmcache", "cycles", $s, $rep, .ops_per_s, .p50_ms, .p99_ms],
        ["lmcache", "gbps", $s, $rep, .gb_per_s, 0, 0] | @tsv' >>"$results"
  done
  echo "lmcache rep $rep done ($(elapsed))" >&2
done

# --- tables --------------------------------------------------------------------------------------
median() { bench_median "$results" "$@"; }
kilo() { awk -v v="$1" 'BEGIN { printf "%.0f", v / 1000 }'; }
latency() {  # kind row server: "p50 / p99" medians
  echo "$(bench_fmt "$(median "$1" "$2" "$3" 6)" %.2f) / $(bench_fmt "$(median "$1" "$2" "$3" 7)" %.2f)"
}
table=$work/table.md
{
  echo "| redis-benchmark -P 16 -c 50, defaults | prefixd kops/s | redis kops/s |" \
    "prefixd/redis | prefixd p50 / p99 ms | redis p50 / p99 ms |" \
    "prefixd / redis --appendonly yes | prefixd --appendonly no / redis |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '$1 == "small" && !seen[$2]++ { print $2 }' "$results" |
    while IFS= read -r row; do
      p=$(median small "$row" prefixd 5)
      r=$(median small "$row" redis 5)
      echo "| $row | $(kilo "$p") | $(kilo "$r") | **$(bench_ratio "$p" "$r")** |" \
        "$(latency small "$row" prefixd) | $(latency small "$row" redis) |" \
        "$(bench_ratio "$p" "$(median small "$row" redis_aof 5)") |" \
        "$(bench_ratio "$(median small "$row" prefixd_noaof 5)" "$r") |"
    done
  echo
  echo "| SET / GET | clients | prefixd GB/s | redis GB/s | prefixd/redis |" \
    "prefixd p50 / p99 ms | redis p50 / p99 ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '$1 == "blob" && !seen[$2]++ { print $2 }' "$results" |
    while IFS='|' read -r op_size clients; do
      p=$(median blob "$op_size|$clients" prefixd_mem 5)
      r=$(median blob "$op_size|$clients" redis_mem 5)
      echo "| $op_size | $clients | $(bench_fmt "$p" %.2f) | $(bench_fmt "$r" %.2f) |" \
        "**$(bench_ratio "$p" "$r")** | $(latency blob "$op_size|$clients" prefixd_mem) |" \
        "$(latency blob "$op_size|$clients" redis_mem) |"
    done
  echo
  echo "| LMCache-shaped, $lmcache_workers workers, 4 MiB chunks | prefixd | redis |" \
    "prefixd/redis |"
  echo "|---|---:|---:|---:|"
  p=$(median lmcache cycles prefixd_mem 5)
  r=$(median lmcache cycles redis_mem 5)
  echo "| chunk cycles/s | $(bench_fmt "$p" %.0f) | $(bench_fmt "$r" %.0f) |" \
    "**$(bench_ratio "$p" "$r")** |"
  echo "| chunk GB/s (stored + loaded) | $(bench_fmt "$(median lmcache gbps prefixd_mem 5)" %.2f) |" \
    "$(bench_fmt "$(median lmcache gbps redis_mem 5)" %.2f) | |"
  echo "| cycle p50 / p99 ms | $(latency lmcache cycles prefixd_mem) |" \
    "$(latency lmcache cycles redis_mem) | |"
} >"$table"

bench_show_table "$table"

# --- docs/benchmarks.md --------------------------------------------------------------------------
((write_doc)) || exit 0
section=$work/section.md
{
  echo "## Strings: prefixd vs redis-server"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Machine: $(bench_machine)"
  echo "- Server: \`${server_bin#"$repo"/}\`, working tree at $commit;" \
    "$(redis-server --version | cut -d' ' -f1-3)"
  echo "- Command: \`$command_line\` (medians of $reps alternating runs; took $(elapsed))"
  echo "- Load average before / after: $load_before / $(cut -d' ' -f1-3 /proc/loadavg)" \
    "(anything above ~1 means other work shared the cores with both servers)"
  echo "- Small rows: \`redis-benchmark -t $small_tests -P 16 -c 50 -n $small_requests\` on the" \
    "same $(nproc) CPUs as the server; both servers on their defaults (prefixd: appendonly yes," \
    "everysec, $prefixd_threads io threads here; redis-server: no config file, built-in save" \
    "points, appendonly no). The servers alternate, each going first in half of the reps." \
    "The last two columns compare at equal durability: prefixd's defaults against redis-server" \
    "with the same log (\`--appendonly yes --appendfsync everysec\`, a run of its own), and" \
    "prefixd \`--appendonly no\` against the same redis-server runs as the main column."
  echo "- SET / GET rows: \`prefixd-blob-bench --mode strings\`," \
    "${blob_requests[1]}/${blob_requests[4]}/${blob_requests[16]}/${blob_requests[64]} requests" \
    "of 1/4/16/64 MiB per phase split over the clients, each client on its own key; GB/s is" \
    "payload (10^9 B) per second; the first and last GET of each client checked byte for byte."
  echo "- LMCache row: \`prefixd-blob-bench --mode lmcache --size 4m --clients $lmcache_workers" \
    "--chunks $lmcache_chunks --requests $lmcache_cycles\`: each worker (a thread with its own" \
    "connection, as a pooled redis-py connection) cycles over $lmcache_chunks keys" \
    "\`meta-llama/Llama-3.1-8B-Instruct@$lmcache_workers@<worker>@<chunk hash hex>@bfloat16\` + \`kv_bytes\` /" \
    "\`metadata\`: SET kv_bytes (4 MiB), SET metadata (28 B), EXISTS metadata, GET metadata," \
    "GET kv_bytes; every reply checked, the chunk byte for byte on each worker's first and last" \
    "cycle. Each key is written once before the timed cycles, so every timed SET replaces a value."
  echo "- SET / GET and LMCache rows with persistence off on both (prefixd \`--appendonly no\`;" \
    "redis-server \`--save '' --appendonly no --proto-max-bulk-len 1gb\`)."
  echo
  cat "$table"
  echo
} >"$section"
bench_write_section "$repo/docs/benchmarks.md" "Strings: prefixd vs redis-server" "$section"
echo "wrote the tables to docs/benchmarks.md" >&2
