#!/usr/bin/env bash
# Installs what is needed, builds a release binary (profile-guided: scripts/build-release.sh) and
# starts prefixd on its defaults (127.0.0.1:1974, data in ./data). Extra arguments go to
# prefixd-server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build-release.sh prefixd-server
exec build/release/prefixd-server "$@"
