#!/usr/bin/env bash
# Checks how scripts/redis-suite.sh ends, with a stand-in for the suite's runtest: under CI=true a
# missing suite or tclsh fails the stage (a developer's run skips it with exit 0), a harness
# that exits non-zero after some passes without an [err] line fails it too, and so does a listed
# out-of-scope test that fails for another reason than its listed one, or is skipped while the
# command it is listed as needing exists.
# Usage: tests/redis-suite/suite_stage_test.sh <prefixd-server>
set -u

repo="$(cd "$(dirname "$0")/../.." && pwd)"
script="$repo/scripts/redis-suite.sh"
server="${1:?usage: $0 <prefixd-server>}"
work="$(mktemp -d /tmp/prefixd-suite-stage.XXXXXX)"
trap 'rm -rf "$work"' EXIT
failures=0

# A suite whose runtest prints one passed test and exits with $STUB_RC.
mkdir -p "$work/suite" "$work/bin"
# With $STUB_ERR, a failed test follows it, its error the text of $STUB_ERR.
cat >"$work/suite/runtest" <<'EOF'
#!/usr/bin/env bash
echo "[ok]: a test that passed (1 ms)"
if [ -n "${STUB_ERR:-}" ]; then
  echo "[err]: a listed test in tests/unit/quit.tcl"
  echo "$STUB_ERR"
fi
exit "${STUB_RC:-0}"
EOF
# Out-of-scope lists: the failed test listed with its reason's error text, and a skipped test
# whose command the server has (so its reason does not hold).
printf '%s\t%s\t%s\t%s\n' unit/quit "a listed test" "needs FROB" "error:unknown command 'frob'" \
  >"$work/listed.tsv"
# The same listed test with two texts, either of which shows its reason (two clients racing).
printf '%s\t%s\t%s\t%s\n' unit/quit "a listed test" "needs FROB" \
  "error:unknown command 'frob' || NOGROUP No such key" >"$work/either.tsv"
printf '%s\t%s\t%s\t%s\t%s\n' unit/quit "a skipped test" "needs GET" command:GET skip \
  >"$work/skipped.tsv"
chmod +x "$work/suite/runtest"
# A PATH without tclsh: only what the script runs before it looks for tclsh.
for tool in dirname git; do ln -s "$(command -v "$tool")" "$work/bin/$tool"; done

# expect <rc: zero|nonzero> <text the output must hold> <description> -- env assignments...
expect() {
  local want="$1" text="$2" what="$3"
  shift 4
  local out rc
  out="$(env -u CI "$@" /bin/bash "$script" unit/quit 2>&1)"
  rc=$?
  if { [ "$want" = zero ] && [ "$rc" -ne 0 ]; } || { [ "$want" = nonzero ] && [ "$rc" -eq 0 ]; } ||
    ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: $what: exit $rc, want $want and \"$text\"; output:"
    sed 's/^/    /' <<<"$out"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

expect nonzero "FAILED: Redis 7.0.15's test suite is not at" "CI=true, no suite" -- \
  CI=true REDIS_SUITE="$work/nosuite" PREFIXD_SERVER="$server"
expect zero "skipped: Redis 7.0.15's test suite is not at" "no suite" -- \
  REDIS_SUITE="$work/nosuite" PREFIXD_SERVER="$server"
expect nonzero "FAILED: tclsh is not installed" "CI=true, no tclsh" -- \
  CI=true REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" PATH="$work/bin"
expect zero "skipped: tclsh is not installed" "no tclsh" -- \
  REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" PATH="$work/bin"
if command -v tclsh >/dev/null && command -v redis-cli >/dev/null; then
  expect zero "$(printf '%-24s %6s %6s %6s  %s' unit/quit 1 0 0 ok)" "a harness that passes" -- \
    REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" STUB_RC=0
  expect zero "$(printf '%-24s %6s %6s %6s  %s' unit/quit 1 1 0 failures)" \
    "a listed test failing for its reason" -- REDIS_SUITE="$work/suite" \
    PREFIXD_SERVER="$server" REDIS_SUITE_OUT_OF_SCOPE="$work/listed.tsv" \
    STUB_ERR="ERR unknown command 'frob', with args beginning with: 'x'"
  expect nonzero "fails for another reason than listed: a listed test" \
    "a listed test failing for another reason" -- REDIS_SUITE="$work/suite" \
    PREFIXD_SERVER="$server" REDIS_SUITE_OUT_OF_SCOPE="$work/listed.tsv" \
    STUB_ERR="Expected '1' to be equal to '2'"
  expect zero "$(printf '%-24s %6s %6s %6s  %s' unit/quit 1 1 0 failures)" \
    "a listed test failing for the second of its two texts" -- REDIS_SUITE="$work/suite" \
    PREFIXD_SERVER="$server" REDIS_SUITE_OUT_OF_SCOPE="$work/either.tsv" \
    STUB_ERR="NOGROUP No such key 'mystream' or consumer group 'mygroup'"
  expect nonzero "fails for another reason than listed: a listed test" \
    "a listed test failing for neither of its two texts" -- REDIS_SUITE="$work/suite" \
    PREFIXD_SERVER="$server" REDIS_SUITE_OUT_OF_SCOPE="$work/either.tsv" \
    STUB_ERR="Expected '1' to be equal to '2'"
  expect nonzero "unexpected failure: a listed test" "a failure not listed" -- \
    REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" \
    REDIS_SUITE_OUT_OF_SCOPE="$work/skipped.tsv" STUB_ERR="ERR unknown command 'frob'"
  expect nonzero "skipped, but its evidence does not hold now: a skipped test" \
    "a skipped test whose command exists" -- REDIS_SUITE="$work/suite" \
    PREFIXD_SERVER="$server" REDIS_SUITE_OUT_OF_SCOPE="$work/skipped.tsv"
  expect nonzero "harness failed" "a harness that exits 1 after a pass, no [err]" -- \
    REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" STUB_RC=1
else
  echo "skipped the harness cases: tclsh or redis-cli is not installed"
fi
exit $((failures > 0))
