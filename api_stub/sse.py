"""A job's events as server-sent events: the replay after a Last-Event-ID, then live entries, until the job ends.
A stream that meets a Redis (or Postgres) outage stays open and resumes after its last event once the server is back:
the outbox publishes what happened meanwhile, so the client misses nothing and has nothing to reconnect."""
from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from agent.infra.events import TERMINAL_STATUSES, Event, stream_key
from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable
from agent.persistence import jobstore
from api_stub.error_responses import ApiError
from api_stub.runtime import Runtime

STREAM_ID = re.compile(r"^\d+(-\d+)?$")
BLOCK_MS = 1000
# a finished job whose stream shows nothing new for this many blocking reads ends the response: its terminal
# event is published right after the commit, so two empty reads mean there is none to wait for (e.g. expired)
IDLE_READS_WHEN_FINAL = 2
# the waits between attempts while a server is down (the last one repeats until it is back or the client leaves)
OUTAGE_WAITS_S = (0.5, 1.0, 2.0, 5.0)


def check_event_id(last_event_id: str | None) -> str:
    if last_event_id is None or last_event_id == "":
        return "0-0"
    if not STREAM_ID.match(last_event_id):
        raise ApiError(400, f"Last-Event-ID {last_event_id!r} is not an event id of this API (e.g. 1700000000000-0)",
                       code="bad_last_event_id")
    return last_event_id


def _is_final(rt: Runtime, job_id: str) -> bool:
    return jobstore.statuses(rt.ctx.pool, [job_id]).get(job_id) in TERMINAL_STATUSES


async def job_events(rt: Runtime, job_id: str, after: str) -> AsyncIterator[dict]:
    """sse-starlette messages; XREAD blocks on the async client, so a waiting client holds no thread. During an
    outage the client gets a comment when it starts and when it ends (EventSource clients ignore comments), and
    sse-starlette's pings in between."""
    key, last, idle, failures = stream_key(job_id), after, 0, 0
    while True:
        try:
            batch: Any = await rt.aredis.xread({key: last}, block=BLOCK_MS, count=100)
            final = not batch and await asyncio.to_thread(_is_final, rt, job_id)
        except UNAVAILABLE_TYPES as exc:
            down = unavailable(exc)
            if down is None:
                raise
            if failures == 0:
                yield {"comment": f"{down.service} is unavailable ({down.reason}); this stream waits and resumes "
                                  f"after event {last}"}
            await asyncio.sleep(OUTAGE_WAITS_S[min(failures, len(OUTAGE_WAITS_S) - 1)])
            failures += 1
            continue
        if failures:
            yield {"comment": f"resumed after event {last}"}
            failures = 0
        if not batch:
            idle = idle + 1 if final else 0
            if idle >= IDLE_READS_WHEN_FINAL:
                return
            continue
        idle = 0
        for _, entries in batch:
            for entry_id, fields in entries:
                ev = Event.model_validate(json.loads(fields["event"]))
                ev.id = last = entry_id
                yield {"id": entry_id, "event": ev.type, "data": ev.model_dump_json()}
                if ev.type == "job_status" and ev.data.get("status") in TERMINAL_STATUSES:
                    return
