#!/usr/bin/env bash
# Remake data/golden/synthetic-quant/: the synthetic llama of scripts/make-synthetic-quant.py quantized
# by llama-quantize to every block format of issue 13 it can write, llama.cpp's log-probs for each
# file, and llama.cpp's own flash-vs-dense noise on each (noise.tsv).
#
# Usage: scripts/make-quant-goldens.sh LLAMACPP_BIN LLAMA_TINY_GGUF [WORK_DIR]
#   LLAMACPP_BIN      llama.cpp's build/bin (llama-quantize, llama-perplexity; commit 0c1e570)
#   LLAMA_TINY_GGUF   the synthetic llama-tiny.gguf (its llama-spm vocabulary is cut to 512)
#   WORK_DIR          where the f32 model, imatrix and the full-vocabulary KL bases go (default
#                     /tmp/synthetic-quant); the bases are what `lse-server --perplexity-kld` reads.
# Every heavy step runs under nice -n 19 with 2 threads.
set -euo pipefail
bin=$1; tiny=$2; work=${3:-/tmp/synthetic-quant}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/llama-perplexity-lib.sh
. "$root/scripts/llama-perplexity-lib.sh"
out=$root/data/golden/synthetic-quant
wiki=$root/data/wiki.test.raw
mkdir -p "$work" "$out"
nice -n 19 python3 "$root/scripts/make-synthetic-quant.py" "$tiny" "$work"

# FILE_TYPE[:name]: llama-quant.cpp's file types with --pure store one tensor type everywhere, except
# that file type IQ2_S stores IQ2_XS tensors and IQ2_M stores IQ2_S; MXFP4_MOE --pure is MXFP4
# everywhere; NVFP4 has no file type, so it is Q8_0 with every weight overridden to nvfp4.
types="IQ4_NL IQ4_XS IQ2_XXS IQ2_XS IQ2_M:iq2_s IQ3_XXS IQ3_S IQ1_S IQ1_M TQ1_0 TQ2_0 MXFP4_MOE:mxfp4 Q8_0:nvfp4 Q1_0 Q2_0"
ppl() { nice -n 19 "$bin/llama-perplexity" -f "$wiki" -c 128 -b 128 --chunks 8 -t 2 "$@"; }
printf 'type\tllamacpp_fa_vs_dense_mean_kld\tmax_kld\tsame_top_pct\tppl_fa\n' > "$out/noise.tsv"
for ft in $types; do
  t=${ft%%:*}; lc=${ft#*:}; [ "$lc" = "$ft" ] && lc=$(echo "$t" | tr A-Z a-z)
  m=$out/llama-q-$lc.gguf
  extra=(); [ "$lc" = nvfp4 ] && extra=(--tensor-type 'weight=nvfp4')
  nice -n 19 "$bin/llama-quantize" --pure --imatrix "$work/llama-q.imatrix" "${extra[@]}" "$work/llama-q.gguf" "$m" "$t" 2 > "$work/quantize-$lc.log" 2>&1
  # the reference: flash attention, KV f16 (llama.cpp's default here)
  perplexity_logged "$work/$lc.fa.log" ppl -m "$m" -fa on --kl-divergence-base "$work/$lc.fa.kld"
  # llama.cpp's own noise: the dense path's base, compared with the flash base below (full vocabulary)
  ppl -m "$m" -fa off --kl-divergence-base "$work/$lc.dense.kld" > "$work/$lc.dense.log" 2>&1
  nice -n 19 python3 "$root/scripts/llamacpp-kld-to-json.py" "$work/$lc.fa.kld" "$work/$lc.fa.log" "$work/$lc.fa-kvf16.full.json" --top 12 --add-bos 1
  # keep 4 of the 8 windows (252 rows) so the committed goldens stay small
  python3 - "$work/$lc.fa-kvf16.full.json" "$out/llama-q-$lc.fa-kvf16.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["windows"] = d["windows"][:4]; d["chunk_ppl"] = d["chunk_ppl"][:4]; d["chunks"] = 4
d["ppl"] = d["chunk_ppl"][-1]; d.pop("ppl_err")
json.dump(d, open(sys.argv[2], "w"), separators=(",", ":")); open(sys.argv[2], "a").write("\n")
PY
  nice -n 19 python3 "$root/scripts/llamacpp-kld-compare.py" "$work/$lc.fa.kld" "$work/$lc.dense.kld" |
    awk -v t="$lc" -v p="$(grep -m1 -o "Final estimate: PPL = [0-9.]*" "$work/$lc.fa.log" | awk '{print $5}')" \
      '{print t "\t" $1 "\t" $2 "\t" $3 "\t" p}' | tee -a "$out/noise.tsv"
done

# Optional: this engine against the full-vocabulary flash bases (LSE=path/to/lse-server), flash and
# dense, KV f16, 8 chunks: lse.tsv in WORK_DIR (the numbers in the folder's README).
if [ -n "${LSE:-}" ]; then
  printf 'type\tflash_mean_kld\tflash_same_top\tdense_mean_kld\tdense_same_top\n' > "$work/lse.tsv"
  for ft in $types; do
    t=${ft%%:*}; lc=${ft#*:}; [ "$lc" = "$ft" ] && lc=$(echo "$t" | tr A-Z a-z)
    row=$lc
    for fa in on off; do
      nice -n 19 "$LSE" --model "$out/llama-q-$lc.gguf" --threads 2 --FlashPrefillV2 $fa --perplexity "$wiki" \
        --perplexity-ctx 128 --perplexity-chunks 8 --perplexity-kld "$work/$lc.fa.kld" > "$work/lse-$lc-$fa.json" 2>/dev/null
      row=$row$'\t'$(python3 -c "import json,sys; k=json.load(open(sys.argv[1]))['kld']; print(f\"{k['mean_kld']:.3e}\t{100*k['same_top']:.3f}\")" "$work/lse-$lc-$fa.json")
    done
    echo "$row" | tee -a "$work/lse.tsv"
  done
fi
