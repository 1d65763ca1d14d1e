#!/usr/bin/env bash
# The reference llama.cpp source (commit 0c1e570): the llama-cpp-python 0.3.36 source package,
# fetched by name once into $CARGO_TARGET_DIR or target/ and reused (vocabularies, llama-quantize);
# prints the archive's path. Its files sit under llama_cpp_python-0.3.36/vendor/llama.cpp/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CARGO_TARGET_DIR:-$root/target}
sdist=$dir/llama_cpp_python-0.3.36.tar.gz
if [ ! -f "$sdist" ]; then
  mkdir -p "$dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --no-build-isolation \
    --dest "$tmp" llama-cpp-python==0.3.36 >&2 2>/dev/null ||
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --dest "$tmp" llama-cpp-python==0.3.36 >&2
  mv "$tmp/llama_cpp_python-0.3.36.tar.gz" "$sdist.part.$$"
  mv "$sdist.part.$$" "$sdist"
fi
echo "$sdist"
