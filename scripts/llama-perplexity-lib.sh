# Sourced by the make-*-goldens.sh scripts.

# perplexity_logged LOG CMD...: runs a llama-perplexity command line, output to LOG, until LOG holds
# the "Final estimate" summary (llama.cpp's log thread sometimes loses the last lines at exit);
# fails with the log's tail after 4 tries.
perplexity_logged() {
  local log=$1 try
  shift
  for try in 1 2 3 4; do
    "$@" > "$log" 2>&1 && grep -q "Final estimate" "$log" && return 0
  done
  tail -20 "$log" >&2
  return 1
}

# two_config_goldens BIN ROOT TMP MODEL OUT_DIR [converter args...]: llama-perplexity on
# data/wiki.test.raw (-c 128 -b 128 --chunks 8 -t 2, --kl-divergence-base) in the two
# configurations the tests compare with, each decoded by llamacpp-kld-to-json.py:
#   OUT_DIR/MODEL.fa-kvf16.json    -fa on  -ctk f16 -ctv f16
#   OUT_DIR/MODEL.dense-kvf32.json -fa off -ctk f32 -ctv f32
two_config_goldens() {
  local bin=$1 root=$2 tmp=$3 m=$4 out=$5 cfg tag
  shift 5
  for cfg in "fa-kvf16:-fa on -ctk f16 -ctv f16" "dense-kvf32:-fa off -ctk f32 -ctv f32"; do
    tag=${cfg%%:*}
    # shellcheck disable=SC2086
    perplexity_logged "$tmp/$m.$tag.log" "$bin/llama-perplexity" -m "$out/$m.gguf" -f "$root/data/wiki.test.raw" \
      -c 128 -b 128 --chunks 8 -t 2 ${cfg#*:} --kl-divergence-base "$tmp/$m.$tag.kld" || return 1
    python3 "$root/scripts/llamacpp-kld-to-json.py" "$tmp/$m.$tag.kld" "$tmp/$m.$tag.log" "$out/$m.$tag.json" "$@" || return 1
  done
}
