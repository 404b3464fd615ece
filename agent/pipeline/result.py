"""Stage 6: the final result object."""
from __future__ import annotations

import time
from collections import Counter

from agent.context import Context
from agent.pipeline import jobstore
from agent.pipeline.models import JobResult

_SOURCE_NAMES = {"transcript": "earnings_transcripts", "10k": "10k", "10k_table": "10k", "news": "news"}


def build_result(ctx: Context, job: jobstore.JobRow, provider: str, status: str,
                 error: str | None = None, note: str | None = None) -> JobResult:
    state = job.state
    evidence = jobstore.load_evidence(ctx.pool, job.id)
    answer = state.answer
    timing = {k: v for k, v in state.timing.items() if not k.startswith("_")}
    if state.started_at:
        timing["total"] = round(time.time() - state.started_at, 3)
    last = state.iterations[-1] if state.iterations else None
    sources = Counter(_SOURCE_NAMES[e.source_type] for e in evidence)
    problems = list(state.search_plan.problems) if state.search_plan else []
    return JobResult(
        job_id=job.id,
        question=state.request.question,
        status=status,
        answer=answer.text if answer else (note or error or ""),
        citations=answer.citations if answer else [],
        confidence=last.confidence if last else 0.0,
        chunks_used=len(evidence),
        iterations=len(state.iterations),
        timing=timing,
        sources={k: sources.get(k, 0) for k in ("earnings_transcripts", "10k", "news")},
        evaluations=state.iterations,
        tokens=dict(state.tokens),
        provider=provider,
        mode=state.plan.answer_mode.value if state.plan else None,
        termination_reason=state.termination_reason or note or error,
        routing_history=state.routing_history,
        reasoning_trace=state.reasoning_trace,
        news=state.news_status,
        problems=problems,
        parent_job_id=state.request.parent_job_id,
        error=error,
    )


def rejected_result(job: jobstore.JobRow, provider: str, reason: str) -> JobResult:
    return JobResult(job_id=job.id, question=job.question, status="rejected", answer=reason, provider=provider,
                     termination_reason="question rejected by the planner", error=reason,
                     reasoning_trace=job.state.reasoning_trace)
