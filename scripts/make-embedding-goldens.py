#!/usr/bin/env python3
"""Make embedding goldens with the reference llama.cpp server.

Usage:
  scripts/make-embedding-goldens.py LLAMA_BIN_DIR [--models DIR] [--out DIR]

For SmolLM2 and Qwen2.5-Coder (generative models: no pooling type in the GGUF) and each pooling
`mean` and `last`, starts `llama-server --embeddings --pooling P`, sends the inputs to
`POST /v1/embeddings` (encoding_format float; the server's default normalisation, Euclidean; for
mean once more with `embd_normalize` -1, raw), and writes <out>/<model stem>.json (see
data/golden/embedding/README.md). Needs Python 3 and `requests`.
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

MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"]
POOLINGS = ["mean", "last"]
INPUTS = [
    "The capital of France is Paris.",
    "def add(a, b):\n    return a + b\n",
    "Embeddings map a text to one vector; similar texts get similar vectors, so a search can rank "
    "documents by their cosine similarity to a query.",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "golden", "embedding"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    log = os.path.join(tempfile.gettempdir(), "lse-embedding-goldens-llama-server.log")
    for name in MODELS:
        path = os.path.join(a.models, name)
        cases = []
        for pooling in POOLINGS:
            gg.server_args = lambda m, p, pooling=pooling: ["-m", m, "--host", "127.0.0.1", "--port", p, "-t", "2", "-np", "1",
                                                            "-c", "2048", "--no-warmup", "--no-webui", "--embeddings", "--pooling", pooling]
            srv = gg.Server(a.bin_dir, path, log)
            try:
                for normalize in (None, -1) if pooling == "mean" else (None,):
                    body = {"input": INPUTS, "encoding_format": "float"}
                    if normalize is not None:
                        body["embd_normalize"] = normalize
                    res = srv.post("/v1/embeddings", body)
                    # 9 significant digits hold an f32 exactly
                    vectors = [[float(f"{x:.9g}") for x in d["embedding"]] for d in sorted(res["data"], key=lambda d: d["index"])]
                    cases.append({"pooling": pooling, "embd_normalize": 2 if normalize is None else normalize,
                                  "prompt_tokens": res["usage"]["prompt_tokens"], "embeddings": vectors})
                    print(f"  {name} {pooling} normalize {cases[-1]['embd_normalize']}: {len(vectors)} x {len(vectors[0])}", flush=True)
            finally:
                srv.stop()
        header = {
            "model": name,
            "model_sha256": gg.sha256_file(path),
            "llama_cpp": gg.LLAMA_CPP,
            "server": "llama-server -m <model> --host 127.0.0.1 --port <free> -t 2 -np 1 -c 2048 --no-warmup --no-webui --embeddings --pooling <pooling>",
            "inputs": INPUTS,
            "notes": "See data/golden/embedding/README.md. POST /v1/embeddings {input: inputs, encoding_format: float}, "
                     "with the default normalisation (embd_normalize 2, Euclidean) and, for mean, with embd_normalize -1 "
                     "(none). Values rounded to 9 significant digits (an f32 exactly).",
        }
        gg.write_golden(a.out, name[:-5], header, cases)


if __name__ == "__main__":
    sys.exit(main())
