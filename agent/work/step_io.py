"""The coordinator's I/O around the pure state machine: lock the job row, load what the step reads,
run the step, and save the new state with its outbox in the same transaction."""
from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict

from pydantic import BaseModel

from agent.context import Context
from agent.db import one_transaction
from agent.models.job import FINAL_STATUSES, Outbox, StepEvent
from agent.models.steps import CANCEL_STEP, FailedOutput, JobStep, Stage, StepOutputs
from agent.persistence import jobstore
from agent.pipeline import machine
from agent.pipeline.inputs import EvidenceSummary, StepInput, StepOutcome
from agent.pipeline.result import build_result
from agent.pipeline.scopes import scope_key
from agent.providers.llm.roles import revises_answers
from agent.work.calls import load_partial_answer
from agent.work.planning import load_availability

log = logging.getLogger(__name__)
_SOURCE_NAMES = {"transcript": "earnings_transcripts", "10k": "10k", "10k_table": "10k", "news": "news"}


class Advanced(BaseModel):
    """What one coordinator delivery did: the outbox to publish first (the previous step's, in case a crash
    lost it) and, unless the delivery was stale, the step's outcome."""

    previous: Outbox
    outcome: StepOutcome | None = None
    iteration: int = 0
    batch: bool = False


def evidence_summary(ctx: Context, job_id: str, counts: list[dict] | None = None) -> EvidenceSummary:
    """The job's evidence by iteration, source and scope (from `jobstore.evidence_counts`, read here unless given)."""
    per_iteration: dict[int, int] = defaultdict(int)
    sources: Counter[str] = Counter()
    scopes = set()
    for r in jobstore.evidence_counts(ctx.pool, job_id) if counts is None else counts:
        per_iteration[r["iteration"]] += r["n"]
        sources[_SOURCE_NAMES[r["source_type"]]] += r["n"]
        scopes.add(scope_key(r["source_type"], r["ticker"], r["fiscal_year"], r["fiscal_quarter"]))
    return EvidenceSummary(per_iteration=dict(per_iteration), scopes=sorted(scopes), sources=dict(sources))


def outputs_prefix(step: str) -> str | None:
    """The step outputs the step after `step` reads: its iteration's (none after `start`; None for a step that is not
    a job step, such as the cancel wake-up)."""
    try:
        done = JobStep.parse(step)
    except ValueError:
        return None
    return None if done.stage == "start" else f"{done.iteration}:"


def load_input(ctx: Context, job: jobstore.JobRow, conn=None, output_rows: dict[str, dict] | None = None,
               evidence_counts: list[dict] | None = None) -> StepInput:
    """Everything the step after `job.step` reads: that iteration's outputs, evidence counts, availability.
    `output_rows` (the outputs under `outputs_prefix(job.step)`) and `evidence_counts`, when given, were read with the
    job's row lock; the rest is read here, the company names on `conn` (the lock's connection) when given."""
    done = JobStep.parse(job.step)
    outputs = StepOutputs()
    prefix = outputs_prefix(job.step)
    if prefix is not None:
        outputs = StepOutputs.from_rows(output_rows if output_rows is not None else jobstore.get_outputs(ctx.pool, job.id, prefix))
    plan = job.state.plan
    if plan is None and done.stage == Stage.plan:
        planned = outputs.one(0, Stage.plan)
        plan = getattr(planned, "plan", None)
    tickers = plan.tickers if plan is not None else []
    partial = None
    # the answer round (machine.Step._answer_round) composes before its step: a compose that failed in it leaves findings
    composed = outputs.of(done.iteration, Stage.compose).values() if done.stage in (Stage.extract, Stage.compose) else []
    if job.state.answer is None and any(isinstance(o, FailedOutput) for o in composed):
        partial = load_partial_answer(ctx, job.id, done.iteration)
    return StepInput(job_id=job.id, done=done, outputs=outputs, evidence=evidence_summary(ctx, job.id, evidence_counts),
                     availability=load_availability(ctx, tickers, conn), now=time.time(), provider=ctx.llm.name,
                     provider_revises=revises_answers(ctx.llm), cancel_requested=job.cancel_requested, partial_answer=partial)


def _failed(job: jobstore.JobRow, inp: StepInput, exc: Exception) -> StepOutcome:
    """A bug or bad data: fail the job with a readable reason, never leave it hanging."""
    reason = f"internal error at step {job.step}: {type(exc).__name__}: {exc}"
    result = build_result(job.id, job.state, inp.evidence, inp.provider, "failed", inp.now, error=reason, error_class="internal")
    return StepOutcome(state=job.state, status="failed", step=JobStep(stage="done"), result=result,
                       events=[StepEvent(type="error", message=reason, data={"step": job.step}),
                               StepEvent(type="job_status", message="failed", data={"status": "failed"})])


def advance_job(ctx: Context, job_id: str, done_step: str) -> Advanced | None:
    """Run the step after `done_step` under the job's row lock. None: the job does not exist.
    `CANCEL_STEP` runs the step a cancelled job is waiting on at once, ending it."""
    # the transaction's BEGIN goes out with the lock's queries, and the state's UPDATE with its COMMIT
    with one_transaction(ctx.pool) as conn:
        # the row lock, and what the step reads if the delivery is not stale, in one round trip
        locked = jobstore.lock_job_with_inputs(conn, job_id, outputs_prefix(done_step))
        if locked is None:
            return None
        job = locked.job
        previous = job.state.outbox
        waking_cancelled = done_step == CANCEL_STEP and job.cancel_requested
        if job.status in FINAL_STATUSES or (job.step != done_step and not waking_cancelled):
            return Advanced(previous=previous)  # a duplicate delivery, or a step another delivery already took
        # the outputs read with the lock are `done_step`'s: the job's own step, unless this is the cancel wake-up
        inp = load_input(ctx, job, conn, locked.outputs if job.step == done_step else None, locked.evidence_counts)
        try:
            outcome = machine.step(job.state, inp, ctx.settings)
        except Exception as exc:
            log.exception("job %s failed at %s", job_id, done_step)
            outcome = _failed(job, inp, exc)
        job.state = outcome.state
        job.state.inflight = list(outcome.calls)
        # the step's events are committed with the step (outbox) and published after the commit, exactly once
        job.state.outbox = Outbox(seq=previous.seq + 1, events=outcome.events)
        error = outcome.result.error if outcome.result and outcome.status != "completed" else None
        jobstore.save_job(conn, job, outcome.status, str(outcome.step), outcome.result, error=error)
    return Advanced(previous=previous, outcome=outcome, iteration=job.state.iteration, batch=job.state.request.batch)
