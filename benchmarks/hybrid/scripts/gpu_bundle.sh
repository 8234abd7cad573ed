#!/usr/bin/env bash
# Builds the GPU check's carry-on bundle here, for a GPU machine that has CUDA 13, Python with
# PyTorch and transformers, but none of our Debian libraries and nothing installable:
#   OUT_DIR/bin/{prefixd-server,prefixd-hybrid}   stripped, RPATH $ORIGIN/../lib
#   OUT_DIR/lib/   every shared library they load except glibc's, the driver's libcuda.so.1 and
#                  the CUDA toolkit's own (cudart, cuBLAS), which the GPU image provides
#   OUT_DIR/run-gpu-check.sh, OUT_DIR/hf_reference.py   the check itself (run-gpu-check.sh --help)
# and refuses a bundle over 48 MiB (the device tool carries at most 64 MiB).
#
# Usage: benchmarks/hybrid/scripts/gpu_bundle.sh OUT_DIR
#          Configures and builds BUILD_DIR (default build/gpu-bundle-build: Release, CUDA
#          "90-real;90-virtual" = sm_90 code + PTX, -march=x86-64-v3 so any x86 host with AVX2
#          runs it), then bundles. A first build takes minutes on 2 cores; ccache is used if found.
#        benchmarks/hybrid/scripts/gpu_bundle.sh --from BUILD_DIR OUT_DIR
#          Bundles binaries already built in BUILD_DIR (what the ctest test does; seconds).
# Env: BUILD_DIR, CUDA_ARCHS, JOBS (default 2).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
SCRIPTS="$SRC/benchmarks/hybrid/scripts"
LIMIT_BYTES=$((48 << 20))

FROM=""
if [ "${1:-}" = "--from" ]; then
  FROM=${2:?--from needs a build directory}
  shift 2
fi
OUT_DIR=${1:?usage: gpu_bundle.sh [--from BUILD_DIR] OUT_DIR}

if [ -z "$FROM" ]; then
  FROM=${BUILD_DIR:-$SRC/build/gpu-bundle-build}
  NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [ -x "$NVCC" ] || { echo "gpu_bundle: no nvcc (set CUDACXX)" >&2; exit 2; }
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  echo "gpu_bundle: building in $FROM ($("$NVCC" --version | tail -1))"
  cmake -S "$SRC" -B "$FROM" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPREFIXD_BUILD_TESTS=OFF \
    -DPREFIXD_HYBRID_CUDA=ON -DPREFIXD_HYBRID_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90-real;90-virtual}" \
    "${launcher[@]}" >/dev/null
  cmake --build "$FROM" -j "${JOBS:-2}" --target prefixd-server prefixd-hybrid
fi

for exe in prefixd-server prefixd-hybrid; do
  [ -x "$FROM/$exe" ] || { echo "gpu_bundle: $FROM/$exe is missing" >&2; exit 2; }
done
command -v patchelf >/dev/null || { echo "gpu_bundle: needs patchelf (scripts/install-deps.sh)" >&2; exit 2; }
if ! grep -q "cudaStreamCreate" "$FROM/prefixd-hybrid" 2>/dev/null; then
  echo "gpu_bundle: $FROM/prefixd-hybrid has no CUDA backend (configure with nvcc)" >&2
  exit 2
fi

# Provided on the GPU machine: glibc, the driver, the CUDA toolkit's runtime libraries.
provided() {
  case "$1" in
    linux-vdso.so.* | ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libpthread.so.* | \
      libdl.so.* | librt.so.* | libresolv.so.* | libutil.so.* | libcuda.so.* | \
      libcudart.so.* | libcublas.so.* | libcublasLt.so.*) return 0 ;;
  esac
  return 1
}

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR/bin" "$OUT_DIR/lib"
for exe in prefixd-server prefixd-hybrid; do
  cp "$FROM/$exe" "$OUT_DIR/bin/$exe"
  strip --strip-unneeded "$OUT_DIR/bin/$exe"
  # "name => /path (addr)" for every library in the closure.
  while read -r name _ path _; do
    provided "$name" && continue
    [ -f "$path" ] || { echo "gpu_bundle: $exe needs $name, which is not found here" >&2; exit 2; }
    [ -f "$OUT_DIR/lib/$name" ] || cp -L "$path" "$OUT_DIR/lib/$name"
  done < <(ldd "$FROM/$exe" | awk '$2 == "=>" {print $1, $2, $3, $4}')
  # DT_RPATH, not RUNPATH: it also applies to the libraries' own dependencies.
  # shellcheck disable=SC2016 # a literal $ORIGIN, for the loader
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$OUT_DIR/bin/$exe"
done
for lib in "$OUT_DIR"/lib/*; do
  chmod u+w "$lib"
  strip --strip-unneeded "$lib" 2>/dev/null || true
  # shellcheck disable=SC2016
  patchelf --set-rpath '$ORIGIN' "$lib"
done
cp "$SCRIPTS/run-gpu-check.sh" "$SCRIPTS/hf_reference.py" "$OUT_DIR/"
chmod +x "$OUT_DIR/run-gpu-check.sh"
git -C "$SRC" rev-parse --short HEAD >"$OUT_DIR/VERSION" 2>/dev/null || echo unknown >"$OUT_DIR/VERSION"

bytes=$(du -sb "$OUT_DIR" | cut -f1)
echo "gpu_bundle: $OUT_DIR: $((bytes >> 20)) MiB ($bytes bytes):"
(cd "$OUT_DIR" && du -ab bin lib | sort -k2 | awk '{printf "  %9d  %s\n", $1, $2}')
if [ "$bytes" -gt "$LIMIT_BYTES" ]; then
  echo "gpu_bundle: over the 48 MiB limit" >&2
  exit 1
fi
