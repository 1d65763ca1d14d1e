#!/usr/bin/env bash
# The main job: score data/wiki.test.raw with the default model (SmolLM2-135M-Instruct Q4_1, fetched on
# first use) and print the JSON report. Extra arguments go to lse-server, e.g. --perplexity-chunks 8.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/get-models.sh" smollm2
cargo build --quiet --release -p lse-server --manifest-path "$root/Cargo.toml"
exec "$root/target/release/lse-server" --model "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
  --perplexity "$root/data/wiki.test.raw" "$@"
