"""`finagent ingest`: parse and chunk locally, embed in batches fanned out over the workers, write atomically."""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent.context import Context
from agent.ingest.documents import IngestLimits, Kind, PreparedDocument, expand_paths, file_hash, prepare
from agent.ingest.failures import IngestError
from agent.ingest.store import Stored, adopt_recipe, chunk_table, existing_version, first_chunks, is_unchanged, stored_hashes, write_document
from agent.ingest.vector_index import IndexRebuild, bulk_load
from agent.providers.embeddings import Embedder
from agent.retrieval import keyword_index
from agent.retrieval.availability import invalidate

log = logging.getLogger(__name__)


class FileOutcome(BaseModel):
    path: str
    status: str  # added | replaced | unchanged | error
    chunks: int = 0
    tables: int = 0
    reason: str | None = None


class IngestReport(BaseModel):
    files: list[FileOutcome] = Field(default_factory=list)
    chunks_embedded: int = 0
    seconds: float = 0.0
    # vector indexes built again after this load's last write (agent/ingest/vector_index.py), included in `seconds`
    index_rebuilds: list[IndexRebuild] = Field(default_factory=list)

    @property
    def errors(self) -> list[FileOutcome]:
        return [f for f in self.files if f.status == "error"]


class EmbedProgress(Protocol):
    """Chunk texts being embedded elsewhere (the workers): how many batches of which size, and how far they are."""

    sizes: list[int]

    def poll(self) -> tuple[int, list[tuple[bool, str | None]]]:
        """(chunks embedded so far, (ready, error) per document)."""
        ...


# starts embedding the documents' chunk texts elsewhere (tasks.ingest.EmbedFanOut: over the workers)
FanOut = Callable[[Context, list[PreparedDocument]], EmbedProgress]


def _failure(what: str, exc: Exception) -> str:
    return f"{what}: {type(exc).__name__}: {exc}"


# Inline ingest embeds several documents in one call: a document of 80 chunks leaves the embedder's parallel
# batches half idle at its end, a window of 256 keeps them full (bench/ingest.py measures inline ingest)
INLINE_WINDOW_CHUNKS = 256

Embedded = tuple[np.ndarray | None, str | None]  # the vectors, or why there are none


def embed_windows(docs: list[PreparedDocument], size: int) -> list[list[PreparedDocument]]:
    """Consecutive documents grouped until a group holds at least `size` chunks."""
    windows: list[list[PreparedDocument]] = [[]]
    count = 0
    for doc in docs:
        if count >= size:
            windows.append([])
            count = 0
        windows[-1].append(doc)
        count += len(doc.chunks)
    return [w for w in windows if w]


def embed_window(embedder, window: list[PreparedDocument], embed_one: Callable[[PreparedDocument], Embedded]) -> list[Embedded]:
    """The vectors of each document of the window, from one embedding call; when that call fails, each document
    is embedded on its own, so a failure fails only the documents it belongs to."""
    if len(window) == 1:
        return [embed_one(window[0])]
    try:
        vecs = embedder.embed([c.text for doc in window for c in doc.chunks])
    except Exception:
        return [embed_one(doc) for doc in window]
    out: list[Embedded] = []
    start = 0
    for doc in window:
        out.append((vecs[start:start + len(doc.chunks)], None))
        start += len(doc.chunks)
    return out


def _fingerprint(hash_file: Callable[[Path], str | None], path: Path, limits: IngestLimits) -> str | None:
    """The content hash a file would be stored under, without parsing it; None when it cannot be had cheaply (a file
    over the size cap, or one that cannot be read): the file is then parsed, and the parse reports what is wrong."""
    try:
        if path.stat().st_size > limits.max_file_bytes:
            return None
        return hash_file(path)
    except Exception:
        return None


# a stored vector this close to the current embedder's for the same text was made the same way (another precision of
# the same model, int8 against float weights, is about 0.99 and is re-embedded, as its own recipe name would be)
SAME_VECTORS = 0.999


def ingest_recipe(settings, embedder: Embedder) -> str:
    """How a document's chunks and vectors are made, beside its bytes: the embedder and the chunk size and overlap."""
    return f"embedder={embedder.name};chunks={settings.chunk_size}:{settings.chunk_overlap}"


def _adopt_current_vectors(ctx: Context, doc_ids: list[int], recipe: str) -> set[int]:
    """Of documents stored before recipes were recorded, those whose first chunk the current embedder embeds as it is
    stored: they take the current recipe (upgrading re-embeds nothing that is right already); the others are
    re-ingested. Their chunking is taken as it is."""
    if not doc_ids:
        return set()
    with ctx.pool.connection() as conn:
        firsts = first_chunks(conn, doc_ids)
    ids = list(firsts)
    if not ids:
        return set()
    try:
        fresh = np.asarray(ctx.embedder.embed([firsts[i][0] for i in ids]), dtype=np.float32)
    except Exception:  # cannot tell: re-ingest them, which reports any embedding failure per file
        return set()
    same = []
    for doc_id, vec in zip(ids, fresh):
        stored = firsts[doc_id][1]
        norms = float(np.linalg.norm(stored) * np.linalg.norm(vec))
        if stored.shape == vec.shape and norms > 0 and float(stored @ vec) / norms >= SAME_VECTORS:
            same.append(doc_id)
    with ctx.pool.connection() as conn:
        adopt_recipe(conn, same, recipe)
    return set(same)


def ingest(ctx: Context, kind: Kind, paths: list[Path], fanout: FanOut | None = None, quiet: bool = False,
           prepare_file: Callable[[Path], PreparedDocument] | None = None, label: str | None = None,
           hash_file: Callable[[Path], str | None] | None = None, skip_by_stored_hash: bool = True) -> IngestReport:
    """Ingest the files of `kind` found under `paths`; with `prepare_file`, exactly `paths`, each read by it. With
    `fanout`, a run larger than one embedding batch is embedded by it (over the workers); otherwise in this process.

    A file is unchanged, and is not parsed, when a document stored from the same path has the content hash the file
    would be stored under now: `hash_file` gives that hash without parsing (by default the hash of the file's bytes
    that `prepare` stores; with `prepare_file` and no `hash_file`, every file is parsed) and whose recipe
    (`ingest_recipe`) is the current one: the same bytes under another embedder or chunking are re-ingested. The stored hashes of all the
    files come from one query. `skip_by_stored_hash=False` parses and chunks every file before comparing its hash
    (the check before the stored-hash lookup, kept as the bench's baseline)."""
    started = time.perf_counter()
    report = IngestReport()
    s = ctx.settings
    todo: list[PreparedDocument] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=quiet) as progress:
        files = list(paths) if prepare_file else expand_paths(paths, kind)
        parse_task = progress.add_task(f"parsing {label or kind} files", total=len(files))
        limits = IngestLimits.from_settings(s)
        hash_of = hash_file or (None if prepare_file else file_hash)
        recipe = ingest_recipe(s, ctx.embedder)
        stored: dict[tuple[str, str], Stored] = {}
        if hash_of and skip_by_stored_hash and files:
            with ctx.pool.connection() as conn:  # a kind's own files only: a transcript named as a 10-K still fails
                stored = stored_hashes(conn, [str(f) for f in files], None if prepare_file else [kind])
        current = {d.id for d in stored.values() if d.recipe == recipe}
        current |= _adopt_current_vectors(ctx, [d.id for d in stored.values() if d.recipe is None], recipe)
        stored_paths = {p for p, _ in stored}
        for path in files:
            if hash_of and str(path) in stored_paths:
                found = stored.get((str(path), _fingerprint(hash_of, path, limits) or ""))
                if found is not None and found.id in current:  # the same bytes and recipe from the same path
                    report.files.append(FileOutcome(path=str(path), status="unchanged", chunks=found.chunks))
                    progress.advance(parse_task)
                    continue
            try:
                if prepare_file:
                    prepared = prepare_file(path)
                else:
                    prepared = prepare(kind, path, s.chunk_size, s.chunk_overlap, limits=limits)
            except IngestError as exc:
                report.files.append(FileOutcome(path=str(path), status="error", reason=exc.reason))
            except Exception as exc:  # a parser's own failure on a hostile file fails that file, not the run
                report.files.append(FileOutcome(path=str(path), status="error", reason=IngestError(path, _failure("parsing failed", exc)).reason))
            else:
                prepared = prepared.model_copy(update={"recipe": recipe})
                with ctx.pool.connection() as conn:
                    unchanged = is_unchanged(prepared, existing_version(conn, prepared))
                if unchanged:
                    report.files.append(FileOutcome(path=str(path), status="unchanged", chunks=len(prepared.chunks)))
                else:
                    todo.append(prepared)
            progress.advance(parse_task)

        total = sum(len(p.chunks) for p in todo)
        embed_task = progress.add_task("embedding chunks", total=total)
        write_task = progress.add_task("writing documents", total=len(todo))

        def embed(prepared: PreparedDocument) -> tuple[np.ndarray | None, str | None]:
            try:
                return ctx.embedder.embed([c.text for c in prepared.chunks]), None  # cache hits after the fan-out
            except Exception as exc:  # a provider failure fails this document, not the batch
                return None, f"embedding failed: {type(exc).__name__}: {exc}"

        def store(prepared: PreparedDocument, vecs: np.ndarray | None, error: str | None) -> None:
            if vecs is not None:  # None: embedding failed, and error says how
                try:
                    status = write_document(ctx.pool, prepared, vecs)  # one transaction: all of the document or none
                except Exception as exc:
                    error = IngestError(prepared.path, _failure("writing failed", exc)).reason
            if error is None:
                invalidate(ctx.redis, prepared.doc.ticker)
                tables = len(getattr(prepared.doc, "tables", []))
                report.files.append(FileOutcome(path=prepared.path, status=status, chunks=len(prepared.chunks), tables=tables))
            else:
                report.files.append(FileOutcome(path=prepared.path, status="error", reason=error))
            progress.advance(write_task)

        incoming: Counter[str] = Counter()
        for prepared in todo:
            incoming[chunk_table(prepared)] += len(prepared.chunks)
        with bulk_load(ctx.database_url, incoming, s.bulk_load_min_chunks) as load:
            _embed_and_store(ctx, todo, fanout, progress, embed_task, embed, store)
            if load.deferred and not quiet:
                progress.console.print(f"building the vector indexes this load deferred: {', '.join(load.deferred)}")
        report.index_rebuilds = load.rebuilt
        report.chunks_embedded = total
    report.seconds = time.perf_counter() - started
    if any(f.status in ("added", "replaced") for f in report.files):
        sync_keyword_index(ctx)
    return report


def _embed_and_store(ctx: Context, todo: list[PreparedDocument], fanout: FanOut | None, progress: Progress, embed_task,
                     embed: Callable[[PreparedDocument], Embedded], store: Callable[..., None]) -> None:
    """Embed every document (fanned out over the workers, or inline in windows) and store each as it is ready."""
    if fanout is not None and sum(len(p.chunks) for p in todo) > ctx.settings.embedding_batch_size:
        fan = fanout(ctx, todo)
        pending = list(range(len(todo)))
        while pending:
            embedded, docs = fan.poll()
            progress.update(embed_task, completed=embedded)
            for doc in list(pending):
                ready, error = docs[doc]
                if ready:
                    store(todo[doc], *(embed(todo[doc]) if error is None else (None, error)))
                    pending.remove(doc)
            if pending:
                time.sleep(0.2)
    else:
        # one writer thread, in order: the documents of a window are written while the next window is embedded
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-writer") as writer:
            writes = []
            for window in embed_windows(todo, INLINE_WINDOW_CHUNKS):
                for prepared, (vecs, error) in zip(window, embed_window(ctx.embedder, window, embed)):
                    progress.advance(embed_task, len(prepared.chunks))
                    writes.append(writer.submit(store, prepared, vecs, error))
            for w in writes:
                w.result()  # store() reports its own failures; anything else is a bug and is raised


def sync_keyword_index(ctx: Context) -> None:
    """The new chunks join this host's BM25 index now rather than at the next beat. Derived data: a failure here
    leaves the chunks to the GIN side and the next sync, and never fails the ingest."""
    try:
        keyword_index.sync_all(ctx.pool, ctx.settings.data_dir)
    except Exception:
        log.warning("BM25 index sync after ingest failed; the workers' beat retries it", exc_info=True)
