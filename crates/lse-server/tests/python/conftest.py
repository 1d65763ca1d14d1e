"""The real lse-server on a free port with SmolLM2 (embeddings pooled by mean), shared by the HTTP
client tests.

Environment: LSE_SERVER (the binary), LSE_TEST_MODEL (the GGUF). Both are set by
scripts/test-python.sh; a test is skipped with the reason when either is missing.
"""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest


def _health(base):
    try:
        with urllib.request.urlopen(base + "/health", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="session")
def server():
    binary = os.environ.get("LSE_SERVER")
    model = os.environ.get("LSE_TEST_MODEL")
    if not binary or not os.path.exists(binary):
        pytest.skip(f"LSE_SERVER not set or missing ({binary!r})")
    if not model or not os.path.exists(model):
        pytest.skip(f"LSE_TEST_MODEL not set or missing ({model!r})")
    p = subprocess.Popen(
        [binary, "--model", model, "--port", "0", "--threads", "2", "--kv-len", "2048", "--alias", "smol", "--pooling", "mean"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline().strip()
    assert line.startswith("lse-server: listening on http://127.0.0.1:"), line
    base = line.rsplit(" ", 1)[1]
    t = time.time()
    while _health(base) != 200:
        assert time.time() - t < 120, "the model did not load"
        time.sleep(0.05)
    yield base
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())
