"""Ingestion fan-out: embed one batch of chunk texts into the shared embedding cache."""
from __future__ import annotations

from pydantic import BaseModel, Field

from workers.app import app, context
from workers.topology import EMBED_BATCH


class EmbedBatch(BaseModel):
    texts: list[str] = Field(min_length=1, max_length=256)


@app.task(name=EMBED_BATCH.name, autoretry_for=(ConnectionError, OSError), retry_backoff=True, max_retries=3)
def embed_batch(texts: list[str]) -> int:
    batch = EmbedBatch(texts=texts)
    context().embedder.embed(batch.texts)  # CachedEmbedder writes through to embedding_cache
    return len(batch.texts)
