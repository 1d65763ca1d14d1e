"""lse.distributed.perplexity on a local Ray cluster of 2 workers: 3 shards as Ray tasks, merged,
give the single run's report (every field but the timings) and its KL base byte for byte; and
lse.Engine's shard files merge like lse-server's. Skipped when Ray cannot be imported or the model
is absent."""

import json
import os
from pathlib import Path

import pytest

import lse
import lse.distributed

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MODEL = Path(os.environ.get("LSE_TEST_MODEL") or REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
WIKI = REPO / "data" / "wiki.test.raw"

needs_model = pytest.mark.skipif(not MODEL.exists() or not WIKI.exists(), reason=f"model {MODEL} or {WIKI} absent")
OPTS = dict(ctx=128, chunks=8, kld_top_k=8, include_windows=True)


def _text():
    return WIKI.read_text(encoding="utf-8")[:16000]


def _numbers(report):
    r = json.loads(json.dumps(report))
    for k in ("elapsed_seconds", "prefill_tokens_per_second"):
        r.pop(k)
    for w in r.get("windows", []):
        w.pop("seconds")
    # as printed: every float by its shortest repr, so equal text means equal bits
    return json.dumps(r)


@needs_model
def test_engine_shards_merge_to_the_single_run(tmp_path):
    eng = lse.Engine(MODEL, threads=2)
    text = _text()
    single = eng.perplexity(text, kld_base_out=tmp_path / "single.kld", **OPTS)
    paths = []
    for i in range(3):
        p = tmp_path / f"s{i}.lseshard"
        out = eng.perplexity(text, shard=f"{i}/3", shard_out=p, kld_base_out=tmp_path / "merged.kld", **OPTS)
        assert out["object"] == "lse.perplexity-shard" and out["shard_index"] == i
        paths.append(p)
    merged = lse.merge_shards(paths)
    assert _numbers(merged) == _numbers(single)
    assert (tmp_path / "merged.kld").read_bytes() == (tmp_path / "single.kld").read_bytes()
    with pytest.raises(ValueError, match="shard 1/3 is missing"):
        lse.merge_shards([paths[0], paths[2]])
    with pytest.raises(ValueError, match="shard must be"):
        eng.perplexity(text, shard="1", shard_out=tmp_path / "x", **OPTS)


@needs_model
def test_ray_two_workers_give_the_single_run(tmp_path):
    ray = pytest.importorskip("ray")
    text = _text()
    single = lse.Engine(MODEL, threads=1).perplexity(text, kld_base_out=tmp_path / "single.kld", **OPTS)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        merged = lse.distributed.perplexity(MODEL, text, shards=3, engine_options={"threads": 1},
                                            kld_base_out=tmp_path / "merged.kld", **OPTS)
    finally:
        ray.shutdown()
    assert merged["windows_scored"] == 8 and len(merged["windows"]) == 8
    assert _numbers(merged) == _numbers(single)
    assert (tmp_path / "merged.kld").read_bytes() == (tmp_path / "single.kld").read_bytes()
