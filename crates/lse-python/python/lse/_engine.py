"""lse.Engine: a loaded GGUF model that scores text like ``lse-server --perplexity``."""

from __future__ import annotations

import json
import math
import os

import numpy as np

from . import _lse

_UNSET = object()


def _size(name, value, minimum=1):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def _path(name, value):
    if value is None:
        return None
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        raise ValueError(f"{name} must be a path, got {value!r}") from None


def _option(name, value):
    """A scalar option as the JSON request takes it: a numpy scalar as Python's; a float that
    JSON cannot carry (NaN, infinities) refused by name."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def _request(req, names=None):
    """``req`` as the JSON text the engine reads. A string anywhere in it that is not valid
    Unicode (a lone surrogate: a ``str`` from bad bytes, or a path from ``os.fsdecode``) is
    refused by its place in the request, where JSON would carry it as an escape the engine
    refuses without saying whence. ``names`` maps request fields (``"input"``,
    ``"prompt.suffix"``) to the caller's parameters."""
    text = json.dumps(req, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        place, at = _lone_surrogate(req, "")
        for field, name in (names or {}).items():
            if place == field or place.startswith((field + ".", field + "[")):
                place = name + place[len(field):]
                break
        raise ValueError(f"{place} is not valid Unicode text: a lone surrogate at index {at}") from None
    return text


def _lone_surrogate(value, place):
    """(place, index) of the first string in ``value`` holding a lone surrogate, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return place, e.start
    elif isinstance(value, dict):
        for k, v in value.items():
            found = _lone_surrogate(k, f"a key of {place or 'the request'}") or _lone_surrogate(v, f"{place}.{k}" if place else k)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _lone_surrogate(v, f"{place}[{i}]")
            if found:
                return found
    return None


def _flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _tokens(value, name="tokens"):
    """Token ids as a list of ints; errors name the caller's parameter ``name``."""
    if value is None:
        raise ValueError(f"{name} is required (token ids)")
    try:
        arr = np.asarray(value)
    except Exception as e:
        raise ValueError(f"{name}: cannot be read as an array: {e}") from None
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D sequence of integer token ids, got dtype {arr.dtype}, shape {arr.shape}")
    ids = [int(x) for x in arr.tolist()]
    bad = [x for x in ids if x < 0 or x > 0xFFFFFFFF]
    if bad:
        raise ValueError(f"{name}: id {bad[0]} is outside the vocabulary")
    return ids


def _logit_bias(bias):
    """{token id: bias} as the request's JSON map (ids as decimal keys, -inf as false)."""
    try:
        items = dict(bias).items()
    except (TypeError, ValueError):
        raise ValueError("logit_bias must be a mapping from token id to a number") from None
    out = {}
    for k, v in items:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"logit_bias: key {k!r} is not a token id")
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"logit bias of token {int(k)} must be a number or -inf, got {v!r}") from None
        if v != v or v == float("inf"):  # JSON has no NaN or infinity: refused here with the engine's words
            raise ValueError(f"logit bias of token {int(k)} must be a number or -inf, got {v}")
        out[str(int(k))] = False if v == float("-inf") else v
    return out


def _pairs(value):
    if isinstance(value, (str, bytes, os.PathLike)):
        raise ValueError("pairs must be a sequence of {'prompt': ..., 'response': ...} records (read a JSONL file with lse.read_pairs)")
    out = []
    for i, rec in enumerate(value):
        if isinstance(rec, dict):
            # other fields are left out, as in a --perplexity-pairs file's lines
            if "prompt" not in rec or "response" not in rec:
                raise ValueError(f"pairs[{i}]: needs the fields prompt and response")
            prompt, response = rec["prompt"], rec["response"]
        else:
            try:
                prompt, response = rec
            except (TypeError, ValueError):
                raise ValueError(f"pairs[{i}]: expected a dict or a (prompt, response) pair") from None
        if not isinstance(prompt, str) or not isinstance(response, str):
            raise ValueError(f"pairs[{i}]: prompt and response must be strings")
        out.append({"prompt": prompt, "response": response})
    return out


def _shard(value):
    """``(i, n)`` or ``"i/n"`` as the request's ``{"index": i, "count": n}``."""
    if isinstance(value, str):
        parts = value.split("/")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"shard must be (index, count) or 'I/N', got {value!r}")
        value = (int(parts[0]), int(parts[1]))
    try:
        index, count = value
    except (TypeError, ValueError):
        raise ValueError(f"shard must be (index, count) or 'I/N', got {value!r}") from None
    return {"index": _size("shard index", index, minimum=0), "count": _size("shard count", count, minimum=1)}


def merge_shards(shards, *, kld_base_out=None, include_windows=False, include_token_ids=False):
    """Merges shard files (``Engine.perplexity(shard=..., shard_out=...)`` or
    ``lse-server --perplexity-shard``) into the SPEC §4 report, as ``lse-server --perplexity-merge``:
    the shards must be one plan, complete and disjoint; the numbers equal a single run's bit for bit.
    Writes the merged KL base (to ``kld_base_out``, else where the shards were told) when they
    recorded one. No model is loaded."""
    if isinstance(shards, (str, bytes)) or not hasattr(shards, "__iter__"):
        raise ValueError("shards must be a list of shard file paths")
    paths = [_path("shards", p) for p in shards]
    req = {"shards": paths, "include_windows": _flag("include_windows", include_windows),
           "include_token_ids": _flag("include_token_ids", include_token_ids)}
    out = _path("kld_base_out", kld_base_out)
    if out is not None:
        req["kld_base_out"] = out
    return json.loads(_lse.merge_shards_json(_request(req)))


def read_pairs(path):
    """Reads a ``--perplexity-pairs`` JSON Lines file into a list of ``{"prompt", "response"}`` dicts
    (blank lines skipped). A bad line raises ValueError with its line number."""
    out = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: line {n}: not valid UTF-8: invalid byte at offset {e.start} of the line") from None
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n}: not valid JSON: {e}") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str) or not isinstance(rec.get("response"), str):
                raise ValueError(f"{path}: line {n}: needs string fields prompt and response")
            out.append({"prompt": rec["prompt"], "response": rec["response"]})
    return out


class Engine:
    """A GGUF model loaded for scoring (SPEC §2 options; ``None`` = the default).

    >>> eng = lse.Engine(model="models/SmolLM2-135M-Instruct.Q4_1.gguf", threads=4)
    >>> eng.perplexity(text=open("wiki.test.raw", newline="").read(), ctx=512, chunks=4)["perplexity"]

    Calls on one engine are serialised; the GIL is released while the model works, so other
    Python threads keep running.
    """

    def __init__(self, model, *, threads=None, batch_size=None, ubatch_size=None, kv_cache_dtype=None,
                 kv_len=None, flash_prefill=None, dialect=None, cpu_fallback=None, huge_pages=None):
        model = _path("model", model)
        if model is None:
            raise ValueError("model is required (a .gguf file or a folder holding one)")
        # The engine reads and checks the options object (the C API's lse_engine_open JSON);
        # here they are only spelled as that object.
        options = {"model": model, "threads": threads, "batch_size": batch_size, "ubatch_size": ubatch_size,
                   "kv_cache_dtype": kv_cache_dtype, "kv_len": kv_len, "dialect": dialect}
        if flash_prefill is not None:
            options["flash_prefill_v2"] = flash_prefill if isinstance(flash_prefill, str) else _flag("flash_prefill", flash_prefill)
        if cpu_fallback is not None:
            options["no_cpu_fallback"] = not _flag("cpu_fallback", cpu_fallback)
        if huge_pages is not None:
            # packed weights on huge pages: for generation, which streams them every token
            options["huge_pages"] = _flag("huge_pages", huge_pages)
        for name in ("threads", "batch_size", "ubatch_size", "kv_len"):
            options[name] = _option(name, options[name])
        try:
            text = _request({k: v for k, v in options.items() if v is not None})
        except TypeError as e:
            raise ValueError(f"engine options: {e}") from None
        self._native = _lse.NativeEngine(text)

    # -- facts about the model
    @property
    def n_vocab(self) -> int:
        return self._native.n_vocab

    @property
    def architecture(self) -> str:
        return self._native.architecture

    @property
    def model_name(self) -> str:
        return self._native.model_name

    @property
    def kv_capacity(self) -> int:
        return self._native.kv_capacity

    @property
    def load_notes(self) -> list:
        """What loading set aside, one line each: special token ids outside the vocabulary (the
        key, the id and the default used), as llama.cpp warns when it loads."""
        return self._native.load_notes

    @property
    def config(self) -> dict:
        """The SPEC §4 ``config`` object for this engine."""
        return json.loads(self._native.config_json())

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of ``text`` as a list of ints."""
        if not isinstance(text, str):
            raise ValueError("text must be a str")
        found = _lone_surrogate(text, "text")
        if found:
            raise ValueError(f"text is not valid Unicode text: a lone surrogate at index {found[1]}")
        return list(self._native.tokenize(text, bool(add_special), bool(parse_special)))

    def embed(self, texts, *, pooling=None, normalize=2):
        """Embeddings as ``llama-server --embeddings`` computes them: each text (a str, or a list
        of them) tokenized as a prompt, its final-normed hidden rows pooled (``pooling`` "mean",
        "cls" or "last"; ``None`` = the model's own, which generative models lack) and normalised
        (``normalize``: llama.cpp's ``embd_normalize``, 2 = Euclidean, -1 = none); at most 2048
        texts a call. Returns a numpy float32 array ``[N, n_embd]``."""
        if not isinstance(texts, str) and not hasattr(texts, "__iter__"):
            raise ValueError("texts must be a str or a list of str")
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("texts must be a str or a list of str")
        if isinstance(normalize, bool) or not isinstance(normalize, (int, np.integer)):
            raise ValueError(f"normalize must be an integer (-1 none, 0 max-abs, 1 taxicab, 2 Euclidean, p > 2 a p-norm), got {normalize!r}")
        req = {"input": texts, "normalize": int(normalize)}
        if pooling is not None:
            req["pooling"] = pooling
        return self._native.embed_json(_request(req, {"input": "texts"}))

    def logits(self, tokens):
        """Full logits ``[T, V]`` (numpy float32) for ``tokens`` run as one fresh session;
        row ``i`` predicts token ``i + 1``. For validation: it materialises ``T x V`` floats."""
        return self._native.logits(_tokens(tokens))

    def perplexity(self, text=None, *, tokens=None, pairs=None, method=None, ctx=None, stride=None,
                   chunks=None, kld_base=None, kld_base_out=None, kld_top_k=None,
                   include_windows=False, include_token_ids=False, shard=None, shard_out=None):
        """Scores ``text`` (a str, tokenized as a prompt and used as given), ``tokens`` (ids), or
        ``pairs`` (``{"prompt", "response"}`` records: conditional perplexity of the responses) and
        returns the SPEC §4 report as a dict, exactly as ``lse-server`` prints it.
        Options are the SPEC §7 request fields (``None`` = default).

        ``shard=(i, n)`` (or ``"i/n"``) with ``shard_out=PATH``: score only shard ``i`` (0-based) of
        ``n`` contiguous shares of the windows and write a shard file there (``--perplexity-shard``);
        returns a small dict naming it. :func:`lse.merge_shards` merges the files into the report."""
        given = [k for k, v in (("text", text), ("tokens", tokens), ("pairs", pairs)) if v is not None]
        if len(given) != 1:
            raise ValueError("perplexity needs exactly one of text, tokens, pairs")
        req = {}
        if text is not None:
            if not isinstance(text, str):
                raise ValueError("text must be a str")
            req["text"] = text
        elif tokens is not None:
            req["tokens"] = _tokens(tokens)
        else:
            req["pairs"] = _pairs(pairs)
        if method is not None:
            if not isinstance(method, str):
                raise ValueError(f"method must be a string, got {method!r}")
            req["method"] = method
        for name, value in (("ctx", ctx), ("stride", stride), ("chunks", chunks), ("kld_top_k", kld_top_k)):
            value = _size(name, value, minimum=0)
            if value is not None:
                req[name] = value
        for name, value in (("kld_base", kld_base), ("kld_base_out", kld_base_out)):
            value = _path(name, value)
            if value is not None:
                req[name] = value
        req["include_windows"] = _flag("include_windows", include_windows)
        req["include_token_ids"] = _flag("include_token_ids", include_token_ids)
        if shard is not None:
            req["shard"] = _shard(shard)
        out = _path("shard_out", shard_out)
        if out is not None:
            req["shard_out"] = out
        return json.loads(self._native.perplexity_json(_request(req)))

    def generate(self, prompt, *, max_tokens=None, temperature=None, top_k=None, top_p=None, min_p=None,
                 repeat_penalty=None, repeat_last_n=None, presence_penalty=None, frequency_penalty=None,
                 seed=None, stop=None, ignore_eos=None, top_logprobs=None, add_special=None, logit_bias=None,
                 json_object=None, json_schema=None, suffix=None, stop_token_ids=None, min_tokens=None,
                 post_sampling_probs=None):
        """Prompts the model with ``prompt`` (a str, tokenized as a prompt with special-token text
        parsed, or a list of token ids; with ``suffix``, the text before a gap and ``suffix`` the
        text after it, laid out with the model's fill-in-the-middle tokens, as
        ``--generate-suffix``) and returns the ``lse.generation`` dict that
        ``lse-server --generate`` prints. Options are those of ``lse_generate`` (``None`` =
        llama.cpp's default); ``logit_bias`` maps token ids to a number added to their logits
        before the other samplers (``float("-inf")`` bans the token); ``json_object=True`` samples
        only tokens that keep the text one JSON object and stops when it closes, ``json_schema`` (a
        dict) the same for a value of that schema; out-of-range values and unsupported schemas
        raise ValueError."""
        if suffix is not None:
            if not isinstance(prompt, str) or not isinstance(suffix, str):
                raise TypeError("with suffix, prompt and suffix are texts (before and after the gap)")
            req = {"prompt": {"prefix": prompt, "suffix": suffix}}
        elif isinstance(prompt, str):
            req = {"prompt": prompt}
        elif prompt is None:
            raise ValueError("prompt is required (a str or token ids)")
        else:
            req = {"prompt": _tokens(prompt, "prompt")}
        if isinstance(stop, (str, bytes)):
            stop = [stop]
        if stop is not None and not all(isinstance(s, str) for s in stop):
            raise ValueError(f"stop must be a str or a list of str, got {stop!r}")
        options = dict(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                       repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                       presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, seed=seed,
                       stop=None if stop is None else list(stop), ignore_eos=ignore_eos,
                       top_logprobs=top_logprobs, add_special=add_special,
                       logit_bias=None if logit_bias is None else _logit_bias(logit_bias),
                       json_object=json_object, json_schema=json_schema,
                       stop_token_ids=None if stop_token_ids is None else _tokens(stop_token_ids, "stop_token_ids"), min_tokens=min_tokens,
                       post_sampling_probs=post_sampling_probs)
        scalars = ("stop", "logit_bias", "json_schema", "stop_token_ids")
        req.update({k: v if k in scalars else _option(k, v) for k, v in options.items() if v is not None})
        return json.loads(self._native.generate_json(_request(req, {"prompt.prefix": "prompt", "prompt.suffix": "suffix"})))

    def __repr__(self):
        return f"lse.Engine(model={self.model_name!r}, architecture={self.architecture!r}, n_vocab={self.n_vocab})"
