#!/usr/bin/env bash
# Installs everything prefixd needs to build, test and benchmark, from Debian's packages and npm.
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  build-essential cmake ninja-build pkg-config git lld
  libasio-dev libspdlog-dev libfmt-dev libcli11-dev libgtest-dev libhiredis-dev libxxhash-dev libssl-dev openssl
  redis-server redis-tools python3 python3-redis
  libopenblas-dev nlohmann-json3-dev patchelf python3-numpy
  clang-14 libclang-rt-14-dev libfuzzer-14-dev clang-format
  libsystemd-dev prometheus
  tcl
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Node.js may come from elsewhere (it bundles npm then, and Debian's npm would conflict).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi

# Node clients for the black-box tests (ioredis, node-redis), pinned in tests/integration.
if [ -f tests/integration/package.json ] && [ ! -d tests/integration/node_modules/ioredis ]; then
  (cd tests/integration && npm install --no-audit --no-fund --loglevel=error)
fi
scripts/fetch-llama.sh
