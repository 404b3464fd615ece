"""The coordinator (queue `coordinator`): one state-machine step per delivery, then dispatch the next
fan-out as a chord whose body is the next `advance`. It never waits on another task."""
from __future__ import annotations

import uuid

import psycopg
import redis

from agent.infra import liveness, metrics
from agent.infra.events import publish_once, published_marker
from agent.models.job import FINAL_STATUSES, Outbox
from agent.persistence import jobstore
from agent.submission import admit_batch_jobs
from agent.work.step_io import advance_job
from tasks.dispatch import CeleryDispatcher, advance_signature, advance_task_id, fan_out
from tasks.recovery import reconcile_quiet_jobs, unsent_calls
from workers.app import app, context
from workers.topology import ADVANCE, RECOVER_ORPHANS, RESUME_STALLED

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


@app.task(name=RESUME_STALLED.name)
def resume_stalled(stalled_after_s: int = 900) -> list[str]:
    """Beat task: re-send the in-flight calls of running jobs that have not moved for a while (on the
    queues their job uses), and publish any step events a crashed coordinator committed but did not publish."""
    ctx = context()
    admit_batch_jobs(ctx, CeleryDispatcher())  # slots freed by jobs whose end was not followed by an admission
    resumed = []
    finished = jobstore.recent_final_seqs(ctx.pool, within_s=3600)
    with ctx.redis.pipeline(transaction=False) as pipe:  # one round trip for every marker
        for job_id, seq in finished:
            pipe.exists(published_marker(job_id, seq))
        published = pipe.execute()
    for (job_id, _), done in zip(finished, published):
        if not done:
            flush_events(job_id, jobstore.load_outbox(ctx.pool, job_id))  # a final step's events lost to a crash
    for row in jobstore.stalled_jobs(ctx.pool, stalled_after_s):
        job = jobstore.load_job(ctx.pool, row["id"])
        if job is None:
            continue
        resume_job(job)
        resumed.append(job.id)
        jobstore.touch(ctx.pool, job.id)
    return resumed


@app.task(name=RECOVER_ORPHANS.name)
def recover_orphans() -> list[str]:
    """Beat task (every few seconds): a job whose task was claimed by a worker that stopped beating (killed,
    its machine gone) gets its current step re-sent under the same task ids, at once; then every job that has stood
    still for a while is reconciled with what the broker and the workers hold (tasks/recovery.py)."""
    ctx = context()
    lost = liveness.orphans(ctx.redis)
    resumed = []
    for job_id in sorted({liveness.job_of(t) for t in lost}):
        job = jobstore.load_job(ctx.pool, job_id) if _is_uuid(job_id) else None
        if job is not None and job.status not in FINAL_STATUSES:
            resume_job(job)
            resumed.append(job_id)
    liveness.forget(ctx.redis, list(lost))  # a re-sent task claims its id again on the worker that takes it
    return resumed + reconcile_quiet_jobs()


def resume_job(job: jobstore.JobRow) -> None:
    """Re-send what a job waits on (same task ids: a duplicate adds nothing), after its committed events."""
    flush_events(job.id, job.state.outbox)
    batch = job.state.request.batch
    if job.cancel_requested:
        CeleryDispatcher().cancel(job)  # the wake-up of a cancel was lost
    elif job.step == "start":
        CeleryDispatcher().start(job.id, batch)
    elif job.state.inflight:
        calls = unsent_calls(job)
        if calls:
            fan_out(job.id, job.step, calls, job.state.iteration, batch)
        else:  # every call finished: the step's body is what was lost
            task_id = advance_task_id(job.id, job.step, job.state.inflight)
            advance_signature(job.id, job.step, batch, task_id=task_id).apply_async()


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
