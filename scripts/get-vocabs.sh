#!/usr/bin/env bash
# Fetch the llama.cpp vocabulary files the tests need: the `models/ggml-vocab-*.gguf` files of
# llama.cpp 0c1e570, taken by package name from the llama-cpp-python 0.3.36 source package, checked
# against their SHA-256 and cached (git-ignored) beside their committed suites (.inp/.out):
#   data/vocab/        gpt-2, llama-bpe, llama-spm, qwen2, qwen35 (the core tokenizer tests)
#   data/vocab-extra/  the other vocabularies of llama.cpp's models/ folder
# Each folder's SHA256SUMS lists its files. Prints nothing but errors once they are cached.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dirs=("$root/data/vocab" "$root/data/vocab-extra")
missing=0
for dest in "${dirs[@]}"; do
  while read -r _ file; do
    [ -f "$dest/$file" ] || missing=1
  done <"$dest/SHA256SUMS"
done
[ "$missing" = 0 ] && exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching llama.cpp vocabularies (llama-cpp-python==0.3.36 source package)" >&2
sdist=$("$root/scripts/get-llama-source.sh")
for dest in "${dirs[@]}"; do
  while read -r _ file; do
    [ -f "$dest/$file" ] && continue
    tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-0.3.36/vendor/llama.cpp/models/$file"
    cp "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/$file" "$dest/$file.part.$$"
    mv "$dest/$file.part.$$" "$dest/$file"
  done <"$dest/SHA256SUMS"
  (cd "$dest" && sha256sum --quiet -c SHA256SUMS) || { echo "get-vocabs: checksum mismatch in $dest" >&2; exit 1; }
done
