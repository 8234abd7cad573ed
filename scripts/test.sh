#!/usr/bin/env bash
# Installs what is needed, builds everything and runs every test (unit and integration, through
# ctest). Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev
ctest --preset dev
