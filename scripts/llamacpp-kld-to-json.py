#!/usr/bin/env python3
"""Decode llama-perplexity's --kl-divergence-base file (and its log) into a small JSON golden.

Usage: scripts/llamacpp-kld-to-json.py BASE.kld PERPLEXITY.log OUT.json [--top K] [--add-bos 0|1]

The base file: "_logits_", n_ctx, n_vocab, n_chunk (int32), the n_chunk*n_ctx token ids (int32),
then per chunk n_ctx-1-n_ctx/2 rows of nv = 2*((n_vocab+1)/2)+4 uint16: [scale f32, min_log_prob
f32, q[n_vocab]] with logp(v) = scale*q[v] + min_log_prob (clamped 16 nats below the row maximum;
error <= scale/2 <= 1.3e-4). Row j of chunk k is the distribution at position n_ctx/2 + j
predicting position n_ctx/2 + j + 1.

Output: {ctx, chunks, add_bos, n_vocab, chunk_ppl, ppl, windows: [{index, input_tokens,
tokens: [{target, nll, top: [[id, logp] x K]}]}]} (top best first, ties lower id first; nll of the
target from the same quantized row; `nll_clamped` where the target hit the clamp). chunk_ppl / ppl are llama-perplexity's printed values.
With add_bos the first input id of each window is replaced by BOS id 1, as llama-perplexity does.
"""
import argparse
import json
import re
import struct

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--add-bos", type=int, default=0)
    a = ap.parse_args()

    raw = open(a.base, "rb").read()
    assert raw[:8] == b"_logits_", "not a llama.cpp kl-divergence base"
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<iii", raw, 8)
    off = 20
    tokens = np.frombuffer(raw, dtype="<i4", count=n_chunk * n_ctx, offset=off)
    off += 4 * n_chunk * n_ctx
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first = n_ctx // 2
    n_rows = n_ctx - 1 - first
    rows = np.frombuffer(raw, dtype="<u2", count=n_chunk * n_rows * nv, offset=off).reshape(n_chunk, n_rows, nv)
    assert off + rows.nbytes == len(raw), "trailing bytes in base file"

    windows = []
    for k in range(n_chunk):
        inp = [int(t) for t in tokens[k * n_ctx:(k + 1) * n_ctx]]
        if a.add_bos:
            inp[0] = 1
        out_rows = []
        for j in range(n_rows):
            r = rows[k, j]
            scale, minlp = np.frombuffer(r[:4].tobytes(), dtype="<f4")
            q = r[4:4 + n_vocab].astype(np.float64)
            logp = float(scale) * q + float(minlp)
            target = int(tokens[k * n_ctx + first + j + 1])
            order = sorted(range(n_vocab), key=lambda v: (-q[v], v))[: a.top]
            row = {
                "target": target,
                "nll": round(-float(logp[target]), 6),
                "top": [[v, round(float(logp[v]), 6)] for v in order],
            }
            if q[target] == 0:
                row["nll_clamped"] = True  # the target sat at the clamp: its nll is a lower bound
            out_rows.append(row)
        windows.append({"index": k, "input_tokens": inp, "tokens": out_rows})

    log = open(a.log, encoding="utf-8", errors="replace").read()
    chunk_ppl = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+),", log)]
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", log)
    assert len(chunk_ppl) == n_chunk and m, "no chunk perplexities in the log"
    doc = {
        "ctx": n_ctx,
        "chunks": n_chunk,
        "add_bos": bool(a.add_bos),
        "n_vocab": n_vocab,
        "chunk_ppl": chunk_ppl,
        "ppl": float(m.group(1)),
        "ppl_err": float(m.group(2)),
        "windows": windows,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
