"""Ingestion fan-out: embed one batch of chunk texts into the shared embedding cache; `EmbedFanOut` sends a run's
batches as one group (agent.ingest.runner.ingest(fanout=EmbedFanOut))."""
from __future__ import annotations

from celery import group
from celery import states as task_states
from pydantic import BaseModel, Field

from agent.context import Context
from agent.ingest.documents import PreparedDocument
from workers.app import app
from workers.process_context import context
from workers.topology import EMBED_BATCH


class EmbedBatch(BaseModel):
    texts: list[str] = Field(min_length=1, max_length=256)


@app.task(name=EMBED_BATCH.name, autoretry_for=(ConnectionError, OSError), retry_backoff=True, max_retries=3)
def embed_batch(texts: list[str]) -> int:
    batch = EmbedBatch(texts=texts)
    context().embedder.embed(batch.texts)  # CachedEmbedder writes through to embedding_cache
    return len(batch.texts)


class EmbedFanOut:
    """The chunk texts of every document to write, embedded by one Celery group of batches. A document is
    written as soon as the batches covering its chunks are done, so an interrupted run keeps what it finished
    (and the embedding cache keeps every finished batch)."""

    def __init__(self, ctx: Context, todo: list[PreparedDocument]):
        size = ctx.settings.embedding_batch_size
        texts = [c.text for p in todo for c in p.chunks]
        self.sizes = [len(texts[i:i + size]) for i in range(0, len(texts), size)]
        self.result = group(embed_batch.s(texts[i:i + size]) for i in range(0, len(texts), size)).apply_async()
        self.spans, start = [], 0
        for prepared in todo:  # the batches holding each document's chunks
            end = start + len(prepared.chunks)
            self.spans.append(range(start // size, (end - 1) // size + 1) if end > start else range(0))
            start = end

    def poll(self) -> tuple[int, list[tuple[bool, str | None]]]:
        """(chunks embedded so far, (ready, error) per document), asking the result backend once per batch."""
        states = [(st in task_states.READY_STATES, st == task_states.FAILURE)
                  for st in (r.state for r in self.result.results)]
        embedded = sum(n for n, (ready, _) in zip(self.sizes, states) if ready)
        docs: list[tuple[bool, str | None]] = []
        for span in self.spans:
            failed = next((self.result.results[b] for b in span if states[b][1]), None)
            if failed is not None:
                docs.append((True, f"embedding failed: {type(failed.result).__name__}: {failed.result}"))
            else:
                docs.append((all(states[b][0] for b in span), None))
        return embedded, docs
