"""lse.Engine against a real model: pairs vs conditional_perplexity on the engine's own logits,
text vs the lse-server CLI. Skipped (with the reason) when the model or the binary is absent.

LSE_TEST_MODEL: the GGUF to use (default: <repo>/models/SmolLM2-135M-Instruct.Q4_1.gguf,
fetched by scripts/get-models.sh smollm2). LSE_SERVER: the lse-server binary (default:
$CARGO_TARGET_DIR/release/lse-server, else <repo>/target/release/lse-server).
"""

import json
import math
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import lse

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
THREADS = 2
MODEL = Path(os.environ.get("LSE_TEST_MODEL") or REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
WIKI = REPO / "data" / "wiki.test.raw"


def _server_path():
    if os.environ.get("LSE_SERVER"):
        return Path(os.environ["LSE_SERVER"])
    target = os.environ.get("CARGO_TARGET_DIR")
    if target and (Path(target) / "release" / "lse-server").exists():
        return Path(target) / "release" / "lse-server"
    return REPO / "target" / "release" / "lse-server"


SERVER = _server_path()

needs_model = pytest.mark.skipif(
    not MODEL.is_file(), reason=f"model {MODEL} is absent (run scripts/get-models.sh smollm2)"
)


@pytest.fixture(scope="module")
def engine():
    if not MODEL.is_file():
        pytest.skip(f"model {MODEL} is absent (run scripts/get-models.sh smollm2)")
    return lse.Engine(model=MODEL, threads=THREADS)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    if not WIKI.is_file():
        pytest.skip(f"{WIKI} is absent")
    # About 1000 tokens of wikitext, ending with one newline (which the CLI removes).
    text = WIKI.read_bytes()[:5000].decode("utf-8", errors="ignore").rstrip("\n") + "\n"
    path = tmp_path_factory.mktemp("text") / "sample.txt"
    path.write_bytes(text.encode("utf-8"))  # bytes: keep the file's CRLF line ends as they are
    return path


def _read(path):
    """The file's text exactly (no newline translation, unlike Path.read_text)."""
    return path.read_bytes().decode("utf-8")


# ---------------------------------------------------------------- pairs vs conditional_perplexity


# The engine's LM-head reduction takes each exp(l - max) in f64 and sums in f64, and
# conditional_perplexity evaluates the log-sum-exp in f64 from the same f32 logits: the 1e-9.
TOL = 1e-9


def _pairs_batch(engine, report):
    """Logits/targets/mask [B, T, V] built from the engine's full logits for every record."""
    tokens = report["token_ids"]
    windows = report["windows"]
    t_max = max(w["end"] - w["begin"] for w in windows) - 1
    v = engine.n_vocab
    logits = np.zeros((len(windows), t_max, v), dtype=np.float32)
    targets = np.zeros((len(windows), t_max), dtype=np.int64)
    mask = np.zeros((len(windows), t_max), dtype=bool)
    for b, w in enumerate(windows):
        seq = tokens[w["begin"] : w["end"]]
        full = engine.logits(seq)
        assert full.shape == (len(seq), v) and full.dtype == np.float32
        n = len(seq) - 1
        logits[b, :n] = full[:-1]  # row j predicts seq[j + 1]
        targets[b, :n] = seq[1:]
        mask[b, :n] = np.arange(1, n + 1) >= w["first_target"]
    return logits, targets, mask


@needs_model
def test_pairs_equal_conditional_perplexity_of_engine_logits(engine):
    pairs = lse.read_pairs(HERE / "data" / "pairs.jsonl")
    report = engine.perplexity(pairs=pairs, include_windows=True, include_token_ids=True)
    assert report["object"] == "lse.perplexity"
    assert report["method"] == "pairs"
    windows = report["windows"]
    assert len(windows) == len(pairs)

    # The mask is the response: record = tokenize(prompt, special) + tokenize(response, no special).
    for w, rec in zip(windows, pairs):
        n_resp = len(engine.tokenize(rec["response"], add_special=False))
        prompt_empty = (w["end"] - w["begin"]) == n_resp
        assert w["scored"] == (n_resp - 1 if prompt_empty else n_resp), (w, rec)
    assert report["scored_tokens"] == sum(w["scored"] for w in windows)
    assert report["ctx"] == max(w["end"] - w["begin"] for w in windows)

    logits, targets, mask = _pairs_batch(engine, report)
    whole = lse.conditional_perplexity(logits, targets, mask)
    assert whole["selected_token_count"] == report["scored_tokens"]
    assert abs(whole["negative_log_likelihood"] - report["mean_nll"]) <= TOL, (whole, report["mean_nll"])
    assert abs(whole["perplexity"] - report["perplexity"]) <= TOL * report["perplexity"]

    # Record by record, too (the average is over tokens, so per-record values differ from the whole).
    for b, w in enumerate(windows):
        one = lse.conditional_perplexity(logits[b : b + 1], targets[b : b + 1], mask[b : b + 1])
        assert one["selected_token_count"] == w["scored"]
        assert abs(one["negative_log_likelihood"] - w["mean_nll"]) <= TOL, (b, one, w)
        assert abs(one["negative_log_likelihood"] * w["scored"] - w["nll_sum"]) <= TOL * max(1.0, w["nll_sum"])


@needs_model
def test_pairs_accept_tuples_and_chunks_limit(engine):
    pairs = lse.read_pairs(HERE / "data" / "pairs.jsonl")
    a = engine.perplexity(pairs=pairs[:2])
    b = engine.perplexity(pairs=[(p["prompt"], p["response"]) for p in pairs], chunks=2)
    # fields beside prompt and response are left out, as in a --perplexity-pairs file's lines
    c = engine.perplexity(pairs=[dict(p, id=i, source="x") for i, p in enumerate(pairs[:2])])
    for key in ("tokens", "token_ids_sha256", "scored_tokens", "mean_nll", "perplexity", "windows_scored"):
        assert a[key] == b[key] == c[key], key


# ---------------------------------------------------------------- text vs the CLI

TIMING_KEYS = {"elapsed_seconds", "prefill_tokens_per_second"}


def _strip_timing(report):
    out = {k: v for k, v in report.items() if k not in TIMING_KEYS}
    if "windows" in out:
        out["windows"] = [{k: v for k, v in w.items() if k != "seconds"} for w in out["windows"]]
    return out


def _cli(args, tmp_path):
    if not SERVER.is_file():
        pytest.skip(f"lse-server binary {SERVER} is absent (cargo build --release -p lse-server)")
    out = tmp_path / "report.json"
    cmd = [str(SERVER), "--model", str(MODEL), "--threads", str(THREADS), *args, "--perplexity-output", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{cmd} failed: {run.stderr}"
    return json.loads(out.read_text())


CLI_CASES = [
    ({"ctx": 128}, ["--perplexity-ctx", "128"]),
    ({"method": "sliding", "ctx": 96, "stride": 48, "chunks": 5},
     ["--perplexity-method", "sliding", "--perplexity-ctx", "96", "--perplexity-stride", "48", "--perplexity-chunks", "5"]),
]


@needs_model
@pytest.mark.parametrize("kwargs,args", CLI_CASES, ids=["chunks", "sliding"])
def test_text_equals_cli(engine, text_file, tmp_path, kwargs, args):
    cli = _cli(["--perplexity", str(text_file), "--perplexity-windows", "--perplexity-token-ids", *args], tmp_path)
    text = _read(text_file)
    assert text.endswith("\n")
    py = engine.perplexity(text=text[:-1], include_windows=True, include_token_ids=True, **kwargs)
    assert list(py) == list(cli), "key order differs"
    assert _strip_timing(py) == _strip_timing(cli)
    assert math.isfinite(py["perplexity"]) and py["perplexity"] > 1


@needs_model
def test_pairs_equal_cli(engine, tmp_path):
    path = HERE / "data" / "pairs.jsonl"
    cli = _cli(["--perplexity-pairs", str(path), "--perplexity-windows", "--perplexity-token-ids"], tmp_path)
    py = engine.perplexity(pairs=lse.read_pairs(path), include_windows=True, include_token_ids=True)
    assert list(py) == list(cli), "key order differs"
    assert _strip_timing(py) == _strip_timing(cli)


@needs_model
def test_tokens_equal_text(engine, text_file):
    text = _read(text_file)[:-1]
    by_text = engine.perplexity(text=text, ctx=64, chunks=2, include_token_ids=True)
    by_ids = engine.perplexity(tokens=np.array(by_text["token_ids"], dtype=np.int64), ctx=64, chunks=2)
    assert by_ids["mean_nll"] == by_text["mean_nll"]
    assert by_ids["token_ids_sha256"] == by_text["token_ids_sha256"]
    assert engine.tokenize(text) == by_text["token_ids"]


@needs_model
def test_kld_base_roundtrip(engine, text_file, tmp_path):
    text = _read(text_file)[:-1]
    base = tmp_path / "base.kld"
    first = engine.perplexity(text=text, ctx=64, chunks=2, kld_base_out=base, kld_top_k=8)
    assert base.is_file()
    again = engine.perplexity(text=text, ctx=64, chunks=2, kld_base=str(base))
    kld = again["kld"]
    assert kld["top_k"] == 8
    assert kld["base_perplexity"] == pytest.approx(first["perplexity"], rel=1e-12)
    assert abs(kld["mean_kld"]) < 1e-6
    assert kld["same_top"] == 1.0


@needs_model
def test_releases_the_gil(engine, text_file):
    text = _read(text_file)[:-1]
    done = threading.Event()
    result = {}

    def work():
        result["r"] = engine.perplexity(text=text, ctx=128, chunks=3)
        done.set()

    th = threading.Thread(target=work)
    ticks = 0
    start = time.perf_counter()
    th.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    th.join()
    elapsed = time.perf_counter() - start
    assert "r" in result
    # With the GIL held for the whole run the loop above could not advance at all.
    if elapsed > 0.2:
        assert ticks >= 20, (ticks, elapsed)


# ---------------------------------------------------------------- bad input


def test_load_notes_say_special_ids_outside_the_vocabulary(engine, tmp_path):
    # SmolLM2's special ids all lie in its vocabulary: nothing was set aside
    assert engine.load_notes == []
    # the synthetic llama with its EOS id (a u32 after the key and its type) moved past the vocabulary
    data = bytearray((REPO / "data" / "golden" / "synthetic" / "llama-tiny.gguf").read_bytes())
    key = b"tokenizer.ggml.eos_token_id"
    at = data.index(key) + len(key)
    assert int.from_bytes(data[at : at + 4], "little") == 4  # GGUF's u32
    data[at + 4 : at + 8] = (999999).to_bytes(4, "little")
    patched = tmp_path / "tiny-bad-eos.gguf"
    patched.write_bytes(bytes(data))
    notes = lse.Engine(model=patched, threads=1).load_notes
    assert len(notes) == 1 and notes[0].startswith(
        "tokenizer.ggml.eos_token_id = 999999 is outside the vocabulary of"
    ), notes


@needs_model
@pytest.mark.parametrize(
    "kwargs",
    [{"batch_size": 0}, {"ubatch_size": 1024, "batch_size": 512}, {"kv_cache_dtype": "f8"}, {"dialect": "avx9"},
     {"threads": -1}, {"kv_len": 0}, {"flash_prefill": "maybe"}],
)
def test_bad_engine_options(kwargs):
    with pytest.raises(ValueError):
        lse.Engine(model=MODEL, **kwargs)


def test_missing_model(tmp_path):
    with pytest.raises((OSError, RuntimeError, ValueError)):
        lse.Engine(model=tmp_path / "nope.gguf")


@needs_model
def test_ctrl_c_stops_a_scoring_run(engine):
    # the GIL is released while the model works: without a look at pending signals between
    # windows, the interrupt waited for the whole run (~15 s of 200 windows here)
    import signal
    text = WIKI.read_bytes()[:400000].decode("utf-8", errors="ignore")
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        engine.perplexity(text=text, ctx=128, chunks=200)
    assert time.monotonic() - t0 < 5.0
    # the engine serves the next call
    assert engine.perplexity(text=text, ctx=128, chunks=1)["perplexity"] > 1


def test_bad_text_is_named(engine, tmp_path):
    # the parameter's own name (was "tokens must be ..."); a list is no flag (bool([1]) was taken)
    with pytest.raises(ValueError, match=r"^prompt is required \(a str or token ids\)$"):
        engine.generate(None)
    with pytest.raises(ValueError, match=r"^prompt must be a 1-D sequence of integer token ids"):
        engine.generate([[1, 2]])
    with pytest.raises(ValueError, match=r"^flash_prefill must be True or False, got \[1\]$"):
        lse.Engine(model=MODEL, flash_prefill=[1])
    # were a raw UnicodeEncodeError and a UnicodeDecodeError without the line
    with pytest.raises(ValueError, match=r"^text is not valid Unicode text: a lone surrogate at index 1$"):
        engine.tokenize("a\udcffb")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"prompt": "a", "response": "b"}\n{"prompt": "\xff", "response": "b"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2: not valid UTF-8: invalid byte at offset 12 of the line$"):
        lse.read_pairs(bad)


def test_bad_option_values_name_the_option(engine):
    with pytest.raises(ValueError, match="include_windows must be True or False"):
        engine.perplexity(text="x" * 1000, include_windows="no")
    with pytest.raises(ValueError, match="normalize must be an integer"):
        engine.embed("hello", pooling="mean", normalize=1.7)
    with pytest.raises(ValueError, match="threads must be a finite number"):
        lse.Engine(model=MODEL, threads=float("nan"))
    with pytest.raises(ValueError, match="text is not valid Unicode text: a lone surrogate at index 0"):
        engine.perplexity(text="\ud800" + "x" * 1000)
    with pytest.raises(ValueError, match="prompt is not valid Unicode text"):
        engine.generate("a\udcff", max_tokens=1)
    # wherever in the request: named by its place there (was a JSON escape error)
    with pytest.raises(ValueError, match=r"^stop\[1\] is not valid Unicode text: a lone surrogate at index 2$"):
        engine.generate("a", max_tokens=1, stop=["x", "ab\udc80"])
    with pytest.raises(ValueError, match=r"^pairs\[1\]\.response is not valid Unicode text"):
        engine.perplexity(pairs=[("a", "b"), ("c", "\ud800")])
    with pytest.raises(ValueError, match=r"^suffix is not valid Unicode text"):
        engine.generate("a", suffix="\udfff", max_tokens=1)
    with pytest.raises(ValueError, match=r"^prompt is not valid Unicode text"):
        engine.generate("\udfff", suffix="b", max_tokens=1)
    with pytest.raises(ValueError, match=r"^pairs\[1\]: prompt and response must be strings"):
        engine.perplexity(pairs=[("a", "b"), ("c", 3)])
    with pytest.raises(ValueError, match=r"^texts\[1\] is not valid Unicode text"):
        engine.embed(["a", "\ud800"], pooling="mean")
    with pytest.raises(ValueError, match=r"^json_schema\.properties\.a\.description is not valid Unicode text"):
        engine.generate("a", max_tokens=1, json_schema={"type": "object", "properties": {"a": {"type": "string", "description": "\udc00"}}})
    # a path of bytes that are not UTF-8 (os.fsdecode gives lone surrogates)
    with pytest.raises(ValueError, match=r"^kld_base_out is not valid Unicode text: a lone surrogate at index 4$"):
        engine.perplexity(text="x" * 1000, kld_base_out=b"/tmp\xff.kld")
    with pytest.raises(ValueError, match=r"^model is not valid Unicode text"):
        lse.Engine(model=b"/tmp/\xfe.gguf")
    # the checks the CLI shares name the keyword arguments, not its flags (--perplexity-stride)
    with pytest.raises(ValueError, match=r"^stride applies to method sliding only \(chunks use stride = ctx = 512\), got 3$"):
        engine.perplexity(text="x" * 1000, stride=3)
    with pytest.raises(ValueError, match=r"^kld_top_k only applies when writing a KL base with kld_base_out PATH"):
        engine.perplexity(text="x" * 1000, kld_top_k=4)
    with pytest.raises(ValueError, match=r"^engine option threads 100000 is far more than the \d+ CPUs"):
        lse.Engine(model=MODEL, threads=100000)


def test_bad_requests(engine):
    with pytest.raises(ValueError):
        engine.perplexity(text="a", tokens=[1, 2])
    with pytest.raises(ValueError):
        engine.perplexity()
    with pytest.raises(ValueError, match="2"):  # too short: states both numbers
        engine.perplexity(text="Hello world.", ctx=64)
    with pytest.raises(ValueError):
        engine.perplexity(tokens=[0, engine.n_vocab] * 64, ctx=64)
    with pytest.raises(ValueError):
        engine.perplexity(text="x" * 1000, method="zigzag")
    with pytest.raises(ValueError):
        engine.perplexity(pairs=[{"prompt": "a"}])
    with pytest.raises(ValueError):
        engine.logits([engine.n_vocab])
