#!/usr/bin/env bash
# Runs units of Redis 7.0.15's own TCL test suite against a prefixd server and prints pass/fail
# counts per unit. The suite is a peer's (../shared/redis-7.0.15-tests next to the repository);
# nothing of it is copied here, and it is not a ctest test. docs/compatibility.md lists the tests
# that are out of scope and why.
#
# Usage: scripts/redis-suite.sh [unit/<name> ...]   (default: the units of every type prefixd
#        claims, and the protocol, keyspace, transaction and introspection units)
# Env:   PREFIXD_SERVER (default build/dev/prefixd-server), REDIS_SUITE (the suite's directory),
#        REDIS_SUITE_OUT_OF_SCOPE (the out-of-scope list; tests/redis-suite/suite_stage_test.sh
#        gives its own),
#        SUITE_TIMEOUT (seconds per unit, default 300), SUITE_BASEPORT (the harness's --baseport,
#        for runs side by side; default its own, 21111).
# Exits non-zero when a test fails that tests/redis-suite/out-of-scope.tsv does not list (each
# listed one needs a data type or feature prefixd does not implement), or fails for another reason
# than the one it is listed for (its evidence column: text its failure must show, or a command or
# setting the server must lack), on an exception, when a unit's harness exits non-zero with no
# failed test to show for it, or when the server stops answering; and, under CI=true, when the
# suite or tclsh is missing.
set -uo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
# Next to the repository; from a linked worktree, next to the main checkout.
main_checkout="$(cd "$repo" && cd "$(git rev-parse --git-common-dir 2>/dev/null || echo .git)/.." \
  2>/dev/null && pwd)"
suite="${REDIS_SUITE:-}"
for candidate in "$repo/../shared/redis-7.0.15-tests" "$main_checkout/../shared/redis-7.0.15-tests"; do
  if [ -z "$suite" ] && [ -x "$candidate/runtest" ]; then suite="$candidate"; fi
done
suite="${suite:-$repo/../shared/redis-7.0.15-tests}"
server="${PREFIXD_SERVER:-$repo/build/dev/prefixd-server}"
per_unit_timeout="${SUITE_TIMEOUT:-300}"

# The tests known to fail, each for a stated reason (docs/compatibility.md).
out_of_scope="${REDIS_SUITE_OUT_OF_SCOPE:-$repo/tests/redis-suite/out-of-scope.tsv}"
all_units=(unit/protocol unit/info-command unit/quit unit/type/string unit/type/incr unit/type/hash
  unit/type/list unit/type/set unit/type/zset unit/type/stream unit/type/stream-cgroups
  unit/keyspace unit/expire unit/multi
  unit/introspection unit/introspection-2 unit/info)

# Without the suite or tclsh a developer's run skips; under CI=true the stage fails instead, so a
# CI run cannot pass without having run the suite.
missing() {
  if [ "${CI:-}" = "true" ]; then
    echo "redis-suite: FAILED: $1 (CI=true needs it)" >&2
    exit 1
  fi
  echo "redis-suite: skipped: $1"
  exit 0
}
if [ ! -x "$suite/runtest" ]; then
  missing "Redis 7.0.15's test suite is not at $suite (set REDIS_SUITE)"
fi
if ! command -v tclsh >/dev/null; then
  missing "tclsh is not installed (scripts/install-deps.sh installs tcl)"
fi
if [ ! -x "$server" ]; then
  echo "redis-suite: $server is not built (cmake --build --preset dev --target prefixd-server)" >&2
  exit 2
fi

units=("$@")
[ ${#units[@]} -eq 0 ] && units=("${all_units[@]}")

work="$(mktemp -d /tmp/prefixd-redis-suite.XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port: bind port 0 and read what the kernel chose.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

# DEBUG is allowed (the harness uses a few of its subcommands); memory only, so the run leaves
# nothing behind.
"$server" --bind 127.0.0.1 --port "$port" --dir "$work/data" --appendonly no \
  --enable-debug-command yes --proto-max-bulk-len 512mb >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
  sleep 0.1
done
if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
  echo "redis-suite: prefixd did not start on port $port:" >&2
  cat "$work/server.log" >&2
  exit 2
fi

# The harness's own ports (its test server listens 32 below): a random base, so that two runs
# on one machine do not take the same one, below Linux's ephemeral range (32768 up), where a
# client's outgoing port may already hold it.
baseport="${SUITE_BASEPORT:-$((22000 + RANDOM % 10000))}"

# Whether a listed test's evidence holds: each of its items (separated by " ; ") does. An item is
# `error:TEXT` (TEXT is in the failure's own lines, `$2`; `error:A || B`: either), `command:NAME` (the server has no such
# command: COMMAND INFO answers nil), `setting:NAME` (CONFIG GET answers nothing) or
# `probe:WORDS => TEXT` (the command WORDS answers with TEXT: an option the server refuses). A
# test not run ("skip") can show no failure: its items must all be of the last three kinds.
evidence_holds() {
  local evidence="$1" detail="$2" item
  local -a items
  mapfile -t items < <(printf '%s\n' "$evidence" | sed 's/ ; /\n/g')
  for item in "${items[@]}"; do
    case "$item" in
      error:*)
        # error:TEXT || TEXT2: any one of the texts (a test whose two clients race shows either).
        [ -n "$detail" ] || return 1
        local text found=0
        local -a texts
        mapfile -t texts < <(printf '%s\n' "${item#error:}" | sed 's/ || /\n/g')
        for text in "${texts[@]}"; do grep -qF -- "$text" "$detail" && found=1; done
        ((found)) || return 1
        ;;
      command:*) [ -z "$(redis-cli -p "$port" command info "${item#command:}" 2>&1)" ] || return 1 ;;
      setting:*) [ -z "$(redis-cli -p "$port" config get "${item#setting:}" 2>&1)" ] || return 1 ;;
      probe:*)
        # probe:WORDS => TEXT: the command (words split on spaces) answers with TEXT in its reply.
        local probe="${item#probe:}"
        local -a words
        read -r -a words <<<"${probe%% => *}"
        timeout 5 redis-cli -p "$port" "${words[@]}" 2>&1 | grep -qF -- "${probe#* => }" || return 1
        ;;
      *) return 1 ;;
    esac
  done
  return 0
}

status=0
printf '%-24s %6s %6s %6s  %s\n' unit passed failed errors result
for unit in "${units[@]}"; do
  log="$work/$(echo "$unit" | tr / _).log"
  # Out-of-scope tests marked "skip" are not run: their failure would leave the shared connection
  # inside MULTI or RESP3 (a command prefixd lacks, sent between MULTI and EXEC or HELLO 3 and
  # HELLO 2) and fail every test after, or wait seconds for a client to block on a command
  # prefixd lacks. What they need must be missing on the server now.
  skips=()
  while IFS=$'\t' read -r skip_unit skip_name _ skip_evidence skip_flag; do
    if [ "$skip_unit" = "$unit" ] && [ "${skip_flag:-}" = "skip" ]; then
      skips+=(--skiptest "$skip_name")
      if [[ "$skip_evidence" == *error:* ]] || ! evidence_holds "$skip_evidence" ""; then
        echo "    skipped, but its evidence does not hold now: $skip_name ($skip_evidence)"
        status=1
      fi
    fi
  done < <(grep -v '^#' "$out_of_scope")
  (cd "$suite" && timeout "$per_unit_timeout" ./runtest --host 127.0.0.1 --port "$port" \
    --durable --clients 1 --tags -needs:debug --baseport "$baseport" "${skips[@]}" \
    --single "$unit") 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >"$log" # the suite colours its output even into a pipe
  rc=${PIPESTATUS[0]}
  cp "$log" "${SUITE_LOGS:-$work}/" 2>/dev/null || true
  passed=$(grep -c '^\[ok\]:' "$log")
  failed=$(grep -c '^\[err\]:' "$log")
  errors=$(grep -c '^\[exception\]:' "$log")
  result="ok"
  if [ "$rc" -eq 124 ]; then
    result="timed out"
  elif [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$errors" -eq 0 ] && [ "$rc" -ne 0 ]; then
    # The harness itself failed (its test server could not bind, tclsh broke): not a pass.
    result="harness failed"
    tail -5 "$log" | sed 's/^/    /'
    status=1
  elif [ "$failed" -gt 0 ] || [ "$errors" -gt 0 ]; then
    result="failures"
  elif [ "$rc" -ne 0 ]; then
    # The harness stopped after some passes without naming a failure: what was left did not run.
    result="harness failed"
    tail -5 "$log" | sed 's/^/    /'
    status=1
  elif [ "$passed" -eq 0 ] && grep -q '^\[ignore\]: Not supported on external server' "$log"; then
    # unit/info, for one, runs nothing against an external server: the harness says so.
    result="no tests ran"
  elif [ "$passed" -eq 0 ]; then
    # Nothing ran and the harness gave no reason (the server binary was being relinked, the
    # suite is broken): not a pass.
    result="nothing ran"
    status=1
  fi
  printf '%-24s %6s %6s %6s  %s\n' "$unit" "$passed" "$failed" "$errors" "$result"
  # Failures not listed as out of scope, or failing for another reason than their evidence, fail
  # the run; listed tests that now pass are reported. A failure's own lines run from its [err]
  # line to the next line the harness writes for a test.
  unexpected=0
  failures="$work/failures"
  rm -rf "$failures" && mkdir -p "$failures"
  awk -v dir="$failures" '
    /^\[(ok|err|ignore|skip|exception)\]:/ || /^\[[0-9]+\/[0-9]+ / { out = "" }
    /^\[err\]:/ { n++; out = dir "/" n; sub(/^\[err\]: /, ""); sub(/ in tests\/[^ ]*$/, "");
                  print > (dir "/" n ".name"); close(dir "/" n ".name"); next }
    out != "" { print >> out; close(out) }' "$log"
  for name_file in "$failures"/*.name; do
    [ -e "$name_file" ] || break
    name="$(cat "$name_file")"
    detail="${name_file%.name}"
    [ -e "$detail" ] || : >"$detail"
    row="$(awk -F'\t' -v u="$unit" -v n="$name" '$1 == u && $2 == n { print; exit }' \
      <(grep -v '^#' "$out_of_scope"))"
    if [ -z "$row" ]; then
      echo "    unexpected failure: $name"
      head -c 300 "$detail" | head -3 | sed 's/^/        /'
      unexpected=1
    elif ! evidence_holds "$(printf '%s' "$row" | cut -f4)" "$detail"; then
      echo "    fails for another reason than listed: $name (listed: $(printf '%s' "$row" | cut -f4))"
      head -c 300 "$detail" | head -3 | sed 's/^/        /'
      unexpected=1
    fi
  done
  while IFS= read -r name; do
    if grep -qxF "[ok]: $name" <(sed -E 's/ \([0-9]+ ms\)$//' "$log"); then
      echo "    listed as out of scope but passes now: $name"
    fi
  done < <(awk -F'\t' -v u="$unit" '$1 == u { print $2 }' "$out_of_scope")
  if [ "$unexpected" -ne 0 ] || [ "$errors" -gt 0 ] || [ "$result" = "timed out" ]; then
    grep -E '^\[exception\]:' "$log" | head -20 | sed 's/^/    /'
    status=1
  fi
  # A unit may have killed or wedged the server (SHUTDOWN, DEBUG): later units need it up.
  if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "redis-suite: the server stopped answering after $unit; its log:" >&2
    tail -20 "$work/server.log" >&2
    exit 1
  fi
done
exit "$status"
