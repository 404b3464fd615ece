"""The ONNX Runtime embedder: its vectors against the torch reference, input order through the length buckets, the
model file cache (partial, corrupt, concurrent first use) and a missing onnxruntime."""
from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pytest

from agent.providers.model_cache import cached_file, is_complete
from agent.providers.onnx_embedder import OnnxEmbedder, _Runtime, length_batches, mean_pool, pad

# general financial prose of very different lengths (one over the 256 word-piece limit), none from ../shared/data
TEXTS = [
    "Revenue grew.",
    "Net interest margin expanded by eight basis points as deposit costs stabilised.",
    "We are raising full-year guidance for operating income, driven by pricing and a better product mix.",
    "   Free cash flow was lower than a year ago because of working capital timing and higher capital expenditures.   ",
    "Credit quality remained strong: net charge-offs were 21 basis points, and nonperforming assets fell for the "
    "third consecutive quarter. Our allowance coverage ratio is unchanged at 1.4 percent of loans.",
    "Same-store sales declined 3 percent, traffic was down 5 percent, and average check rose 2 percent on menu pricing.",
    "The board authorised a new share repurchase program and raised the quarterly dividend by ten percent. " * 20,
    "Operating expenses, excluding one-time severance charges, were flat sequentially.",
    "Backlog reached a record, with book-to-bill above one in every segment and strong orders from industrial customers.",
    "Guidance for next quarter assumes foreign exchange headwinds of about one point.",
    "Loans grew 4 percent annualised, led by commercial and industrial lending, while mortgage balances declined. "
    "We expect mid-single-digit loan growth next year, with deposit growth roughly in line.",
    "Thank you, operator.",
    "Our effective tax rate was 22 percent, and we expect 21 to 23 percent for the full year.",
    "Gross margin was 41.2 percent, down 60 basis points, as freight and commodity inflation outpaced price increases.",
    "Capital ratios remain well above regulatory minimums; CET1 ended the quarter at 10.3 percent.",
    "Inventory days came down by six as supply chain constraints eased.",
    "Adjusted EPS of $1.12 compares with $0.98 last year.",
    "We opened 14 new units during the quarter and plan 40 to 45 openings this fiscal year.",
]


@pytest.fixture(scope="module")
def vectors():
    """Torch reference vectors and the product's ONNX embedder at the default precision, its model in the default
    cache as in use (built by ops/setup.sh; exported here first if missing, about 20 s)."""
    from agent.providers.embeddings import LocalEmbedder
    from agent.settings import Settings

    onnx = OnnxEmbedder(Settings(_env_file=None).embedding_quantize, threads=2, batch_size=4)
    return LocalEmbedder().embed(TEXTS), onnx


def test_vectors_match_torch(vectors):
    """Float weights give torch's vectors up to rounding; int8 ones are about 0.99 apart (docs/benchmarks.md)."""
    reference, onnx = vectors
    got = onnx.embed(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * reference).sum(axis=1)
    assert cos.mean() >= (0.99 if onnx.quantize == "int8" else 0.9999), cos
    assert cos.min() >= (0.97 if onnx.quantize == "int8" else 0.999), cos


def test_order_survives_length_buckets(vectors):
    """Several batches of sorted lengths: each text still gets its own vector, whatever the input order."""
    reference, onnx = vectors
    perm = np.random.default_rng(5).permutation(len(TEXTS))
    got = onnx.embed([TEXTS[i] for i in perm])
    sims = got @ reference.T  # row r is text perm[r]: its best match must be its own torch vector
    assert list(sims.argmax(axis=1)) == list(perm)


def test_tokens_are_sentence_transformers_own(vectors):
    """The same word pieces as the torch model gets: stripped text, cut at 256."""
    from agent.providers.embeddings import LocalEmbedder

    _, onnx = vectors
    texts = [TEXTS[6], "  Revenue grew.  ", TEXTS[4]]
    theirs = LocalEmbedder()._load().tokenize(texts)
    ours = onnx.tokenize(texts)
    assert len(ours[0]) == 256
    for row, (ids, mask) in enumerate(zip(theirs["input_ids"].tolist(), theirs["attention_mask"].tolist())):
        assert ours[row] == [i for i, m in zip(ids, mask) if m]


def test_empty_input(vectors):
    _, onnx = vectors
    assert onnx.embed([]).shape == (0, 384)


def test_int8_is_named_apart_in_the_embedding_cache():
    assert OnnxEmbedder("int8").name != OnnxEmbedder("none").name == "all-MiniLM-L6-v2"


def test_length_batches_cover_every_index_once_longest_first():
    lengths = [5, 300, 17, 17, 2, 90, 40, 8, 256]
    batches = length_batches(lengths, 4)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) <= 4 for b in batches)
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat, reverse=True)


def test_pad_and_mean_pool_ignore_padding():
    ids, mask = pad([[1, 2, 3], [4]])
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    hidden = np.zeros((2, 3, 384), dtype=np.float32)
    hidden[1, 0, 0] = 2.0
    hidden[1, 1:, 1] = 100.0  # padding positions: must not count
    pooled = mean_pool(hidden, mask)
    assert np.allclose(pooled[1], np.eye(384, dtype=np.float32)[0])


# --- the model file cache ------------------------------------------------------------------------

def _build(tmp: Path, log: Path, delay: float = 0.0) -> None:
    with log.open("a") as f:
        f.write("built\n")
    time.sleep(delay)
    tmp.write_bytes(b"model bytes " * 1000)


def test_cache_builds_once_then_reuses(tmp_path):
    log, target = tmp_path / "log", tmp_path / "cache" / "m.onnx"
    assert cached_file(target, partial(_build, log=log)) == target
    cached_file(target, partial(_build, log=log))
    assert log.read_text().count("built") == 1 and is_complete(target)
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []  # no temporary dir left


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_manifest", "no_file"])
def test_cache_rebuilds_a_partial_or_corrupt_file(tmp_path, damage):
    log, target = tmp_path / "log", tmp_path / "m.onnx"
    cached_file(target, partial(_build, log=log))
    good = target.read_bytes()
    if damage == "truncate":
        target.write_bytes(good[: len(good) // 2])
    elif damage == "flip":
        target.write_bytes(good[:-1] + b"X")  # same size, different content
    elif damage == "no_manifest":  # a crash between the rename and the manifest
        target.with_name(target.name + ".manifest.json").unlink()
    else:
        target.unlink()
    assert not is_complete(target)
    cached_file(target, partial(_build, log=log))
    assert log.read_text().count("built") == 2
    assert target.read_bytes() == good and is_complete(target)


def test_cache_a_failed_build_leaves_nothing_and_raises(tmp_path):
    target = tmp_path / "m.onnx"

    def broken(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cached_file(target, broken)
    assert not target.exists() and not is_complete(target)
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []


def test_cache_concurrent_first_use_builds_once(tmp_path):
    """Three processes with three threads each ask at once: one builds, the others wait and load its file."""
    log, target = tmp_path / "log", tmp_path / "m.onnx"
    with ProcessPoolExecutor(3, mp_context=get_context("spawn")) as procs:
        results = list(procs.map(_threads_asking, [target] * 3, [log] * 3))
    assert results == [[str(target)] * 3] * 3
    assert log.read_text().count("built") == 1 and is_complete(target)


def _threads_asking(target: Path, log: Path) -> list[str]:
    with ThreadPoolExecutor(3) as threads:
        return [str(p) for p in threads.map(lambda _: cached_file(target, partial(_build, log=log, delay=0.5)), range(3))]


def test_missing_onnxruntime_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(ImportError, match=r"onnxruntime is not installed: .*'finagent\[local-model\]'.*FINAGENT_EMBEDDING_BACKEND=torch"):
        _Runtime(tmp_path / "m.onnx", 1)
