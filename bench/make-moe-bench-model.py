#!/usr/bin/env python3
"""Write a random-weight qwen3moe of realistic shape for the MoE prefill benchmark (not for tests).

Usage: bench/make-moe-bench-model.py VOCAB_GGUF OUT.gguf

12 layers, n_embd 1024, 16 heads / 4 KV heads of 64, 32 experts (top 8) of width 384 with separate
gate/up/down tensors, the llama-spm vocabulary cut to 4096 entries; ~490M parameters written as
f16 (quantize with llama-quantize, e.g. Q8_0 for ~0.5 GB). Deterministic (numpy default_rng seed).
"""
import importlib.util
import os
import sys

import gguf
import numpy as np

spec = importlib.util.spec_from_file_location("moe", os.path.join(os.path.dirname(__file__), "..", "scripts", "make-synthetic-moe.py"))
moe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(moe)

N_LAYER, N_EMBD, N_HEAD, N_KV, HD, N_EXPERT, N_USED, N_FF = 12, 1024, 16, 4, 64, 32, 8, 384


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(sys.argv[2], "qwen3moe")
    w.add_name("qwen3moe-bench")
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF * N_USED)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_expert_feed_forward_length(N_FF)
    w.add_file_type(1)
    moe.copy_vocab(w, gguf.GGUFReader(sys.argv[1]), False)
    f16 = lambda a: a.astype(np.float16)
    w.add_tensor("token_embd.weight", f16(moe.normal(rng, (moe.N_VOCAB, N_EMBD), 1)))
    w.add_tensor("output_norm.weight", moe.norm_w(rng, N_EMBD))
    w.add_tensor("output.weight", f16(moe.normal(rng, (moe.N_VOCAB, N_EMBD), N_EMBD)))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", moe.norm_w(rng, N_EMBD))
        w.add_tensor(p + "attn_q.weight", f16(moe.normal(rng, (N_HEAD * HD, N_EMBD), N_EMBD)))
        w.add_tensor(p + "attn_k.weight", f16(moe.normal(rng, (N_KV * HD, N_EMBD), N_EMBD)))
        w.add_tensor(p + "attn_v.weight", f16(moe.normal(rng, (N_KV * HD, N_EMBD), N_EMBD)))
        w.add_tensor(p + "attn_output.weight", f16(moe.normal(rng, (N_EMBD, N_HEAD * HD), N_HEAD * HD, gain=0.5)))
        w.add_tensor(p + "attn_q_norm.weight", moe.norm_w(rng, HD))
        w.add_tensor(p + "attn_k_norm.weight", moe.norm_w(rng, HD))
        w.add_tensor(p + "ffn_norm.weight", moe.norm_w(rng, N_EMBD))
        w.add_tensor(p + "ffn_gate_inp.weight", moe.normal(rng, (N_EXPERT, N_EMBD), N_EMBD, gain=3.0))
        gate, up, down = moe.experts(rng, N_EXPERT, N_FF, N_EMBD)
        w.add_tensor(p + "ffn_gate_exps.weight", f16(gate))
        w.add_tensor(p + "ffn_up_exps.weight", f16(up))
        w.add_tensor(p + "ffn_down_exps.weight", f16(0.5 * down))
    moe.write(w)


if __name__ == "__main__":
    main()
