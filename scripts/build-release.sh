#!/usr/bin/env bash
# Builds the release preset with profile-guided optimisation (GCC): a server that records where its
# time goes is built first and driven for about half a minute by a bounded loopback workload, then
# the targets are built with that record. prefixd is bound by its instruction cache on small
# requests, and the profile lays the hot code out together: 15-25 % less server CPU per SET
# and MSET (docs/benchmarks.md, 2026-12-06). The release preset links with link-time optimisation
# as well, so the profile lays the hot path out across the project's libraries. The profile is
# kept in build/release/pgo and reused while the sources are unchanged; PREFIXD_PGO=off builds
# without one.
#
#   scripts/build-release.sh [TARGET...]     (default: prefixd-server)
set -euo pipefail
cd "$(dirname "$0")/.."

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(prefixd-server)
build=build/release
profile=$PWD/$build/pgo

if [[ ${PREFIXD_PGO:-} == off ]]; then
  cmake --preset release -DPREFIXD_PGO= >/dev/null
  exec cmake --build --preset release --target "${targets[@]}"
fi

# What the profile was recorded from: everything compiled into the server, the flags it was
# compiled with (the release preset's link-time optimisation changes what the profile describes),
# and this script's training.
source_stamp() {
  find src cmake CMakeLists.txt CMakePresets.json scripts/build-release.sh -type f -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

# Drives the instrumented server at $1 with the kinds of request the profile should favour: small
# pipelined string commands (LMCache's metadata, redis-benchmark's rows), unpipelined ones over many
# keys, SSM state of 64 bytes and of 1 MiB, and the small reads of a V-store row and a prefix-index
# block. Loopback only, every step bounded in count and time.
train() {
  # A scratch folder and the server in it, removed and stopped on exit; free_port, wait_ready.
  source benchmarks/bench_lib.sh pgo-training
  local server=$1 port pid blob state
  port=$(free_port)
  "$server" --port "$port" --dir "$work" --loglevel warning >"$work/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_ready "$port" "the instrumented prefixd-server"
  local bench=(timeout 120 redis-benchmark -p "$port" -q)
  "${bench[@]}" -P 16 -c 50 -n 100000 -t ping_inline,ping_mbulk,set,get,incr,mset >/dev/null
  "${bench[@]}" -c 20 -n 20000 -r 100000 -d 64 -t set,get >/dev/null
  state=$(head -c 64 /dev/zero | tr '\0' 's')
  "${bench[@]}" -P 16 -c 20 -n 50000 -r 10000 SSM.PREFIX.STORE 's:__rand_int__' 0 "$state" >/dev/null
  "${bench[@]}" -P 16 -c 20 -n 50000 -r 10000 SSM.PREFIX.FETCH 's:__rand_int__' 0 >/dev/null
  # The small state reads held to GET's rate (issue 34): MFETCH of one layer, a V-store row, a
  # prefix-index block (its parent is the root, 16 NUL bytes: redis-cli's piped mode unescapes it).
  "${bench[@]}" -P 16 -c 20 -n 50000 -r 10000 SSM.PREFIX.MFETCH 's:__rand_int__' 0 >/dev/null
  local cli=(timeout 10 redis-cli -p "$port")
  "${cli[@]}" V.CREATE pgo:rows 1 VQUANT fp32 >/dev/null
  printf 'abcd' | "${cli[@]}" -x V.STOREBATCH pgo:rows 0 0 1 >/dev/null
  "${bench[@]}" -P 16 -c 20 -n 50000 V.FETCH pgo:rows 0 RANGE 0 1 >/dev/null
  "${cli[@]}" KV.PREFIX.NAMESPACE pgo:ns BLOCK 1 ATTN 1 KVDIM 1 RECURRENT 1 VQUANT fp32 >/dev/null
  printf 'KV.PREFIX.BSTORE pgo:ns "%s" 1 abcdefghijklmnop 0 abcdefgh\n' "$(printf '\\x00%.0s' {1..16})" |
    "${cli[@]}" >/dev/null
  "${bench[@]}" -P 16 -c 20 -n 50000 KV.PREFIX.BFETCH pgo:ns 1 abcdefghijklmnop 0 >/dev/null
  blob=$work/blob
  head -c $((1 << 20)) /dev/urandom >"$blob"
  for _ in $(seq 1 20); do
    timeout 10 redis-cli -p "$port" -x SSM.PREFIX.STORE big 0 <"$blob" >/dev/null
    timeout 10 redis-cli -p "$port" --raw SSM.PREFIX.FETCH big 0 >/dev/null
    timeout 10 redis-cli -p "$port" -x SET big:kv_bytes <"$blob" >/dev/null
    timeout 10 redis-cli -p "$port" --raw GET big:kv_bytes >/dev/null
  done
  # A clean exit writes the profile.
  kill -TERM "$pid"
  wait "$pid" || true
}

stamp=$(source_stamp)
if [[ ! -f $profile/stamp || $(cat "$profile/stamp") != "$stamp" ]]; then
  rm -rf "$profile"
  mkdir -p "$profile"
  cmake --preset release -DPREFIXD_PGO=generate -DPREFIXD_PGO_DIR="$profile" >/dev/null
  cmake --build --preset release --target prefixd-server
  echo "build-release.sh: recording a profile (about half a minute)" >&2
  train "$build/prefixd-server"
  if ! compgen -G "$profile/*.gcda" >/dev/null; then
    echo "build-release.sh: the training run wrote no profile" >&2
    exit 1
  fi
  echo "$stamp" >"$profile/stamp"
fi
cmake --preset release -DPREFIXD_PGO=use -DPREFIXD_PGO_DIR="$profile" >/dev/null
cmake --build --preset release --target "${targets[@]}"
