"""A BM25 index of the chunk tables (tantivy), for the keyword side of unfiltered hybrid search at scale.

Postgres full text has no ranked index: the GIN index finds the rows holding a term, but ranking them means reading
every one. A phrase of common words ("loan growth guidance") is held by thousands of chunks in a 100k corpus and by
tens of thousands in a million, so hybrid search's GIN side (agent/retrieval/hybrid.py) gives such a phrase no
keyword-only candidates at all. Tantivy keeps postings with block-max scores and answers "top n by BM25" without
reading every match: about 1 ms at 100k chunks, and it grows far slower than the match set (docs/benchmarks.md).

The index is derived data, never the source of truth:
- It lives under the data dir (`keyword-index/<corpus>`), one per host, and holds only chunk ids and stemmed text.
- `sync` appends the rows past its watermark (the highest chunk id it holds), under an inter-process lock, so one
  writer at a time; readers never block. The ingest runner syncs after a run, and every worker node that
  searches syncs its own host's index every `KEYWORD_INDEX_SYNC_S` (workers/keyword_sync.py).
- While the table has rows past the watermark, hybrid search also takes the GIN side's keyword candidates, which
  read the whole table (with none, BM25's candidates stand alone); a replaced document's old ids stay in the index
  until `rebuild` but are dropped when candidates are joined to the table.
- An index built against another database (its system identifier differs) is ignored.
Filtered searches never use it: their scope is read exactly.
"""
from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
from pathlib import Path

from pydantic import BaseModel

TABLES = {"transcript": "transcript_chunks", "10k": "tenk_chunks"}
_TERM = re.compile(r"[A-Za-z0-9]+")
SYNC_BATCH = 20_000
WRITER_HEAP = 128 * 1024 * 1024


class IndexMeta(BaseModel):
    """What the index holds: chunks up to `watermark` of the database `system_id`."""

    system_id: str
    watermark: int = 0
    documents: int = 0


class Candidates(BaseModel):
    """BM25's top chunk ids for a query, and the highest chunk id the index held when it answered: rows past the
    watermark were not ranked."""

    ids: list[int] = []
    watermark: int = 0


class SyncReport(BaseModel):
    corpus: str
    added: int
    watermark: int
    seconds: float
    skipped: bool = False  # another process held the writer lock


def query_terms(text: str) -> str:
    """Plain words only: tantivy's query syntax (fields, +/-, quotes, AND/OR) must not come from a question."""
    return " ".join(w.lower() for w in _TERM.findall(text))


def system_id(pool) -> str:
    with pool.connection() as conn:
        return str(conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()["system_identifier"])


def _top_with_ties(searcher, query, n: int) -> list:
    """The top n hits (score, document address) and every hit tied with the n-th.

    tantivy breaks score ties by document address, which a segment merge (after any commit, a periodic sync's included)
    changes: the same question could take different chunks run to run, so the caller breaks them by chunk id, and
    needs them all. They are read among twice the hits asked for, and only when the tie fills that whole window is the
    search repeated, wider. (One hit more than n, widened on a tie, was slower on the bench's corpus, whose variants
    of one chunk tie at the cut for 73 of 100 queries.) count=False: the default also counts every match, which
    nothing here reads (0.4 ms p50 at 1M chunks)."""
    k = 2 * n
    while True:
        hits = searcher.search(query, k, count=False).hits
        if len(hits) < k or hits[-1][0] < hits[n - 1][0]:
            break
        k *= 2
    cut = hits[n - 1][0] if len(hits) >= n else float("-inf")
    return [hit for hit in hits if hit[0] >= cut]


class KeywordIndex:
    def __init__(self, path: Path):
        import tantivy

        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self._index = tantivy.Index(builder.build(), path=str(path))
        self._meta_mtime = 0.0
        self._meta: IndexMeta | None = None
        self._writing = threading.Lock()

    @property
    def meta_path(self) -> Path:
        return self.path / "finagent-meta.json"

    def meta(self) -> IndexMeta | None:
        """The last committed meta; re-read (and the reader reloaded) when a writer has committed since."""
        try:
            mtime = self.meta_path.stat().st_mtime
        except FileNotFoundError:
            return None
        if mtime != self._meta_mtime:
            self._meta = IndexMeta.model_validate_json(self.meta_path.read_text())
            self._meta_mtime = mtime
            self._index.reload()
        return self._meta

    def search(self, text: str, n: int, system_id: str | None = None) -> list[int]:
        """The ids of the top n chunks by BM25 over the OR of the text's words; none when the index was never
        committed or (given `system_id`) was built against another database."""
        return self.ranked(text, n, system_id).ids

    def ranked(self, text: str, n: int, system_id: str | None = None) -> Candidates:
        """`search`'s ids with the watermark of the index they were read from."""
        terms = query_terms(text)
        meta = self.meta() if terms else None
        if meta is None or (system_id is not None and meta.system_id != system_id):
            return Candidates()
        searcher = self._index.searcher()
        hits = _top_with_ties(searcher, self._index.parse_query(terms, ["text"]), n)
        # the ids from their fast field (a column), not from each hit's stored document (a compressed block read)
        kept = zip([score for score, _ in hits], searcher.fast_field_values("id", [address for _, address in hits]))
        return Candidates(ids=[chunk for _, chunk in sorted(kept, key=lambda h: (-h[0], h[1]))[:n]],
                          watermark=meta.watermark)

    def sync(self, pool, corpus: str, rebuild: bool = False) -> SyncReport:
        """Append the chunks past the watermark (all of them with `rebuild`), in batches, each batch committed with
        its watermark. Skipped at once when another process is writing."""
        import fasteners
        import tantivy

        started = time.perf_counter()
        lock = fasteners.InterProcessLock(str(self.path / "finagent-write.lock"))  # other processes
        if not self._writing.acquire(blocking=False):  # other threads: an fcntl lock is the whole process's
            return self._skipped(corpus)
        if not lock.acquire(blocking=False):
            self._writing.release()
            return self._skipped(corpus)
        try:
            sid = system_id(pool)
            meta = self.meta()
            if not rebuild and meta is not None and meta.system_id == sid and not self._rows_past(pool, corpus, meta.watermark):
                # nothing new (the periodic sync's usual case): no writer, no commit and no new meta. A writer
                # per sync grew the syncing process by about 10 MB a time, and a new meta made every reader reload.
                return SyncReport(corpus=corpus, added=0, watermark=meta.watermark, seconds=round(time.perf_counter() - started, 2))
            writer = self._index.writer(heap_size=WRITER_HEAP, num_threads=1)
            if rebuild or meta is None or meta.system_id != sid:
                writer.delete_all_documents()
                meta = IndexMeta(system_id=sid)
            added = 0
            while True:
                with pool.connection() as conn:
                    rows = conn.execute(f"SELECT id, text FROM {TABLES[corpus]} WHERE id > %s ORDER BY id LIMIT %s",
                                        (meta.watermark, SYNC_BATCH)).fetchall()
                if not rows:
                    break
                for row in rows:
                    writer.add_document(tantivy.Document(id=row["id"], text=row["text"]))
                writer.commit()
                added += len(rows)
                meta = meta.model_copy(update={"watermark": rows[-1]["id"], "documents": meta.documents + len(rows)})
                self._write_meta(meta)
            if added == 0:  # nothing new; a new or rebuilt index is still committed and recorded
                writer.commit()
                self._write_meta(meta)
            writer.wait_merging_threads()
            return SyncReport(corpus=corpus, added=added, watermark=meta.watermark,
                              seconds=round(time.perf_counter() - started, 2))
        finally:
            lock.release()
            self._writing.release()

    @staticmethod
    def _rows_past(pool, corpus: str, watermark: int) -> bool:
        with pool.connection() as conn:
            return conn.execute(f"SELECT EXISTS (SELECT 1 FROM {TABLES[corpus]} WHERE id > %s) AS more",
                                (watermark,)).fetchone()["more"]

    def _skipped(self, corpus: str) -> SyncReport:
        meta = self.meta()
        return SyncReport(corpus=corpus, added=0, watermark=meta.watermark if meta else 0, seconds=0.0, skipped=True)

    def _write_meta(self, meta: IndexMeta) -> None:
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta.model_dump()))
        os.replace(tmp, self.meta_path)


def index_dir(data_dir: Path, corpus: str) -> Path:
    return data_dir / "keyword-index" / corpus


@functools.cache
def _open(path: Path) -> KeywordIndex:
    return KeywordIndex(path)


os.register_at_fork(after_in_child=_open.cache_clear)  # a forked worker opens its own reader


def for_corpus(corpus: str, data_dir: Path | None = None) -> KeywordIndex | None:
    """This process's reader of the corpus's index, or None when no index was ever built here."""
    if data_dir is None:
        from agent.settings import get_settings

        data_dir = get_settings().data_dir
    path = index_dir(data_dir, corpus)
    if not (path / "finagent-meta.json").exists():
        return None
    return _open(path)


def candidates(pool, corpus: str, text: str, n: int) -> Candidates:
    """BM25's top n chunk ids for an unfiltered search, or none when there is no index of this database."""
    index = for_corpus(corpus)
    return index.ranked(text, n, system_id=_system_id_of(pool)) if index is not None else Candidates()


_system_ids: dict[str, str] = {}


def _system_id_of(pool) -> str:
    key = str(getattr(pool, "conninfo", id(pool)))
    if key not in _system_ids:
        _system_ids[key] = system_id(pool)
    return _system_ids[key]


def sync_all(pool, data_dir: Path, rebuild: bool = False) -> list[SyncReport]:
    # this process's cached index of each corpus (the one its searches read), not a new one per call
    return [_open(index_dir(data_dir, corpus)).sync(pool, corpus, rebuild=rebuild) for corpus in TABLES]
