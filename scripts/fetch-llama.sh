#!/usr/bin/env bash
# Fetches the pinned llama.cpp release from npm into .deps/llama.cpp (ignored by git): the source
# (node-llama-cpp ships it as a git bundle) and the prebuilt CPU libraries of the same release
# (@node-llama-cpp/linux-x64). Nothing of llama.cpp is committed. Idempotent: a tree that already
# holds the pinned release is left alone. Layout afterwards:
#   .deps/llama.cpp/include    llama.h and ggml's public headers
#   .deps/llama.cpp/lib        libllama, libggml*, the per-CPU libggml-cpu-* backends
#   .deps/llama.cpp/gguf-py    llama.cpp's pure-Python GGUF writer (used to write test models)
#   .deps/llama.cpp/source     the release's whole source tree (for reading, never built here)
#   .deps/llama.cpp/RELEASE    the pins below, checked by cmake/Llama.cmake
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_LLAMA_CPP_VERSION=3.21.1     # ships llama.cpp release v0.4.0
LLAMA_RELEASE=v0.4.0
GGML_VERSION=0.23.0               # ggml_version() of that release's libraries

dest=.deps/llama.cpp
stamp="node-llama-cpp=${NODE_LLAMA_CPP_VERSION} llama.cpp=${LLAMA_RELEASE} ggml=${GGML_VERSION}"
if [ -f "$dest/RELEASE" ] && [ "$(cat "$dest/RELEASE")" = "$stamp" ]; then
  exit 0
fi

if ! command -v npm >/dev/null; then
  echo "fetch-llama.sh: npm is needed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "Fetching llama.cpp ${LLAMA_RELEASE} (node-llama-cpp@${NODE_LLAMA_CPP_VERSION}) from npm"
(cd "$work" && npm pack --silent "node-llama-cpp@${NODE_LLAMA_CPP_VERSION}" \
  "@node-llama-cpp/linux-x64@${NODE_LLAMA_CPP_VERSION}" >/dev/null)
mkdir -p "$work/src-pkg" "$work/bin-pkg"
tar xzf "$work/node-llama-cpp-${NODE_LLAMA_CPP_VERSION}.tgz" -C "$work/src-pkg"
tar xzf "$work/node-llama-cpp-linux-x64-${NODE_LLAMA_CPP_VERSION}.tgz" -C "$work/bin-pkg"

# The packages must say they are the release pinned here, or the pins above are wrong.
tag=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tag"])' \
  "$work/src-pkg/package/llama/llama.cpp.info.json")
built=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["buildOptions"]["llamaCpp"]["release"])' \
  "$work/bin-pkg/package/bins/linux-x64/_nlcBuildMetadata.json")
if [ "$tag" != "$LLAMA_RELEASE" ] || [ "$built" != "$LLAMA_RELEASE" ]; then
  echo "fetch-llama.sh: expected llama.cpp ${LLAMA_RELEASE}, the source says ${tag}," \
       "the libraries ${built}" >&2
  exit 1
fi

git clone --quiet "$work/src-pkg/package/llama/gitRelease.bundle" "$work/source" 2>/dev/null
rm -rf "$work/source/.git"

rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib"
cp "$work/source/include/llama.h" "$work/source/include/llama-cpp.h" "$dest/include/"
cp "$work/source/ggml/include/"*.h "$dest/include/"
cp "$work/bin-pkg/package/bins/linux-x64/"*.so "$dest/lib/"
cp -r "$work/source/gguf-py" "$dest/gguf-py"
mv "$work/source" "$dest/source"
# A plain name to link against; the library's own soname stays libllama.v0.4.0.so.
ln -s "libllama.${LLAMA_RELEASE}.so" "$dest/lib/libllama.so"
ln -s "libggml.${LLAMA_RELEASE}.so" "$dest/lib/libggml.so"
echo "$stamp" > "$dest/RELEASE"
echo "llama.cpp ${LLAMA_RELEASE} is in $dest"
