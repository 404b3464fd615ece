"""Sending work to Celery by task name and queue, as `workers.topology` defines them. It imports no task
module, so the API and the CLI can submit jobs without loading the workers' code.

Every id a job sends starts with the job id, so one job's tasks can be found in Flower (search for the id) and
revoked by id, and every id is deterministic, so a redelivered coordinator step or `resume_stalled` re-sends
the same ids:

| what                         | id                                   | example                             |
|------------------------------|--------------------------------------|-------------------------------------|
| first coordinator step       | `{job}:0:start:0`                    |                                     |
| a fan-out call               | `{job}:{output key}`                 | `J:1:search:3`, `J:1:tenk2:answer:ACME` |
| the chord body (`advance`)   | `{job}:{it}:advance:{stage}`         | `J:1:advance:search`, `J:1:advance:tenk2:retrieve` |
| the chord's header group     | `{job}:{it}:fanout:{stage}`          | `J:1:fanout:search`                 |
| a later wave's group         | `{job}:{it}:fanout:{stage}:{wave}`   | `J:1:fanout:extract:evaluate`       |
| the cancel delivery          | `{job}:cancel`                       |                                     |

A call's id is its output key, unique in the job because the outputs are stored under it. A 10-K stage runs
once per round in the same iteration, so its advance and group ids carry the round.
"""
from __future__ import annotations

import logging

from celery import chain, chord
from celery.canvas import Signature, _chain

from agent.models.steps import CANCEL_STEP, JobStep, StepKey, TaskCall, call_waves, wave_rank
from agent.persistence.jobstore import JobRow
from workers.app import app
from workers.pipelined_publish import one_publish_batch
from workers.process_context import context
from workers.topology import ADVANCE, CALL_TASKS, queue_for

log = logging.getLogger(__name__)


def start_task_id(job_id: str) -> str:
    return f"{job_id}:0:start:0"


def call_task_id(call: TaskCall, job_id: str, iteration: int) -> str:
    return f"{job_id}:{call.output_key(iteration)}"


def fan_out_key(done_step: str, calls: list[TaskCall]) -> tuple[int, str]:
    """(iteration, what the fan-out waits for): `search`, or `tenk2:retrieve` for a 10-K stage's round."""
    done = JobStep.parse(done_step)
    if done.stage in ("start", "done"):
        return done.iteration, str(done.stage)
    rounds = [r for c in calls if (r := getattr(c, "round", None)) is not None]
    key = StepKey(iteration=done.iteration, stage=done.stage, round=max(rounds) if rounds else None)
    return done.iteration, str(key).split(":", 1)[1]


def advance_task_id(job_id: str, done_step: str, calls: list[TaskCall]) -> str:
    iteration, what = fan_out_key(done_step, calls)
    return f"{job_id}:{iteration}:advance:{what}"


def group_id(job_id: str, done_step: str, calls: list[TaskCall]) -> str:
    iteration, what = fan_out_key(done_step, calls)
    return f"{job_id}:{iteration}:fanout:{what}"


def advance_signature(job_id: str, done_step: str, batch: bool, task_id: str | None = None) -> Signature:
    options = {"task_id": task_id} if task_id else {}
    return app.signature(ADVANCE.name, args=(job_id, done_step), immutable=True, queue=queue_for(ADVANCE, batch), **options)


def call_signature(call: TaskCall, job_id: str, iteration: int, batch: bool) -> Signature:
    spec = CALL_TASKS[call.task]
    return app.signature(spec.name, args=(job_id, iteration, call.model_dump(mode="json")), immutable=True,
                         task_id=call_task_id(call, job_id, iteration), queue=queue_for(spec, batch))


def fan_out_canvas(job_id: str, done_step: str, calls: list[TaskCall], iteration: int, batch: bool,
                   parallel: bool = True) -> Signature:
    """The calls as a chord whose body is the coordinator's next step (a chain when there is one call or
    fan-out is off). The answer round's waves (`call_waves`) nest: the extractions' chord has the compose as its body,
    chained to the evaluations' chord, whose body is the next step. Every id in it is fixed here, none left to
    Celery's random uuids."""
    body = advance_signature(job_id, done_step, batch, task_id=advance_task_id(job_id, done_step, calls))
    waves = call_waves(calls)
    sigs = [[[call_signature(c, job_id, iteration, batch) for c in links] for links in chains] for chains in waves]
    if not parallel:  # fan-out disabled: the same tasks, one after another
        return chain(*(s for chains in sigs for links in chains for s in links), body)
    step_rank = wave_rank(JobStep.parse(done_step).stage)
    for n in reversed(range(len(waves))):
        chains = sigs[n]
        if len(chains) == 1:
            body = chain(*chains[0], *(body.tasks if isinstance(body, _chain) else [body]))
            continue
        # the chord's own task_id becomes its header group's id. A fixed group id is safe to re-send: Celery's Redis
        # backend (>= 5.7) counts a chord part once per task id, so a re-sent header joins the parts the first send
        # already finished instead of firing the body early. A chain is one part, counted when its last task ends.
        # A later wave's group is named by its stage, so a re-send from that wave on (recovery) keeps its id.
        stage = waves[n][0][0].stage
        gid = group_id(job_id, done_step, calls) + (f":{stage.value}" if wave_rank(stage) > step_rank else "")
        body = chord([links[0] if len(links) == 1 else chain(*links) for links in chains], body, task_id=gid)
    return body


def fan_out(job_id: str, done_step: str, calls: list[TaskCall], iteration: int, batch: bool) -> None:
    """Send the calls. A chord's messages go to Redis in one pipeline (the first at once, workers/pipelined_publish.py); if that
    fails, the same messages are sent again one by one, each with Celery's publish retries. A message the failed batch
    did deliver then arrives twice under the same id, which adds nothing: outputs are keyed, and the backend counts a
    chord part once per task id (as when recovery re-sends a step)."""
    parallel = context().settings.fanout
    canvas = fan_out_canvas(job_id, done_step, calls, iteration, batch, parallel=parallel)
    if not isinstance(canvas, chord):
        canvas.apply_async()  # one message: nothing to batch
        return
    try:
        with one_publish_batch(app):
            canvas.apply_async()
    except Exception as exc:
        log.warning("job %s: the fan-out after %s sent in one batch failed (%s); sending it again message by message",
                    job_id, done_step, exc)
        fan_out_canvas(job_id, done_step, calls, iteration, batch, parallel=parallel).apply_async()


class CeleryDispatcher:
    """`agent.submission.Dispatcher` over Celery: a job starts with its first coordinator step."""

    def start(self, job_id: str, batch: bool) -> None:
        advance_signature(job_id, "start", batch, task_id=start_task_id(job_id)).apply_async()

    def cancel(self, job: JobRow) -> None:
        state = job.state
        queued = [call_task_id(c, job.id, state.iteration) for c in state.inflight]
        if queued:
            app.control.revoke(queued)  # workers drop these when they receive them; running ones finish unheeded
        # the coordinator ends the job on a dedicated delivery, whatever step it is waiting on
        advance_signature(job.id, CANCEL_STEP, state.request.batch, task_id=f"{job.id}:cancel").apply_async()


def consumed_queues(timeout_s: float) -> set[str]:
    """The queues at least one live worker consumes (Celery's broadcast inspect, waiting `timeout_s`)."""
    replies = app.control.inspect(timeout=timeout_s).active_queues() or {}
    return {q["name"] for queues in replies.values() for q in queues or []}
