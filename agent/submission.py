"""Submitting and cancelling jobs, as domain operations: persist the job, announce it, and hand it to a dispatcher.

The dispatcher is the one thing that knows how a job gets run (the Celery implementation is
`tasks.dispatch.CeleryDispatcher`), so the API and the CLI submit without importing a task module.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Protocol

from agent.context import Context
from agent.failure_hints import suggest
from agent.infra.events import publish, stream_key
from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable
from agent.models.job import FINAL_STATUSES, JobRequest, JobState
from agent.ownership import OPEN, Caller, can_see, scoped_idempotency_key
from agent.persistence import batchstore, jobstore
from agent.retrieval.companies import load_companies
from agent.retrieval.periods import impossible_periods
from finagent.models import JobView

log = logging.getLogger(__name__)


class Dispatcher(Protocol):
    def start(self, job_id: str, batch: bool) -> None:
        """Queue the job's first coordinator step (idempotent for a given job id)."""
        ...

    def cancel(self, job: jobstore.JobRow) -> None:
        """Revoke the job's queued calls and wake its coordinator so it ends the job."""
        ...


class IdempotencyConflict(ValueError):
    """The idempotency key is already used by a job with a different request (HTTP 422)."""

    def __init__(self, key: str, job_id: str):
        super().__init__(f"idempotency key {key!r} is already used by job {job_id} with a different request")
        self.key = key
        self.job_id: str | None = job_id


class RequestInFlight(IdempotencyConflict):
    """Another submission with the same idempotency key is still being made (HTTP 409): retry it shortly, and it
    answers with that submission's job (or IdempotencyConflict, if the request differs)."""

    def __init__(self, key: str):
        ValueError.__init__(self, f"a submission with idempotency key {key!r} is still in flight; retry it shortly")
        self.key, self.job_id = key, None


class InvalidRequest(ValueError):
    """A request no job can be made of, found before anything is written; `field` names the part at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def check_question(request: JobRequest) -> None:
    """A question naming a period that cannot exist (Q5, fiscal 1850) is refused rather than answered for another."""
    problems = impossible_periods(request.question)
    if problems:
        raise InvalidRequest("question", "names a period that cannot exist: " + "; ".join(problems))


def known_tickers(ctx: Context) -> set[str]:
    with ctx.pool.connection() as conn:
        return {c.ticker for c in load_companies(conn)}


def check_request(ctx: Context, request: JobRequest, known: Collection[str] | None = None, caller: Caller = OPEN) -> None:
    """Everything JobRequest's own validation cannot see: impossible periods in the question, tickers of companies
    finagent does not know, a parent job that does not exist (or that `caller` may not see). Raises InvalidRequest."""
    check_question(request)
    if request.tickers:
        known = known_tickers(ctx) if known is None else known
        unknown = [t for t in request.tickers if t not in known]
        if unknown:
            hint = suggest(f"unknown tickers {', '.join(unknown)}:", known)
            raise InvalidRequest("tickers", f"unknown ticker{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                                            "no company with that symbol has been ingested" + (f"; {hint.message}" if hint else ""))
    if request.parent_job_id:
        parent = jobstore.load_job(ctx.pool, request.parent_job_id)
        if parent is None or not can_see(caller, parent.owner):
            raise InvalidRequest("parent_job_id", f"no job {request.parent_job_id}")


def _same_request(a: JobRequest, b: JobRequest) -> bool:
    return a.model_dump(exclude={"idempotency_key"}) == b.model_dump(exclude={"idempotency_key"})


def create(ctx: Context, dispatcher: Dispatcher, request: JobRequest, caller: Caller = OPEN) -> tuple[str, bool]:
    """Persist the job, owned by `caller`, before anything runs. The same idempotency key (from the same owner) with
    the same request returns the same job (created=False); with a different request it raises IdempotencyConflict;
    while another submission with the key is still being made (saved and not yet started), RequestInFlight. A request
    that fails `check_request` raises InvalidRequest and writes nothing."""
    check_request(ctx, request, caller=caller)
    key = request.idempotency_key
    if key is None:
        job_id, created = jobstore.create_job(ctx.pool, JobState(request=request), owner=caller.owner)
        if created:
            _announce_and_start(ctx, dispatcher, job_id, request.batch)
        return job_id, created
    with jobstore.idempotency_claim(ctx.pool, scoped_idempotency_key(caller.owner, key)) as conn:
        if conn is None:
            raise RequestInFlight(key)
        job_id, created = jobstore.create_job(ctx.pool, JobState(request=request), conn, owner=caller.owner)
        if created:
            _announce_and_start(ctx, dispatcher, job_id, request.batch)
            return job_id, True
    existing = jobstore.load_job(ctx.pool, job_id)
    if existing is not None and not _same_request(existing.state.request, request):
        raise IdempotencyConflict(key, job_id)
    return job_id, False


def _announce_and_start(ctx: Context, dispatcher: Dispatcher, job_id: str, batch: bool) -> None:
    """The saved job's `queued` event and its first step. With Redis down the job stays saved and queued, and the
    submission succeeds: the reconciler sends its first step once the broker is back (tasks/recovery.py), where an
    error would have the caller retry and make a second job. One attempt at Redis, not the ~20 s a worker rides out: a
    batch of a thousand lines must not wait that long for each."""
    def send() -> None:
        _publish_queued(ctx, ctx.redis_one_attempt, job_id)
        if batch:
            admit_batch_jobs(ctx, dispatcher)
        else:
            dispatcher.start(job_id, batch=False)

    _unless_a_server_is_down(send, f"job {job_id} is saved but not started", "the reconciler starts it when it is back")


def _unless_a_server_is_down(send: Callable[[], None], saved: str, then: str) -> None:
    """`send` what follows a committed change (events, broker messages); a server being down is logged, not raised:
    the change is in Postgres, and what acts on it there picks it up once the server is back."""
    try:
        send()
    except UNAVAILABLE_TYPES as exc:
        down = unavailable(exc)
        if down is None:
            raise
        log.warning("%s: %s is unavailable (%s); %s", saved, down.service, down.reason, then)


def admit_batch_jobs(ctx: Context, dispatcher: Dispatcher) -> list[str]:
    """Start the oldest waiting batch jobs while fewer than `batch_concurrency` run; called when a batch job is
    submitted or ends, and by the beat. The rest wait in the database, not in the broker."""
    admitted = batchstore.claim_batch_slots(ctx.pool, ctx.settings.batch_concurrency)
    announce_unannounced(ctx, admitted)
    for job_id in admitted:
        dispatcher.start(job_id, batch=True)
    return admitted


def announce_unannounced(ctx: Context, job_ids: list[str]) -> None:
    """The `queued` event of each job whose stream is empty: its submission met Redis down (`_announce_and_start`).
    Called before a job's first step is sent, so every job's stream begins with it. One round trip to look."""
    if not job_ids:
        return
    with ctx.redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.exists(stream_key(job_id))
        found = pipe.execute()
    for job_id, exists in zip(job_ids, found):
        if not exists:
            _publish_queued(ctx, ctx.redis, job_id)


def _publish_queued(ctx: Context, redis_client, job_id: str) -> None:
    """The first event of every job's stream."""
    publish(redis_client, job_id, "job_status", "queued", {"status": "queued"}, ctx.settings.event_stream_maxlen)


def rerun_with_feedback(ctx: Context, dispatcher: Dispatcher, parent_id: str, feedback: str,
                        caller: Caller = OPEN) -> tuple[str, bool]:
    """A finished job re-run with feedback becomes a new job linked to it, owned by the parent's owner (an admin's
    re-run of a key's job still belongs to that key); its plan sees the feedback. LookupError: no job `caller` may
    see."""
    parent = find_job(ctx, parent_id, caller)
    if parent.status not in FINAL_STATUSES:
        raise ValueError(f"job {parent_id} is still {parent.status}; feedback applies to finished jobs")
    request = parent.state.request.model_copy(update={"feedback": feedback, "parent_job_id": parent.id, "idempotency_key": None})
    # `caller` sees the parent, so it either owns it already or sees everything
    return create(ctx, dispatcher, JobRequest.model_validate(request.model_dump()), replace(caller, owner=parent.owner))


def find_job(ctx: Context, job_id: str, caller: Caller = OPEN) -> jobstore.JobRow:
    """The job, or LookupError (a malformed id is simply not found, and so is another key's job: the same message
    as for no job at all, so that a caller learns nothing of jobs it may not see)."""
    try:
        uuid.UUID(job_id)
    except ValueError:
        raise LookupError(f"no job {job_id}: not a job id") from None
    job = jobstore.load_job(ctx.pool, job_id)
    if job is None or not can_see(caller, job.owner):
        raise LookupError(f"no job {job_id}")
    return job


def job_view(job: jobstore.JobRow) -> JobView:
    """What every caller (HTTP, the Celery contract) is shown of a job."""
    req = job.state.request
    return JobView(job_id=job.id, status=job.status, step=job.step, question=job.question,
                   mode=req.mode.value if req.mode else None, batch=req.batch, cancel_requested=job.cancel_requested,
                   parent_job_id=job.parent_job_id, created_at=job.created_at, updated_at=job.updated_at,
                   error=job.error, result=job.result)


def cancel(ctx: Context, dispatcher: Dispatcher, job_id: str) -> str:
    """Cancel an unfinished job: it stops at its next step with status `cancelled`, keeping its answer so far,
    and its queued calls are revoked. Returns the job's status now (a finished job's status is returned
    unchanged: there is nothing to cancel). LookupError for an unknown job."""
    job = find_job(ctx, job_id)
    if job.status in FINAL_STATUSES:
        return job.status
    if jobstore.request_cancel(ctx.pool, job.id):
        def send() -> None:
            publish(ctx.redis_one_attempt, job.id, "agent_decision", "Cancel requested: stopping at the next step.",
                    {"action": "cancel"}, ctx.settings.event_stream_maxlen)
            dispatcher.cancel(job)

        _unless_a_server_is_down(send, f"job {job.id}'s cancel is saved but not sent",
                              "the job ends as cancelled at its next step")
    refreshed = jobstore.load_job(ctx.pool, job.id)
    return refreshed.status if refreshed else job.status
