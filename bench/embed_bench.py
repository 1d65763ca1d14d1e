#!/usr/bin/env python3
"""Embeddings benchmark: lse-server against llama.cpp's llama-server on the same GGUF.

Both servers pool by mean (`--pooling mean`; llama-server also `--embeddings`), same threads,
4 slots of 2,048 tokens.
Sends `--requests` POST /v1/embeddings requests of `--batch` texts each (consecutive pieces of
data/wiki.test.raw of about `--chars` characters) one after another, after one warm-up request,
and reports texts/s and prompt tokens/s (the servers' own usage counts) and the median request
time. Standard library only. Usage:
  bench/embed_bench.py --model M [--lse PATH] [--llama PATH] [--threads N] [--batch N] [--requests N]
"""

import json
import os
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import server_args, start, stop  # noqa: E402


# mean pooling on both; llama-server also needs --embeddings, and a batch that holds a request
EXTRA = {"lse": ["--pooling", "mean"], "llama": ["--embeddings", "--pooling", "mean", "-b", "8192", "-ub", "8192"]}


def embed(base, texts):
    body = json.dumps({"input": texts, "encoding_format": "float"}).encode()
    req = urllib.request.Request(base + "/v1/embeddings", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def bench(kind, binary, args, batches):
    p, base = start(kind, binary, args.model, args.threads, 4, 2048, EXTRA[kind])
    try:
        embed(base, batches[0])
        times, tokens = [], 0
        t_all = time.time()
        for b in batches[1:]:
            t0 = time.time()
            r = embed(base, b)
            times.append(time.time() - t0)
            tokens += r["usage"]["prompt_tokens"]
        wall = time.time() - t_all
        texts = sum(len(b) for b in batches[1:])
        return {"texts_per_s": texts / wall, "tokens_per_s": tokens / wall, "median_request_s": statistics.median(times)}
    finally:
        stop(p)


def main():
    ap = server_args(__doc__)
    ap.add_argument("--batch", type=int, default=16, help="texts per request")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--chars", type=int, default=500, help="characters per text")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "data", "wiki.test.raw"), encoding="utf-8", newline="") as f:
        wiki = f.read()
    pieces = [wiki[i * args.chars:(i + 1) * args.chars] for i in range((args.requests + 1) * args.batch)]
    batches = [pieces[i * args.batch:(i + 1) * args.batch] for i in range(args.requests + 1)]
    results = {}
    for kind, binary in (("lse-server", args.lse), ("llama-server", args.llama)):
        if not binary or not os.path.exists(binary):
            print(f"{kind}: skipped (binary {binary!r} not found)", file=sys.stderr)
            continue
        results[kind] = bench("lse" if kind == "lse-server" else "llama", binary, args, batches)
    print(f"{'metric':20}" + "".join(f"{k:>16}" for k in results))
    for k in ["texts_per_s", "tokens_per_s", "median_request_s"]:
        print(f"{k:20}" + "".join(f"{results[s][k]:16.3f}" for s in results))


if __name__ == "__main__":
    main()
