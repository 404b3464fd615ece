"""`finagent ingest`: parse and chunk locally, embed in batches fanned out over the workers, write atomically."""
from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, Field
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent.context import Context
from agent.ingest.documents import Kind, PreparedDocument, expand_paths, prepare
from agent.ingest.errors import IngestError
from agent.ingest.store import existing_hash, write_document
from agent.retrieval.availability import invalidate


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

    @property
    def errors(self) -> list[FileOutcome]:
        return [f for f in self.files if f.status == "error"]


def _embed_fanout(ctx: Context, texts: list[str], progress: Progress, task_id) -> None:
    """Embed `texts` into the shared cache with one Celery group; the caller is a CLI, not a task."""
    from celery import group

    from tasks.ingest import embed_batch

    size = ctx.settings.embedding_batch_size
    batches = [texts[i:i + size] for i in range(0, len(texts), size)]
    result = group(embed_batch.s(b) for b in batches).apply_async()
    done = 0
    while not result.ready():
        now = sum(len(b) for b, r in zip(batches, result.results) if r.ready())
        progress.update(task_id, advance=now - done)
        done = now
        time.sleep(0.2)
    result.get(propagate=True)
    progress.update(task_id, advance=len(texts) - done)


def ingest(ctx: Context, kind: Kind, paths: list[Path], fanout: bool = True, quiet: bool = False) -> IngestReport:
    started = time.perf_counter()
    report = IngestReport()
    s = ctx.settings
    todo: list[PreparedDocument] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=quiet) as progress:
        files = expand_paths(paths, kind)
        parse_task = progress.add_task(f"parsing {kind} files", total=len(files))
        for path in files:
            try:
                prepared = prepare(kind, path, s.chunk_size, s.chunk_overlap)
            except IngestError as exc:
                report.files.append(FileOutcome(path=str(path), status="error", reason=exc.reason))
            else:
                with ctx.pool.connection() as conn:
                    unchanged = existing_hash(conn, prepared) == prepared.content_hash
                if unchanged:
                    report.files.append(FileOutcome(path=str(path), status="unchanged", chunks=len(prepared.chunks)))
                else:
                    todo.append(prepared)
            progress.advance(parse_task)

        texts = [c.text for p in todo for c in p.chunks]
        embed_task = progress.add_task("embedding chunks", total=len(texts))
        if texts and fanout and len(texts) > s.embedding_batch_size:
            _embed_fanout(ctx, texts, progress, embed_task)
        write_task = progress.add_task("writing documents", total=len(todo))
        for prepared in todo:
            vecs = ctx.embedder.embed([c.text for c in prepared.chunks])  # cache hits after the fan-out
            if not fanout:
                progress.advance(embed_task, len(prepared.chunks))
            status = write_document(ctx.pool, prepared, vecs)
            invalidate(ctx.redis, prepared.doc.ticker)
            tables = len(getattr(prepared.doc, "tables", []))
            report.files.append(FileOutcome(path=prepared.path, status=status, chunks=len(prepared.chunks), tables=tables))
            progress.advance(write_task)
        report.chunks_embedded = len(texts)
    report.seconds = time.perf_counter() - started
    return report
