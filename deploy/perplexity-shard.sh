#!/usr/bin/env bash
# The one command of a sharded perplexity run, called by the Slurm job array (deploy/slurm) and
# the Kubernetes Indexed Job (deploy/kubernetes) alike:
#   perplexity-shard.sh shard   scores this task's share of the windows into
#                               $LSE_OUT_DIR/shard-<task index>.lseshard (lse-server --perplexity-shard auto)
#   perplexity-shard.sh merge   checks that the shard files are one plan, complete and disjoint, and
#                               writes the report (and the KL base, when one is recorded)
# The task index comes from SLURM_ARRAY_TASK_ID (Slurm) or JOB_COMPLETION_INDEX (Kubernetes).
#
# Environment:
#   LSE_OUT_DIR       a folder every task sees (a shared volume): shard files, report (required)
#   LSE_MODEL         the .gguf model (shard; required)
#   LSE_TEXT          the UTF-8 text to score (shard; required)
#   LSE_SHARDS        the shard count: required on Kubernetes (= the Job's completions); in a
#                     Slurm array it defaults to SLURM_ARRAY_TASK_COUNT and must equal it
#   LSE_PPL_ARGS      more perplexity options, split on spaces, e.g. "--perplexity-ctx 512 --threads 16"
#   LSE_KLD_BASE      compare against this KL base (every task must see it)
#   LSE_KLD_BASE_OUT  record a KL base: each shard keeps its part, the merge writes the base here
#   LSE_REPORT        the merged report (default: $LSE_OUT_DIR/report.json)
#   LSE_SERVER        the lse-server binary (default: lse-server on PATH)
# Use a fresh LSE_OUT_DIR for each run: the merge takes every shard-*.lseshard file in it.
set -euo pipefail
server="${LSE_SERVER:-lse-server}"
out="${LSE_OUT_DIR:?LSE_OUT_DIR (the shared folder for shard files) is not set}"
case "${1:-}" in
shard)
    index="${SLURM_ARRAY_TASK_ID:-${JOB_COMPLETION_INDEX:-unset}}"
    args=(--model "${LSE_MODEL:?LSE_MODEL is not set}" --perplexity "${LSE_TEXT:?LSE_TEXT is not set}")
    args+=(--perplexity-shard "auto${LSE_SHARDS:+/$LSE_SHARDS}" --perplexity-output "$out/shard-$index.lseshard" --quiet)
    if [ -n "${LSE_KLD_BASE:-}" ]; then args+=(--perplexity-kld "$LSE_KLD_BASE"); fi
    if [ -n "${LSE_KLD_BASE_OUT:-}" ]; then args+=(--perplexity-kld-base-out "$LSE_KLD_BASE_OUT"); fi
    mkdir -p "$out"
    # shellcheck disable=SC2086 # LSE_PPL_ARGS is a list of options
    exec "$server" "${args[@]}" ${LSE_PPL_ARGS:-}
    ;;
merge)
    shopt -s nullglob
    shards=("$out"/shard-*.lseshard)
    if [ ${#shards[@]} -eq 0 ]; then
        echo "perplexity-shard.sh: no shard files (shard-*.lseshard) in $out" >&2
        exit 1
    fi
    exec "$server" --perplexity-merge "${shards[@]}" --perplexity-output "${LSE_REPORT:-$out/report.json}"
    ;;
*)
    echo "usage: perplexity-shard.sh shard|merge (settings in the environment: see the top of this file)" >&2
    exit 2
    ;;
esac
