"""The final result object, built from the job's state and its evidence counts."""
from __future__ import annotations

from agent.models.job import JobResult, JobState, ThoroughSearch
from agent.pipeline.inputs import EvidenceSummary
from agent.settings import AnswerMode


def build_result(job_id: str, state: JobState, evidence: EvidenceSummary, provider: str, status: str, now: float,
                 error: str | None = None, note: str | None = None, error_class: str | None = None) -> JobResult:
    answer = state.answer
    timing: dict[str, float] = {str(stage): seconds for stage, seconds in state.timing.stages.items()}
    if state.started_at:
        timing["total"] = round(now - state.started_at, 3)
    last = state.iterations[-1] if state.iterations else None
    return JobResult(
        job_id=job_id,
        question=state.request.question,
        status=status,
        answer=answer.text if answer else (note or error or ""),
        citations=answer.citations if answer else [],
        confidence=last.confidence if last else 0.0,
        chunks_used=evidence.total,
        iterations=len(state.iterations),
        timing=timing,
        sources={k: evidence.sources.get(k, 0) for k in ("earnings_transcripts", "10k", "news")},
        evaluations=state.iterations,
        tokens=dict(state.tokens),
        cost_usd=round(state.cost_usd, 6),
        cache_hits=state.cache_hits,
        context=state.context,
        provider=provider,
        mode=_effective_mode(state),
        termination_reason=state.termination_reason or note or error,
        routing_history=state.routing_history,
        reasoning_trace=state.reasoning_trace,
        news=state.news_status,
        problems=list(state.search_plan.problems) if state.search_plan else [],
        parent_job_id=state.request.parent_job_id,
        error=error,
        error_class=error_class if status == "failed" else None,
        partial=status == "failed" and answer is not None,
        suggestion=thorough_search(state) if status == "completed" else None,
    )


def _effective_mode(state: JobState) -> str | None:
    """The mode the job ran in: the caller's, else the planner's choice."""
    mode = state.request.mode or (state.plan.answer_mode if state.plan else None)
    return mode.value if mode else None


def thorough_search(state: JobState) -> ThoroughSearch | None:
    """A quicker mode that stopped below its threshold offers the deep_search request that would run next."""
    if state.plan is None or state.limits is None or not state.iterations:
        return None
    mode = state.request.mode or state.plan.answer_mode
    if mode == AnswerMode.deep_search or state.iterations[-1].confidence >= state.limits.confidence_threshold:
        return None
    request = state.request.model_copy(update={"mode": AnswerMode.deep_search, "max_iterations": None,
                                               "idempotency_key": None, "tickers": state.request.tickers or state.plan.tickers})
    return ThoroughSearch(request=request)


def rejected_result(job_id: str, state: JobState, provider: str, reason: str) -> JobResult:
    return JobResult(job_id=job_id, question=state.request.question, status="rejected", answer=reason, provider=provider,
                     termination_reason="question rejected by the planner", error=reason,
                     reasoning_trace=state.reasoning_trace)
