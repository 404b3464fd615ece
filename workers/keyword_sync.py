"""Every worker node that searches keeps its own host's BM25 index (agent/retrieval/keyword_index.py) in step with
the chunk tables: a daemon thread, started when the node is ready, syncs at once and then every
`KEYWORD_INDEX_SYNC_S`.

Why not a beat task: beat's message reaches one worker on one host, so every other host's index went stale (its
searches still correct, the rows past its watermark found by the GIN side, but slower, and ranked differently from
host to host). Several nodes of one host share the index directory: `KeywordIndex.sync` takes an inter-process
writer lock (a second writer skips) and is a no-op when nothing is new. Nodes whose queues never run a search (the
coordinator's, llm) start nothing and never open the index.

Imported by workers/app.py; connecting the handlers starts nothing.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from celery import signals

from workers.topology import CALL_TASKS, queue_for

log = logging.getLogger(__name__)

# the tasks that call hybrid_search, and so read the index: interactive on their own queue, a batch job's on batch
SEARCH_TASKS = (CALL_TASKS["search"], CALL_TASKS["tenk_retrieve"])
SEARCHING_QUEUES = frozenset(queue_for(spec, batch) for spec in SEARCH_TASKS for batch in (False, True))
STOP_WAIT_S = 10.0  # how long a warm shutdown waits for a running sync to end


class Stop(Protocol):
    def wait(self, timeout: float | None = None) -> bool: ...


def searches(queues: Iterable[str]) -> bool:
    """Whether a node consuming these queues runs searches, and so keeps its host's index in sync."""
    return not SEARCHING_QUEUES.isdisjoint(queues)


def sync_every(sync: Callable[[], Any], period_s: float, stop: Stop) -> None:
    """`sync` now, then `period_s` after each until `stop` is set. A failing sync is logged and tried again the next
    period: the index is derived data, and a worker must never die of it."""
    while True:
        try:
            sync()
        except Exception:
            log.warning("BM25 index sync failed; trying again in %.0f s", period_s, exc_info=True)
        if stop.wait(period_s):
            return


def sync_this_host() -> None:
    from agent.retrieval import keyword_index
    from workers.process_context import context

    ctx = context()
    for report in keyword_index.sync_all(ctx.pool, ctx.settings.data_dir):
        if report.added:
            log.info("BM25 index %s: %d chunks added in %.2f s, watermark %d", report.corpus, report.added,
                     report.seconds, report.watermark)


def consumed_queues(consumer: Any) -> list[str]:
    """The queue names a worker's consumer (worker_ready's sender) reads: its `-Q`, or every queue without one."""
    try:
        return list(consumer.app.amqp.queues.consume_from)
    except (AttributeError, TypeError):
        return []


_stop = threading.Event()
_threads: list[threading.Thread] = []


@signals.worker_ready.connect(dispatch_uid="finagent-keyword-index-sync")
def _start_keyword_sync(sender: Any = None, **_: Any) -> None:
    if not searches(consumed_queues(sender)):
        return
    from agent.settings import get_settings

    # a thread of its own: the first sync (a whole index on a new host) never delays the node's readiness
    thread = threading.Thread(target=sync_every, args=(sync_this_host, get_settings().keyword_index_sync_s, _stop),
                              name="finagent-keyword-sync", daemon=True)
    _threads.append(thread)
    thread.start()


@signals.worker_shutdown.connect(dispatch_uid="finagent-keyword-index-sync-stop")
def _stop_keyword_sync(**_: Any) -> None:
    _stop.set()
    for thread in _threads:
        thread.join(STOP_WAIT_S)
