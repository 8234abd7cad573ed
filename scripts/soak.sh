#!/usr/bin/env bash
# Soaks crash recovery: runs the SIGKILL crash-loop test (DurabilityCrashTest in
# tests/integration/persistence_test.cc) for many rounds against the built server. Every round
# kills the server under four concurrent writers and checks that every acknowledged write came
# back bit for bit after the restart.
# Usage: scripts/soak.sh [ROUNDS] (default 500). Uses the build in $PREFIXD_BUILD_DIR, else
# build/dev, else build; build it first (cmake --preset dev && cmake --build --preset dev).
# PREFIXD_CRASH_SEED repeats a failing run (its seed is printed first). Exits non-zero on failure.
set -euo pipefail

rounds="${1:-500}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! [[ "${rounds}" =~ ^[0-9]+$ ]] || [[ "${rounds}" -eq 0 ]]; then
  echo "usage: $0 [ROUNDS]   (ROUNDS: a positive number, default 500)" >&2
  exit 2
fi

build=""
for candidate in ${PREFIXD_BUILD_DIR:+"${PREFIXD_BUILD_DIR}"} "${root}/build/dev" "${root}/build"; do
  if [[ -x "${candidate}/tests/persistence_test" && -x "${candidate}/prefixd-server" ]]; then
    build="${candidate}"
    break
  fi
done
if [[ -z "${build}" ]]; then
  echo "no build with tests/persistence_test and prefixd-server in" \
    "${PREFIXD_BUILD_DIR:-build/dev or build}; build first:" \
    "cmake --preset dev && cmake --build --preset dev" >&2
  exit 2
fi

echo "=== crash loop: ${rounds} rounds, server ${build}/prefixd-server"
start=$(date +%s)
status=0
PREFIXD_CRASH_ROUNDS="${rounds}" PREFIXD_SERVER="${build}/prefixd-server" \
  "${build}/tests/persistence_test" --gtest_filter='DurabilityCrashTest.*' || status=$?
echo "=== $(( $(date +%s) - start )) s; $([[ ${status} -eq 0 ]] && echo passed || echo FAILED)"
exit "${status}"
