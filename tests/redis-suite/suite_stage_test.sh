#!/usr/bin/env bash
# Checks how scripts/redis-suite.sh ends, with a stand-in for the suite's runtest: under CI=true a
# missing suite or tclsh fails the stage (a developer's run skips it with exit 0), and a harness
# that exits non-zero after some passes without an [err] line fails it too.
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
cat >"$work/suite/runtest" <<'EOF'
#!/usr/bin/env bash
echo "[ok]: a test that passed (1 ms)"
exit "${STUB_RC:-0}"
EOF
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
  expect zero "unit/quit                   1      0      0  ok" "a harness that passes" -- \
    REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" STUB_RC=0
  expect nonzero "harness failed" "a harness that exits 1 after a pass, no [err]" -- \
    REDIS_SUITE="$work/suite" PREFIXD_SERVER="$server" STUB_RC=1
else
  echo "skipped the harness cases: tclsh or redis-cli is not installed"
fi
exit $((failures > 0))
