"""The search bench's MiniLM-geometry vectors: every synthetic chunk resolves to the corpus's own sentences."""
from __future__ import annotations

import numpy as np

from agent.providers.embeddings import HashEmbedder
from bench import common

BASE = [
    [("CEO", "prepared_remarks", "Revenue grew 12% to $4.2 billion. Margins expanded by 150 basis points. We are"),
     ("CFO", "qa", "Deposits rose 3.5% in the quarter. Loan growth was strong! Guidance is unchanged for 2024?")],
    [("CEO", "prepared_remarks", "Capex will be $900 million next year. Demand from retail customers remains solid."),
     ("CFO", "qa", "Credit quality is stable. Net charge-offs were 0.42% annualised. We keep the dividend at $1.10.")],
]


class CountingModel(HashEmbedder):
    def __init__(self):
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return super().embed(texts)


def test_every_synthetic_chunk_is_the_weighted_mean_of_known_sentences(tmp_path):
    model = CountingModel()
    emb = common.SentenceMeanEmbedder(BASE, cache_dir=tmp_path, model=model)
    docs = list(common.synthetic_docs(BASE, ["AAA", "BBB", "CCC"], [(2023, q) for q in range(1, 5)]))
    texts = [text for _, _, _, chunks in docs for _, _, text in chunks]
    assert any(t not in {c[2] for d in BASE for c in d} for t in texts)  # the variation did change some chunks
    vecs = emb.embed(texts)  # a KeyError here: a swapped-in fragment ran into its neighbour
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)

    pieces = common._SENT.split(texts[0])
    weights = np.array([len(p) for p in pieces], dtype=np.float32)
    rows = [emb._row[common._mask(p)] for p in pieces]
    expected = weights @ emb._vecs[rows]
    assert np.allclose(vecs[0], expected / np.linalg.norm(expected), atol=1e-6)


def test_sentence_vectors_are_embedded_once_and_cached(tmp_path):
    first = CountingModel()
    common.SentenceMeanEmbedder(BASE, cache_dir=tmp_path, model=first)
    second = CountingModel()
    again = common.SentenceMeanEmbedder(BASE, cache_dir=tmp_path, model=second)
    assert (first.calls, second.calls) == (1, 0)
    assert len(list(tmp_path.glob("minilm-sentences-*.npy"))) == 1
    assert again.embed_one("Credit quality is stable.").shape == (384,)
