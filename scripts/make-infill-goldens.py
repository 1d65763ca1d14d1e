#!/usr/bin/env python3
"""Make fill-in-the-middle goldens with the reference llama.cpp server.

Usage:
  scripts/make-infill-goldens.py LLAMA_BIN_DIR [--models DIR] [--out DIR]

Starts `llama-server` on Qwen2.5-Coder-0.5B (its vocabulary has FIM tokens) with `-c 4096` and
sends greedy requests in two layouts:
  * "infill": POST /infill (input_prefix, input_suffix, input_extra, prompt) — llama-server's own
    layout (repository name and file separators before the FIM prefix, long prefixes and suffixes
    cut to fit one batch); the server's rendered `prompt` and `tokens_evaluated` are kept.
  * "suffix": POST /completion with the single-file layout written out as text
    (<|fim_prefix|>PREFIX<|fim_suffix|>SUFFIX<|fim_middle|>), what OpenAI's `suffix` asks for.
Writes <out>/<model stem>.json (see data/golden/infill/README.md). Needs Python 3 and `requests`.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
spec = importlib.util.spec_from_file_location("generation_goldens", os.path.join(HERE, "make-generation-goldens.py"))
gg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gg)

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
N_PREDICT = 48
CTX = 4096

FIB_PREFIX = "def fib(n):\n    "
FIB_SUFFIX = "\n    return fib(n - 1) + fib(n - 2)\n"
UTILS = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n"
MAIN_PREFIX = "from utils import clamp, mean\n\n\ndef normalise(scores):\n    avg = "
MAIN_SUFFIX = "\n    return [clamp(s / avg, 0.0, 1.0) for s in scores]\n"
JS_PREFIX = "function sumOfSquares(values) {\n  let total = 0;\n  "
JS_SUFFIX = "\n  return total;\n}\n\nconsole.log(sumOfSquares([1, 2, 3]));\n"


def long_code():
    """A long Python text (this repository's generation-golden script, a fixed committed file):
    its first ~1,700 tokens before the gap and ~600 after, past llama-server's cuts of 1,536 and 510."""
    with open(os.path.join(HERE, "make-generation-goldens.py"), encoding="utf-8") as f:
        text = f.read()
    cut = text.index("def gguf_metadata")
    return text[:cut + 7000], text[cut + 7000:cut + 9400]


def body(extra):
    b = {"n_predict": N_PREDICT, "temperature": 0, "cache_prompt": False, "return_tokens": True, "n_probs": 2,
         "seed": 0, "repeat_penalty": 1.0, "presence_penalty": 0, "frequency_penalty": 0, "dry_multiplier": 0,
         "stream": False}
    b.update(extra)
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "golden", "infill"))
    a = ap.parse_args()
    path = os.path.join(a.models, MODEL)
    meta = gg.gguf_metadata(path, {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"})
    pieces = gg.Pieces(meta)
    long_prefix, long_suffix = long_code()
    infill_cases = [
        ("fib", {"input_prefix": FIB_PREFIX, "input_suffix": FIB_SUFFIX}),
        ("with_files", {"input_prefix": MAIN_PREFIX, "input_suffix": MAIN_SUFFIX,
                        "input_extra": [{"filename": "utils.py", "text": UTILS}, {"text": "# notes\n"}]}),
        ("middle_started", {"input_prefix": FIB_PREFIX, "input_suffix": FIB_SUFFIX, "prompt": "if n < 2"}),
        ("javascript", {"input_prefix": JS_PREFIX, "input_suffix": JS_SUFFIX}),
        ("long_cut", {"input_prefix": long_prefix, "input_suffix": long_suffix}),
    ]
    suffix_cases = [("fib", FIB_PREFIX, FIB_SUFFIX), ("javascript", JS_PREFIX, JS_SUFFIX), ("normalise", MAIN_PREFIX, MAIN_SUFFIX)]
    os.makedirs(a.out, exist_ok=True)
    srv = gg.Server.__new__(gg.Server)
    # the generation script's server, with this context (the room llama-server leaves for input_extra)
    gg.server_args = lambda m, p: ["-m", m, "--host", "127.0.0.1", "--port", p, "-t", "2", "-np", "1", "-c", str(CTX), "--no-warmup", "--no-webui"]
    srv.__init__(a.bin_dir, path, os.path.join(tempfile.gettempdir(), "lse-infill-goldens-llama-server.log"))
    cases = []
    try:
        def record(name, kind, request, res):
            ids = res["tokens"]
            rows = gg.align_rows(name, ids, res.get("completion_probabilities", []), pieces)
            top2 = [None if r is None else [[t["id"], t["logprob"]] for t in r["top_logprobs"]] for r in rows]
            cases.append({"name": name, "kind": kind, "request": request, "prompt": res["prompt"],
                          "tokens_evaluated": res["tokens_evaluated"], "ids": ids, "text": res["content"],
                          "stop_type": res["stop_type"], "top2": top2})
            print(f"  {kind} {name}: {res['tokens_evaluated']} prompt tokens, {len(ids)} generated", flush=True)

        for name, fields in infill_cases:
            record(name, "infill", fields, srv.post("/infill", body(fields)))
        for name, prefix, suffix in suffix_cases:
            text = "<|fim_prefix|>" + prefix + "<|fim_suffix|>" + suffix + "<|fim_middle|>"
            record(name, "suffix", {"prefix": prefix, "suffix": suffix}, srv.post("/completion", body({"prompt": text})))
    finally:
        srv.stop()
    header = {
        "model": MODEL,
        "model_sha256": gg.sha256_file(path),
        "llama_cpp": gg.LLAMA_CPP,
        "server": f"llama-server -m <model> --host 127.0.0.1 --port <free> -t 2 -np 1 -c {CTX} --no-warmup --no-webui",
        "n_predict": N_PREDICT,
        "notes": "See data/golden/infill/README.md. Greedy (temperature 0), n_probs 2 (top2 = raw log-softmax "
                 "before sampling, rows aligned to ids as in data/golden/generation), cache_prompt false. "
                 "kind infill: the request fields as sent to POST /infill; prompt = the server's rendered "
                 "prompt text (special tokens shown). kind suffix: POST /completion with the text "
                 "<|fim_prefix|>prefix<|fim_suffix|>suffix<|fim_middle|> (special text parsed, no BOS: the "
                 "vocabulary does not add one).",
    }
    gg.write_golden(a.out, MODEL[:-5], header, cases)


if __name__ == "__main__":
    sys.exit(main())
