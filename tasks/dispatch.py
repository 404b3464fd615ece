"""Sending work to Celery by task name and queue, as `workers.topology` defines them. It imports no task
module, so the API and the CLI can submit jobs without loading the workers' code."""
from __future__ import annotations

from celery import chain, chord
from celery.canvas import Signature

from agent.models.steps import CANCEL_STEP, TaskCall
from agent.persistence.jobstore import JobRow
from workers.app import app, context
from workers.topology import ADVANCE, CALL_TASKS, queue_for


def advance_signature(job_id: str, done_step: str, batch: bool) -> Signature:
    return app.signature(ADVANCE.name, args=(job_id, done_step), immutable=True, queue=queue_for(ADVANCE, batch))


def call_task_id(call: TaskCall, job_id: str, iteration: int, n: int) -> str:
    """Deterministic ids (job:iter:step:n): a redelivered coordinator re-sends the same tasks, and a cancel
    can revoke them by id."""
    suffix = f"{call.round}:{n}" if hasattr(call, "round") else str(n)
    return f"{job_id}:{iteration}:{call.task}:{suffix}"


def call_signature(call: TaskCall, job_id: str, iteration: int, n: int, batch: bool) -> Signature:
    spec = CALL_TASKS[call.task]
    return app.signature(spec.name, args=(job_id, iteration, call.model_dump(mode="json")), immutable=True,
                         task_id=call_task_id(call, job_id, iteration, n), queue=queue_for(spec, batch))


def fan_out(job_id: str, done_step: str, calls: list[TaskCall], iteration: int, batch: bool) -> None:
    """The calls as a chord whose body is the coordinator's next step."""
    body = advance_signature(job_id, done_step, batch)
    sigs = [call_signature(c, job_id, iteration, n, batch) for n, c in enumerate(calls)]
    if len(sigs) == 1 or not context().settings.fanout:
        chain(*sigs, body).apply_async()  # fan-out disabled: the same tasks, one after another
    else:
        chord(sigs)(body)


class CeleryDispatcher:
    """`agent.submission.Dispatcher` over Celery: a job starts with its first coordinator step."""

    def start(self, job_id: str, batch: bool) -> None:
        advance_signature(job_id, "start", batch).apply_async(task_id=f"{job_id}:0:start:0")

    def cancel(self, job: JobRow) -> None:
        state = job.state
        queued = [call_task_id(c, job.id, state.iteration, n) for n, c in enumerate(state.inflight)]
        if queued:
            app.control.revoke(queued)  # workers drop these when they receive them; running ones finish unheeded
        # the coordinator ends the job on a dedicated delivery, whatever step it is waiting on
        advance_signature(job.id, CANCEL_STEP, state.request.batch).apply_async(task_id=f"{job.id}:cancel")
