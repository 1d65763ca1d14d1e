#!/usr/bin/env python3
"""Make greedy-generation goldens with the reference llama.cpp server.

Usage:
  scripts/make-generation-goldens.py LLAMA_BIN_DIR [--out DIR] [--synthetic DIR] [--models DIR]
                                     [--only STEM ...]

For every synthetic model (all *.gguf in --synthetic) and every real model present in --models,
starts `llama-server` on a free 127.0.0.1 port, tokenizes each prompt through `POST /tokenize`
(add_special = true, i.e. exactly what `/completion` does with a text prompt), sends the ids to
`POST /completion` with greedy settings and n_probs = 2, checks the result against the same request
made with the text prompt, stops the server and writes one JSON file per model:
<out>/<model file stem>.json (see data/golden/generation/README.md for the format).

Needs only Python 3 and `requests`.
"""
import argparse
import hashlib
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_CPP = "0c1e570 (llama-cpp-python 0.3.36 vendor)"
N_PREDICT = 64
REPEAT_LAST_N = 64
CHECK_N = 16

SYNTHETIC_PROMPTS = [
    ("fox", "The quick brown fox jumps over the lazy dog."),
    ("village", "Once upon a time, in a small village,"),
    ("counting", "1, 2, 3, 4, 5,"),
]

REAL_PROMPTS = [
    ("prose_capital", "The capital of France is"),
    ("question_sky", "Question: Why is the sky blue?\nAnswer:"),
    ("list_fruits", "Here is a list of three fruits:\n1."),
    ("code_fibonacci", "def fibonacci(n):"),
    ("json_object", '{"name": "Alice", "age": 30, "languages": ['),
    ("translate_japanese", "Translate to Japanese: Good morning, how are you?\n"),
    ("french_sea", "Écris une phrase en français sur la mer :"),
    ("prose_moon", "In July 1969, the Apollo 11 mission"),
    ("chinese_weather", "今天天气很好，我们一起去"),
    ("emoji_pizza", "My favourite food is pizza 🍕 because"),
]

REAL_MODELS = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
]

NOTES = (
    "Made by scripts/make-generation-goldens.py with llama-server (tools/server of llama.cpp 0c1e570, "
    "CPU build). Each case: prompt tokenized by POST /tokenize {content, add_special: true} (the same "
    "call /completion makes for a text prompt: add_special=true, parse_special=true; the BOS is "
    "prepended iff the vocabulary's add_bos rule says so, see add_bos/bos_id), then POST /completion "
    "with the ids as prompt, n_predict 64, temperature 0, cache_prompt false, return_tokens true, "
    "n_probs 2, seed 0, ignore_eos false, presence/frequency penalty 0, dry_multiplier 0, "
    "repeat_last_n 64 and repeat_penalty 1.0 (plain) or 1.5 (penalty cases); every case was "
    "cross-checked against the same request with the text prompt and n_predict 16 (same prompt length, "
    "same first 16 ids). "
    "ids = the server's `tokens` (generated ids; an end-of-generation token, when hit, is included as "
    "the last id and stop_type is 'eos'; 'limit' = n_predict reached). text = the server's `content`. "
    "top2[i] = the server's completion_probabilities[i].top_logprobs as [id, logprob]: natural-log "
    "softmax of the RAW model logits at step i (pre-sampling: before the penalty, top-k/p, min-p and "
    "temperature samplers), computed in float32 by the server as log(p) (the server returns log-probs "
    "directly with post_sampling_probs false, no conversion was done here). top2[i] is null where the "
    "server gave no row: llama-server only adds a probability row for a token after which the "
    "generated text does not end inside a multi-byte UTF-8 character (its validate_utf8: a lead byte "
    "among the last 4 bytes without enough bytes after it); a token that leaves a character cut gets "
    "no row, and the row of the token that completes it carries the joined bytes; so rows were "
    "aligned to ids by replaying the token pieces (from the GGUF vocab) through that rule. Greedy: with temperature "
    "<= 0 the temperature sampler keeps only the first maximum logit (strict >, in the candidate order "
    "left by the earlier samplers, which sort by logit) of the candidates left by the chain in "
    "sampler_chain (defaults: penalties -> dry -> top_n_sigma -> top_k -> typ_p -> top_p -> min_p -> "
    "xtc -> temperature; values in generation_settings), then dist picks it; so plain cases pick "
    "argmax of the raw logits (== top2[i][0] unless near-tie), penalty cases pick argmax of the "
    "penalized logits, which may differ from top2[i][0]. Penalty window: YES, the prompt counts. "
    "server_slot::init_sampler() calls common_sampler_accept(smpl, id, false) for every prompt token "
    "before generation, and each generated token is accepted after it is sampled; the penalties "
    "sampler keeps a ring buffer of the last repeat_last_n accepted tokens (prompt + generated, BOS "
    "included when present) and, for every distinct id in it (count ignored for repeat_penalty), "
    "divides the logit by repeat_penalty if logit > 0 else multiplies it. The penalty applies to the "
    "token at step i using the window of the 64 tokens before it."
)


# ---------------------------------------------------------------- GGUF metadata (own minimal reader)

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path, wanted):
    """Return {key: value} for the scalar keys in `wanted` (arrays and other keys are skipped)."""
    out = {}
    with open(path, "rb") as f:
        data = f.read(128 << 20)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def take_str():
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n]
        pos += n
        return s.decode("utf-8", "replace")

    def skip_value(t):
        nonlocal pos
        if t in _SCALARS:
            pos += struct.calcsize(_SCALARS[t])
        elif t == 8:
            n = take("<Q")
            pos += n
        elif t == 9:
            et = take("<I")
            n = take("<Q")
            if et in _SCALARS:
                pos += n * struct.calcsize(_SCALARS[et])
            else:
                for _ in range(n):
                    skip_value(et)
        else:
            raise ValueError(f"{path}: unknown GGUF type {t}")

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    take("<I")  # version
    take("<Q")  # tensor count
    n_kv = take("<Q")
    for _ in range(n_kv):
        key = take_str()
        t = take("<I")
        if key in wanted and t in _SCALARS:
            out[key] = take(_SCALARS[t])
        elif key in wanted and t == 8:
            out[key] = take_str()
        elif key in wanted and t == 9:
            et = take("<I")
            n = take("<Q")
            if et == 8:
                out[key] = [take_str() for _ in range(n)]
            elif et in _SCALARS:
                out[key] = [take(_SCALARS[et]) for _ in range(n)]
            else:
                for _ in range(n):
                    skip_value(et)
        else:
            skip_value(t)
    return out


def _byte_level_decoder():
    """Inverse of the GPT-2 byte-level BPE alphabet (printable bytes map to themselves, the rest to 256+)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class Pieces:
    """Bytes of each token's text as the server renders it (control tokens render as nothing)."""

    def __init__(self, meta):
        self.model = meta.get("tokenizer.ggml.model")
        self.tokens = meta.get("tokenizer.ggml.tokens") or []
        self.types = meta.get("tokenizer.ggml.token_type") or []
        self.byte_level = _byte_level_decoder() if self.model == "gpt2" else None

    def __call__(self, tid):
        text = self.tokens[tid]
        ttype = self.types[tid] if tid < len(self.types) else 1
        if ttype == 3:  # control
            return b""
        if ttype == 6 and text.startswith("<0x") and text.endswith(">"):  # byte token
            return bytes([int(text[3:-1], 16)])
        if ttype == 4:  # user defined: verbatim
            return text.encode("utf-8")
        if self.byte_level is not None:
            return bytes(self.byte_level.get(ch, 0x3F) for ch in text)
        return text.replace("\u2581", " ").encode("utf-8")


def utf8_cut(data):
    """True when `data` ends inside a multi-byte UTF-8 character, judged the way llama-server does
    (it only looks for a lead byte among the last 4 bytes whose sequence is not finished)."""
    n = len(data)
    for i in range(1, min(4, n) + 1):
        c = data[n - i]
        if (c & 0xE0) == 0xC0 and i < 2:
            return True
        if (c & 0xF0) == 0xE0 and i < 3:
            return True
        if (c & 0xF8) == 0xF0 and i < 4:
            return True
    return False


def align_rows(name, ids, rows, pieces):
    """llama-server adds a probability row only for tokens after which the generated text is not cut
    inside a UTF-8 character; return one row (or None) per generated id."""
    text = b""
    out = []
    k = 0
    for tid in ids:
        text += pieces(tid)
        if utf8_cut(text):
            out.append(None)
            continue
        if k >= len(rows) or rows[k]["id"] != tid:
            raise RuntimeError(f"{name}: cannot align probability rows with the generated ids")
        out.append(rows[k])
        k += 1
    if k != len(rows):
        raise RuntimeError(f"{name}: {len(rows) - k} probability rows left after alignment")
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- server

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(model_placeholder, port_placeholder):
    return ["-m", model_placeholder, "--host", "127.0.0.1", "--port", port_placeholder,
            "-t", "2", "-np", "1", "-c", "2048", "--no-warmup", "--no-webui"]


class Server:
    def __init__(self, bin_dir, model, log_path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = os.path.join(bin_dir, "llama-server")
        args = [exe] + server_args(model, str(self.port))
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}; see {log_path}")
            try:
                r = requests.get(self.url + "/health", timeout=5)
                if r.status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"llama-server did not become healthy; see {log_path}")
            time.sleep(0.5)

    def post(self, path, body):
        r = requests.post(self.url + path, json=body, timeout=1800)
        if r.status_code != 200:
            raise RuntimeError(f"{path} -> HTTP {r.status_code}: {r.text[:500]}")
        return r.json()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------- goldens

def completion_body(prompt, repeat_penalty, n_predict=N_PREDICT):
    return {
        "prompt": prompt,
        "n_predict": n_predict,
        "temperature": 0,
        "cache_prompt": False,
        "return_tokens": True,
        "n_probs": 2,
        "seed": 0,
        "ignore_eos": False,
        "repeat_penalty": repeat_penalty,
        "repeat_last_n": REPEAT_LAST_N,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "dry_multiplier": 0,
        "stream": False,
    }


def run_case(srv, name, text, repeat_penalty, meta, pieces):
    tok = srv.post("/tokenize", {"content": text, "add_special": True})
    prompt_ids = tok["tokens"]
    bos = meta.get("tokenizer.ggml.bos_token_id")
    add_bos = meta.get("tokenizer.ggml.add_bos_token")
    if add_bos is True and (not prompt_ids or prompt_ids[0] != bos):
        raise RuntimeError(f"{name}: add_bos_token=true but prompt does not start with BOS {bos}")
    if add_bos is False and prompt_ids and prompt_ids[0] == bos:
        raise RuntimeError(f"{name}: add_bos_token=false but prompt starts with BOS {bos}")

    res = srv.post("/completion", completion_body(prompt_ids, repeat_penalty))
    ids = res["tokens"]
    probs = align_rows(name, ids, res.get("completion_probabilities", []), pieces)
    top2 = [None if row is None else [[t["id"], t["logprob"]] for t in row["top_logprobs"]] for row in probs]
    if res["tokens_evaluated"] != len(prompt_ids):
        raise RuntimeError(f"{name}: server evaluated {res['tokens_evaluated']} prompt tokens, sent {len(prompt_ids)}")

    # Cross-check: the text prompt through /completion must give the same prompt length and the same
    # first CHECK_N generated ids (a shorter run, to keep the check cheap on the larger models).
    chk = srv.post("/completion", completion_body(text, repeat_penalty, CHECK_N))
    if chk["tokens_evaluated"] != len(prompt_ids) or chk["tokens"] != ids[:CHECK_N]:
        raise RuntimeError(f"{name}: text-prompt completion differs from token-prompt completion")

    case = {
        "name": name,
        "prompt": text,
        "prompt_ids": prompt_ids,
        "n_predict": N_PREDICT,
        "repeat_penalty": repeat_penalty,
        "repeat_last_n": REPEAT_LAST_N,
        "ids": ids,
        "text": res["content"],
        "stop_type": res["stop_type"],
        "top2": top2,
    }
    return case, res.get("generation_settings", {})


def write_golden(out_dir, stem, header, cases):
    """Writes <out_dir>/<stem>.json: the header keys one per line, then one case per line."""
    lines = ["{"]
    for k, v in header.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    lines.append('"cases": [')
    lines.append(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
    lines.append("]}")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, stem + ".json")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"  wrote {os.path.relpath(path, ROOT)}", flush=True)


def make_model(bin_dir, model_path, prompts, penalties, out_dir, log_dir):
    name = os.path.basename(model_path)
    stem = name[:-5] if name.endswith(".gguf") else name
    meta = gguf_metadata(model_path, {"general.architecture", "tokenizer.ggml.model",
                                      "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id",
                                      "tokenizer.ggml.eos_token_id", "tokenizer.ggml.tokens",
                                      "tokenizer.ggml.token_type"})
    pieces = Pieces(meta)
    print(f"[{time.strftime('%H:%M:%S')}] {name}", flush=True)
    srv = Server(bin_dir, model_path, os.path.join(log_dir, stem + ".server.log"))
    cases = []
    settings = None
    try:
        props = requests.get(srv.url + "/props", timeout=30).json()
        for label, text in prompts:
            for rp in penalties:
                case_name = label if rp == 1.0 else f"{label}_rp{rp:g}"
                t0 = time.time()
                case, gs = run_case(srv, case_name, text, rp, meta, pieces)
                settings = settings or gs
                cases.append(case)
                print(f"  {case_name}: {len(case['prompt_ids'])} prompt ids, {len(case['ids'])} generated "
                      f"({case['stop_type']}), {time.time() - t0:.1f}s", flush=True)
    finally:
        srv.stop()
    header = {
        "model": name,
        "model_sha256": sha256_file(model_path),
        "llama_cpp": LLAMA_CPP,
        "llama_cpp_build_info": props.get("build_info"),
        "server_args": server_args("<model>", "<free port>"),
        "arch": meta.get("general.architecture"),
        "tokenizer": meta.get("tokenizer.ggml.model"),
        "add_bos": meta.get("tokenizer.ggml.add_bos_token"),
        "bos_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_id": meta.get("tokenizer.ggml.eos_token_id"),
        "notes": NOTES,
        "sampler_chain": settings.get("samplers") if settings else None,
        "generation_settings": settings,
    }
    write_golden(out_dir, stem, header, cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir", help="llama.cpp bin folder holding llama-server")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "golden", "generation"))
    ap.add_argument("--synthetic", default=os.path.join(ROOT, "data", "golden", "synthetic"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--only", nargs="*", help="model file stems to (re)make; default all")
    ap.add_argument("--log-dir", default=None, help="server logs (default: a temp folder)")
    a = ap.parse_args()

    log_dir = a.log_dir or os.path.join(os.environ.get("TMPDIR", "/tmp"), "lse-generation-goldens")
    os.makedirs(log_dir, exist_ok=True)
    jobs = []
    for f in sorted(os.listdir(a.synthetic)):
        if f.endswith(".gguf"):
            jobs.append((os.path.join(a.synthetic, f), SYNTHETIC_PROMPTS, (1.0, 1.5)))
    for f in REAL_MODELS:
        p = os.path.join(a.models, f)
        if os.path.exists(p):
            jobs.append((p, REAL_PROMPTS, (1.0,)))
        else:
            print(f"skipping {f}: not in {a.models} (run scripts/get-models.sh)", file=sys.stderr)
    for path, prompts, pens in jobs:
        stem = os.path.basename(path)[:-5]
        if a.only and stem not in a.only:
            continue
        make_model(a.bin_dir, path, prompts, pens, a.out, log_dir)


if __name__ == "__main__":
    main()
