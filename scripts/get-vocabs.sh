#!/usr/bin/env bash
# Fetch the llama.cpp vocabulary files the tokenizer tests need beyond ../shared/data/vocab: the
# `models/ggml-vocab-*.gguf` files of llama.cpp 0c1e570, taken by package name from the
# llama-cpp-python 0.3.36 source package, checked against their SHA-256 and cached (git-ignored)
# in data/vocab-extra/ beside their suites. Prints nothing but errors once they are cached.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/data/vocab-extra
sums=$dest/SHA256SUMS
missing=0
while read -r _ file; do
  [ -f "$dest/$file" ] || missing=1
done <"$sums"
[ "$missing" = 0 ] && exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching llama.cpp vocabularies (llama-cpp-python==0.3.36 source package)" >&2
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --no-build-isolation \
  --dest "$tmp" llama-cpp-python==0.3.36 >&2 2>/dev/null ||
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --dest "$tmp" llama-cpp-python==0.3.36 >&2
sdist=$(ls "$tmp"/llama_cpp_python-0.3.36.tar.gz)
while read -r _ file; do
  tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-0.3.36/vendor/llama.cpp/models/$file"
  cp "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/$file" "$dest/$file.part"
  mv "$dest/$file.part" "$dest/$file"
done <"$sums"
(cd "$dest" && sha256sum --quiet -c SHA256SUMS) || { echo "get-vocabs: checksum mismatch" >&2; exit 1; }
