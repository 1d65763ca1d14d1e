"""Sharded perplexity on a Ray cluster (``pip install 'lse[ray]'``).

``lse.distributed.perplexity(model, text, shards=N, ...)`` runs the N shards of one plan as Ray
tasks (each loads the model and scores its contiguous share of the windows, like
``lse-server --perplexity-shard I/N``), brings the shard files back to the driver and merges them
(``lse-server --perplexity-merge``): the report equals a single run's bit for bit (timings aside),
and a recorded KL base equals the single run's byte for byte.

The model file, and a KL base being compared against, must be readable at the same path on every
node (a shared volume); the text travels through Ray's object store; the merged base is written on
the driver.
"""

from __future__ import annotations

import os
import tempfile

from ._engine import Engine, _size, merge_shards

__all__ = ["perplexity"]


def _score_shard(model, engine_options, request, index, count):
    """One Ray task: load the model, score shard ``index`` of ``count``, return the shard file's bytes."""
    engine = Engine(model, **engine_options)
    with tempfile.TemporaryDirectory(prefix="lse-shard-") as d:
        out = os.path.join(d, f"shard-{index}.lseshard")
        engine.perplexity(**request, shard=(index, count), shard_out=out)
        with open(out, "rb") as f:
            return f.read()


def perplexity(model, text=None, *, tokens=None, shards, engine_options=None, num_cpus_per_shard=1,
               method=None, ctx=None, stride=None, chunks=None, kld_base=None, kld_base_out=None,
               kld_top_k=None, include_windows=False, include_token_ids=False):
    """Scores ``text`` (or ``tokens``) with ``model`` in ``shards`` Ray tasks and returns the merged
    SPEC §4 report (a dict), as ``lse.Engine(model, **engine_options).perplexity(...)`` would.

    ``engine_options``: ``lse.Engine`` keyword arguments for every task (e.g. ``{"threads": 4}``);
    ``num_cpus_per_shard``: the CPUs Ray reserves for each task. The perplexity options are those of
    ``lse.Engine.perplexity``. Uses the Ray cluster this process is connected to (``ray.init()`` is
    called with no arguments when it is not). Raises ``ImportError`` when Ray is not installed,
    ``ValueError`` for bad options or shards that do not merge.
    """
    try:
        import ray
    except ImportError:
        ray = None
    # a folder named ray in the working directory imports as an empty namespace package
    if not hasattr(ray, "remote"):
        raise ImportError("lse.distributed needs Ray: pip install 'lse[ray]' (or pip install ray)")
    count = _size("shards", shards, minimum=1)
    if (text is None) == (tokens is None):
        raise ValueError("perplexity needs exactly one of text, tokens")
    engine_options = dict(engine_options or {})
    request = {"method": method, "ctx": ctx, "stride": stride, "chunks": chunks, "kld_base": kld_base,
               "kld_base_out": kld_base_out, "kld_top_k": kld_top_k, "include_windows": include_windows,
               "include_token_ids": include_token_ids}
    if text is not None:
        request["text"] = text
    else:
        request["tokens"] = list(tokens)
    model = os.fspath(model)
    if not ray.is_initialized():
        ray.init()
    task = ray.remote(num_cpus=num_cpus_per_shard)(_score_shard)
    shared = ray.put(request)
    refs = [task.remote(model, engine_options, shared, i, count) for i in range(count)]
    blobs = ray.get(refs)
    with tempfile.TemporaryDirectory(prefix="lse-merge-") as d:
        paths = []
        for i, blob in enumerate(blobs):
            p = os.path.join(d, f"shard-{i}.lseshard")
            with open(p, "wb") as f:
                f.write(blob)
            paths.append(p)
        return merge_shards(paths, kld_base_out=kld_base_out, include_windows=include_windows,
                            include_token_ids=include_token_ids)
