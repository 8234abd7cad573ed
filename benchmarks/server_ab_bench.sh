#!/usr/bin/env bash
# Two prefixd-server binaries side by side (an old and a new build, say), both running at once,
# each command's redis-benchmark runs alternating between them: A, B, A, B... --reps times, so
# that the machine's drift falls on both alike. Prints, per command, the median requests per
# second and server CPU per request (all its threads' schedstat around each run) of A and B, and
# B's ratios to A with the lowest and highest of the per-pair ratios (one per rep). Each server
# runs with --appendonly no and one io thread; run it twice with A and B swapped to see what the
# order does.
#
#   benchmarks/server_ab_bench.sh A_BIN B_BIN [--reps N] [--requests N] [--pin] [--command 'WORDS']...
#
# --pin: both servers run on the last CPU and redis-benchmark on the others (taskset).
#
# Commands default to GET of a 3-byte string, MFETCH of a 3-byte layer, and GET of 8 bytes under
# a 52-byte key (16 pipelined requests of 72 bytes: past the connection's 1 KiB input array).
# Every row is redis-benchmark -P 16 -c 50 -n N (default 500,000); loopback only.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 A_BIN B_BIN [--reps N] [--requests N] [--command 'WORDS']..." >&2; exit 2; }
binaries=("$1" "$2")
shift 2
reps=5
requests=500000
commands=()
pin=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --command) commands+=("$2"); shift 2 ;;
    --pin) pin=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for bin in "${binaries[@]}"; do [[ -x $bin ]] || { echo "no server binary at $bin" >&2; exit 2; }; done
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is not installed" >&2; exit 2; }
source "$repo/benchmarks/bench_lib.sh" server-ab

long_key=$(printf 'k%.0s' $(seq 1 52))
[[ ${#commands[@]} -gt 0 ]] || commands=("GET s3" "SSM.PREFIX.MFETCH sess 0" "GET $long_key")
server_cpus=() client_cpus=()
if [[ $pin == 1 ]]; then
  last=$(($(nproc) - 1))
  [[ $last -ge 1 ]] || { echo "--pin needs two CPUs" >&2; exit 2; }
  server_cpus=(taskset -c "$last") client_cpus=(taskset -c "0-$((last - 1))")
fi
ports=()
for side in 0 1; do
  port=$(free_port)
  mkdir -p "$work/$side"
  "${server_cpus[@]}" "${binaries[$side]}" --port "$port" --dir "$work/$side" --appendonly no --io-threads 1 \
    --loglevel warning >"$work/$side/server.log" 2>&1 &
  pids+=($!)
  ports+=("$port")
  wait_ready "$port" "server $side"
  redis-cli -p "$port" SET s3 abc >/dev/null
  redis-cli -p "$port" SET "$long_key" abcdefgh >/dev/null
  redis-cli -p "$port" SSM.PREFIX.MSTORE sess 0 abc 1 abc >/dev/null
done

results=$work/results
for command in "${commands[@]}"; do
  for rep in $(seq 1 "$reps"); do
    for side in 0 1; do
      before=$(cpu_ns "${pids[$side]}")
      # shellcheck disable=SC2086 # the words of a command
      rate=$("${client_cpus[@]}" redis-benchmark -p "${ports[$side]}" -P 16 -c 50 -n "$requests" -q $command 2>&1 |
        tr '\r' '\n' |
        awk '/requests per second/ { for (i = 2; i <= NF; i++) if ($i == "requests") v = $(i - 1) }
             END { print v }')
      after=$(cpu_ns "${pids[$side]}")
      printf '%s\t%s\t%s\t%s\t%s\n' "$command" "$side" "$rep" "$rate" \
        $(((after - before) / requests)) >>"$results"
    done
  done
done

median() {  # command side column (4: requests/s, 5: CPU ns per request)
  awk -F'\t' -v r="$1" -v s="$2" -v c="$3" '$1 == r && $2 == s { print $c }' "$results" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
spread() {  # command column: the lowest and highest of B/A, rep by rep
  awk -F'\t' -v r="$1" -v c="$2" '$1 == r && $2 == 0 { a[$3] = $c } $1 == r && $2 == 1 { b[$3] = $c }
    END { n = 0; for (k in a) { q = b[k] / a[k]; if (n++ == 0 || q < lo) lo = q; if (n == 1 || q > hi) hi = q }
          printf "%.2f–%.2f", lo, hi }' "$results"
}
echo "| command | A requests/s | A CPU ns/req | B requests/s | B CPU ns/req | B/A requests/s (spread) | B/A CPU per request (spread) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for command in "${commands[@]}"; do
  ra=$(median "$command" 0 4) rb=$(median "$command" 1 4)
  ca=$(median "$command" 0 5) cb=$(median "$command" 1 5)
  printf '| `%.40s` | %.0f | %.0f | %.0f | %.0f | %s (%s) | %s (%s) |\n' "$command" "$ra" "$ca" "$rb" \
    "$cb" "$(bench_ratio "$rb" "$ra")" "$(spread "$command" 4)" "$(bench_ratio "$cb" "$ca")" \
    "$(spread "$command" 5)"
done
echo
echo "A: ${binaries[0]}; B: ${binaries[1]}; $reps alternating runs of each, median;"
echo "redis-benchmark -P 16 -c 50 -n $requests$([[ $pin == 1 ]] && echo ", pinned: servers on CPU $last, client on the rest"); $(bench_machine)"
