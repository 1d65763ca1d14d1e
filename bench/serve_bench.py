#!/usr/bin/env python3
"""Serving benchmark: lse-server against llama.cpp's llama-server on the same GGUF.

Measures, per server:
  * single-stream decode tokens/s (one streamed completion, EOS ignored),
  * aggregate decode tokens/s with 4 and with 16 concurrent streams,
  * time to first token of a 512-token prompt sent while 8 streams are already decoding,
  * time to first token of a 1,500-token prompt continued by 16 tokens after the 1,500 ran in an
    earlier request, with `cache_prompt` true (both servers' default: the kept prefix is not run
    again) and false,
  * time to first token of a 16-token prompt sent 0.15 s after a new 1,500-token prompt (while
    that one is being prefilled), and the long prompt's own.

Standard library only. Each server is started on a free port, with the same thread count and
16 slots, and stopped at the end. Usage:
  bench/serve_bench.py --model M [--lse PATH] [--llama PATH] [--threads N] [--tokens N] [--json OUT]
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(base):
    try:
        with urllib.request.urlopen(base + "/health", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def start(kind, binary, model, threads, parallel, ctx_per_slot, extra=()):
    port = free_port()
    if kind == "lse":
        cmd = [binary, "--model", model, "--port", str(port), "--threads", str(threads),
               "--parallel", str(parallel), "--kv-len", str(ctx_per_slot)]
    else:
        cmd = [binary, "-m", model, "--port", str(port), "-t", str(threads), "-tb", str(threads),
               "-np", str(parallel), "-c", str(ctx_per_slot * parallel), "--no-warmup", "-ngl", "0"]
    cmd += list(extra)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    t = time.time()
    while health(base) != 200:
        if p.poll() is not None:
            raise RuntimeError(f"{kind} exited with {p.returncode}: {' '.join(cmd)}")
        if time.time() - t > 300:
            raise RuntimeError(f"{kind} did not become healthy")
        time.sleep(0.1)
    return p, base


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()


def stream(base, prompt, max_tokens, stop_event=None, cache_prompt=True):
    """Streams a completion; returns (start, [arrival time of each chunk with text or tokens])."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "cache_prompt": cache_prompt}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    times = []
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            ev = json.loads(data)
            ch = ev.get("choices") or []
            if ch and ch[0].get("finish_reason") is None:
                times.append(time.perf_counter())
            if stop_event is not None and stop_event.is_set():
                break
    return t0, times


def single_stream(base, n):
    t0, times = stream(base, "The history of the city begins", n)
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    return (n - 1) / span, times[0] - t0


def aggregate(base, streams, n):
    out = [None] * streams

    def run(i):
        out[i] = stream(base, f"Story number {i}: once upon a time", n)

    ths = [threading.Thread(target=run, args=(i,)) for i in range(streams)]
    t = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    wall = time.perf_counter() - t
    return streams * n / wall


def ttft_under_load(base, busy=8, prompt_len=512):
    stop_ev = threading.Event()
    started = [threading.Event() for _ in range(busy)]

    def bg(i):
        body = {"prompt": f"Background story {i}:", "max_tokens": 1000, "temperature": 0, "ignore_eos": True, "stream": True}
        req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                for raw in r:
                    if raw.startswith(b"data: "):
                        started[i].set()
                    if stop_ev.is_set():
                        break
        except OSError:
            pass
        started[i].set()

    ths = [threading.Thread(target=bg, args=(i,), daemon=True) for i in range(busy)]
    for th in ths:
        th.start()
    for e in started:
        e.wait(120)
    time.sleep(0.5)
    rng = random.Random(0)
    ids = [rng.randrange(1000, 20000) for _ in range(prompt_len)]
    t0, times = stream(base, ids, 4)
    stop_ev.set()
    for th in ths:
        th.join(30)
    return times[0] - t0


def ttft_continued(base, cache_prompt, prompt_len=1500, extra=16):
    rng = random.Random(1)
    ids = [rng.randrange(1000, 20000) for _ in range(prompt_len)]
    stream(base, ids, 2, cache_prompt=cache_prompt)  # an earlier request with the prompt
    more = ids + [rng.randrange(1000, 20000) for _ in range(extra)]
    t0, times = stream(base, more, 2, cache_prompt=cache_prompt)
    return times[0] - t0


def ttft_short_behind_long(base, long_len=1500, short_len=16):
    """First-token times of a short prompt sent while a long one prefills, and of the long one."""
    rng = random.Random(2)
    long_ids = [rng.randrange(1000, 20000) for _ in range(long_len)]
    short_ids = [rng.randrange(1000, 20000) for _ in range(short_len)]
    out = {}

    def run_long():
        out["long"] = stream(base, long_ids, 2, cache_prompt=False)

    th = threading.Thread(target=run_long)
    th.start()
    time.sleep(0.15)
    t0, times = stream(base, short_ids, 2, cache_prompt=False)
    th.join()
    lt0, ltimes = out["long"]
    return times[0] - t0, ltimes[0] - lt0


def bench(kind, binary, args):
    p, base = start(kind, binary, args.model, args.threads, 16, args.ctx)
    try:
        stream(base, "warm up", 4)
        r = {}
        r["single_stream_tok_s"], r["single_stream_ttft_s"] = single_stream(base, args.tokens)
        r["aggregate_4_tok_s"] = aggregate(base, 4, args.tokens)
        r["aggregate_16_tok_s"] = aggregate(base, 16, args.tokens)
        r["ttft_512_with_8_busy_s"] = ttft_under_load(base)
        r["ttft_continued_1500_cached_s"] = ttft_continued(base, True)
        r["ttft_continued_1500_uncached_s"] = ttft_continued(base, False)
        r["ttft_16_behind_1500_s"], r["ttft_1500_before_16_s"] = ttft_short_behind_long(base)
        return r
    finally:
        stop(p)


def server_args(doc):
    """The options every serving benchmark takes: the model, the two servers, the threads."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--lse", default=os.environ.get("LSE_SERVER", "target/release/lse-server"))
    ap.add_argument("--llama", default=os.environ.get("LLAMA_SERVER", ""))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    return ap


def main():
    ap = server_args(__doc__)
    ap.add_argument("--tokens", type=int, default=64, help="tokens per stream")
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    results = {}
    for kind, binary in (("lse-server", args.lse), ("llama-server", args.llama)):
        if not binary or not os.path.exists(binary):
            print(f"{kind}: skipped (binary {binary!r} not found)", file=sys.stderr)
            continue
        results[kind] = bench("lse" if kind == "lse-server" else "llama", binary, args)
        print(kind, json.dumps(results[kind], indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    keys = ["single_stream_tok_s", "aggregate_4_tok_s", "aggregate_16_tok_s", "ttft_512_with_8_busy_s",
            "ttft_continued_1500_cached_s", "ttft_continued_1500_uncached_s", "ttft_16_behind_1500_s",
            "ttft_1500_before_16_s"]
    print(f"{'metric':28}" + "".join(f"{k:>16}" for k in results))
    for k in keys:
        print(f"{k:28}" + "".join(f"{results[s][k]:16.3f}" for s in results))


if __name__ == "__main__":
    main()
