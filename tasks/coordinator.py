"""The coordinator (queue `coordinator`): one state-machine step per delivery, then dispatch the next
fan-out as a chord whose body is the next `advance`. It never waits on another task. Repairing a job that stopped
moving is tasks/recovery.py's."""
from __future__ import annotations

import psycopg
import redis

from agent.infra import metrics
from agent.infra.events import publish_once, published_marker
from agent.models.job import FINAL_STATUSES, Outbox
from agent.submission import admit_batch_jobs
from agent.work.step_io import advance_job
from tasks.dispatch import CeleryDispatcher, fan_out
from workers.app import app
from workers.process_context import context
from workers.topology import ADVANCE

SERVICE_ERRORS = (ConnectionError, OSError, redis.ConnectionError, redis.TimeoutError, psycopg.OperationalError)


# a step that meets the database or Redis restarting is retried (1, 2, 4 ... 30 s apart: about 3 minutes in all);
# no STARTED state in the result backend, as for the calls (tasks/fanout.py): one Redis round trip less per step
@app.task(name=ADVANCE.name, bind=True, acks_late=True, max_retries=8, autoretry_for=SERVICE_ERRORS,
          retry_backoff=True, retry_backoff_max=30, retry_jitter=True, track_started=False)
def advance(self, job_id: str, done_step: str = "start") -> str:
    ran = advance_job(context(), job_id, done_step)
    if ran is None:
        return "stale"
    # publish the previous step's events first (a redelivery after a crash between commit and publish); almost
    # always they went out with their step, which one EXISTS tells (the publish itself watches its marker: 3 trips)
    previous = ran.previous
    if previous.events and not context().redis.exists(published_marker(job_id, previous.seq)):
        flush_events(job_id, previous)
    if ran.outcome is None:
        return "stale"  # a duplicate delivery, or a step some other delivery already took
    # dispatch only after commit, so the next tasks read the state this step wrote; a crash right here is
    # repaired by resume_stalled, which publishes the outbox and re-sends the in-flight calls under the same task ids
    if ran.outcome.calls:
        fan_out(job_id, str(ran.outcome.step), ran.outcome.calls, ran.iteration, ran.batch)
    flush_events(job_id, ran.outcome.state.outbox)
    if ran.outcome.status in FINAL_STATUSES:
        metrics.observe_job_end(ran.outcome.state, ran.outcome.result, ran.outcome.status)
    if ran.batch and ran.outcome.status in FINAL_STATUSES:
        admit_batch_jobs(context(), CeleryDispatcher())  # its slot is free: the next batch job starts
    return str(ran.outcome.step)


def flush_events(job_id: str, outbox: Outbox) -> None:
    ctx = context()
    publish_once(ctx.redis, job_id, outbox.seq, outbox.events, ctx.settings.event_stream_maxlen)
