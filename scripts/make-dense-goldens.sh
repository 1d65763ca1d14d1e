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
OUT=$ROOT/data/golden/synthetic-dense
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH=$BIN
mkdir -p "$OUT"
python3 "$ROOT/scripts/make-synthetic-dense.py" --out "$OUT" "$@"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=($(cd "$OUT" && ls ./*.gguf | sed 's|^\./||; s|\.gguf$||'))
for m in "${models[@]}"; do
  for cfg in "fa-kvf16:-fa on -ctk f16 -ctv f16" "dense-kvf32:-fa off -ctk f32 -ctv f32"; do
    tag=${cfg%%:*}
    # llama.cpp's log thread sometimes loses the last lines at exit: run again until they are there
    for try in 1 2 3 4; do
      # shellcheck disable=SC2086
      "$BIN/llama-perplexity" -m "$OUT/$m.gguf" -f "$ROOT/data/wiki.test.raw" -c 128 -b 128 --chunks 8 -t 2 \
        ${cfg#*:} --kl-divergence-base "$TMP/$m.$tag.kld" > "$TMP/$m.$tag.log" 2>&1
      grep -q "Final estimate" "$TMP/$m.$tag.log" && break
    done
    grep -q "Final estimate" "$TMP/$m.$tag.log" || { tail -20 "$TMP/$m.$tag.log" >&2; exit 1; }
    top=16
    [[ $m == *-q8_0 ]] && top=8
    python3 "$ROOT/scripts/llamacpp-kld-to-json.py" "$TMP/$m.$tag.kld" "$TMP/$m.$tag.log" "$OUT/$m.$tag.json" --top $top
  done
done
