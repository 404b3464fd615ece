"""The service contract over Celery: stable, versioned task names on Celery's default queue, so a service
with only `celery` and the broker URL can submit a job, follow it and read its result without our code.

    app = Celery(broker=URL, backend=URL)
    job_id = app.send_task("finagent.v1.submit_research", kwargs={"question": "..."}).get(timeout=30)
    app.send_task("finagent.v1.get_job", args=[job_id]).get(timeout=30)   # {"status": ..., "result": {...}}

Arguments and return values are plain JSON. A bad request raises ValueError with a readable message.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agent import submission
from agent.infra.events import replay
from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable
from agent.models.job import JobRequest
from tasks.dispatch import CeleryDispatcher
from workers.app import app
from workers.process_context import context
from workers.topology import CANCEL_JOB, GET_JOB, JOB_EVENTS, SUBMIT_RESEARCH


def _readable(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())


# a submission that meets Postgres down is tried again, the caller's `.get()` waiting on the same task id: each try
# waits up to 30 s for a connection, so about 3 minutes of outage in all before the caller sees the error
SUBMIT_RETRIES, SUBMIT_RETRY_S = 5, 5.0


@app.task(name=SUBMIT_RESEARCH.name, acks_late=True, bind=True, max_retries=SUBMIT_RETRIES)
def submit_research(self, question: str, **fields: Any) -> str:
    """Create the job (any JobRequest field by keyword; `idempotency_key` makes a retry safe) and return its id."""
    try:
        request = JobRequest(question=question, **fields)
    except ValidationError as exc:
        raise ValueError(f"invalid research request: {_readable(exc)}") from None
    try:
        return submission.create(context(), CeleryDispatcher(), request)[0]
    except submission.IdempotencyConflict as exc:
        raise ValueError(str(exc)) from None
    except UNAVAILABLE_TYPES as exc:
        if unavailable(exc) is None:
            raise
        # nothing was saved: a saved job's submission does not fail on an outage (agent/submission.py)
        raise self.retry(exc=exc, countdown=SUBMIT_RETRY_S) from None


@app.task(name=GET_JOB.name)
def get_job(job_id: str) -> dict[str, Any]:
    """The job as the HTTP API shows it (`finagent.models.JobView`): its status and, once it has ended, its result."""
    try:
        job = submission.find_job(context(), job_id)
    except LookupError as exc:
        raise ValueError(str(exc)) from None
    return submission.job_view(job).model_dump(mode="json")


@app.task(name=JOB_EVENTS.name)
def job_events(job_id: str, after: str = "0") -> list[dict[str, Any]]:
    """The job's progress events after the event id `after` ('0': from the start); each has an `id` to resume from."""
    ctx = context()
    return [ev.model_dump(mode="json") for ev in replay(ctx.redis, job_id, after)]


@app.task(name=CANCEL_JOB.name)
def cancel_job(job_id: str) -> str:
    """Cancel the job; it ends at its next step with status `cancelled`. Returns its status now."""
    try:
        return submission.cancel(context(), CeleryDispatcher(), job_id)
    except LookupError as exc:
        raise ValueError(str(exc)) from None
