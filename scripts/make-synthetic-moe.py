#!/usr/bin/env python3
"""Make the tiny random-weight mixture-of-experts models of data/golden/synthetic-moe/.

Usage: scripts/make-synthetic-moe.py SYNTHETIC_DIR OUT_DIR

Each model is derived from a shared synthetic dense model in SYNTHETIC_DIR (the llama-spm
vocabulary, attention / delta-net tensors and norms are copied) with:
  * the vocabulary cut to its first 4096 entries (unk, bos, eos, the 256 byte tokens and the
    highest-priority pieces survive; SPM tokenizes with byte fallback), token_embd rows likewise,
    so the files stay below 3 MB;
  * every dense FFN replaced by a mixture of experts drawn with numpy's default_rng(seed).

qwen3moe-tiny   from qwen3-tiny:  3 layers, 8 experts top-2, expert width 64, separate
                ffn_gate_exps / ffn_up_exps / ffn_down_exps.
qwen35moe-tiny  from qwen35-tiny: 4 hybrid layers (3 delta-net, 1 attention), 8 experts top-3,
                expert width 32, a shared expert of width 64 gated by ffn_gate_inp_shexp;
                layers 0-1 store the fused ffn_gate_up_exps, layers 2-3 separate tensors; plus a
                multi-token-prediction block at blk.4 (nextn_predict_layers = 1) that inference
                does not run.
gpt-oss-tiny    4 layers (even ones sliding-window 32), 4 heads / 2 kv heads of 32 with q/k/v/o
                biases and attention sinks, rope NEOX base 1.5e5 with YaRN (factor 32, original
                context 4096), 8 experts top-2 of width 32 with router and expert biases, the
                clamped SwiGLU; an untied output (a copy of token_embd).

Deterministic: same inputs and seeds give byte-identical files (numpy >= 1.17, gguf-py 0.19).
"""
import sys

import gguf
import numpy as np

import synthetic_vocab

N_VOCAB = 4096


def copy_vocab(w, r, add_bos):
    synthetic_vocab.copy_vocab(w, r, N_VOCAB, add_bos)


def tensors(r):
    return {t.name: t for t in r.tensors}


def arr(t):
    """The tensor's data in numpy shape (ggml dims reversed), copied."""
    shape = [int(d) for d in reversed(list(t.shape))]
    return np.array(t.data).reshape(shape).copy()


def normal(rng, shape, fan_in, gain=1.0):
    return (rng.standard_normal(shape) * (gain / np.sqrt(fan_in))).astype(np.float32)


def norm_w(rng, n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def experts(rng, n_expert, n_ff, n_embd):
    """(gate, up, down) in numpy shapes [n_expert, n_ff, n_embd] / [n_expert, n_embd, n_ff];
    row 0 of down is zero so the unigram channel crosses the layer unchanged."""
    gate = normal(rng, (n_expert, n_ff, n_embd), n_embd)
    up = normal(rng, (n_expert, n_ff, n_embd), n_embd)
    down = normal(rng, (n_expert, n_embd, n_ff), n_ff)
    down[:, 0, :] = 0.0
    return gate, up, down


def common_keys(w, arch, src, n_layer, name, seed, desc):
    w.add_name(name)
    w.add_description(f"synthetic random-weight {arch} model for architecture tests (scripts/make-synthetic-moe.py, seed {seed}); not a trained model")
    w.add_file_type(0)
    w.add_quantization_version(2)
    for k, f in src.fields.items():
        if not k.startswith(src_arch(src) + "."):
            continue
        suffix = k[len(src_arch(src)) + 1:]
        if suffix in ("block_count", "feed_forward_length", "attention.recurrent_layers"):
            continue
        v = f.contents()
        key = f"{arch}.{suffix}"
        if isinstance(v, list):
            if isinstance(v[0], bool):
                w.add_array(key, v)
            else:
                w.add_array(key, [int(x) for x in v])
        elif isinstance(v, float):
            w.add_float32(key, v)
        elif isinstance(v, (int, np.integer)):
            w.add_uint32(key, int(v))
        else:
            raise SystemExit(f"unexpected key {k}")
    w.add_block_count(n_layer)


def src_arch(r):
    return r.fields["general.architecture"].contents()


def make_qwen3moe(syn, out):
    seed = 2001
    rng = np.random.default_rng(seed)
    src = gguf.GGUFReader(f"{syn}/qwen3-tiny.gguf")
    st = tensors(src)
    n_layer, n_embd, n_expert, n_used, n_ff = 3, 64, 8, 2, 64
    w = gguf.GGUFWriter(f"{out}/qwen3moe-tiny.gguf", "qwen3moe")
    common_keys(w, "qwen3moe", src, n_layer, "qwen3moe-tiny", seed, "")
    w.add_feed_forward_length(n_ff * n_used)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(n_ff)
    copy_vocab(w, src, False)
    w.add_tensor("token_embd.weight", arr(st["token_embd.weight"])[:N_VOCAB].astype(np.float16))
    w.add_tensor("output_norm.weight", arr(st["output_norm.weight"]))
    for il in range(n_layer):
        for t in ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm", "ffn_norm"]:
            w.add_tensor(f"blk.{il}.{t}.weight", arr(st[f"blk.{il}.{t}.weight"]))
        w.add_tensor(f"blk.{il}.ffn_gate_inp.weight", normal(rng, (n_expert, n_embd), n_embd, gain=3.0))
        gate, up, down = experts(rng, n_expert, n_ff, n_embd)
        w.add_tensor(f"blk.{il}.ffn_gate_exps.weight", gate)
        w.add_tensor(f"blk.{il}.ffn_up_exps.weight", up)
        w.add_tensor(f"blk.{il}.ffn_down_exps.weight", down)
    write(w)


def make_qwen35moe(syn, out):
    seed = 2002
    rng = np.random.default_rng(seed)
    src = gguf.GGUFReader(f"{syn}/qwen35-tiny.gguf")
    st = tensors(src)
    n_layer, n_embd, n_expert, n_used, n_ff, n_sh = 4, 64, 8, 3, 32, 64
    n_head, n_head_kv, hd = 4, 2, 32
    w = gguf.GGUFWriter(f"{out}/qwen35moe-tiny.gguf", "qwen35moe")
    common_keys(w, "qwen35moe", src, n_layer + 1, "qwen35moe-tiny", seed, "")
    w.add_uint32("qwen35moe.nextn_predict_layers", 1)
    w.add_array("qwen35moe.attention.recurrent_layers", [True, True, True, False, False])
    w.add_feed_forward_length(n_ff * n_used)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(n_ff)
    w.add_expert_shared_feed_forward_length(n_sh)
    copy_vocab(w, src, False)
    w.add_tensor("token_embd.weight", arr(st["token_embd.weight"])[:N_VOCAB].astype(np.float16))
    w.add_tensor("output_norm.weight", arr(st["output_norm.weight"]))

    def moe(il, fused):
        w.add_tensor(f"blk.{il}.ffn_gate_inp.weight", normal(rng, (n_expert, n_embd), n_embd, gain=3.0))
        gate, up, down = experts(rng, n_expert, n_ff, n_embd)
        if fused:
            w.add_tensor(f"blk.{il}.ffn_gate_up_exps.weight", np.concatenate([gate, up], axis=1))
        else:
            w.add_tensor(f"blk.{il}.ffn_gate_exps.weight", gate)
            w.add_tensor(f"blk.{il}.ffn_up_exps.weight", up)
        w.add_tensor(f"blk.{il}.ffn_down_exps.weight", down)
        w.add_tensor(f"blk.{il}.ffn_gate_inp_shexp.weight", normal(rng, (n_embd,), n_embd, gain=2.0))
        w.add_tensor(f"blk.{il}.ffn_gate_shexp.weight", normal(rng, (n_sh, n_embd), n_embd))
        w.add_tensor(f"blk.{il}.ffn_up_shexp.weight", normal(rng, (n_sh, n_embd), n_embd))
        sd = normal(rng, (n_embd, n_sh), n_sh)
        sd[0, :] = 0.0
        w.add_tensor(f"blk.{il}.ffn_down_shexp.weight", sd)

    for il in range(n_layer):
        for t in st:
            if t.startswith(f"blk.{il}.") and ".ffn_" not in t:
                w.add_tensor(t, arr(st[t]))
        moe(il, fused=il < 2)
    # the MTP block: a full-attention layer with its own MoE and the nextn projections
    il = n_layer
    w.add_tensor(f"blk.{il}.attn_norm.weight", norm_w(rng, n_embd))
    w.add_tensor(f"blk.{il}.post_attention_norm.weight", norm_w(rng, n_embd))
    w.add_tensor(f"blk.{il}.attn_q.weight", normal(rng, (2 * n_head * hd, n_embd), n_embd))
    w.add_tensor(f"blk.{il}.attn_k.weight", normal(rng, (n_head_kv * hd, n_embd), n_embd))
    w.add_tensor(f"blk.{il}.attn_v.weight", normal(rng, (n_head_kv * hd, n_embd), n_embd))
    w.add_tensor(f"blk.{il}.attn_output.weight", normal(rng, (n_embd, n_head * hd), n_head * hd))
    w.add_tensor(f"blk.{il}.attn_q_norm.weight", norm_w(rng, hd))
    w.add_tensor(f"blk.{il}.attn_k_norm.weight", norm_w(rng, hd))
    moe(il, fused=True)
    w.add_tensor(f"blk.{il}.nextn.eh_proj.weight", normal(rng, (n_embd, 2 * n_embd), 2 * n_embd))
    w.add_tensor(f"blk.{il}.nextn.enorm.weight", norm_w(rng, n_embd))
    w.add_tensor(f"blk.{il}.nextn.hnorm.weight", norm_w(rng, n_embd))
    w.add_tensor(f"blk.{il}.nextn.shared_head_norm.weight", norm_w(rng, n_embd))
    write(w)


def make_gpt_oss(syn, out):
    seed = 2003
    rng = np.random.default_rng(seed)
    src = gguf.GGUFReader(f"{syn}/qwen3-tiny.gguf")
    st = tensors(src)
    n_layer, n_embd, n_head, n_head_kv, hd = 4, 64, 4, 2, 32
    n_expert, n_used, n_ff = 8, 2, 32
    a = "gpt-oss"
    w = gguf.GGUFWriter(f"{out}/gpt-oss-tiny.gguf", a)
    w.add_name("gpt-oss-tiny")
    w.add_description(f"synthetic random-weight gpt-oss model for architecture tests (scripts/make-synthetic-moe.py, seed {seed}); not a trained model")
    w.add_file_type(0)
    w.add_quantization_version(2)
    w.add_uint32(f"{a}.context_length", 131072)
    w.add_uint32(f"{a}.embedding_length", n_embd)
    w.add_uint32(f"{a}.block_count", n_layer)
    w.add_uint32(f"{a}.feed_forward_length", n_ff)
    w.add_uint32(f"{a}.attention.head_count", n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", n_head_kv)
    w.add_uint32(f"{a}.attention.key_length", hd)
    w.add_uint32(f"{a}.attention.value_length", hd)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(f"{a}.rope.freq_base", 150000.0)
    w.add_string(f"{a}.rope.scaling.type", "yarn")
    w.add_float32(f"{a}.rope.scaling.factor", 32.0)
    w.add_uint32(f"{a}.rope.scaling.original_context_length", 4096)
    w.add_uint32(f"{a}.attention.sliding_window", 32)
    w.add_uint32(f"{a}.expert_count", n_expert)
    w.add_uint32(f"{a}.expert_used_count", n_used)
    w.add_uint32(f"{a}.expert_feed_forward_length", n_ff)
    copy_vocab(w, src, False)
    emb = arr(st["token_embd.weight"])[:N_VOCAB].astype(np.float16)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", arr(st["output_norm.weight"]))
    w.add_tensor("output.weight", emb.copy())

    def bias(shape, scale=0.1):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm_w(rng, n_embd))
        w.add_tensor(p + "post_attention_norm.weight", norm_w(rng, n_embd))
        w.add_tensor(p + "attn_q.weight", normal(rng, (n_head * hd, n_embd), n_embd, gain=2.0))
        w.add_tensor(p + "attn_q.bias", bias(n_head * hd))
        w.add_tensor(p + "attn_k.weight", normal(rng, (n_head_kv * hd, n_embd), n_embd, gain=2.0))
        w.add_tensor(p + "attn_k.bias", bias(n_head_kv * hd))
        w.add_tensor(p + "attn_v.weight", normal(rng, (n_head_kv * hd, n_embd), n_embd))
        w.add_tensor(p + "attn_v.bias", bias(n_head_kv * hd))
        o = normal(rng, (n_embd, n_head * hd), n_head * hd)
        o[0, :] = 0.0
        ob = bias(n_embd)
        ob[0] = 0.0
        w.add_tensor(p + "attn_output.weight", o)
        w.add_tensor(p + "attn_output.bias", ob)
        w.add_tensor(p + "attn_sinks.weight", rng.standard_normal(n_head).astype(np.float32))
        w.add_tensor(p + "ffn_gate_inp.weight", normal(rng, (n_expert, n_embd), n_embd, gain=3.0))
        w.add_tensor(p + "ffn_gate_inp.bias", bias(n_expert))
        gate, up, down = experts(rng, n_expert, n_ff, n_embd)
        gate *= 3.0  # gate values beyond the clamp at 7 occur
        w.add_tensor(p + "ffn_gate_exps.weight", gate)
        w.add_tensor(p + "ffn_gate_exps.bias", bias((n_expert, n_ff)))
        w.add_tensor(p + "ffn_up_exps.weight", up)
        w.add_tensor(p + "ffn_up_exps.bias", bias((n_expert, n_ff)))
        w.add_tensor(p + "ffn_down_exps.weight", down)
        db = bias((n_expert, n_embd))
        db[:, 0] = 0.0
        w.add_tensor(p + "ffn_down_exps.bias", db)
    write(w)


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    syn, out = sys.argv[1], sys.argv[2]
    make_qwen3moe(syn, out)
    make_qwen35moe(syn, out)
    make_gpt_oss(syn, out)


if __name__ == "__main__":
    main()
