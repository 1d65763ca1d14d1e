#!/usr/bin/env bash
# Builds the `lse` Python wheel (maturin, release), installs it into a private environment under
# the Cargo target folder, and runs the Python tests (crates/lse-python/tests) with pytest; then
# the HTTP server's client tests (crates/lse-server/tests/python/run.sh: openai, lm-eval).
# Exits non-zero when the build or any test fails.
#
# Environment:
#   PYTHON            interpreter to build and test with (default: python3)
#   CARGO_TARGET_DIR  where cargo builds (default: <repo>/target); the venv goes to $CARGO_TARGET_DIR/python
#   LSE_SERVER        lse-server binary for the CLI cross-check (default: build it, release, into
#                     $CARGO_TARGET_DIR/release/lse-server, so it matches the wheel)
#   LSE_TEST_MODEL    GGUF model for the engine tests (default: models/SmolLM2-135M-Instruct.Q4_1.gguf)
# Extra arguments are passed to pytest.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
export CARGO_TARGET_DIR="$target"
py="${PYTHON:-python3}"
work="$target/python"
wheels="$work/wheels"
venv="$work/venv"

rm -rf "$wheels"
mkdir -p "$wheels"

# A venv that sees the interpreter's own packages (numpy, pytest, maturin when installed there);
# whatever is missing is installed into the venv from the package index.
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv --system-site-packages "$venv"
fi
vpy="$venv/bin/python"
missing=()
"$vpy" -c "import numpy" 2>/dev/null || missing+=(numpy)
"$vpy" -c "import pytest" 2>/dev/null || missing+=(pytest)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test-python: installing ${missing[*]} into $venv" >&2
    "$vpy" -m pip install --quiet "${missing[@]}"
fi
# Ray, for lse.distributed (the optional extra lse[ray]); its test is skipped only when Ray cannot
# be imported, so a failed install is reported loudly here.
if ! "$vpy" -c "import ray" 2>/dev/null; then
    echo "test-python: installing ray into $venv" >&2
    "$vpy" -m pip install --quiet "ray>=2.9" || echo "test-python: WARNING: ray could not be installed; the lse.distributed test will be skipped" >&2
fi
# maturin is a program: the venv's own, else one on PATH, else installed into the venv.
maturin="$venv/bin/maturin"
if [ ! -x "$maturin" ]; then
    if command -v maturin >/dev/null 2>&1 && maturin --version >/dev/null 2>&1; then
        maturin="$(command -v maturin)"
    else
        echo "test-python: installing maturin into $venv" >&2
        "$vpy" -m pip install --quiet --ignore-installed "maturin>=1.5,<2"
    fi
fi

# The CLI cross-check needs an lse-server built from the same tree as the wheel
# (built right before it).
if [ -z "${LSE_SERVER:-}" ]; then
    echo "test-python: building lse-server (release) for the CLI cross-check" >&2
    cargo build --release --quiet -p lse-server
fi
echo "test-python: building the wheel" >&2
"$maturin" build --release --quiet -m crates/lse-python/Cargo.toml -i "$vpy" -o "$wheels"
wheel="$(ls "$wheels"/lse-*.whl | head -n 1)"
"$vpy" -m pip install --quiet --force-reinstall --no-deps "$wheel"

export LSE_SERVER="${LSE_SERVER:-$target/release/lse-server}"
export LSE_TEST_MODEL="${LSE_TEST_MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
# Run from the tests folder so `import lse` finds the installed package, not the source tree.
cd "$root/crates/lse-python/tests"
status=0
"$vpy" -m pytest -q -p no:cacheprovider -rs "$@" . || status=$?
# The HTTP server's client tests (openai, lm-eval) run in their own venv, on the same binary.
bash "$root/crates/lse-server/tests/python/run.sh" || status=$?
exit $status
