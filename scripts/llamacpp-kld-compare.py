#!/usr/bin/env python3
"""Full-vocabulary KLD between two llama-perplexity --kl-divergence-base files of the same text.

Usage: scripts/llamacpp-kld-compare.py BASE_P.kld BASE_Q.kld
Prints "mean_kld max_kld same_top_pct" of KL(P || Q) over all scored rows (the format is described
in scripts/llamacpp-kld-to-json.py; rows are u16-quantized, so identical runs give ~1e-9, not 0).
"""
import struct
import sys

import numpy as np


def read(path):
    raw = open(path, "rb").read()
    assert raw[:8] == b"_logits_", f"{path}: not a llama.cpp kl-divergence base"
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<iii", raw, 8)
    off = 20 + 4 * n_chunk * n_ctx
    tokens = np.frombuffer(raw, dtype="<i4", count=n_chunk * n_ctx, offset=20)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    n_rows = n_ctx - 1 - n_ctx // 2
    rows = np.frombuffer(raw, dtype="<u2", count=n_chunk * n_rows * nv, offset=off).reshape(-1, nv)
    head = np.frombuffer(rows[:, :4].tobytes(), dtype="<f4").reshape(-1, 2).astype(np.float64)
    logp = head[:, :1] * rows[:, 4:4 + n_vocab].astype(np.float64) + head[:, 1:]
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))  # renormalise the quantized rows
    return tokens, logp


def main():
    tp, p = read(sys.argv[1])
    tq, q = read(sys.argv[2])
    assert np.array_equal(tp, tq) and p.shape == q.shape, "bases of different runs"
    kld = (np.exp(p) * (p - q)).sum(axis=1)
    same = (p.argmax(axis=1) == q.argmax(axis=1)).mean()
    print(f"{kld.mean():.3e} {kld.max():.3e} {100 * same:.3f}")


if __name__ == "__main__":
    main()
