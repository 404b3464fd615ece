"""Re-ingesting an unchanged file costs a hash, not a parse: `ingest` reads the stored (source path, content hash)
pairs of all its files in one query and skips a file whose path and hash are stored; a changed file is parsed and
replaced. The hashes are the ones `prepare` and `prepare_pages` store, so the check agrees with what is stored."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import agent.ingest.runner as runner
from agent.ingest.documents import file_hash, pages_hash, prepare, prepare_pages
from agent.ingest.filing_pages import CHUNKING_VERSION, FilingMeta
from agent.settings import Settings


def _transcript(folder: Path, name: str, words: str = "Deposits grew and margins held.") -> Path:
    path = folder / name
    path.write_text(json.dumps({"prepared_remarks": [{"speaker": "CFO", "speech": words}],
                                "q_and_a": [{"speaker": "Analyst", "speech": "What about loans?"}]}))
    return path


RECIPE = "embedder=hash;chunks=1000:150"  # the fixture's embedder and the default chunking


class FakeStore:
    """The database as the runner sees it: stored (path, hash) -> (chunks, recipe), the version a document would
    replace, the first chunk's vector of documents stored before recipes, and writes."""

    def __init__(self):
        self.stored: dict[tuple[str, str], int] = {}
        self.recipes: dict[tuple[str, str], str | None] = {}  # a stored document's recipe, when not RECIPE
        self.existing: str | None = None
        self.existing_recipe: str | None = RECIPE
        self.first_vectors: dict[int, np.ndarray] = {}
        self.lookups: list[tuple[list[str], list[str] | None]] = []
        self.adopted: list[int] = []
        self.written: list[str] = []

    def _ids(self) -> dict[tuple[str, str], int]:
        return {k: i for i, k in enumerate(self.stored)}

    def stored_hashes(self, conn, paths, kinds=None):
        self.lookups.append((list(paths), kinds))
        ids = self._ids()
        return {k: runner.Stored(ids[k], v, self.recipes.get(k, RECIPE)) for k, v in self.stored.items() if k[0] in paths}

    def first_chunks(self, conn, doc_ids):
        return {i: ("first chunk text", self.first_vectors[i]) for i in doc_ids if i in self.first_vectors}

    def adopt_recipe(self, conn, doc_ids, recipe):
        assert recipe == RECIPE
        self.adopted += doc_ids

    def existing_version(self, conn, prepared):
        return (self.existing, self.existing_recipe) if self.existing else None

    def write_document(self, pool, prepared, vecs):
        assert prepared.recipe == RECIPE
        self.written.append(prepared.path)
        return "replaced" if self.existing else "added"


@pytest.fixture
def store(monkeypatch) -> FakeStore:
    fake = FakeStore()
    for name in ("stored_hashes", "existing_version", "write_document", "first_chunks", "adopt_recipe"):
        monkeypatch.setattr(runner, name, getattr(fake, name))
    monkeypatch.setattr(runner, "invalidate", lambda redis, ticker: None)
    return fake


def _embed(texts):
    return np.ones((len(texts), 4), np.float32)


@pytest.fixture
def ctx():
    pool = SimpleNamespace(connection=lambda: contextlib.nullcontext(object()))
    embedder = SimpleNamespace(name="hash", embed=_embed)
    return SimpleNamespace(settings=Settings(embedding_provider="hash"), database_url="", pool=pool, embedder=embedder,
                           redis=None)


@pytest.fixture
def no_parse(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an unchanged file was parsed")
    monkeypatch.setattr(runner, "prepare", refuse)


def test_an_unchanged_file_is_skipped_without_parsing(ctx, store, no_parse, tmp_path):
    a, b = _transcript(tmp_path, "ACME_2031_q1.json"), _transcript(tmp_path, "ACME_2031_q2.json", "Other words.")
    store.stored = {(str(a), file_hash(a)): 7, (str(b), file_hash(b)): 3}
    report = runner.ingest(ctx, "transcript", [tmp_path], fanout=None, quiet=True)
    assert [(Path(f.path).name, f.status, f.chunks) for f in report.files] == [
        ("ACME_2031_q1.json", "unchanged", 7), ("ACME_2031_q2.json", "unchanged", 3)]
    assert report.chunks_embedded == 0 and store.written == []
    assert store.lookups == [([str(a), str(b)], ["transcript"])]  # one query for every file, of the kind's own documents


def test_a_changed_file_is_parsed_and_replaced(ctx, store, tmp_path):
    path = _transcript(tmp_path, "ACME_2031_q1.json")
    store.stored = {(str(path), file_hash(path)): 2}
    store.existing = file_hash(path)
    _transcript(tmp_path, "ACME_2031_q1.json", "Deposits fell; margins narrowed.")  # same path, new bytes
    report = runner.ingest(ctx, "transcript", [path], fanout=None, quiet=True)
    assert [(f.status, f.chunks) for f in report.files] == [("replaced", 2)]
    assert store.written == [str(path)] and report.chunks_embedded == 2  # a chunk per turn


def test_a_new_file_is_parsed_and_added(ctx, store, tmp_path):
    other = _transcript(tmp_path, "ACME_2031_q1.json")
    store.stored = {(str(other) + ".old", file_hash(other)): 2}  # the same bytes stored from another path
    report = runner.ingest(ctx, "transcript", [other], fanout=None, quiet=True)
    assert [f.status for f in report.files] == ["added"] and store.written == [str(other)]


def test_the_same_bytes_under_another_identity_are_still_compared_after_parsing(ctx, store, tmp_path):
    """A copy of a stored file under another name is another path: it is parsed, then found unchanged by its
    document's stored hash (the check before the stored-hash lookup)."""
    copy = _transcript(tmp_path, "ACME_q1_2031.json")
    store.existing = file_hash(copy)
    report = runner.ingest(ctx, "transcript", [copy], fanout=None, quiet=True)
    assert [(f.status, f.chunks) for f in report.files] == [("unchanged", 2)] and store.written == []


def test_a_file_over_the_size_cap_is_not_hashed_and_fails_with_its_reason(ctx, store, tmp_path):
    path = tmp_path / "ACME_2031_q1.json"
    path.write_bytes(b" " * 2048)
    store.stored = {(str(path), file_hash(path)): 1}
    ctx.settings = Settings(embedding_provider="hash", ingest_max_file_bytes=1024)
    report = runner.ingest(ctx, "transcript", [path], fanout=None, quiet=True)
    assert report.files[0].status == "error" and "over the ingest limit" in report.files[0].reason


def test_the_baseline_parses_every_file(ctx, store, monkeypatch, tmp_path):
    path = _transcript(tmp_path, "ACME_2031_q1.json")
    store.stored = {(str(path), file_hash(path)): 9}
    store.existing = file_hash(path)
    parsed = []
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: parsed.append(a[1]) or prepare(*a, **k))
    report = runner.ingest(ctx, "transcript", [path], fanout=None, quiet=True, skip_by_stored_hash=False)
    assert parsed == [path] and store.lookups == []
    assert [(f.status, f.chunks) for f in report.files] == [("unchanged", 2)]


def test_a_transcript_hash_is_the_sha256_of_its_bytes(tmp_path):
    """The hash stored before the stored-hash lookup existed: upgrading re-ingests nothing."""
    path = _transcript(tmp_path, "ACME_2031_q1.json")
    assert file_hash(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert prepare("transcript", path, 1000, 150).content_hash == file_hash(path)


def _pages(folder: Path, name: str, texts: list[str]) -> Path:
    (folder / "pages").mkdir(exist_ok=True)
    path = folder / "pages" / f"{name}.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"doc_name": name, "page": i, "text": text}) + "\n")
    return path


META = FilingMeta(doc_name="ACME_2031_10K", company="Acme Widgets", doc_type="10k", doc_period=2031)


def test_the_pages_hash_is_what_prepare_pages_stores(tmp_path):
    path = _pages(tmp_path, "ACME_2031_10K", ["Revenue grew.", "Net income fell."])
    prepared = prepare_pages(path, META, "ACME", 1000, 150)
    assert pages_hash(path, META, "ACME", 1000, 150) == prepared.content_hash
    recipe = f"\n{META.model_dump_json()}\nACME\n{CHUNKING_VERSION}:1000:150"
    assert prepared.content_hash == hashlib.sha256(path.read_bytes() + recipe.encode()).hexdigest()
    # the recipe is part of the hash: another ticker or chunk size is another document
    assert pages_hash(path, META, "ACMW", 1000, 150) != prepared.content_hash
    assert pages_hash(path, META, "ACME", 800, 150) != prepared.content_hash


def test_unchanged_pages_are_skipped_without_reading_them(ctx, store, tmp_path):
    same = _pages(tmp_path, "ACME_2031_10K", ["Revenue grew."])
    changed = _pages(tmp_path, "ACME_2032_10K", ["Revenue grew again."])
    meta = {"ACME_2031_10K": META, "ACME_2032_10K": META.model_copy(update={"doc_name": "ACME_2032_10K", "doc_period": 2032})}
    hash_file = lambda p: pages_hash(p, meta[p.name.removesuffix(".jsonl.gz")], "ACME", 1000, 150)
    store.stored = {(str(same), hash_file(same)): 4, (str(changed), "an older hash"): 4}
    read = []

    def prepare_file(p: Path):
        read.append(p.name)
        return prepare_pages(p, meta[p.name.removesuffix(".jsonl.gz")], "ACME", 1000, 150)

    report = runner.ingest(ctx, "10k", [same, changed], fanout=None, quiet=True, prepare_file=prepare_file,
                           hash_file=hash_file)
    assert read == ["ACME_2032_10K.jsonl.gz"]
    assert [(Path(f.path).name, f.status) for f in report.files] == [("ACME_2031_10K.jsonl.gz", "unchanged"),
                                                                     ("ACME_2032_10K.jsonl.gz", "added")]
    assert store.lookups == [([str(same), str(changed)], None)]  # a pages file may be any filing kind


def test_without_a_hash_function_every_given_file_is_read(ctx, store, tmp_path):
    path = _pages(tmp_path, "ACME_2031_10K", ["Revenue grew."])
    read = []
    report = runner.ingest(ctx, "10k", [path], fanout=None, quiet=True,
                           prepare_file=lambda p: read.append(p) or prepare_pages(p, META, "ACME", 1000, 150))
    assert read == [path] and store.lookups == [] and report.files[0].status == "added"


def test_the_same_bytes_under_another_embedder_or_chunking_are_re_ingested(ctx, store, tmp_path):
    """A stored document's vectors are its embedder's: switching the embedder (or the chunking) and re-ingesting an
    unchanged corpus replaces every document instead of keeping vectors the queries no longer match."""
    path = _transcript(tmp_path, "ACME_2031_q1.json")
    for other in ("embedder=all-MiniLM-L6-v2;chunks=1000:150", "embedder=hash;chunks=800:150"):
        store.stored = {(str(path), file_hash(path)): 2}
        store.recipes = {(str(path), file_hash(path)): other}
        store.existing, store.existing_recipe, store.written = file_hash(path), other, []
        report = runner.ingest(ctx, "transcript", [path], fanout=None, quiet=True)
        assert [(f.status, f.chunks) for f in report.files] == [("replaced", 2)] and store.written == [str(path)]
    assert runner.ingest_recipe(Settings(embedding_provider="hash", chunk_size=800), ctx.embedder) != RECIPE


def test_a_document_stored_before_recipes_is_kept_when_its_vectors_are_the_current_embedders(ctx, store, tmp_path):
    """Upgrading re-embeds nothing that is right already: a document without a recorded recipe whose first chunk the
    current embedder embeds as stored takes the recipe and is skipped; one whose vectors differ is re-ingested."""
    kept, stale = _transcript(tmp_path, "ACME_2031_q1.json"), _transcript(tmp_path, "ACME_2031_q2.json", "Loans grew.")
    store.stored = {(str(kept), file_hash(kept)): 2, (str(stale), file_hash(stale)): 2}
    store.recipes = {k: None for k in store.stored}
    store.first_vectors = {0: np.ones(4, np.float32) * 3, 1: np.array([1, -1, 0, 0], np.float32)}
    report = runner.ingest(ctx, "transcript", [kept, stale], fanout=None, quiet=True)
    assert [(Path(f.path).name, f.status) for f in report.files] == [("ACME_2031_q1.json", "unchanged"),
                                                                     ("ACME_2031_q2.json", "added")]
    assert store.adopted == [0] and store.written == [str(stale)]
