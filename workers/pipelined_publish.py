"""A fan-out's messages in one Redis round trip.

Celery sends a chord's header tasks one by one, each `LPUSH` (and the `task-sent` event's `PUBLISH`) waiting for its
reply, so a 12-call fan-out paid 24 round trips to Redis before its last task could start. Inside
`one_publish_batch()`, every message the thread sends goes through one kombu producer whose batch (kombu >= 5.7,
`Producer.batch`) buffers the commands in a non-transactional pipeline and sends them when the block ends. The first
message is sent at once, so the first task of the fan-out starts while the others are still being serialised.

The messages, their ids and their order are Celery's own: only how they reach Redis changes.

A fan-out sent from inside a worker also no longer registers its tasks' results as awaited. Celery's Redis backend
does that for every header task of a chord (the chord's group result is built with a barrier over them): it subscribes
the worker's result connection to each task's channel and keeps each AsyncResult in its pending table until a result
arrives through a drainer that a worker never runs. So every fan-out cost one SUBSCRIBE per task before its first
message left, and the coordinator process kept every task it ever sent (and Redis pushed every one of their results to
a connection nobody read). Nothing in a worker can wait on those results (Celery refuses `get()` inside a task unless
`allow_join_result()`, which this leaves alone); processes that do wait (the API, the CLI, Celery clients) are unchanged.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery import signals as celery_signals
from celery._state import task_join_will_block
from celery.app import backends
from celery.backends.asynchronous import AsyncBackendMixin
from celery.utils.objects import FallbackContext


class _Batching(threading.local):
    producer: Any = None  # the producer whose batch this thread is filling, inside one_publish_batch()
    batch: Any = None
    sent = 0


_batching = _Batching()


class _NoAwaitedResultsInWorkers:
    """A result backend that, inside a worker task, does not register results as awaited (see the module's doc)."""

    def add_pending_result(self, result, weak=False, start_drainer=True):
        if task_join_will_block():  # a worker, outside allow_join_result(): nothing here will wait on it
            return result
        return super().add_pending_result(result, weak=weak, start_drainer=start_drainer)  # type: ignore[misc]


class BatchingCelery(Celery):
    """Celery, except that a thread inside `one_publish_batch()` sends every message through that block's producer
    (Celery acquires a producer from its pool for each send otherwise, and a chord's header group takes its own), and
    that a worker's result backend does not track the results of the tasks it sends."""

    def producer_or_acquire(self, producer=None):
        if producer is None and _batching.producer is not None:
            return FallbackContext(_batching.producer, self._acquire_producer)
        return super().producer_or_acquire(producer)

    def _get_backend(self):
        # Celery's own (app/base.py), with the async backends' class extended
        cls, url = backends.by_url(self.backend_cls or self.conf.result_backend, self.loader)
        if issubclass(cls, AsyncBackendMixin):
            cls = type(cls.__name__, (_NoAwaitedResultsInWorkers, cls), {})
        return cls(app=self, url=url)


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
