"""Progress events: Redis pub/sub on finagent:jobs:{id}:events, plus a capped stream for late subscribers."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, get_args

from pydantic import BaseModel, Field

from agent.infra import metrics
from agent.infra.redis_tx import watched_transaction
from agent.models.job import FINAL_STATUSES, EventType, StepEvent

EVENT_TYPES = get_args(EventType)
TERMINAL_STATUSES = FINAL_STATUSES
STREAM_TTL_S = 7 * 24 * 3600


class Event(BaseModel):
    type: str
    job_id: str
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    ts: float = Field(default_factory=time.time)
    id: str | None = None  # the stream entry id, usable as Last-Event-ID


def channel(job_id: str) -> str:
    return f"finagent:jobs:{job_id}:events"


def stream_key(job_id: str) -> str:
    return f"finagent:jobs:{job_id}:stream"


def _event(job_id: str, type: str, message: str = "", data: dict | None = None) -> Event:
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    return Event(type=type, job_id=job_id, message=message, data=data or {})


def _append(redis_or_pipe, ev: Event, maxlen: int):
    """XADD the event to its job's stream (and keep the stream for a week); returns the entry id, or the pipe."""
    entry = redis_or_pipe.xadd(stream_key(ev.job_id), {"event": ev.model_dump_json(exclude={"id"})},
                               maxlen=maxlen, approximate=True)
    redis_or_pipe.expire(stream_key(ev.job_id), STREAM_TTL_S)
    return entry


def _broadcast(redis, ev: Event, entry_id) -> Event:
    ev.id = entry_id if isinstance(entry_id, str) else entry_id.decode()
    redis.publish(channel(ev.job_id), ev.model_dump_json())
    return ev


def publish(redis, job_id: str, type: str, message: str = "", data: dict | None = None, maxlen: int = 1000) -> Event:
    ev = _event(job_id, type, message, data)
    ev = _broadcast(redis, ev, _append(redis, ev, maxlen))
    metrics.count_events([ev.type])
    return ev


def published_marker(job_id: str, seq: int) -> str:
    return f"finagent:jobs:{job_id}:published:{seq}"


def publish_once(redis, job_id: str, seq: int, events: list[StepEvent], maxlen: int = 1000) -> bool:
    """Publish one coordinator step's events exactly once, however often it is retried (outbox pattern):
    the stream entries and the step's marker are written in one MULTI/EXEC under WATCH of the marker."""
    if not events:
        return False
    marker = published_marker(job_id, seq)
    built = [_event(job_id, e.type, e.message, e.data) for e in events]

    def write(pipe) -> bool:
        if pipe.exists(marker):
            return False
        pipe.multi()
        for ev in built:
            _append(pipe, ev, maxlen)
        pipe.set(marker, "1", ex=STREAM_TTL_S)
        return True

    written, results = watched_transaction(redis, write, marker)
    if not written:
        return False
    metrics.count_events(ev.type for ev in built)
    for ev, entry_id in zip(built, results[::2]):  # XADD, EXPIRE per event; live subscribers, late ones replay
        _broadcast(redis, ev, entry_id)
    return True


def replay(redis, job_id: str, after: str = "0") -> list[Event]:
    """Events already in the stream after `after` (a stream id; '0' for all)."""
    start = "(" + after if after != "0" else "-"
    return [_decode(eid, fields) for eid, fields in redis.xrange(stream_key(job_id), min=start)]


def _decode(eid, fields) -> Event:
    raw = fields.get("event") or fields.get(b"event")
    ev = Event.model_validate(json.loads(raw))
    ev.id = eid if isinstance(eid, str) else eid.decode()
    return ev


def follow(redis, job_id: str, after: str = "0", block_ms: int = 1000, timeout_s: float | None = None) -> Iterator[Event]:
    """Replay, then block on the stream for new events until a terminal job_status (no gap between the two)."""
    last = after if after != "0" else "0-0"
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while deadline is None or time.monotonic() < deadline:
        batch = redis.xread({stream_key(job_id): last}, block=block_ms, count=100)
        for _, entries in batch or []:
            for eid, fields in entries:
                ev = _decode(eid, fields)
                last = ev.id or last
                yield ev
                if ev.type == "job_status" and ev.data.get("status") in TERMINAL_STATUSES:
                    return
