"""Event publishing on fakeredis: the outbox publishes a step's events exactly once, in order."""
from __future__ import annotations

import threading

import fakeredis
import pytest
from pydantic import ValidationError

from agent.infra.events import Event, channel, follow, publish, publish_once, replay
from agent.models.job import StepEvent


@pytest.fixture
def redis():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)


def ev(type: str, message: str = "", data: dict | None = None) -> StepEvent:
    return StepEvent(type=type, message=message, data=data or {})


STEP = [ev("iteration_start", "Iteration 1", {"iteration": 1}), ev("search", "Found 3 chunks", {"chunks": 3})]


def test_publish_once_writes_a_step_only_once(redis):
    assert publish_once(redis, "j1", 1, STEP)
    assert not publish_once(redis, "j1", 1, STEP)  # a redelivered coordinator or resume_stalled
    assert publish_once(redis, "j1", 2, [ev("job_status", "completed", {"status": "completed"})])
    events = replay(redis, "j1")
    assert [e.type for e in events] == ["iteration_start", "search", "job_status"]
    assert events[1].data == {"chunks": 3} and all(e.id for e in events)


def test_concurrent_flushes_of_one_step_publish_it_once(redis):
    clients = [fakeredis.FakeRedis(server=redis.connection_pool.connection_kwargs["server"], decode_responses=True)
               for _ in range(6)]
    barrier = threading.Barrier(len(clients))
    wins: list[bool] = []

    def flush(client):
        barrier.wait()
        wins.append(publish_once(client, "j2", 7, STEP))

    threads = [threading.Thread(target=flush, args=(c,)) for c in clients]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert wins.count(True) == 1 and len(replay(redis, "j2")) == len(STEP)


def test_live_subscribers_get_the_stream_ids(redis):
    sub = redis.pubsub()
    sub.subscribe(channel("j3"))
    sub.get_message(timeout=1)  # the subscribe confirmation
    publish_once(redis, "j3", 1, STEP[:1])
    msg = sub.get_message(timeout=1)
    ev = Event.model_validate_json(msg["data"])
    assert ev.type == "iteration_start" and ev.id == replay(redis, "j3")[0].id


def test_empty_steps_and_unknown_types(redis):
    assert not publish_once(redis, "j4", 1, [])
    with pytest.raises(ValidationError):
        ev("made_up")
    with pytest.raises(ValueError, match="unknown event type"):
        publish(redis, "j4", "made_up")
    assert replay(redis, "j4") == []


def test_follow_replays_then_stops_at_a_terminal_status(redis):
    publish(redis, "j5", "job_status", "queued", {"status": "queued"})
    publish_once(redis, "j5", 1, STEP + [ev("job_status", "failed", {"status": "failed"})])
    seen = [e.type for e in follow(redis, "j5", block_ms=10, timeout_s=5)]
    assert seen == ["job_status", "iteration_start", "search", "job_status"]
    after = replay(redis, "j5")[1].id
    assert [e.type for e in replay(redis, "j5", after=after)] == ["search", "job_status"]
