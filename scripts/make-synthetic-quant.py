#!/usr/bin/env python3
"""Make the f32 synthetic llama of data/golden/synthetic-quant/ (and its neutral imatrix).

Usage: scripts/make-synthetic-quant.py LLAMA_TINY_GGUF OUT_DIR

Writes OUT_DIR/llama-q.gguf and OUT_DIR/llama-q.imatrix. The model is made to be quantized by
llama-quantize to each of the block formats of issue 13 and compared with llama.cpp, so it is built
to be well conditioned (llama.cpp's own flash-vs-dense noise far below a mean KLD of 1e-3):
  * 1 layer, hidden 256, 4 heads / 2 kv heads of 64, ffn 256: every matrix row is a multiple of
    256, so every 256-element format applies to every matrix, token_embd included;
  * mild attention (q/k gain 1: score std ~1, no near-one-hot softmax), residual branches scaled
    0.5 (attn_output, ffn_down), logits of std ~1.6 (token_embd std 0.1, output tied to it);
  * the llama-spm vocabulary of LLAMA_TINY_GGUF cut to its first 512 entries (unk, bos, eos, the
    256 byte tokens and 253 pieces; SPM falls back to bytes), add_bos true, so files stay small.
The imatrix is neutral (every column weight 1.0, llama.cpp's legacy format): random weights have
no activation statistics, and llama-quantize insists on one for the 1- and 2-bit i-quants.

Deterministic: numpy default_rng(1313), gguf-py 0.19; same inputs give byte-identical files.
"""
import os
import struct
import sys

import gguf
import numpy as np

import synthetic_vocab

N_VOCAB = 512
H, NH, NKV, F, L = 256, 4, 2, 256, 1
HD = H // NH
SEED = 1313


def copy_vocab(w, r):
    synthetic_vocab.copy_vocab(w, r, N_VOCAB, True)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED)

    def mat(rows, cols, gain):
        return (rng.standard_normal((rows, cols)) * (gain / np.sqrt(cols))).astype(np.float32)

    def norm_w():
        return (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32)

    path = os.path.join(out, "llama-q.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("llama-q")
    w.add_description(f"synthetic random-weight llama for quant-format tests (scripts/make-synthetic-quant.py, seed {SEED}); not a trained model")
    w.add_file_type(0)
    w.add_quantization_version(2)
    w.add_context_length(2048)
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    w.add_rope_dimension_count(HD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(N_VOCAB)
    copy_vocab(w, gguf.GGUFReader(src))
    mats = []  # (name, n_cols) for the imatrix

    def add_mat(name, a):
        w.add_tensor(name, a)
        mats.append((name, a.shape[1]))

    add_mat("token_embd.weight", (rng.standard_normal((N_VOCAB, H)) * 0.1).astype(np.float32))
    w.add_tensor("output_norm.weight", norm_w())
    for il in range(L):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm_w())
        add_mat(p + "attn_q.weight", mat(H, H, 1.0))
        add_mat(p + "attn_k.weight", mat(NKV * HD, H, 1.0))
        add_mat(p + "attn_v.weight", mat(NKV * HD, H, 1.0))
        add_mat(p + "attn_output.weight", mat(H, H, 0.5))
        w.add_tensor(p + "ffn_norm.weight", norm_w())
        add_mat(p + "ffn_gate.weight", mat(F, H, 1.0))
        add_mat(p + "ffn_up.weight", mat(F, H, 1.0))
        add_mat(p + "ffn_down.weight", mat(H, F, 0.5))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    with open(os.path.join(out, "llama-q.imatrix"), "wb") as f:
        f.write(struct.pack("<i", len(mats)))
        for name, ncol in mats:
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b + struct.pack("<ii", 1, ncol))
            f.write(struct.pack(f"<{ncol}f", *([1.0] * ncol)))
        ds = b"neutral"
        f.write(struct.pack("<ii", 1, len(ds)) + ds)
    print("wrote", path)


if __name__ == "__main__":
    main()
