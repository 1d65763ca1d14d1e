#!/usr/bin/env bash
# Every test of the project: Rust (release mode: the numerics are heavy), the C API test, the Python package.
# Fetches the real models and makes the test data that is not committed (llama.cpp's vocabularies,
# the synthetic tiny models: scripts/get-testdata.sh) first; tests then require the models
# (LSE_REQUIRE_MODELS=1) instead of skipping. Needs nothing outside this repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/get-models.sh smollm2 gemma3 qwen25coder
scripts/get-testdata.sh
export LSE_REQUIRE_MODELS=1
cargo test --release --workspace
if [ -x scripts/test-python.sh ]; then scripts/test-python.sh; fi
