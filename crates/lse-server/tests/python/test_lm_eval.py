"""lm-evaluation-harness (`local-completions`, remote tokenizer, token-id requests) on small local
JSONL tasks: a multiple-choice log-likelihood task and a rolling log-likelihood task. Its
log-likelihoods must equal the server's own echo log-probs for the same token ids."""

import json
import math
import os
import urllib.request
from pathlib import Path

import pytest

from conftest import post

DATA = Path(__file__).parent / "data"

MC_YAML = """task: lse_http_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
"""

ROLLING_YAML = """task: lse_http_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
"""


def echo_loglikelihood(server, context_ids, continuation_ids):
    ids = context_ids + continuation_ids
    r = post(server, "/v1/completions", {"prompt": ids, "echo": True, "logprobs": 1, "max_tokens": 0, "temperature": 0})
    lps = r["choices"][0]["logprobs"]["token_logprobs"]
    return sum(lps[len(context_ids):])


def cached_tokens_total(server):
    with urllib.request.urlopen(server + "/metrics", timeout=30) as r:
        line = next(l for l in r.read().decode().splitlines() if l.startswith("lse_prompt_tokens_cached_total "))
    return float(line.split()[1])


def test_lm_eval_local_completions(server, tmp_path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import lm_eval
    from lm_eval.tasks import TaskManager

    (tmp_path / "mc.yaml").write_text(MC_YAML.format(path=DATA / "mc.jsonl"))
    (tmp_path / "rolling.yaml").write_text(ROLLING_YAML.format(path=DATA / "rolling.jsonl"))
    cached_before = cached_tokens_total(server)
    out = lm_eval.simple_evaluate(
        model="local-completions",
        model_args=f"model=smol,base_url={server}/v1/completions,tokenizer_backend=remote,tokenized_requests=True,max_length=2048",
        tasks=["lse_http_mc", "lse_http_rolling"],
        task_manager=TaskManager(include_path=str(tmp_path)),
        log_samples=True,
        batch_size=1,
    )
    # the choices of one question share its context: later ones reuse its rows and log-probs
    print("prompt tokens kept during the lm-eval run:", cached_tokens_total(server) - cached_before)
    assert cached_tokens_total(server) > cached_before
    res = out["results"]
    acc = res["lse_http_mc"]["acc,none"]
    assert 0.0 <= acc <= 1.0
    ppl = res["lse_http_rolling"]["word_perplexity,none"]
    assert math.isfinite(ppl) and ppl > 1.0

    # every multiple-choice log-likelihood equals the server's echo log-probs for the same ids
    docs = [json.loads(l) for l in (DATA / "mc.jsonl").read_text().splitlines() if l.strip()]
    samples = out["samples"]["lse_http_mc"]
    assert len(samples) == len(docs)
    tok = lambda s: post(server, "/tokenize", {"content": s, "add_special": False})["tokens"]
    checked = 0
    for s in samples:
        doc = s["doc"]
        for choice, resp in zip(doc["choices"], s["resps"]):
            ll = float(resp[0][0])
            whole = tok(doc["question"] + " " + choice)
            ctx = tok(doc["question"])
            if whole[: len(ctx)] != ctx:
                continue  # the boundary merged tokens; lm-eval splits differently
            want = echo_loglikelihood(server, ctx, whole[len(ctx):])
            assert abs(ll - want) < 1e-6, (doc["question"], choice, ll, want)
            checked += 1
    assert checked > 0
