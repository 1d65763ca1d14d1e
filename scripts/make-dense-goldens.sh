#!/usr/bin/env bash
# Makes llama.cpp's goldens of data/golden/synthetic-dense/: the tiny dense models
# (scripts/make-synthetic-dense.py, f32 and Q8_0) run by llama-perplexity in two configurations:
#   <model>.fa-kvf16.json    -fa on  -ctk f16 -ctv f16
#   <model>.dense-kvf32.json -fa off -ctk f32 -ctv f32
# each `-c 128 -b 128 --chunks 8 -t 2 --kl-divergence-base` on data/wiki.test.raw, decoded by
# scripts/llamacpp-kld-to-json.py (top-16 log-probs per scored row; top-8 for the Q8_0 models, whose
# KLD bound is loose anyway, to keep the committed data small).
# Usage: scripts/make-dense-goldens.sh LLAMA_BIN_DIR [model names...]
set -euo pipefail
BIN=${1:?llama.cpp bin dir}
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/llama-perplexity-lib.sh
. "$ROOT/scripts/llama-perplexity-lib.sh"
OUT=$ROOT/data/golden/synthetic-dense
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH=$BIN
mkdir -p "$OUT"
python3 "$ROOT/scripts/make-synthetic-dense.py" --out "$OUT" "$@"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=($(cd "$OUT" && ls ./*.gguf | sed 's|^\./||; s|\.gguf$||'))
for m in "${models[@]}"; do
  top=16
  [[ $m == *-q8_0 ]] && top=8
  two_config_goldens "$BIN" "$ROOT" "$TMP" "$m" "$OUT" --top $top
done
