#!/usr/bin/env bash
# The GPU check's bundle (benchmarks/hybrid/scripts/gpu_bundle.sh), assembled from this build's
# binaries: its layout, its size, and that its binaries resolve every library from the bundle
# itself, glibc or CUDA (ldd with an empty environment) and start.
# Usage: gpu_bundle_test.sh SOURCE_DIR BUILD_DIR HAVE_CUDA(ON|OFF) WORK_DIR
# Exit 77 (ctest: skipped) when this build has no CUDA backend.
set -euo pipefail
SRC=$1 BUILD=$2 HAVE_CUDA=$3 WORK=$4
if [ "$HAVE_CUDA" != ON ]; then
  echo "SKIPPED: this build has no CUDA backend (nvcc was not found at configure time, or"
  echo "PREFIXD_HYBRID_CUDA=OFF), so there is no GPU bundle to check"
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

rm -rf "$WORK"
mkdir -p "$WORK"
BUNDLE="$WORK/bundle"
"$SRC/benchmarks/hybrid/scripts/gpu_bundle.sh" --from "$BUILD" "$BUNDLE" || fail "gpu_bundle.sh failed"

for f in bin/prefixd-server bin/prefixd-hybrid run-gpu-check.sh; do
  [ -x "$BUNDLE/$f" ] || fail "$f is missing or not executable"
done
[ -f "$BUNDLE/hf_reference.py" ] || fail "hf_reference.py is missing"
ls "$BUNDLE"/lib/*.so* >/dev/null 2>&1 || fail "lib/ is empty"
bytes=$(du -sb "$BUNDLE" | cut -f1)
[ "$bytes" -le $((48 << 20)) ] || fail "the bundle is $bytes bytes, over 48 MiB"

# The directory holding the CUDA runtime libraries here, standing in for the GPU image's.
cuda_dir=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcudart.so.13" ] && cuda_dir=$d && break
done

for exe in prefixd-server prefixd-hybrid; do
  bin="$BUNDLE/bin/$exe"
  readelf -d "$bin" | grep -q 'RPATH.*\$ORIGIN/\.\./lib' || fail "$exe has no RPATH \$ORIGIN/../lib"
  # Only the bundle, glibc and CUDA: every other library must resolve inside lib/.
  deps=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= ldd "$bin")
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    case "$name" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | \
        ld-linux-x86-64.so.* | libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.*)
        continue ;;
    esac
    [ "$path" = "not" ] && fail "$exe: $name not found"
    real=$(readlink -f "$path")
    case "$real" in
      "$(readlink -f "$BUNDLE/lib")"/*) ;;
      *) fail "$exe loads $name from $real, outside the bundle" ;;
    esac
  done <<<"$deps"
  if grep -q "not found" <<<"$deps"; then
    grep "not found" <<<"$deps" | grep -qv "libcuda\|libcudart\|libcublas" &&
      fail "$exe: $(grep 'not found' <<<"$deps" | head -1)"
  fi
done

run_env=(env -i PATH=/usr/bin:/bin "LD_LIBRARY_PATH=$cuda_dir")
version=$("${run_env[@]}" "$BUNDLE/bin/prefixd-server" --version) || fail "prefixd-server --version"
[ -n "$version" ] || fail "prefixd-server --version printed nothing"
help=$("${run_env[@]}" "$BUNDLE/bin/prefixd-hybrid" --help) || fail "prefixd-hybrid --help"
for sub in sweep warm compare logits; do
  grep -q "$sub" <<<"$help" || fail "prefixd-hybrid --help lacks '$sub'"
done
echo "bundle ok: $((bytes >> 20)) MiB, $(ls "$BUNDLE/lib" | wc -l) libraries: $(ls "$BUNDLE/lib" | tr '\n' ' ')"
