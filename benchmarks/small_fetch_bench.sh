#!/usr/bin/env bash
# Small reads of prefix state against GET of the same bytes, on one prefixd-server in one run:
# SSM.PREFIX.FETCH of a 3-byte layer and MFETCH of one and of two against GET and MGET of 3-byte
# strings (MFETCH of one also against MGET of one key: the same reply, an array of one bulk, which
# costs the client on the same two cores more to parse than GET's bare bulk), V.FETCH RANGE of
# one 4-byte row against GET of 4 bytes, KV.PREFIX.BFETCH of one block (8 bytes) against GET of 8
# bytes, and against GET of 8 bytes under a key long enough that the two requests are the same
# size (72 bytes). Each row is redis-benchmark -P 16 -c 50 -n N; the rows of a pair run back to
# back, every pair --reps times (default 5) in turn, and the table shows the median requests per
# second and server CPU per request of each, and the state read's ratios to its GET (issue 34
# asks for requests/s >= 1.00x; CPU per request is the steadier figure), with the ratio of the
# client's CPU per request (redis-benchmark shares the two cores: a reply that costs it more
# lowers requests/s without costing the server anything). The first row is a
# control: GET against the same GET, so the spread of a ratio that cannot differ is printed
# beside the others; each row also shows the lowest and highest of its per-pair ratios (one per
# rep), the run-to-run spread a ratio lies within.
#
#   benchmarks/small_fetch_bench.sh [--server BIN] [--requests N] [--reps N] [--pin] [--instructions]
#
# BIN defaults to build/release/prefixd-server (scripts/build-release.sh builds it). Loopback only;
# the server runs with --appendonly no and one io thread, as the wire table's small rows do.
# --pin: the server runs on the last CPU and redis-benchmark on the others (taskset), so that
# neither is moved onto the other's core mid-run; on two cores the server then has one to itself.
# --instructions: instead, the server runs under valgrind's callgrind, counting the user-space
# instructions of its connection coroutine (as benchmarks/instructions_per_request.sh counts
# them) for one run of each row (default 50,000 requests): the steadiest figure, which hardly
# moves between runs. Needs valgrind.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server=$repo/build/release/prefixd-server
requests=300000
reps=5
instructions=0
pin=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --instructions) instructions=1; shift ;;
    --pin) pin=1; shift ;;
    --server) server=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x $server ]] || { echo "no server binary at $server" >&2; exit 2; }
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is not installed" >&2; exit 2; }
if [[ $instructions == 1 ]]; then
  command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
  [[ $requests == 300000 ]] && requests=50000
fi
source "$repo/benchmarks/bench_lib.sh" small-fetch

port=$(free_port)
under=()
[[ $instructions == 1 ]] && under=(valgrind --tool=callgrind --callgrind-out-file="$work/callgrind"
  --collect-atstart=no --toggle-collect='*Connection*::Process*')
server_cpus=() client_cpus=()
if [[ $pin == 1 ]]; then
  last=$(($(nproc) - 1))
  [[ $last -ge 1 ]] || { echo "--pin needs two CPUs" >&2; exit 2; }
  server_cpus=(taskset -c "$last") client_cpus=(taskset -c "0-$((last - 1))")
fi
"${server_cpus[@]}" "${under[@]}" "$server" --port "$port" --dir "$work" --appendonly no --io-threads 1 \
  --loglevel warning >"$work/server.log" 2>&1 &
pids+=($!)
wait_ready "$port" prefixd-server

cli() { redis-cli -p "$port" "$@" >/dev/null; }
# The values: strings of 3, 4 and 8 bytes; a two-layer session of 3-byte layers (small: it lives
# in its keyspace entry); a V-store row of one fp32 value; a prefix-index block of one token with
# KVDIM 1 (its K and V rows, 8 bytes as fp32). Hashes are 16 bytes without a NUL, as
# redis-benchmark passes arguments as C strings.
cli SET s3 abc
cli SET s3b abc
cli SET s4 abcd
cli SET s8 abcdefgh
# The same 8 bytes under a 52-byte key: a GET request as long as BFETCH's (72 bytes; before
# d3786cb, 16 of them passed the connection's 1 KiB input buffer and cost a second read).
long_key=$(printf 'k%.0s' $(seq 1 52))
cli SET "$long_key" abcdefgh
cli SSM.PREFIX.MSTORE sess 0 abc 1 abc
cli V.CREATE rows 1 VQUANT fp32
printf 'abcd' | redis-cli -p "$port" -x V.STOREBATCH rows 0 0 1 >/dev/null
cli KV.PREFIX.NAMESPACE ns BLOCK 1 ATTN 1 KVDIM 1 RECURRENT 1 VQUANT fp32
# The parent of a first block is h_0, 16 NUL bytes, which no command-line argument can hold.
/usr/bin/python3 - "$port" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
args = [b"KV.PREFIX.BSTORE", b"ns", b"\0" * 16, b"1", b"abcdefghijklmnop", b"0", b"abcdefgh"]
s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
reply = s.recv(64)
if reply != b":1\r\n":
    sys.exit("BSTORE answered %r" % reply)
EOF
[[ $(redis-cli -p "$port" KV.PREFIX.BFETCH ns 1 abcdefghijklmnop 0) == abcdefgh ]] ||
  { echo "BFETCH does not return the stored rows" >&2; exit 1; }

server_pid=${pids[0]}
# One run: "<requests per second>\t<server CPU ns per request>\t<client CPU ns per request>"
# (the server's threads' schedstat around the run: steadier than throughput where
# redis-benchmark shares the two cores; the client's user and system time).
rps() {  # command words...
  local before after rate client
  before=$(cpu_ns "$server_pid")
  { TIMEFORMAT='%3U %3S'; time "${client_cpus[@]}" redis-benchmark -p "$port" -P 16 -c 50 -n "$requests" -q "$@" \
      >"$work/run.out" 2>&1; } 2>"$work/run.time"
  after=$(cpu_ns "$server_pid")
  rate=$(tr '\r' '\n' <"$work/run.out" |
    awk '/requests per second/ { for (i = 2; i <= NF; i++) if ($i == "requests") v = $(i - 1) }
         END { print v }')
  client=$(awk -v n="$requests" '{ printf "%.0f", ($1 + $2) * 1e9 / n }' "$work/run.time")
  printf '%s\t%s\t%s' "$rate" $(((after - before) / requests)) "$client"
}
rows=(
  "GET s4|GET s4"
  "SSM.PREFIX.FETCH sess 0|GET s3"
  "SSM.PREFIX.MFETCH sess 0|GET s3"
  "SSM.PREFIX.MFETCH sess 0|MGET s3"
  "SSM.PREFIX.MFETCH sess 0 1|MGET s3 s3b"
  "V.FETCH rows 0 RANGE 0 1|GET s4"
  "KV.PREFIX.BFETCH ns 1 abcdefghijklmnop 0|GET s8"
  "KV.PREFIX.BFETCH ns 1 abcdefghijklmnop 0|GET $long_key"
)

if [[ $instructions == 1 ]]; then
  # Instructions per request of one run: the counters zeroed before it and dumped after it.
  count() {  # command words...
    local dump
    callgrind_control -z "$server_pid" >/dev/null 2>&1
    redis-benchmark -p "$port" -P 16 -c 50 -n "$requests" -q "$@" >/dev/null 2>&1
    callgrind_control -d "$server_pid" >/dev/null 2>&1
    dump=$(ls -t "$work"/callgrind.* | head -1)
    callgrind_annotate "$dump" 2>/dev/null |
      awk -v n="$requests" '/PROGRAM TOTALS/ { gsub(",", "", $1); printf "%.0f", $1 / n }'
    rm -f "$dump"
  }
  echo "| state read | instructions/request | string read | instructions/request | ratio |"
  echo "|---|---:|---|---:|---:|"
  for row in "${rows[@]}"; do
    state=${row%%|*} string=${row#*|}
    # shellcheck disable=SC2086 # the words of a command
    a=$(count $state) b=$(count $string)
    printf '| `%s` | %s | `%s` | %s | %s |\n' "$state" "$a" "$string" "$b" "$(bench_ratio "$a" "$b")"
  done
  echo
  echo "callgrind, connection coroutine, one run of each row; redis-benchmark -P 16 -c 50 -n $requests"
  exit 0
fi
results=$work/results
for rep in $(seq 1 "$reps"); do
  for row in "${rows[@]}"; do
    state=${row%%|*} string=${row#*|}
    # shellcheck disable=SC2086 # the words of a command
    printf '%s\t%s\t%s\n' "$row" state "$(rps $state)" >>"$results"
    # shellcheck disable=SC2086
    printf '%s\t%s\t%s\n' "$row" string "$(rps $string)" >>"$results"
  done
done
median() {  # row side column (3: requests/s, 4: server CPU ns per request, 5: client's)
  awk -F'\t' -v r="$1" -v s="$2" -v c="$3" '$1 == r && $2 == s { print $c }' "$results" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# The lowest and highest per-pair ratio of a row (state over string, rep by rep).
spread() {  # row column
  awk -F'\t' -v r="$1" -v c="$2" '$1 == r && $2 == "state" { a[++n] = $c }
    $1 == r && $2 == "string" { b[++m] = $c }
    END { for (i = 1; i <= n; i++) { q = a[i] / b[i]; if (i == 1 || q < lo) lo = q; if (i == 1 || q > hi) hi = q }
          printf "%.2f–%.2f", lo, hi }' "$results"
}
echo "| state read | requests/s | CPU ns/req | string read | requests/s | CPU ns/req | ratio: requests/s (spread) | ratio: CPU per request (spread) | ratio: client CPU per request (spread) |"
echo "|---|---:|---:|---|---:|---:|---:|---:|---:|"
for row in "${rows[@]}"; do
  a=$(median "$row" state 3) b=$(median "$row" string 3)
  ca=$(median "$row" state 4) cb=$(median "$row" string 4)
  ka=$(median "$row" state 5) kb=$(median "$row" string 5)
  printf '| `%s` | %.0f | %.0f | `%s` | %.0f | %.0f | %s (%s) | %s (%s) | %s (%s) |\n' "${row%%|*}" \
    "$a" "$ca" "${row#*|}" "$b" "$cb" "$(bench_ratio "$a" "$b")" "$(spread "$row" 3)" \
    "$(bench_ratio "$ca" "$cb")" "$(spread "$row" 4)" "$(bench_ratio "$ka" "$kb")" "$(spread "$row" 5)"
done
echo
echo "$reps runs of each row, median, and in brackets the lowest and highest ratio of one run's pair;"
echo "the first row is GET against itself (the spread of a ratio that cannot differ);"
echo "redis-benchmark -P 16 -c 50 -n $requests$([[ $pin == 1 ]] && echo ", pinned: server on CPU $last, client on the rest"); $(bench_machine)"
