#!/usr/bin/env bash
# Installs what is needed, builds a release binary and starts prefixd on its defaults
# (127.0.0.1:1974, data in ./data). Extra arguments go to prefixd-server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target prefixd-server
exec build/release/prefixd-server "$@"
