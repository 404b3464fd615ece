"""Inline ingest embeds windows of whole documents in one call, and a failed call fails only its culprits."""
from __future__ import annotations

import numpy as np

from agent.ingest.documents import PreparedChunk, PreparedDocument
from agent.ingest.runner import embed_window, embed_windows
from agent.models.corpus import TranscriptDoc, Turn


def _doc(name: str, n: int) -> PreparedDocument:
    doc = TranscriptDoc(ticker="ACME", fiscal_year=2031, fiscal_quarter=1,
                        turns=[Turn(speaker="CFO", section="prepared_remarks", text="Remarks.")])
    return PreparedDocument(kind="transcript", path=name, content_hash=name, doc=doc,
                            chunks=[PreparedChunk(index=i, text=f"{name} chunk {i}") for i in range(n)])


class Embedder:
    def __init__(self, poison: str | None = None):
        self.calls: list[int] = []
        self.poison = poison

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        if self.poison and any(t.startswith(self.poison) for t in texts):
            raise RuntimeError("provider down")
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


def _one(embedder):
    def embed_one(doc):
        try:
            return embedder.embed([c.text for c in doc.chunks]), None
        except Exception as exc:
            return None, f"embedding failed: {exc}"
    return embed_one


def test_documents_are_grouped_until_a_window_is_full():
    docs = [_doc(n, k) for n, k in (("a", 100), ("b", 100), ("c", 100), ("d", 300), ("e", 5))]
    assert [[d.path for d in w] for w in embed_windows(docs, 256)] == [["a", "b", "c"], ["d"], ["e"]]
    assert embed_windows([], 256) == []


def test_one_call_per_window_and_each_document_gets_its_own_vectors():
    docs = [_doc("a", 3), _doc("bb", 2)]
    emb = Embedder()
    out = embed_window(emb, docs, _one(emb))
    assert emb.calls == [5]
    assert [v.shape for v, _ in out] == [(3, 2), (2, 2)] and all(e is None for _, e in out)
    assert out[1][0][0, 0] == len("bb chunk 0")


def test_a_failed_window_is_retried_document_by_document():
    docs = [_doc("a", 3), _doc("bad", 2), _doc("c", 1)]
    emb = Embedder(poison="bad")
    out = embed_window(emb, docs, _one(emb))
    assert emb.calls == [6, 3, 2, 1]
    assert out[0][1] is None and out[2][1] is None
    assert out[1][0] is None and "provider down" in out[1][1]
