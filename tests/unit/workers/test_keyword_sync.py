"""Which worker nodes keep their host's BM25 index in sync (workers/keyword_sync.py), and the periodic sync loop."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from workers import keyword_sync
from workers.keyword_sync import consumed_queues, searches, sync_every
from workers.topology import WORKERS, Queue


def test_a_node_syncs_when_it_consumes_a_queue_whose_tasks_search():
    assert searches(["search"]) and searches(["batch"])  # a batch job's searches run on batch
    assert searches(["llm", "search"])
    assert not searches(["coordinator", "celery"]) and not searches(["llm"]) and not searches([])
    assert keyword_sync.SEARCHING_QUEUES == {Queue.search.value, Queue.batch.value}


def test_of_the_topology_s_pools_only_search_and_batch_sync():
    assert [w.name for w in WORKERS if searches(q.value for q in w.queues)] == ["search", "batch"]


def test_the_queues_come_from_the_consumer_and_a_bare_sender_has_none():
    assert consumed_queues(consumer("search", "llm")) == ["search", "llm"]
    assert consumed_queues(None) == []


class FakeStop:
    """threading.Event's wait, without time: records each timeout and reports the stop after `periods` waits."""

    def __init__(self, periods: int):
        self.periods, self.waits = periods, []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return len(self.waits) >= self.periods


def test_a_failing_sync_is_logged_and_tried_again_the_next_period(caplog):
    outcomes = [RuntimeError("postgres is down"), OSError("disk full"), None, RuntimeError("again"), None]
    calls = []

    def sync() -> None:
        calls.append(len(calls))
        if (error := outcomes[len(calls) - 1]) is not None:
            raise error

    stop = FakeStop(periods=5)
    with caplog.at_level(logging.WARNING, logger=keyword_sync.__name__):
        sync_every(sync, 30.0, stop)
    assert calls == [0, 1, 2, 3, 4]  # once at start, then once after each of four periods
    assert stop.waits == [30.0] * 5
    failures = [r for r in caplog.records if "sync failed" in r.getMessage()]
    assert [str(r.exc_info[1]) for r in failures] == ["postgres is down", "disk full", "again"]


def test_the_loop_syncs_at_once_and_ends_when_stopped():
    calls = []
    stop = FakeStop(periods=1)
    sync_every(lambda: calls.append(1), 60.0, stop)
    assert calls == [1] and stop.waits == [60.0]


def consumer(*queues: str) -> SimpleNamespace:
    return SimpleNamespace(app=SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(
        consume_from=dict.fromkeys(queues)))))


def test_only_a_searching_node_starts_the_sync_thread_at_the_setting_s_period(monkeypatch):
    from agent.settings import Settings

    started: list[dict] = []

    class Thread:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def start(self) -> None:
            started.append(self.kwargs)

    monkeypatch.setattr(keyword_sync.threading, "Thread", Thread)
    monkeypatch.setattr(keyword_sync, "_threads", [])
    monkeypatch.setattr("agent.settings.get_settings", lambda: Settings(keyword_index_sync_s=7.5))
    keyword_sync._start_keyword_sync(sender=consumer("llm"))
    keyword_sync._start_keyword_sync(sender=consumer("coordinator", "celery"))
    assert started == []
    keyword_sync._start_keyword_sync(sender=consumer("batch"))
    assert len(started) == 1 and started[0]["target"] is sync_every and started[0]["daemon"]
    assert started[0]["args"][:2] == (keyword_sync.sync_this_host, 7.5)
