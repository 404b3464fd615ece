"""HashEmbedder properties and CachedEmbedder's in-process cache (no database)."""
from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from agent.providers.embeddings import DIM, CachedEmbedder, HashEmbedder, make_embedder
from agent.settings import Settings


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_hash_embedder_shape_and_dtype():
    vecs = HashEmbedder().embed(["net interest margin", "loan growth", ""])
    assert DIM == 384
    assert vecs.shape == (3, 384)
    assert vecs.dtype == np.float32


def test_hash_embedder_is_deterministic_across_instances():
    texts = ["Net interest margin expanded 5 bps.", "Deposits grew."]
    a = HashEmbedder().embed(texts)
    b = HashEmbedder().embed(list(reversed(texts)))[::-1]
    assert np.array_equal(a, b)


def test_hash_embedder_unit_norm_even_for_empty_text():
    vecs = HashEmbedder().embed(["a b c d", "x", "", "!!!"])
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)


def test_hash_embedder_case_insensitive():
    e = HashEmbedder()
    assert np.array_equal(e.embed(["Net Interest Margin"])[0], e.embed(["net interest margin"])[0])


def test_shared_words_mean_higher_similarity():
    e = HashEmbedder()
    q, close, far = e.embed([
        "net interest margin outlook for next year",
        "our net interest margin outlook improved",
        "restaurant traffic and menu pricing in Texas",
    ])
    assert _cos(q, close) > _cos(q, far)
    assert _cos(q, close) > 0.3
    assert abs(_cos(q, far)) < 0.3


class CountingEmbedder:
    """A real inner embedder that records what it was asked to embed."""

    name = "counting"

    def __init__(self):
        self.calls: list[list[str]] = []
        self._inner = HashEmbedder()

    def embed(self, texts):
        self.calls.append(list(texts))
        return self._inner.embed(texts)


def test_cached_embedder_embeds_each_distinct_text_once():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    first = cached.embed(["alpha", "beta", "alpha"])
    assert inner.calls == [["alpha", "beta"]]  # duplicates in one batch are embedded once
    assert np.array_equal(first[0], first[2])
    again = cached.embed(["beta", "alpha"])
    assert inner.calls == [["alpha", "beta"]]  # no second model call
    assert np.array_equal(again, HashEmbedder().embed(["beta", "alpha"]))
    cached.embed(["alpha", "gamma"])
    assert inner.calls == [["alpha", "beta"], ["gamma"]]  # only the new text
    assert cached.model_calls == 2


def test_cached_embedder_results_match_inner_order():
    cached = CachedEmbedder(CountingEmbedder())
    cached.embed(["c", "a"])
    texts = ["a", "b", "c", "b", "a"]
    assert np.array_equal(cached.embed(texts), HashEmbedder().embed(texts))


def test_cached_embedder_empty_input():
    inner = CountingEmbedder()
    out = CachedEmbedder(inner).embed([])
    assert out.shape == (0, DIM)
    assert inner.calls == []


def test_cached_embedder_lru_evicts_oldest():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, lru_size=2)
    cached.embed(["a"])
    cached.embed(["b"])
    cached.embed(["a"])  # a is now most recent
    cached.embed(["c"])  # evicts b
    assert inner.calls == [["a"], ["b"], ["c"]]
    cached.embed(["a"])
    assert len(inner.calls) == 3
    cached.embed(["b"])
    assert inner.calls[-1] == ["b"]


def test_make_embedder_hash_is_cached_hash():
    e = make_embedder(Settings(embedding_provider="hash"))
    assert isinstance(e, CachedEmbedder) and isinstance(e.inner, HashEmbedder)
    assert e.name == "hash"


def test_make_embedder_local_defaults_to_onnx_float_and_loads_nothing_yet(tmp_path):
    from agent.providers.onnx_embedder import OnnxEmbedder

    e = make_embedder(Settings(embedding_provider="local", model_cache_dir=tmp_path))
    assert isinstance(e.inner, OnnxEmbedder)
    assert (e.inner.quantize, e.name, e.inner.cache_dir) == ("none", "all-MiniLM-L6-v2", tmp_path)
    assert list(tmp_path.iterdir()) == []  # the model is exported on first use, not when the embedder is made
    int8 = make_embedder(Settings(embedding_provider="local", embedding_quantize="int8", embedding_threads=1))
    assert (int8.name, int8.inner.threads) == ("all-MiniLM-L6-v2:int8", 1)


def test_make_embedder_torch_backend_is_sentence_transformers():
    from agent.providers.embeddings import LocalEmbedder

    e = make_embedder(Settings(embedding_provider="local", embedding_backend="torch"))
    assert isinstance(e.inner, LocalEmbedder) and e.name == "all-MiniLM-L6-v2"


@pytest.mark.parametrize(("field", "value", "env"), [
    ("embedding_backend", "tensorflow", "FINAGENT_EMBEDDING_BACKEND"),
    ("embedding_quantize", "int4", "FINAGENT_EMBEDDING_QUANTIZE"),
    ("embedding_threads", -1, "FINAGENT_EMBEDDING_THREADS"),
])
def test_embedding_settings_refuse_bad_values_naming_the_variable(field, value, env):
    with pytest.raises(ValidationError, match=env):
        Settings(**{field: value})



def test_a_remote_embedding_failure_says_the_sdk_retried_it(monkeypatch):
    """The SDK retries the embedding request itself; the failure it ends with is marked, so the task does not retry it
    again (one layer owns the retries). Against a local server that answers 503 to everything."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from agent.infra.client_retries import retried_by_client
    from agent.providers.embeddings import OpenAIEmbedder

    posts: list[str] = []

    class Unavailable(BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(503)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        embedder = OpenAIEmbedder(Settings(embedding_provider="openai", llm_api_key="k", llm_timeout_s=5,
                                           llm_base_url=f"http://127.0.0.1:{server.server_port}/v1"))
        embedder.client = embedder.client.with_options(max_retries=1)
        monkeypatch.setattr("openai._base_client.BaseClient._calculate_retry_timeout", lambda *a, **k: 0.0)
        with pytest.raises(Exception) as raised:
            embedder.embed(["gross margin"])
    finally:
        server.shutdown()
    mark = retried_by_client(raised.value)
    assert len(posts) == 2 and mark is not None and mark.client == "embeddings" and mark.attempts == 2
