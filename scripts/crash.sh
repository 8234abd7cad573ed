#!/usr/bin/env bash
# The full crash loop: the durability layer's crash test at every operation of its scripted
# workload (both tears), and a disk-full and an I/O error at every operation. ctest runs a
# bounded sample of the same points. Usage: scripts/crash.sh [build dir, default build/dev].
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${root}/build/dev}"
cmake --build "${build}" --target crash_test
PREFIXD_CRASH_EVERY_STEP=1 "${build}/tests/crash_test" --gtest_brief=1 2>&1 | grep -v '^\[20'
