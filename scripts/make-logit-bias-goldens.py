#!/usr/bin/env python3
"""Make greedy-generation goldens with logit_bias, from the reference llama.cpp server.

Usage:
  scripts/make-logit-bias-goldens.py LLAMA_BIN_DIR [--out DIR] [--synthetic DIR]

For every synthetic model, starts `llama-server` as scripts/make-generation-goldens.py does, and
for each of its prompts: a plain greedy run of N_PREDICT tokens names the token to ban (its first,
with `false`, i.e. -inf); a run with that ban and repeat_penalty 1.5 names the token to raise by
BOOST (its second). The request with both biases runs with repeat_penalty 1.0 and 1.5 (llama.cpp
adds the bias before the penalties; on these models the order happens not to change a choice, so
the sampler's unit test checks it). Writes <out>/<model file stem>.json; see data/golden/generation-logit-bias/README.md.
"""
import argparse
import importlib.util
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("gen", os.path.join(ROOT, "scripts", "make-generation-goldens.py"))
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

N_PREDICT = 32
BOOST = 0.5


def body(prompt_ids, repeat_penalty, bias):
    b = gen.completion_body(prompt_ids, repeat_penalty, N_PREDICT)
    if bias is not None:
        b["logit_bias"] = bias
    return b


def make_model(bin_dir, model_path, out_dir, log_dir):
    name = os.path.basename(model_path)
    stem = name[:-5]
    print(f"[{time.strftime('%H:%M:%S')}] {name}", flush=True)
    srv = gen.Server(bin_dir, model_path, os.path.join(log_dir, stem + ".bias.log"))
    cases = []
    try:
        for label, text in gen.SYNTHETIC_PROMPTS:
            prompt_ids = srv.post("/tokenize", {"content": text, "add_special": True})["tokens"]
            plain = srv.post("/completion", body(prompt_ids, 1.0, None))["tokens"]
            first = plain[0]
            banned = srv.post("/completion", body(prompt_ids, 1.5, [[first, False]]))["tokens"]
            bias = [[first, False], [banned[1], BOOST]]
            for rp in (1.0, 1.5):
                res = srv.post("/completion", body(prompt_ids, rp, bias))
                ids = res["tokens"]
                if first in ids:
                    raise RuntimeError(f"{name} {label}: the banned token {first} was generated: {ids}")
                cases.append({
                    "name": label if rp == 1.0 else f"{label}_rp{rp:g}",
                    "prompt_ids": prompt_ids,
                    "n_predict": N_PREDICT,
                    "repeat_penalty": rp,
                    "repeat_last_n": gen.REPEAT_LAST_N,
                    "logit_bias": bias,
                    "plain_ids": plain,
                    "ids": ids,
                    "stop_type": res["stop_type"],
                })
                print(f"  {cases[-1]['name']}: {len(ids)} ids ({res['stop_type']}), plain run first id {first}", flush=True)
    finally:
        srv.stop()
    header = {
        "model": name,
        "model_sha256": gen.sha256_file(model_path),
        "llama_cpp": gen.LLAMA_CPP,
        "server_args": gen.server_args("<model>", "<free port>"),
        "notes": "Greedy /completion (temperature 0, cache_prompt false, return_tokens, seed 0, dry off) "
                 "with logit_bias as [[id, bias]]; bias false is -inf. plain_ids: the same request "
                 "without the bias and with repeat_penalty 1.0 (its first id is banned); the raised id "
                 "is the second of the run with only that ban and repeat_penalty 1.5.",
    }
    gen.write_golden(out_dir, stem, header, cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir", help="llama.cpp bin folder holding llama-server")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "golden", "generation-logit-bias"))
    ap.add_argument("--synthetic", default=os.path.join(ROOT, "data", "golden", "synthetic"))
    a = ap.parse_args()
    log_dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "lse-generation-goldens")
    os.makedirs(log_dir, exist_ok=True)
    for f in sorted(os.listdir(a.synthetic)):
        if f.endswith(".gguf"):
            make_model(a.bin_dir, os.path.join(a.synthetic, f), a.out, log_dir)


if __name__ == "__main__":
    sys.exit(main())
