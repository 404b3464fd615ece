"""How a fan-out reaches the broker (workers/pipelined_publish.py, tasks/dispatch.fan_out): a chord's messages in one batch, sent
again one by one if the batch fails; and a worker's result backend not tracking the results of what it sends."""
from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from celery._state import _set_task_join_will_block, task_join_will_block
from celery.backends.asynchronous import AsyncBackendMixin
from celery.canvas import _chain, _chord

import tasks.dispatch as dispatch
from agent.models.steps import ExtractCall
from workers import pipelined_publish as batching
from workers.pipelined_publish import BatchingCelery, one_publish_batch


def calls(n: int) -> list[ExtractCall]:
    return [ExtractCall(scope=f"ACME:2024_q{i + 1}") for i in range(n)]


@pytest.fixture
def sent(monkeypatch):
    """Every canvas fan_out applies, with whether a publish batch was open around it."""
    sent: list[tuple[str, list[str], bool]] = []
    state = {"open": False}

    @contextmanager
    def batch(app):
        state["open"] = True
        try:
            yield
        finally:
            state["open"] = False
            if state.get("fail"):
                raise ConnectionError("the pipeline broke")

    def record(kind):
        def apply_async(self, *a, **kw):
            ids = [t.options["task_id"] for t in self.tasks]
            sent.append((kind, ids, state["open"]))
        return apply_async

    monkeypatch.setattr(dispatch, "one_publish_batch", batch)
    monkeypatch.setattr(dispatch, "context", lambda: SimpleNamespace(settings=SimpleNamespace(fanout=True)))
    monkeypatch.setattr(_chord, "apply_async", record("chord"))
    monkeypatch.setattr(_chain, "apply_async", record("chain"))
    return SimpleNamespace(calls=sent, state=state)


def test_a_chord_is_sent_in_one_batch_and_a_single_call_without(sent):
    dispatch.fan_out("J", "1:search", calls(3), 1, False)
    dispatch.fan_out("J", "1:extract", calls(1)[:1], 1, False)
    assert [(kind, opened) for kind, _, opened in sent.calls] == [("chord", True), ("chain", False)]
    assert sent.calls[0][1] == [f"J:1:extract:ACME:2024_q{i}" for i in (1, 2, 3)]


def test_a_failed_batch_is_sent_again_message_by_message_under_the_same_ids(sent):
    sent.state["fail"] = True
    dispatch.fan_out("J", "1:search", calls(3), 1, False)
    (first, ids1, batched), (again, ids2, unbatched) = sent.calls
    assert batched and not unbatched and ids1 == ids2 and first == again == "chord"


def test_inside_a_batch_every_send_of_the_thread_uses_its_producer_and_the_first_message_is_flushed_at_once(monkeypatch):
    app = BatchingCelery("t", broker="memory://", backend="cache+memory://", set_as_current=False)
    flushes = []
    with one_publish_batch(app):
        held = batching._batching.producer
        with app.producer_or_acquire() as p1, app.producer_or_acquire() as p2:
            assert p1 is held and p2 is held
        monkeypatch.setattr(batching._batching.batch, "flush", lambda: flushes.append(1))
        for _ in range(3):
            batching._send_the_first_at_once()
        assert flushes == [1]  # only after the first message: the rest go when the block ends
    assert batching._batching.producer is None and batching._batching.batch is None  # outside: Celery's pool, as usual


def test_a_worker_does_not_await_the_results_of_the_tasks_it_sends(monkeypatch):
    app = BatchingCelery("t", broker="memory://", backend="redis://127.0.0.1:9/0", set_as_current=False)
    backend = app.backend
    subscribed = []
    monkeypatch.setattr(AsyncBackendMixin, "_add_pending_result",
                        lambda self, task_id, result, weak=False: subscribed.append(task_id))
    monkeypatch.setattr(backend.result_consumer.drainer, "start", lambda: None)
    was = task_join_will_block()
    try:
        _set_task_join_will_block(True)  # as in a worker
        app.AsyncResult("J:1:extract:A").then(lambda *_: None)
        assert subscribed == []
        _set_task_join_will_block(False)  # a client (the API, the CLI) waits on results as before
        app.AsyncResult("J:1:extract:B").then(lambda *_: None)
        assert subscribed == ["J:1:extract:B"]
    finally:
        _set_task_join_will_block(was)
