#!/usr/bin/env bash
# Makes data/golden/synthetic-moe/: the tiny MoE models (scripts/make-synthetic-moe.py), their Q8_0
# (qwen) / MXFP4_MOE (gpt-oss) copies (llama-quantize) and llama.cpp's perplexity goldens in two configurations:
#   <model>.fa-kvf16.json   llama-perplexity -fa on  -ctk f16 -ctv f16
#   <model>.dense-kvf32.json llama-perplexity -fa off -ctk f32 -ctv f32
# each `-c 128 -b 128 --chunks 8 -t 2 --kl-divergence-base` on data/wiki.test.raw, decoded by
# scripts/llamacpp-kld-to-json.py (top-16 log-probs per scored row).
# Usage: scripts/make-moe-goldens.sh LLAMA_BIN_DIR SYNTHETIC_DIR
set -euo pipefail
BIN=${1:?llama.cpp bin dir}
SYN=${2:?shared synthetic dir (qwen3-tiny.gguf, qwen35-tiny.gguf)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/llama-perplexity-lib.sh
. "$ROOT/scripts/llama-perplexity-lib.sh"
OUT=$ROOT/data/golden/synthetic-moe
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH=$BIN
mkdir -p "$OUT"
python3 "$ROOT/scripts/make-synthetic-moe.py" "$SYN" "$OUT"
for m in qwen3moe-tiny qwen35moe-tiny; do
  "$BIN/llama-quantize" "$OUT/$m.gguf" "$OUT/$m-q8_0.gguf" Q8_0 > "$TMP/q.log" 2>&1
done
# experts MXFP4, the other matrices Q8_0
"$BIN/llama-quantize" "$OUT/gpt-oss-tiny.gguf" "$OUT/gpt-oss-tiny-mxfp4.gguf" MXFP4_MOE > "$TMP/q.log" 2>&1
for m in qwen3moe-tiny qwen35moe-tiny qwen3moe-tiny-q8_0 qwen35moe-tiny-q8_0 gpt-oss-tiny gpt-oss-tiny-mxfp4; do
  two_config_goldens "$BIN" "$ROOT" "$TMP" "$m" "$OUT"
done
ls -la "$OUT"
