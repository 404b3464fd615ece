"""A fan-out's messages in one Redis round trip.

Celery sends a chord's header tasks one by one, each `LPUSH` (and the `task-sent` event's `PUBLISH`) waiting for its
reply, so a 12-call fan-out paid 24 round trips to Redis before its last task could start. Inside
`one_publish_batch()`, every message the thread sends goes through one kombu producer whose batch (kombu >= 5.7,
`Producer.batch`) buffers the commands in a non-transactional pipeline and sends them when the block ends. The first
message is sent at once, so the first task of the fan-out starts while the others are still being serialised.

The messages, their ids and their order are Celery's own: only how they reach Redis changes.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery import signals as celery_signals
from celery.utils.objects import FallbackContext


class _Batching(threading.local):
    producer: Any = None  # the producer whose batch this thread is filling, inside one_publish_batch()
    batch: Any = None
    sent = 0


_batching = _Batching()


class BatchingCelery(Celery):
    """Celery, except that a thread inside `one_publish_batch()` sends every message through that block's producer
    (Celery acquires a producer from its pool for each send otherwise, and a chord's header group takes its own)."""

    def producer_or_acquire(self, producer=None):
        if producer is None and _batching.producer is not None:
            return FallbackContext(_batching.producer, self._acquire_producer)
        return super().producer_or_acquire(producer)


@contextmanager
def one_publish_batch(app: BatchingCelery) -> Iterator[None]:
    """Publish what this thread sends inside the block in one pipeline when it ends (the first message at once).

    A failed batch raises (kombu's BatchPublishError: the delivery of its messages is uncertain) and is not retried
    here: the caller decides (dispatch re-sends the same ids one by one, as recovery would). On a transport without
    batches every message is published at once, as without the block."""
    with app.producer_or_acquire() as producer, producer.batch() as batch:
        _batching.producer, _batching.batch, _batching.sent = producer, batch, 0
        try:
            yield
        finally:
            _batching.producer = _batching.batch = None


@celery_signals.after_task_publish.connect(dispatch_uid="finagent-first-of-a-batch")
def _send_the_first_at_once(**_: Any) -> None:
    if _batching.batch is not None:
        _batching.sent += 1
        if _batching.sent == 1:
            _batching.batch.flush()
