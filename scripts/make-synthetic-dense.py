#!/usr/bin/env python3
"""Make the tiny random-weight dense models of data/golden/synthetic-dense/ byte for byte.

Usage: scripts/make-synthetic-dense.py [--out DIR] [names...]   (default: every model, into
                                                               data/golden/synthetic-dense/)

Every model: 4 layers, n_embd 64, 4 query heads / 2 kv heads of 32 (phi3: 16), FFN width 128, the llama-spm
vocabulary (data/vocab/ggml-vocab-llama-spm.gguf, fetched by scripts/get-vocabs.sh) cut to its first
4096 entries (unk, bos, eos, the 256 byte tokens and the highest-priority pieces; SPM tokenizes
with byte fallback), and the unigram channel of scripts/make-synthetic.py (token_embd column 0
carries 0.6 (log p_uni + 20), gemma2 / granite 0.2 (...), from data/golden/synthetic/unigram-counts.txt restricted to those
ids; row 0 of every attn_output / ffn_down is zero so it reaches the output norm unchanged).
Weights are drawn with numpy's default_rng(seed), everything F32; the `-q8_0` copies quantize
every 2-D tensor to Q8_0 with gguf-py (llama.cpp's reference rounding), 1-D tensors stay F32.

smollm3-tiny   seed 3001: llama layers, rope NORM base 10000, layer 3 without rope (NoPE every
               4th layer, fixed in llama.cpp), tied output.
mistral3-tiny  seed 3002: llama layers with attn_output.bias, rope NORM base 10000 with YaRN
               (factor 4, original context 32, beta_fast 4, beta_slow 0.25: ramp over pairs 0..6,
               yarn_log_multiplier 1),
               attention temperature scale 0.1 (Q x ln(floor(pos / 32) + 1) * 0.1 + 1), an untied output.
gemma2-tiny    seed 3003: gemma2 layers (post-attention / post-FFN norms, GELU-tanh MLP, embeddings x 8,
               Q x 1/sqrt(32)), rope NEOX base 10000, sliding window 32 on the even layers, attention
               logit soft-capping 4, final logit soft-capping 15, tied output.
phi3-tiny      seed 3004: heads of 16 (llama.cpp's phi3 wants n_head x head_dim = n_embd), fused
               attn_qkv and fused ffn_up (gate rows, then up), rope NEOX base 10000 over 12 of the 16
               dims with LongRoPE factors (rope_factors_short used at ctx 128; rope_factors_long
               differ; original context 4096 of 16384) and rope.scaling.attn_factor 1.1;
               attention.sliding_window 32, which llama.cpp ignores for phi3; tied output.
granite-tiny   seed 3005: llama layers, rope NORM base 10000, embedding_scale 3, residual_scale 0.7,
               attention.scale 0.3, logit_scale 1.5, the weaker unigram channel of gemma2-tiny, tied output.

Deterministic: same inputs and seeds give byte-identical files (numpy >= 1.17, gguf-py 0.19);
their SHA-256 are in data/golden/synthetic-dense/SHA256SUMS, checked after writing.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import gguf
import numpy as np

import synthetic_vocab

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data/golden/synthetic-dense"
VOCAB = ROOT / "data/vocab/ggml-vocab-llama-spm.gguf"
UNIGRAM = ROOT / "data/golden/synthetic/unigram-counts.txt"
N_VOCAB = 4096
N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, HD, N_FF = 4, 64, 4, 2, 32, 128

# name: (arch, seed)
MODELS = {"smollm3-tiny": ("smollm3", 3001), "mistral3-tiny": ("mistral3", 3002), "gemma2-tiny": ("gemma2", 3003),
          "phi3-tiny": ("phi3", 3004), "granite-tiny": ("granite", 3005)}


def head_dim(arch: str) -> int:
    """phi3's attn_output is n_embd x n_embd in llama.cpp: heads of 16 there."""
    return 16 if arch == "phi3" else HD
ALL = [n for m in MODELS for n in (m, m + "-q8_0")]


def unigram_log_prob() -> np.ndarray:
    counts = np.zeros(N_VOCAB, dtype=np.float64)
    for line in UNIGRAM.read_text().splitlines():
        if line and not line.startswith("#"):
            i, c = (int(x) for x in line.split())
            if i < N_VOCAB:
                counts[i] = c
    return np.log((counts + 0.5) / (counts.sum() + 0.5 * N_VOCAB))


def copy_vocab(w: gguf.GGUFWriter):
    synthetic_vocab.copy_vocab(w, gguf.GGUFReader(VOCAB), N_VOCAB, False)


class Draw:
    """Weights in file order from one generator."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def mat(self, rows: int, cols: int, gain: float = 1.0, zero_row0: bool = False) -> np.ndarray:
        m = (self.rng.standard_normal((rows, cols)) * (gain / np.sqrt(cols))).astype(np.float32)
        if zero_row0:
            m[0] = 0.0
        return m

    def norm(self, n: int) -> np.ndarray:
        return (1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def bias(self, n: int) -> np.ndarray:
        b = (0.1 * self.rng.standard_normal(n)).astype(np.float32)
        b[0] = 0.0
        return b


def common_keys(w: gguf.GGUFWriter, arch: str, name: str, seed: int, file_type: int):
    # llama.cpp sets phi-3 token attributes by general.name and needs <|endoftext|> then (not in this vocabulary)
    w.add_name(name.replace("phi3", "tiny-p3"))
    w.add_description(f"synthetic random-weight {arch} model for architecture tests (scripts/make-synthetic-dense.py, seed {seed}); not a trained model")
    w.add_file_type(file_type)
    w.add_quantization_version(2)
    w.add_uint32(f"{arch}.context_length", 16384 if arch == "phi3" else 4096)
    w.add_uint32(f"{arch}.embedding_length", N_EMBD)
    w.add_uint32(f"{arch}.block_count", N_LAYER)
    w.add_uint32(f"{arch}.feed_forward_length", N_FF)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD_KV)
    w.add_uint32(f"{arch}.attention.key_length", head_dim(arch))
    w.add_uint32(f"{arch}.attention.value_length", head_dim(arch))
    w.add_uint32(f"{arch}.rope.dimension_count", 12 if arch == "phi3" else head_dim(arch))
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_uint32(f"{arch}.vocab_size", N_VOCAB)


def arch_keys(w: gguf.GGUFWriter, arch: str):
    if arch == "smollm3":
        w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    elif arch == "mistral3":
        w.add_float32(f"{arch}.rope.freq_base", 10000.0)
        w.add_string(f"{arch}.rope.scaling.type", "yarn")
        w.add_float32(f"{arch}.rope.scaling.factor", 4.0)
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", 32)
        w.add_float32(f"{arch}.rope.scaling.yarn_beta_fast", 4.0)
        w.add_float32(f"{arch}.rope.scaling.yarn_beta_slow", 0.25)
        w.add_float32(f"{arch}.rope.scaling.yarn_log_multiplier", 1.0)
        w.add_float32(f"{arch}.attention.temperature_scale", 0.1)
    elif arch == "gemma2":
        w.add_float32(f"{arch}.rope.freq_base", 10000.0)
        w.add_uint32(f"{arch}.attention.sliding_window", 32)
        w.add_float32(f"{arch}.attn_logit_softcapping", 4.0)
        w.add_float32(f"{arch}.final_logit_softcapping", 15.0)
    elif arch == "phi3":
        w.add_float32(f"{arch}.rope.freq_base", 10000.0)
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", 4096)
        w.add_float32(f"{arch}.rope.scaling.attn_factor", 1.1)
        w.add_uint32(f"{arch}.attention.sliding_window", 32)
    elif arch == "granite":
        w.add_float32(f"{arch}.rope.freq_base", 10000.0)
        w.add_float32(f"{arch}.embedding_scale", 3.0)
        w.add_float32(f"{arch}.residual_scale", 0.7)
        w.add_float32(f"{arch}.attention.scale", 0.3)
        w.add_float32(f"{arch}.logit_scale", 1.5)


def weights(arch: str, seed: int) -> list[tuple[str, np.ndarray]]:
    d = Draw(seed)
    # gemma2 adds post-norms (granite scales the embeddings by 3) (their outputs have unit RMS) to embeddings x 8: a weaker channel
    # (as gemma3-tiny in scripts/make-synthetic.py) so the layers still matter
    emb_std, prior_gain, out_norm0 = (0.2, 0.2, 1.6) if arch in ("gemma2", "granite") else (0.15, 0.6, 0.5)
    emb = (d.rng.standard_normal((N_VOCAB, N_EMBD)) * emb_std).astype(np.float32)
    emb[:, 0] = (prior_gain * (unigram_log_prob() + 20.0)).astype(np.float32)
    out_norm = d.norm(N_EMBD)
    out_norm[0] = out_norm0
    t = [("token_embd.weight", emb), ("output_norm.weight", out_norm)]
    if arch == "mistral3":
        t.append(("output.weight", d.mat(N_VOCAB, N_EMBD, gain=0.15 * np.sqrt(N_EMBD))))
    hd = head_dim(arch)
    if arch == "phi3":  # LongRoPE divisors per rotated pair (6 of them): short ones are used at ctx 128
        t.append(("rope_factors_long.weight", d.rng.uniform(1.0, 8.0, 6).astype(np.float32)))
        t.append(("rope_factors_short.weight", d.rng.uniform(1.0, 3.0, 6).astype(np.float32)))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        t.append((p + "attn_norm.weight", d.norm(N_EMBD)))
        if arch == "phi3":
            q, k, v = d.mat(N_HEAD * hd, N_EMBD, gain=2.5), d.mat(N_HEAD_KV * hd, N_EMBD, gain=2.5), d.mat(N_HEAD_KV * hd, N_EMBD)
            t.append((p + "attn_qkv.weight", np.concatenate([q, k, v])))
        else:
            t.append((p + "attn_q.weight", d.mat(N_HEAD * hd, N_EMBD, gain=2.5)))
            t.append((p + "attn_k.weight", d.mat(N_HEAD_KV * hd, N_EMBD, gain=2.5)))
            t.append((p + "attn_v.weight", d.mat(N_HEAD_KV * hd, N_EMBD)))
        t.append((p + "attn_output.weight", d.mat(N_EMBD, N_HEAD * hd, zero_row0=True)))
        if arch == "mistral3":
            t.append((p + "attn_output.bias", d.bias(N_EMBD)))
        if arch == "gemma2":
            t.append((p + "post_attention_norm.weight", d.norm(N_EMBD)))
        t.append((p + "ffn_norm.weight", d.norm(N_EMBD)))
        if arch == "phi3":  # fused: gate rows, then up rows
            t.append((p + "ffn_up.weight", np.concatenate([d.mat(N_FF, N_EMBD), d.mat(N_FF, N_EMBD)])))
        else:
            t.append((p + "ffn_gate.weight", d.mat(N_FF, N_EMBD)))
            t.append((p + "ffn_up.weight", d.mat(N_FF, N_EMBD)))
        t.append((p + "ffn_down.weight", d.mat(N_EMBD, N_FF, zero_row0=True)))
        if arch == "gemma2":
            t.append((p + "post_ffw_norm.weight", d.norm(N_EMBD)))
    if arch == "mistral3":  # the untied output shares the unigram channel
        t[2][1][:, 0] = emb[:, 0]
    return t


def build(name: str, out: Path) -> Path:
    base = name.removesuffix("-q8_0")
    quant = base != name
    arch, seed = MODELS[base]
    path = out / f"{name}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    common_keys(w, arch, name, seed, 7 if quant else 0)
    arch_keys(w, arch)
    copy_vocab(w)
    for tname, a in weights(arch, seed):
        if quant and a.ndim == 2:
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(tname, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(tname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def expected_sums() -> dict[str, str]:
    sums = OUT / "SHA256SUMS"
    if not sums.exists():
        return {}
    return {f.lstrip("*"): h for h, f in (line.split() for line in sums.read_text().splitlines() if line.strip())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=ALL)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-check", action="store_true", help="do not check against SHA256SUMS (when making new models)")
    args = ap.parse_args()
    if not VOCAB.exists():
        print(f"make-synthetic-dense: {VOCAB} missing (run scripts/get-vocabs.sh)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    want = expected_sums()
    bad = 0
    for name in args.names:
        if name not in ALL:
            print(f"make-synthetic-dense: unknown model {name} (known: {' '.join(ALL)})", file=sys.stderr)
            return 1
        path = build(name, args.out)
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if not args.no_check and want.get(path.name) != got:
            print(f"make-synthetic-dense: {path.name}: SHA-256 {got} is not the listed {want.get(path.name)}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
