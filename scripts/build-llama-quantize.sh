#!/usr/bin/env bash
# Build llama.cpp's llama-quantize (the reference commit, from the llama-cpp-python 0.3.36 source
# package fetched by name) into $CARGO_TARGET_DIR or target/, once; print its path. The quantized
# test models are made with it (scripts/make-quantized-fixtures.sh) instead of being committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${CARGO_TARGET_DIR:-$root/target}/llama-quantize
bin=$out/build/bin/llama-quantize
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
command -v cmake >/dev/null 2>&1 || python3 -m pip install --quiet cmake >&2
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building llama-quantize (llama-cpp-python==0.3.36 source package; a few minutes)" >&2
sdist=$("$root/scripts/get-llama-source.sh")
rm -rf "$out/src"
tar -xzf "$sdist" -C "$tmp" llama_cpp_python-0.3.36/vendor/llama.cpp
mv "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp" "$out/src"
# Quantization runs llama.cpp's scalar reference code, so the files do not depend on the CPU,
# nor on the optimisation level (no fast-math; get-testdata checks their SHA-256): -O1 builds in
# 3.1 min on 2 cores where -O3 takes 4.2, and quantizes the fixtures in 25 s.
cmake -S "$out/src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$out/cmake.log" 2>&1
cmake --build "$out/build" -j2 --target llama-quantize >>"$out/cmake.log" 2>&1 ||
  { echo "build-llama-quantize: build failed, see $out/cmake.log" >&2; exit 1; }
echo "$bin"
