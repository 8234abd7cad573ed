#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz and runs each for SECONDS (default 60) on
# a scratch copy of its seed corpus, so the committed corpus stays as it is.
# Usage: scripts/fuzz.sh [SECONDS]. Exits non-zero when a target crashes; the crashing input is
# left in build-fuzz/artifacts/. FUZZ_JOBS sets build parallelism (default 2).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${root}/build-fuzz"
artifacts="${build}/artifacts"

cmake -S "${root}" -B "${build}" -G Ninja \
  -DCMAKE_C_COMPILER="${FUZZ_CC:-clang-14}" -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-14}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREFIXD_BUILD_FUZZERS=ON -DPREFIXD_BUILD_BENCHMARKS=OFF
targets=(request_parser reply_reader record snapshot state_blob config)
ninja -C "${build}" -j "${FUZZ_JOBS:-2}" "${targets[@]/%/_fuzz}"

scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
mkdir -p "${artifacts}"

status=0
for target in "${targets[@]}"; do
  corpus="${scratch}/${target}"
  mkdir -p "${corpus}"
  cp "${root}/tests/fuzz/corpus/${target}/"* "${corpus}/"
  echo "=== ${target}: ${seconds}s"
  dict=()
  case "${target}" in request_parser | reply_reader) dict=(-dict="${root}/tests/fuzz/resp.dict") ;; esac
  if ! "${build}/tests/fuzz/${target}_fuzz" "${corpus}" \
      -max_total_time="${seconds}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="${artifacts}/${target}-" -print_final_stats=1; then
    echo "=== ${target}: FAILED (inputs in ${artifacts})" >&2
    status=1
  fi
done
exit "${status}"
