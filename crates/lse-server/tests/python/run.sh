#!/usr/bin/env bash
# Runs the HTTP client tests of lse-server (crates/lse-server/tests/python) with pytest: the
# `openai` package and lm-evaluation-harness (`local-completions`) against the real server.
# Installs what is missing (openai, lm-eval[api], pytest) by name with pip into a private venv.
#
# Environment:
#   PYTHON            interpreter for the venv (default: python3)
#   CARGO_TARGET_DIR  cargo's target folder (default: <repo>/target); the venv is $CARGO_TARGET_DIR/python-http
#   LSE_SERVER        the lse-server binary (default: build it, release)
#   LSE_TEST_MODEL    GGUF model (default: models/SmolLM2-135M-Instruct.Q4_1.gguf)
# Extra arguments are passed to pytest.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
export CARGO_TARGET_DIR="$target"
venv="$target/python-http"
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
vpy="$venv/bin/python"
if ! "$vpy" -c "import openai, lm_eval, pytest" 2>/dev/null; then
    echo "test-python (http): installing openai, lm-eval[api], pytest into $venv" >&2
    "$vpy" -m pip install --quiet openai "lm-eval[api]" pytest
fi
if [ -z "${LSE_SERVER:-}" ]; then
    cargo build --release --quiet -p lse-server
    export LSE_SERVER="$target/release/lse-server"
fi
export LSE_TEST_MODEL="${LSE_TEST_MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$here"
exec "$vpy" -m pytest -q -p no:cacheprovider -rs "$@" .
