"""The coordinator (queue `coordinator`): one state-machine step per delivery, then dispatch the next
fan-out as a chord whose body is the next `advance`. It never waits on another task."""
from __future__ import annotations

import logging

from celery import chain, chord

from agent.pipeline import flow, jobstore
from agent.pipeline.outcome import StepOutcome, TaskCall
from agent.pipeline.events import publish, publish_once, published_marker
from agent.pipeline.models import JobRequest, JobState, Outbox
from workers.app import app, context
from workers.queues import queue_for

log = logging.getLogger(__name__)


def _signature(call: TaskCall, job_id: str, iteration: int, n: int, batch: bool):
    from tasks import llm, news, search, tenk

    a = call.args
    sig, queue = {
        "plan": (lambda: llm.plan.si(job_id), "llm"),
        "search": (lambda: search.search_quarter.si(job_id, iteration, a["n"], a["spec"]), "search"),
        "extract": (lambda: llm.extract.si(job_id, iteration, a["scope"]), "llm"),
        "compose": (lambda: llm.compose.si(job_id, iteration), "llm"),
        "evaluate": (lambda: llm.evaluate.si(job_id, iteration, a["scope"]), "llm"),
        "news": (lambda: news.news_search.si(job_id, iteration, a["query"]), "llm"),
        "tenk_plan": (lambda: tenk.tenk_plan.si(job_id, iteration, a["round"], a["ticker"], a["fiscal_year"], a["missing_info"]), "llm"),
        "tenk_retrieve": (lambda: tenk.tenk_retrieve.si(job_id, iteration, a["round"], a["slot"], a["assignments"]), "search"),
        "tenk_answer": (lambda: tenk.tenk_answer.si(job_id, iteration, a["round"], a["ticker"]), "llm"),
        "tenk_evaluate": (lambda: tenk.tenk_evaluate.si(job_id, iteration, a["round"], a["ticker"]), "llm"),
    }[call.task]
    # deterministic ids (job:iter:step:n): a redelivered coordinator re-sends the same tasks
    suffix = f"{a['round']}:{n}" if "round" in a else str(n)
    return sig().set(task_id=f"{job_id}:{iteration}:{call.task}:{suffix}", queue=queue_for(queue, batch))


def dispatch(job_id: str, outcome: StepOutcome, iteration: int, batch: bool) -> None:
    body = advance.si(job_id, outcome.step).set(queue=queue_for("coordinator", batch))
    sigs = [_signature(c, job_id, iteration, n, batch) for n, c in enumerate(outcome.calls)]
    if len(sigs) == 1 or not context().settings.fanout:
        chain(*sigs, body).apply_async()  # fan-out disabled: the same tasks, one after another
    else:
        chord(sigs)(body)


@app.task(name="tasks.coordinator.advance", bind=True, acks_late=True, max_retries=5,
          autoretry_for=(ConnectionError, OSError), retry_backoff=True, retry_jitter=True)
def advance(self, job_id: str, done_step: str = "start") -> str:
    ctx = context()
    with ctx.pool.connection() as conn, conn.transaction():
        job = jobstore.lock_job(conn, job_id)
        if job is None:
            return "stale"
        previous = job.state.outbox
        if job.status in ("completed", "failed", "rejected") or job.step != done_step:
            flush_events(job_id, previous)  # a redelivery after a crash between commit and publish
            return "stale"  # a duplicate delivery, or a step some other delivery already took
        try:
            outcome = flow.step(ctx, job, ctx.llm.name)
        except Exception as exc:  # a bug or bad data: fail the job with a readable reason, never leave it hanging
            log.exception("job %s failed at %s", job_id, done_step)
            from agent.pipeline.result import build_result

            reason = f"internal error at step {done_step}: {type(exc).__name__}: {exc}"
            outcome = StepOutcome(status="failed", step="done", result=build_result(ctx, job, ctx.llm.name, "failed", error=reason),
                                       events=[("error", reason, {"step": done_step}), ("job_status", "failed", {"status": "failed"})])
        job.state.inflight = [c.model_dump() for c in outcome.calls]
        # the step's events are committed with the step (outbox) and published after the commit, exactly once
        job.state.outbox = Outbox(seq=previous.seq + 1, events=outcome.events)
        jobstore.save_job(conn, job, outcome.status, outcome.step, outcome.result,
                          error=outcome.result.error if outcome.result and outcome.status != "completed" else None)
    # dispatch only after commit, so the next tasks read the state this step wrote; a crash right here is
    # repaired by resume_stalled, which publishes the outbox and re-sends the in-flight calls under the same task ids
    flush_events(job_id, previous)
    if outcome.calls:
        dispatch(job_id, outcome, job.state.iteration, job.state.request.batch)
    flush_events(job_id, job.state.outbox)
    return outcome.step


def flush_events(job_id: str, outbox: Outbox) -> None:
    ctx = context()
    publish_once(ctx.redis, job_id, outbox.seq, outbox.events, ctx.settings.event_stream_maxlen)


def create(request: JobRequest) -> tuple[str, bool]:
    """Persist the job before anything runs; the same idempotency key returns the same job."""
    ctx = context()
    job_id, created = jobstore.create_job(ctx.pool, JobState(request=request))
    if created:
        publish(ctx.redis, job_id, "job_status", "queued", {"status": "queued"})
        advance.apply_async((job_id, "start"), task_id=f"{job_id}:0:start:0", queue=queue_for("coordinator", request.batch))
    return job_id, created


def rerun_with_feedback(parent_id: str, feedback: str) -> tuple[str, bool]:
    """Seed 003: a finished job re-run with feedback becomes a new job linked to it; its plan sees the feedback."""
    parent = jobstore.load_job(context().pool, parent_id)
    if parent is None:
        raise LookupError(f"no job {parent_id}")
    if parent.status not in ("completed", "failed", "rejected"):
        raise ValueError(f"job {parent_id} is still {parent.status}; feedback applies to finished jobs")
    request = parent.state.request.model_copy(update={"feedback": feedback, "parent_job_id": parent.id, "idempotency_key": None})
    return create(JobRequest.model_validate(request.model_dump()))


@app.task(name="tasks.coordinator.submit_research", acks_late=True)
def submit_research(question: str, mode: str | None = None, tickers: list[str] | None = None,
                    max_iterations: int | None = None, idempotency_key: str | None = None, **options) -> str:
    """Public entry point for other services: returns the job id at once; follow the job's events."""
    return create(JobRequest(question=question, mode=mode, tickers=tickers, max_iterations=max_iterations,
                             idempotency_key=idempotency_key, **options))[0]


@app.task(name="tasks.coordinator.resume_stalled")
def resume_stalled(stalled_after_s: int = 900) -> list[str]:
    """Beat task: re-send the in-flight calls of running jobs that have not moved for a while, and publish
    any step events a crashed coordinator committed but did not get to publish."""
    ctx = context()
    resumed = []
    finished = jobstore.recent_final_outboxes(ctx.pool, within_s=3600)
    with ctx.redis.pipeline(transaction=False) as pipe:  # one round trip for every marker
        for job_id, outbox in finished:
            pipe.exists(published_marker(job_id, outbox.seq))
        published = pipe.execute()
    for (job_id, outbox), done in zip(finished, published):
        if not done:
            flush_events(job_id, outbox)  # a final step's events lost to a crash
    for row in jobstore.stalled_jobs(ctx.pool, stalled_after_s):
        job = jobstore.load_job(ctx.pool, row["id"])
        flush_events(job.id, job.state.outbox)
        calls = [TaskCall.model_validate(c) for c in job.state.inflight]
        if job.step == "start":
            advance.apply_async((job.id, "start"), task_id=f"{job.id}:0:start:0")
        elif calls:
            dispatch(job.id, StepOutcome(step=job.step, calls=calls), job.state.iteration, job.state.request.batch)
        resumed.append(job.id)
        jobstore.touch(ctx.pool, job.id)
    return resumed
