#!/usr/bin/env bash
# Checks that a test run cannot pass by running nothing: ctest through a preset fails when its
# filter matches no test (CMakePresets.json, noTestsAction), and the node-client tests and the
# hybrid suite, configured without their dependencies (node at a path that does not exist, a
# pkg-config that finds no OpenBLAS, no npm packages), are tests that skip, and fail under
# CI=true.
# Usage: tests/ctest_guards_test.sh (configures a scratch tree, builds nothing; a few seconds)
set -u

repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/prefixd-ctest-guards.XXXXXX)"
trap 'rm -rf "$work"' EXIT
failures=0

# check <description> <rc: zero|nonzero> <text the output, as one line, must hold> -- command...
check() {
  local what="$1" want="$2" text="$3"
  shift 4
  local out rc
  out="$("$@" 2>&1)"
  rc=$?
  if { [ "$want" = zero ] && [ "$rc" -ne 0 ]; } || { [ "$want" = nonzero ] && [ "$rc" -eq 0 ]; } ||
    ! tr '\n' ' ' <<<"$out" | grep -qE -- "$text"; then
    echo "FAIL: $what: exit $rc, want $want and /$text/; output:"
    sed 's/^/    /' <<<"$out" | tail -40
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

# A pkg-config that finds everything but OpenBLAS, which prefixd-hybrid needs.
mkdir -p "$work/bin"
real_pkg_config="$(command -v pkg-config)"
cat >"$work/bin/pkg-config" <<EOF2
#!/bin/sh
case " \$* " in *openblas*) exit 1 ;; esac
exec "$real_pkg_config" "\$@"
EOF2
chmod +x "$work/bin/pkg-config"
if ! env -u CI cmake -S "$repo" -B "$work/build" -G Ninja -DNODE="$work/no/node" \
  -DPKG_CONFIG_EXECUTABLE="$work/bin/pkg-config" -DPREFIXD_HYBRID_CUDA=OFF \
  -DPREFIXD_BUILD_BENCHMARKS=ON >"$work/configure.log" 2>&1; then
  echo "FAIL: configuring without node and OpenBLAS failed:"
  tail -20 "$work/configure.log" | sed 's/^/    /'
  exit 1
fi
guarded='^(node_node_clients|node_node_cluster|node_tls_clients|hybrid_not_built)$'
check "without node and OpenBLAS, CI=true: the four tests fail, saying why" nonzero \
  "FAILED: prefixd-hybrid was not built.*FAILED: node is not installed.*0% tests passed, 4 tests failed out of 4" -- \
  env CI=true ctest --test-dir "$work/build" -R "$guarded" --output-on-failure
check "without node and OpenBLAS: the four tests skip" zero \
  "hybrid_not_built \(Skipped\).*node_node_clients \(Skipped\).*node_node_cluster \(Skipped\).*node_tls_clients \(Skipped\)" -- \
  env -u CI ctest --test-dir "$work/build" -R "$guarded"

# The node test files where no npm package can be found (copies outside tests/integration, whose
# node_modules CI installs): under CI=true each fails; elsewhere each passes, its tests skipped.
if command -v node >/dev/null; then
  mkdir -p "$work/node"
  cp "$repo"/tests/integration/*.mjs "$work/node/"
  for file in node_clients node_cluster tls_clients; do
    check "$file.test.mjs without ioredis, CI=true: fails" nonzero \
      "ioredis.*not installed.*CI=true needs it" -- \
      env CI=true PREFIXD_SERVER=/nonexistent node --test "$work/node/$file.test.mjs"
    check "$file.test.mjs without ioredis: skips" zero "SKIP: .*ioredis.*# fail 0" -- \
      env -u CI PREFIXD_SERVER=/nonexistent node --test "$work/node/$file.test.mjs"
  done
else
  echo "skipped the npm cases: node is not installed"
fi

# Each test preset of the repository's CMakePresets.json, its build directory the scratch tree
# (so this run's own tree and its logs are left alone), with a label that matches nothing.
mkdir -p "$work/presets/build"
cp "$repo/CMakePresets.json" "$work/presets/"
presets="$(cd "$work/presets" && ctest --list-presets 2>/dev/null | sed -n 's/^  *"\([^"]*\)".*/\1/p')"
if [ -z "$presets" ]; then
  echo "FAIL: ctest --list-presets lists no test preset"
  failures=$((failures + 1))
fi
for preset in $presets; do
  ln -s "$work/build" "$work/presets/build/$preset"
  check "ctest --preset $preset with a label that matches nothing fails" nonzero \
    "No tests were found" -- \
    bash -c 'cd "$1" && ctest --preset "$2" -L "^no-such-label$"' _ "$work/presets" "$preset"
done
exit $((failures > 0))
