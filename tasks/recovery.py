"""Recovery, in one place: every way a job that stopped moving is set going again, each re-sending under the same
task ids (a duplicate adds nothing: outputs are keyed and a stale coordinator delivery is ignored).

- `recover_orphans` (beat, every few seconds): a task claimed by a worker that stopped beating is re-sent at once.
- `reconcile_quiet_jobs` (run by `recover_orphans`): a quiet job is checked against what the broker and the workers hold.
- `resume_stalled` (beat, every minute): committed events a crash left unpublished, and jobs that stood still too long.
- `resume_job`: what all three send; for a job with a saved cancel, the cancel delivery again.

Reconciling quiet jobs with what the broker and the workers actually hold:

A job waits on task ids: its in-flight calls, or its first step. When it has not moved for `BODY_GRACE_S`, each id it
waits on is finished (its output stored: `finished_calls`), queued (in a queue's list), held by
a live worker (running, prefetched, or waiting for its retry countdown: asked by one broadcast), or none of these,
which means lost:
- a broker crash lost it (written after the last append-only fsync),
- a worker's connection to the broker dropped with messages prefetched (Redis hands them out again only after the
  visibility timeout, ten minutes),
- or its publish never reached the broker.
A job with a lost id gets its step re-sent under the same ids: a duplicate adds nothing, because outputs are keyed and a
stale coordinator delivery is ignored. A job whose ids all finished while it stood still waits on its chord body; unless
that body is queued or held (behind a busy coordinator queue), it was lost, and is sent again under its own id.
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable

from agent.infra import liveness
from agent.infra.events import published_marker
from agent.models.job import FINAL_STATUSES
from agent.models.steps import TaskCall, call_waves
from agent.persistence import jobstore
from agent.submission import admit_batch_jobs, announce_unannounced
from tasks.coordinator import flush_events
from tasks.dispatch import CeleryDispatcher, advance_signature, advance_task_id, call_task_id, fan_out, start_task_id
from workers.app import app, renew_broker_connections
from workers.process_context import context
from workers.topology import RECOVER_ORPHANS, RESUME_STALLED, Queue

log = logging.getLogger(__name__)
FINISHED = {"SUCCESS", "FAILURE", "REVOKED"}
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")  # kombu's Redis keys for the priority steps


def waited_ids(job: jobstore.JobRow) -> list[str]:
    return [i for chains in waited_waves(job) for links in chains for i in links]


def waited_waves(job: jobstore.JobRow) -> list[list[list[str]]]:
    """The ids a job waits on, as the waves and chains they were sent in (models.steps.call_waves): a 10-K evaluation
    behind its company's answer, the answer round's compose behind its extractions and its evaluations behind the
    compose."""
    if job.step == "start":
        return [[[start_task_id(job.id)]]]
    return [[[call_task_id(c, job.id, job.state.iteration) for c in links] for links in chains]
            for chains in call_waves(job.state.inflight)]


def finished_calls(job: jobstore.JobRow) -> Callable[[TaskCall], bool]:
    """Whether one of the job's in-flight calls has finished: every call stores its output as it ends (a FailedOutput
    when it failed for good), in the transaction of its ledger row. Its task's result is not kept (tasks/fanout.py), so
    a call Celery failed before it recorded an outcome (its retry could not be published while the broker was down, a
    failed chord part failed the body before it ran, a hard time limit killed it) is not finished, and is sent again.
    A Redis that crashes loses no stored output."""
    it = job.state.iteration
    stored = jobstore.output_keys(context().pool, job.id, f"{it}:")
    return lambda c: str(c.output_key(it)) in stored


def _first_unfinished_wave(job: jobstore.JobRow) -> tuple[int, list[list[list[TaskCall]]], list[TaskCall]]:
    """The job's waves, the index of the first with an unfinished call (len(waves) when every call finished), and that
    wave's unfinished calls that are sent: each chain's first unfinished link."""
    finished = finished_calls(job)
    waves = call_waves(job.state.inflight)
    for n, chains in enumerate(waves):
        firsts = [c for c in (next((c for c in links if not finished(c)), None) for links in chains) if c is not None]
        if firsts:
            return n, waves, firsts
    return len(waves), waves, []


def unfinished_ids(job: jobstore.JobRow) -> list[str]:
    """Of the first wave with an unfinished call, each chain's first unfinished call: a link behind an unfinished one
    is not sent yet, so not lost, and neither is any call of a later wave."""
    if job.step == "start":
        task_id = start_task_id(job.id)
        return [] if app.AsyncResult(task_id).state in FINISHED else [task_id]
    _, _, firsts = _first_unfinished_wave(job)
    return [call_task_id(c, job.id, job.state.iteration) for c in firsts]


def unsent_calls(job: jobstore.JobRow) -> list[TaskCall]:
    """The job's in-flight calls from its first wave with an unfinished call on: what re-sending its step must send.
    The waves before it finished and stored their outputs; sent again, their chord would not fire its body a second
    time (the backend counted each of their task ids once already), so the wave after them is sent itself. A one-wave
    step is re-sent whole, as before there were waves."""
    n, waves, _ = _first_unfinished_wave(job)
    return [c for later in waves[n:] for links in later for c in links]


def queued_ids(redis) -> set[str]:
    ids: set[str] = set()
    for queue in Queue:
        for key in (queue.value + suffix for suffix in _PRIORITY_SUFFIXES):
            for raw in redis.lrange(key, 0, -1):
                try:
                    ids.add(json.loads(raw)["headers"]["id"])
                except (ValueError, KeyError, TypeError):
                    continue
    return ids


def worker_held_ids(timeout_s: float = 1.0, expected: int | None = None) -> set[str]:
    """Running, prefetched and countdown-waiting task ids, from every worker that answers the broadcast. Each of its
    three questions returns once `expected` workers replied (those whose heartbeat is live), not after the timeout."""
    inspect = app.control.inspect(timeout=timeout_s, limit=expected or None)
    ids: set[str] = set()
    for reply in (inspect.active(), inspect.reserved(), inspect.scheduled()):
        for tasks in (reply or {}).values():
            ids.update(str(i) for t in tasks if (i := t.get("id") or (t.get("request") or {}).get("id")))
    return ids


def live_claims(redis) -> set[str]:
    claims = set(redis.hkeys(liveness.CLAIMS))
    return claims - set(liveness.orphans(redis))


def reconcile_quiet_jobs() -> list[str]:
    ctx = context()
    quiet = [j for j in (jobstore.load_job(ctx.pool, i) for i in jobstore.quiet_jobs(ctx.pool, liveness.BODY_GRACE_S)) if j is not None]
    held: set[str] | None = None
    acted: list[str] = []
    for job in quiet:
        if job.step != "start" and not job.state.inflight:
            continue
        unfinished = unfinished_ids(job)
        # every call finished and the job stood still: its step's body is what it waits on (queued behind a busy
        # coordinator queue, or lost)
        body = [] if unfinished or job.step == "start" else [advance_task_id(job.id, job.step, job.state.inflight)]
        waited = body or unfinished
        if not waited:
            continue  # a first step that ran: the job moves on its own
        if held is None:  # one broadcast and one scan per run, only when some job waits on something
            try:
                held = (queued_ids(ctx.redis) | worker_held_ids(expected=len(liveness.beating_workers(ctx.redis)))
                        | live_claims(ctx.redis))
            except app.connection_for_read().connection_errors:
                renew_broker_connections()  # the broker restarted under a pooled connection: look again next run
                return acted
        lost = [i for i in waited if i not in held]
        if not lost:
            continue  # waiting its turn
        log.warning("job %s at %s lost %s; re-sending %s", job.id, job.step, ", ".join(lost),
                    "its step's body" if body else "its step")
        if job.step == "start":
            announce_unannounced(ctx, [job.id])  # saved while Redis was down
        resume_job(job)
        jobstore.touch(ctx.pool, job.id)  # at most one repair per grace period
        acted.append(job.id)
    return acted


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
