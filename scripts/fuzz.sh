#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz and runs each for SECONDS (default 60),
# except the glob matcher, a smaller input space, which runs for a quarter of that (at least 5),
# on a scratch copy of each seed corpus, so the committed corpus stays as it is.
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
targets=(request_parser reply_reader glob record snapshot dump state_blob config llama_state)
ninja -C "${build}" -j "${FUZZ_JOBS:-2}" "${targets[@]/%/_fuzz}"

scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
mkdir -p "${artifacts}"

status=0
glob_seconds=$(( seconds / 4 > 5 ? seconds / 4 : 5 ))
for target in "${targets[@]}"; do
  corpus="${scratch}/${target}"
  mkdir -p "${corpus}"
  cp "${root}/tests/fuzz/corpus/${target}/"* "${corpus}/"
  target_seconds="${seconds}"
  dict=()
  case "${target}" in
    request_parser | reply_reader) dict=(-dict="${root}/tests/fuzz/resp.dict") ;;
    glob) dict=(-dict="${root}/tests/fuzz/glob.dict") target_seconds="${glob_seconds}" ;;
  esac
  echo "=== ${target}: ${target_seconds}s"
  if ! "${build}/tests/fuzz/${target}_fuzz" "${corpus}" \
      -max_total_time="${target_seconds}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="${artifacts}/${target}-" -print_final_stats=1; then
    echo "=== ${target}: FAILED (inputs in ${artifacts})" >&2
    status=1
  fi
done
exit "${status}"
