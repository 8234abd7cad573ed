#!/usr/bin/env bash
# Wire benchmark: prefixd-server against Debian's redis-server on loopback, in one run.
#
#   benchmarks/run_wire_bench.sh [--build-dir DIR] [--server BIN] [--quick] [--reps N] [--no-write]
#
# Rows:
#   - blobs: SSM.PREFIX.STORE/FETCH against SET/GET of 1, 16 and 64 MiB with 1 and 4 clients,
#     driven by prefixd-blob-bench (raw sockets, gather writes, verified replies);
#   - small pipelined ops: redis-benchmark -P 16 -c 50 PING_MBULK, and SSM.PREFIX.FETCH of a
#     3-byte blob against GET of a 3-byte value, for prefixd with --io-threads 1 and 2;
#   - the loopback TCP ceiling (prefixd-blob-bench --mode loopback, 1 and 4 streams).
# Servers run alternately (prefixd, redis, prefixd, redis, ...), each row repeated --reps times;
# the table shows medians and the prefixd/redis ratio. The table goes to stdout and, with the
# date, machine, commit and this command line, replaces the "Wire: prefixd vs redis-server"
# section of docs/benchmarks.md (other sections are left alone).
#
# --build-dir (default build) holds prefixd-server and prefixd-blob-bench; --server picks another
# prefixd-server binary (e.g. one built from a clean export of a commit). When prefixd knows
# --appendonly it runs with --appendonly no, as redis-server does here: neither side persists.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command_line="benchmarks/run_wire_bench.sh${*:+ $*}"
source "$repo/benchmarks/bench_lib.sh" wire-bench
bench_parse_options build "$@"

# Workload sizes: total requests per timed phase (split over the clients), per blob size.
declare -A blob_requests
if ((quick)); then
  blob_requests=([1]=128 [16]=16 [64]=8)
  small_requests=300000
  loopback_chunks=32
  ((reps > 1)) && reps=1
else
  blob_requests=([1]=512 [16]=64 [64]=24)
  small_requests=1000000
  loopback_chunks=128
fi
blob_sizes=(1 16 64)
blob_clients=(1 4)

prefixd_flags=(--loglevel warning)
if "$server_bin" --help 2>/dev/null | grep -q -- '--appendonly'; then
  prefixd_flags+=(--appendonly no)
fi

declare -A port
start_prefixd() {  # name extra-flags...
  local name=$1
  shift
  port[$name]=$(free_port)
  mkdir -p "$work/$name"
  "$server_bin" --port "${port[$name]}" --dir "$work/$name" "${prefixd_flags[@]}" "$@" \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "${port[$name]}" "prefixd-server ($name)"
}
start_redis() {
  port[redis]=$(free_port)
  (cd "$work" && exec redis-server --port "${port[redis]}" --bind 127.0.0.1 --save '' \
    --appendonly no --proto-max-bulk-len 1gb --loglevel warning >"$work/redis.log" 2>&1) &
  pids+=($!)
  wait_ready "${port[redis]}" redis-server
}

start_prefixd prefixd            # defaults: --io-threads 0, one network thread per core
start_prefixd prefixd_t1 --io-threads 1
start_prefixd prefixd_t2 --io-threads 2
start_redis

results=$work/results.tsv  # kind  row  server  rep  value  p50  p99
: >"$results"
elapsed() { printf '%ds' $((SECONDS - start_seconds)); }
start_seconds=$SECONDS
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# --- loopback ceiling and blobs -----------------------------------------------------------------
# The ceiling is measured once per rep, between the blob rows, so it sees the same load they do.
for rep in $(seq 1 "$reps"); do
  for streams in 1 4; do
    timeout 60 "$bench_bin" --mode loopback --size 16m --requests "$loopback_chunks" \
      --clients "$streams" |
      jq -r --arg rep "$rep" '["loopback", "\(.clients)", "loopback", $rep, .gb_per_s, 0, 0] | @tsv' \
        >>"$results"
  done
  for mb in "${blob_sizes[@]}"; do
    for clients in "${blob_clients[@]}"; do
      for server in prefixd redis; do
        mode=$([[ $server == redis ]] && echo redis || echo prefixd)
        timeout 120 "$bench_bin" --mode "$mode" --port "${port[$server]}" --size "${mb}m" \
          --clients "$clients" --requests "${blob_requests[$mb]}" |
          jq -r --arg s "$server" --arg rep "$rep" '
            if .verified != true then error("\($s) returned wrong bytes") else . end |
            ["blob", "\(.op) \(.size / 1048576) MB|\(.clients)", $s, $rep, .gb_per_s, .p50_ms,
             .p99_ms] | @tsv' >>"$results"
      done
    done
  done
  echo "blobs rep $rep done ($(elapsed))" >&2
done

# --- small pipelined ops -------------------------------------------------------------------------
timeout 5 redis-cli -p "${port[redis]}" SET k abc >/dev/null
for name in prefixd_t1 prefixd_t2; do
  timeout 5 redis-cli -p "${port[$name]}" SSM.PREFIX.STORE s 0 abc >/dev/null
done
small() {  # row server rep redis-benchmark-args...
  local row=$1 server=$2 rep=$3
  shift 3
  timeout 120 redis-benchmark -p "${port[$server]}" -P 16 -c 50 -n "$small_requests" --csv "$@" \
    2>/dev/null | tail -n 1 | tr -d '"' |
    awk -F, -v row="$row" -v s="$server" -v rep="$rep" \
      '{ printf "small\t%s\t%s\t%s\t%s\t%s\t%s\n", row, s, rep, $2, $5, $7 }' >>"$results"
}
for rep in $(seq 1 "$reps"); do
  for server in prefixd_t1 redis prefixd_t2 redis; do
    small "PING_MBULK" "$server" "$rep" -t ping_mbulk
  done
  small "FETCH 3 B / GET 3 B" prefixd_t1 "$rep" SSM.PREFIX.FETCH s 0
  small "FETCH 3 B / GET 3 B" redis "$rep" GET k
  small "FETCH 3 B / GET 3 B" prefixd_t2 "$rep" SSM.PREFIX.FETCH s 0
  small "FETCH 3 B / GET 3 B" redis "$rep" GET k
  echo "small ops rep $rep done ($(elapsed))" >&2
done

# --- table ---------------------------------------------------------------------------------------
# median KIND ROW SERVER COLUMN: the median over reps of column 5 (value), 6 (p50) or 7 (p99).
median() { bench_median "$results" "$@"; }
# best KIND ROW SERVER: the largest value over reps (the loopback ceiling is a best case).
best() {
  awk -F'\t' -v k="$1" -v r="$2" -v s="$3" '$1 == k && $2 == r && $3 == s { print $5 }' \
    "$results" | sort -g | tail -n 1
}
ratio() { bench_ratio "$@"; }
fmt() { bench_fmt "$@"; }
kilo() { awk -v v="$1" 'BEGIN { printf "%.0f", v / 1000 }'; }

loop1=$(best loopback 1 loopback)
loop4=$(best loopback 4 loopback)
table=$work/table.md
{
  echo "Loopback TCP ceiling (16 MiB send() and MSG_WAITALL recv() calls, no protocol; best of $reps, median in brackets):" \
    "**$(fmt "$loop1" %.2f) GB/s** ($(fmt "$(median loopback 1 loopback 5)" %.2f)) with 1 stream," \
    "**$(fmt "$loop4" %.2f) GB/s** ($(fmt "$(median loopback 4 loopback 5)" %.2f)) with 4 streams." \
    "\"of loopback\" compares each blob row with the ceiling for its client count."
  echo
  echo "| blobs | clients | prefixd GB/s | redis GB/s | prefixd/redis | of loopback |" \
    "prefixd p50 / p99 ms | redis p50 / p99 ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for op in store fetch; do
    for mb in "${blob_sizes[@]}"; do
      for clients in "${blob_clients[@]}"; do
        row="$op $mb MB|$clients"
        p=$(median blob "$row" prefixd 5)
        r=$(median blob "$row" redis 5)
        ceiling=$([[ $clients == 1 ]] && echo "$loop1" || echo "$loop4")
        echo "| $op $mb MiB | $clients | $(fmt "$p" %.2f) | $(fmt "$r" %.2f) | **$(ratio "$p" "$r")** |" \
          "$(awk -v a="$p" -v b="$ceiling" 'BEGIN { printf "%.0f%%", 100 * a / b }') |" \
          "$(fmt "$(median blob "$row" prefixd 6)" %.2f) / $(fmt "$(median blob "$row" prefixd 7)" %.2f) |" \
          "$(fmt "$(median blob "$row" redis 6)" %.2f) / $(fmt "$(median blob "$row" redis 7)" %.2f) |"
      done
    done
  done
  echo
  echo "| pipelined, -P 16, 50 clients | prefixd | prefixd kops/s | redis kops/s |" \
    "prefixd/redis | prefixd p50 / p99 ms | redis p50 / p99 ms |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  for row in "PING_MBULK" "FETCH 3 B / GET 3 B"; do
    r=$(median small "$row" redis 5)
    for name in prefixd_t1 prefixd_t2; do
      p=$(median small "$row" "$name" 5)
      echo "| $row | --io-threads ${name#prefixd_t} | $(kilo "$p") | $(kilo "$r") |" \
        "**$(ratio "$p" "$r")** |" \
        "$(median small "$row" "$name" 6) / $(median small "$row" "$name" 7) |" \
        "$(median small "$row" redis 6) / $(median small "$row" redis 7) |"
    done
  done
} >"$table"

bench_show_table "$table"

# --- docs/benchmarks.md --------------------------------------------------------------------------
((write_doc)) || exit 0
doc=$repo/docs/benchmarks.md
section=$work/section.md
{
  echo "## Wire: prefixd vs redis-server"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Machine: $(bench_machine)"
  echo "- Server: \`${server_bin#"$repo"/}\` \`${prefixd_flags[*]}\`, working tree at $commit;" \
    "$(redis-server --version | cut -d' ' -f1-3)"
  echo "- Command: \`$command_line\` (medians of $reps alternating runs; took $(elapsed))"
  echo "- Load average before / after: $load_before / $(cut -d' ' -f1-3 /proc/loadavg)" \
    "(anything above ~1 means other work shared the cores with both servers)"
  echo "- Blob rows: prefixd-blob-bench, ${blob_requests[1]}/${blob_requests[16]}/${blob_requests[64]}" \
    "requests of 1/16/64 MiB per phase split over the clients, each client on its own key;" \
    "GB/s is payload (10^9 B) per second; first and last fetch of each client checked byte for" \
    "byte. prefixd runs with its default --io-threads (one network thread per core)."
  echo "- Small rows: redis-benchmark -P 16 -c 50 -n $small_requests on the same $(nproc) CPUs as" \
    "the server, so partly client-bound; the same redis-server runs are compared with both prefixd" \
    "settings."
  echo
  cat "$table"
  echo
} >"$section"
bench_write_section "$doc" "Wire: prefixd vs redis-server" "$section"
echo "wrote the table to ${doc#"$repo"/}" >&2
