#!/usr/bin/env python3
"""Embeddings benchmark: lse-server against llama.cpp's llama-server on the same GGUF.

Both servers pool by mean (`--pooling mean`; llama-server also `--embeddings`), same threads.
Sends `--requests` POST /v1/embeddings requests of `--batch` texts each (consecutive pieces of
data/wiki.test.raw of about `--chars` characters) one after another, after one warm-up request,
and reports texts/s and prompt tokens/s (the servers' own usage counts) and the median request
time. Standard library only. Usage:
  bench/embed_bench.py --model M [--lse PATH] [--llama PATH] [--threads N] [--batch N] [--requests N]
"""

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import free_port, health, stop  # noqa: E402

import subprocess  # noqa: E402


def start(kind, binary, model, threads):
    port = free_port()
    if kind == "lse":
        cmd = [binary, "--model", model, "--port", str(port), "--threads", str(threads), "--kv-len", "2048", "--pooling", "mean"]
    else:
        cmd = [binary, "-m", model, "--port", str(port), "-t", str(threads), "-tb", str(threads), "-c", "8192",
               "-b", "8192", "-ub", "8192", "--embeddings", "--pooling", "mean", "--no-warmup", "-ngl", "0"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    t = time.time()
    while health(base) != 200:
        if p.poll() is not None or time.time() - t > 300:
            stop(p)
            raise RuntimeError(f"{kind} did not start: {' '.join(cmd)}")
        time.sleep(0.1)
    return p, base


def embed(base, texts):
    body = json.dumps({"input": texts, "encoding_format": "float"}).encode()
    req = urllib.request.Request(base + "/v1/embeddings", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def bench(kind, binary, args, batches):
    p, base = start(kind, binary, args.model, args.threads)
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--lse", default=os.environ.get("LSE_SERVER", "target/release/lse-server"))
    ap.add_argument("--llama", default=os.environ.get("LLAMA_SERVER", ""))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
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
