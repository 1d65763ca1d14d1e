"""lse.Engine.embed against llama.cpp's llama-server --embeddings (data/golden/embedding)."""

import json

import pytest

from test_engine import REPO, engine  # noqa: F401  (fixture)


def test_embed_matches_llama_server(engine):  # noqa: F811
    """Engine.embed against llama-server --embeddings (data/golden/embedding): cosine >= 0.999 per
    text (two implementations' hidden rows; other texts stay under 0.98), Euclidean length 1."""
    golden = json.loads((REPO / "data" / "golden" / "embedding" / "SmolLM2-135M-Instruct.Q4_1.json").read_text())
    for case in golden["cases"]:
        got = engine.embed(golden["inputs"], pooling=case["pooling"], normalize=case["embd_normalize"])
        assert got.shape == (len(golden["inputs"]), len(case["embeddings"][0])) and got.dtype.name == "float32"
        for g, w in zip(got.tolist(), case["embeddings"]):
            cos = sum(x * y for x, y in zip(g, w)) / (sum(x * x for x in g) * sum(y * y for y in w)) ** 0.5
            assert cos >= 0.999
    with pytest.raises(ValueError, match="pooling"):
        engine.embed("hi")
    with pytest.raises(ValueError, match="rank"):
        engine.embed("hi", pooling="rank")
