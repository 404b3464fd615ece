"""Submitting jobs, as domain operations: persist the job, announce it, and hand it to a dispatcher.

The dispatcher is the one thing that knows how a job gets run (the Celery implementation is
`tasks.dispatch.CeleryDispatcher`), so the API and the CLI submit without importing a task module.
"""
from __future__ import annotations

from typing import Protocol

from agent.context import Context
from agent.infra.events import publish
from agent.models.job import FINAL_STATUSES, JobRequest, JobState
from agent.persistence import jobstore


class Dispatcher(Protocol):
    def start(self, job_id: str, batch: bool) -> None:
        """Queue the job's first coordinator step (idempotent for a given job id)."""
        ...


def create(ctx: Context, dispatcher: Dispatcher, request: JobRequest) -> tuple[str, bool]:
    """Persist the job before anything runs; the same idempotency key returns the same job (created=False)."""
    job_id, created = jobstore.create_job(ctx.pool, JobState(request=request))
    if created:
        publish(ctx.redis, job_id, "job_status", "queued", {"status": "queued"}, ctx.settings.event_stream_maxlen)
        dispatcher.start(job_id, request.batch)
    return job_id, created


def rerun_with_feedback(ctx: Context, dispatcher: Dispatcher, parent_id: str, feedback: str) -> tuple[str, bool]:
    """A finished job re-run with feedback becomes a new job linked to it; its plan sees the feedback."""
    parent = jobstore.load_job(ctx.pool, parent_id)
    if parent is None:
        raise LookupError(f"no job {parent_id}")
    if parent.status not in FINAL_STATUSES:
        raise ValueError(f"job {parent_id} is still {parent.status}; feedback applies to finished jobs")
    request = parent.state.request.model_copy(update={"feedback": feedback, "parent_job_id": parent.id, "idempotency_key": None})
    return create(ctx, dispatcher, JobRequest.model_validate(request.model_dump()))
