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
# The lse-server binary this test build makes (lse-server's own tests need it, so it is built before
# any test runs): the C API's and the Python package's CLI cross-checks use it instead of building
# the package alone, whose feature set differs from the workspace's (a second build of most crates).
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target="$root/$target" ;; esac
export LSE_SERVER="${LSE_SERVER:-$target/release/lse-server}"
cargo test --release --workspace
if [ -x scripts/test-python.sh ]; then scripts/test-python.sh; fi
