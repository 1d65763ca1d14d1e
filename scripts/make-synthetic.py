#!/usr/bin/env python3
"""Rebuild the synthetic tiny GGUF models of data/golden/synthetic/ byte for byte.

The models are random-weight (see data/golden/synthetic/README.md for what each one exercises and how
the weights are drawn); llama.cpp's outputs for them (*.ppl.json, *.top32.json, *.llamacpp.kld) are
committed, the models (~5 MB each, random bits that do not compress) are not: this script makes them
again from their seeds and checks each against its SHA-256 in data/golden/synthetic/SHA256SUMS.

Inputs: numpy and gguf (the gguf-py package, for reading the vocabulary and for Q8_0/Q4_0
quantization), data/vocab/ggml-vocab-llama-spm.gguf (fetched by scripts/get-vocabs.sh; its tokenizer
is copied verbatim into every model) and data/golden/synthetic/unigram-counts.txt (the unigram channel).

  python3 scripts/make-synthetic.py [--out DIR] [names...]     (default: every model, into
                                                               data/golden/synthetic/)
"""
from __future__ import annotations

import argparse
import hashlib
import math
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SYN = ROOT / "data/golden/synthetic"
VOCAB = ROOT / "data/vocab/ggml-vocab-llama-spm.gguf"
N_VOCAB = 32000
ALIGN = 32

# GGUF value types
U32, I32, F32V, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9
# ggml tensor types
T_F32, T_F16, T_Q4_0, T_Q8_0 = 0, 1, 2, 8

# name: arch, seed, layers, dims, weight types, extra hyper-parameters, the draw scales (README table)
MODELS = {
    "llama-tiny": dict(arch="llama", seed=1001, n_layer=4, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=192,
                       emb_type=T_F16, mat_type=T_F32, prior_gain=0.6, prior_offset=20.0, out_norm0=0.6,
                       emb_std=0.15, qk_gain=2.5, qk_norm_scale=None, file_type=1),
    "qwen2-tiny": dict(arch="qwen2", seed=1002, n_layer=3, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=224,
                       emb_type=T_F16, mat_type=T_F16, prior_gain=0.6, prior_offset=20.0, out_norm0=0.5,
                       emb_std=0.15, qk_gain=2.5, qk_norm_scale=None, file_type=1),
    "qwen3-tiny": dict(arch="qwen3", seed=1003, n_layer=3, n_embd=64, n_head=4, n_head_kv=2, head_dim=32, n_ff=160,
                       emb_type=T_F16, mat_type=T_F32, prior_gain=0.6, prior_offset=20.0, out_norm0=0.5,
                       emb_std=0.15, qk_gain=1.0, qk_norm_scale=2.5, file_type=1),
    "gemma3-tiny": dict(arch="gemma3", seed=1004, n_layer=4, n_embd=64, n_head=4, n_head_kv=1, head_dim=32, n_ff=256,
                        emb_type=T_F16, mat_type=T_F16, prior_gain=0.2, prior_offset=20.0, out_norm0=1.6,
                        emb_std=0.2, qk_gain=1.0, qk_norm_scale=2.5, file_type=1),
    "qwen35-tiny": dict(arch="qwen35", seed=1005, n_layer=4, n_embd=64, n_head=4, n_head_kv=2, head_dim=32, n_ff=192,
                        emb_type=T_F16, mat_type=T_F32, prior_gain=0.6, prior_offset=20.0, out_norm0=0.5,
                        emb_std=0.15, qk_gain=1.0, qk_norm_scale=2.5, file_type=1),
}
# Quantized copies of llama-tiny: every 2-D tensor quantized with gguf-py, 1-D tensors stay F32.
QUANTIZED = {"llama-tiny-q8_0": ("llama-tiny", T_Q8_0, 7), "llama-tiny-q4_0": ("llama-tiny", T_Q4_0, 2)}
ALL = list(MODELS) + list(QUANTIZED)


# ---------------------------------------------------------------------------------------------- GGUF
def gstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key: str, vtype: int, value) -> bytes:
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == STR:
        return out + gstr(value)
    if vtype == U32:
        return out + struct.pack("<I", value)
    if vtype == F32V:
        return out + struct.pack("<f", value)
    if vtype == BOOL:
        return out + struct.pack("<?", value)
    if vtype == ARR:
        etype, items = value
        fmt = {I32: "<i", BOOL: "<?"}[etype]
        return out + struct.pack("<IQ", etype, len(items)) + b"".join(struct.pack(fmt, x) for x in items)
    raise ValueError(vtype)


def vocab_kvs() -> dict[str, bytes]:
    """The tokenizer.* key-value entries of the llama-spm vocabulary, as their raw bytes."""
    from gguf import GGUFReader

    r = GGUFReader(str(VOCAB))
    return {k: b"".join(p.tobytes() for p in f.parts) for k, f in r.fields.items() if k.startswith("tokenizer.")}


def write_gguf(path: Path, kvs: list[bytes], tensors: list[tuple[str, tuple, int, bytes]]) -> None:
    """tensors: (name, numpy shape (rows, cols), ggml type, data bytes), in file order."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    infos, offset = [], 0
    for name, shape, ttype, data in tensors:
        dims = tuple(reversed(shape))
        infos.append(gstr(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                     + struct.pack("<IQ", ttype, offset))
        offset += len(data) + (-len(data)) % ALIGN
    head += b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    body = b"".join(d + b"\0" * ((-len(d)) % ALIGN) for *_, d in tensors)
    path.write_bytes(head + body)


# ----------------------------------------------------------------------------------------- weights
def unigram_log_prob() -> np.ndarray:
    """log p_uni(v): add-1/2 smoothed unigram distribution over the 32000 llama-spm ids."""
    counts = np.zeros(N_VOCAB, dtype=np.float64)
    for line in (SYN / "unigram-counts.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            i, c = line.split()
            counts[int(i)] = int(c)
    return np.log((counts + 0.5) / (counts.sum() + 0.5 * N_VOCAB))


def tensor_list(m: dict) -> list[tuple[str, tuple]]:
    """(name, numpy shape) in file order, which is also the draw order."""
    e, hd, nh, nkv, ff = m["n_embd"], m["head_dim"], m["n_head"], m["n_head_kv"], m["n_ff"]
    out = [("token_embd.weight", (N_VOCAB, e)), ("output_norm.weight", (e,))]
    for i in range(m["n_layer"]):
        b = f"blk.{i}."
        if m["arch"] == "qwen35" and i < m["n_layer"] - 1:  # gated delta net layers
            out += [(b + "attn_norm.weight", (e,)), (b + "attn_qkv.weight", (128, e)), (b + "attn_gate.weight", (64, e)),
                    (b + "ssm_conv1d.weight", (128, 4)), (b + "ssm_dt.bias", (4,)), (b + "ssm_a", (4,)),
                    (b + "ssm_beta.weight", (4, e)), (b + "ssm_alpha.weight", (4, e)), (b + "ssm_norm.weight", (16,)),
                    (b + "ssm_out.weight", (e, 64)), (b + "post_attention_norm.weight", (e,))]
        else:
            qrows = nh * hd * (2 if m["arch"] == "qwen35" else 1)  # qwen35: [q | gate] per head
            out.append((b + "attn_norm.weight", (e,)))
            out.append((b + "attn_q.weight", (qrows, e)))
            if m["arch"] == "qwen2":
                out.append((b + "attn_q.bias", (qrows,)))
            out.append((b + "attn_k.weight", (nkv * hd, e)))
            if m["arch"] == "qwen2":
                out.append((b + "attn_k.bias", (nkv * hd,)))
            out.append((b + "attn_v.weight", (nkv * hd, e)))
            if m["arch"] == "qwen2":
                out.append((b + "attn_v.bias", (nkv * hd,)))
            out.append((b + "attn_output.weight", (e, nh * hd)))
            if m["qk_norm_scale"] is not None:
                out += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
            if m["arch"] in ("gemma3", "qwen35"):
                out.append((b + "post_attention_norm.weight", (e,)))
        if m["arch"] != "qwen35":
            out.append((b + "ffn_norm.weight", (e,)))
        out += [(b + "ffn_gate.weight", (ff, e)), (b + "ffn_up.weight", (ff, e)), (b + "ffn_down.weight", (e, ff))]
        if m["arch"] == "gemma3":
            out.append((b + "post_ffw_norm.weight", (e,)))
    return out


def make_weights(m: dict) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(m["seed"])
    out = []
    pending_a = dt_bias = None
    for name, shape in tensor_list(m):
        short = name.split(".", 2)[-1] if name.startswith("blk.") else name
        if name == "token_embd.weight":
            w = rng.standard_normal(shape) * m["emb_std"]
            w[:, 0] = m["prior_gain"] * (unigram_log_prob() + m["prior_offset"])
        elif short == "ssm_dt.bias":
            w = dt_bias  # drawn before attn_qkv (below)
        elif short == "ssm_a":
            w = pending_a
        elif len(shape) == 1:
            if short.endswith(".bias"):
                w = 0.3 * rng.standard_normal(shape)
            else:
                w = 1 + 0.1 * rng.standard_normal(shape)
                if short in ("attn_q_norm.weight", "attn_k_norm.weight"):
                    w = w * m["qk_norm_scale"]
                if name == "output_norm.weight":
                    w[0] = m["out_norm0"]
        else:
            if short == "attn_qkv.weight":
                # softplus(dt bias) log-uniform in [0.01, 0.5]
                dt_bias = np.log(np.expm1(np.exp(rng.uniform(math.log(0.01), math.log(0.5), 4).astype(np.float32))))
            if short == "ssm_conv1d.weight":
                w = 0.5 * rng.standard_normal(shape)
                out.append((name, w))
                pending_a = -rng.uniform(1, 16, 4)
                continue
            gain = m["qk_gain"] if short in ("attn_q.weight", "attn_k.weight") else 1.0
            w = rng.standard_normal(shape) * gain / math.sqrt(shape[1])
            if short in ("attn_output.weight", "ffn_down.weight", "ssm_out.weight"):
                w[0] = 0.0  # the unigram carrier crosses the layers unchanged
        out.append((name, w))
    return out


def encode(w: np.ndarray, ttype: int) -> bytes:
    w32 = np.asarray(w, dtype=np.float32)
    if ttype == T_F32:
        return w32.tobytes()
    if ttype == T_F16:
        return w32.astype(np.float16).tobytes()
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    q = {T_Q8_0: GGMLQuantizationType.Q8_0, T_Q4_0: GGMLQuantizationType.Q4_0}[ttype]
    return quantize(w32, q).tobytes()


# ---------------------------------------------------------------------------------------- metadata
def metadata(name: str, m: dict, file_type: int, vocab: dict[str, bytes]) -> list[bytes]:
    a = m["arch"]
    desc = (f"synthetic random-weight {a} model for architecture tests (make-synthetic.py, seed {m['seed']}); "
            "not a trained model")
    kvs = [kv("general.architecture", STR, a), kv("general.name", STR, name), kv("general.description", STR, desc),
           kv("general.file_type", U32, file_type), kv("general.quantization_version", U32, 2)]
    ctx = {"llama": 2048, "qwen2": 4096, "qwen3": 4096, "gemma3": 8192, "qwen35": 8192}[a]
    kvs += [kv(f"{a}.context_length", U32, ctx), kv(f"{a}.embedding_length", U32, m["n_embd"]),
            kv(f"{a}.block_count", U32, m["n_layer"]), kv(f"{a}.feed_forward_length", U32, m["n_ff"]),
            kv(f"{a}.attention.head_count", U32, m["n_head"]), kv(f"{a}.attention.head_count_kv", U32, m["n_head_kv"]),
            kv(f"{a}.attention.layer_norm_rms_epsilon", F32V, 1e-5 if a == "llama" else 1e-6)]
    base = {"llama": 5e5, "qwen2": 1e6, "qwen3": 1e6, "gemma3": 1e6, "qwen35": 1e7}[a]
    kvs.append(kv(f"{a}.rope.freq_base", F32V, base))
    if a == "llama":
        kvs += [kv("llama.vocab_size", U32, N_VOCAB), kv("llama.rope.dimension_count", U32, m["head_dim"])]
    if a in ("qwen3", "gemma3", "qwen35"):
        kvs += [kv(f"{a}.attention.key_length", U32, m["head_dim"]), kv(f"{a}.attention.value_length", U32, m["head_dim"])]
    if a == "gemma3":
        kvs += [kv("gemma3.attention.sliding_window", U32, 32), kv("gemma3.attention.sliding_window_pattern", U32, 3),
                kv("gemma3.rope.freq_base_swa", F32V, 1e4), kv("gemma3.rope.scaling.type", STR, "linear"),
                kv("gemma3.rope.scaling.factor", F32V, 8.0), kv("gemma3.final_logit_softcapping", F32V, 30.0)]
    if a == "qwen35":
        kvs += [kv("qwen35.rope.dimension_count", U32, 16), kv("qwen35.rope.dimension_sections", ARR, (I32, [3, 3, 2, 0])),
                kv("qwen35.ssm.conv_kernel", U32, 4), kv("qwen35.ssm.state_size", U32, 16),
                kv("qwen35.ssm.group_count", U32, 2), kv("qwen35.ssm.time_step_rank", U32, 4),
                kv("qwen35.ssm.inner_size", U32, 64), kv("qwen35.full_attention_interval", U32, 4),
                kv("qwen35.attention.recurrent_layers", ARR, (BOOL, [True, True, True, False]))]
    # the llama-spm tokenizer, verbatim; Qwen models say add_bos_token=false (set after add_eos_token)
    for k in ("model", "pre", "tokens", "scores", "token_type", "bos_token_id", "eos_token_id", "unknown_token_id"):
        kvs.append(vocab[f"tokenizer.ggml.{k}"])
    if a.startswith("qwen"):
        kvs += [vocab["tokenizer.ggml.add_eos_token"], kv("tokenizer.ggml.add_bos_token", BOOL, False)]
    else:
        kvs += [vocab["tokenizer.ggml.add_bos_token"], vocab["tokenizer.ggml.add_eos_token"]]
    return kvs


def build(name: str, out_dir: Path, vocab: dict[str, bytes]) -> Path:
    if name in QUANTIZED:
        src, mat_type, file_type = QUANTIZED[name]
        m = MODELS[src]
        emb_type = mat_type
    else:
        m = MODELS[name]
        mat_type, emb_type, file_type = m["mat_type"], m["emb_type"], m["file_type"]
    tensors = []
    for tname, w in make_weights(m):
        if w.ndim == 1:
            t = T_F32
        elif tname == "token_embd.weight":
            t = emb_type
            if name in QUANTIZED:  # quantize llama-tiny's stored (F16) embedding
                w = np.asarray(w, dtype=np.float32).astype(np.float16)
        else:
            t = mat_type
        tensors.append((tname, w.shape, t, encode(w, t)))
    path = out_dir / f"{name}.gguf"
    write_gguf(path, metadata(name, m, file_type, vocab), tensors)
    return path


def expected_sums() -> dict[str, str]:
    sums = {}
    for line in (SYN / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            h, f = line.split()
            sums[f.lstrip("*")] = h
    return sums


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=ALL)
    ap.add_argument("--out", type=Path, default=SYN)
    args = ap.parse_args()
    if not VOCAB.exists():
        print(f"make-synthetic: {VOCAB} missing (run scripts/get-vocabs.sh)", file=sys.stderr)
        return 1
    vocab = vocab_kvs()
    sums = expected_sums()
    args.out.mkdir(parents=True, exist_ok=True)
    bad = 0
    for name in args.names:
        if name not in ALL:
            print(f"make-synthetic: unknown model {name} (known: {' '.join(ALL)})", file=sys.stderr)
            return 1
        path = build(name, args.out, vocab)
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        want = sums.get(path.name)
        if got != want:
            print(f"make-synthetic: {path.name} sha256 {got}, expected {want}", file=sys.stderr)
            path.rename(path.with_suffix(".gguf.bad"))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
