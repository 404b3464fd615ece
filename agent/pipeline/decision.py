"""The iteration decision: merge per-scope evaluations, and decide whether to iterate (every termination condition)."""
from __future__ import annotations

from pydantic import BaseModel, Field

from agent.models.job import JobState
from agent.models.research import Evaluation
from agent.pipeline.budget import out_of_time


def merge_evaluations(parts: list[Evaluation]) -> Evaluation:
    if len(parts) == 1:
        return parts[0].model_copy(update={"scope": "all"})

    def mean(attr: str) -> int:
        return round(sum(getattr(p, attr) for p in parts) / len(parts))

    def union(attr: str, cap: int = 8) -> list[str]:
        return list(dict.fromkeys(x for p in parts for x in getattr(p, attr)))[:cap]

    news_queries = [p.news_query for p in parts if p.news_query]
    return Evaluation(
        completeness_score=mean("completeness_score"),
        specificity_score=mean("specificity_score"),
        accuracy_score=mean("accuracy_score"),
        clarity_score=mean("clarity_score"),
        issues=union("issues"),
        missing_info=union("missing_info"),
        suggestions=union("suggestions"),
        is_sufficient=all(p.is_sufficient for p in parts),
        followup_keywords=union("followup_keywords", 4),
        needs_transcript_search=any(p.needs_transcript_search for p in parts),
        needs_news_search=any(p.needs_news_search for p in parts),
        news_query=news_queries[0] if news_queries else None,
        scope="all",
    )


class Decision(BaseModel):
    will_iterate: bool
    reason: str
    keywords: list[str] = Field(default_factory=list)
    news_query: str | None = None


def decide(state: JobState, evaluation: Evaluation, now: float, dynamic_termination: bool = True) -> Decision:
    limits = state.limits
    assert limits is not None, "decide() runs after planning has set the limits"
    confidence = evaluation.overall_confidence
    threshold = limits.confidence_threshold
    if limits.min_confidence is not None:
        threshold = max(threshold, limits.min_confidence)  # a request's min_confidence raises the bar
    previous = {k for rec in state.iterations for k in rec.keywords}
    keywords = [k for k in evaluation.followup_keywords if k not in previous]
    news = evaluation.news_query if evaluation.needs_news_search else None
    if dynamic_termination and confidence >= threshold:
        return Decision(will_iterate=False, reason=f"confidence {confidence:.0%} >= threshold {threshold:.0%}")
    if state.iteration >= limits.max_iterations:
        return Decision(will_iterate=False, reason=f"max iterations ({limits.max_iterations}) reached")
    total = sum(state.phase_iterations.values())
    if total >= limits.max_iterations_effective:
        return Decision(will_iterate=False, reason=f"max_iterations_effective ({limits.max_iterations_effective}) reached")
    refinement_limit = limits.phase_limits.get("refinement")
    if refinement_limit is not None and state.phase_iterations.get("refinement", 0) >= refinement_limit:
        return Decision(will_iterate=False, reason=f"refinement phase limit ({refinement_limit}) reached")
    if out_of_time(state, now):
        return Decision(will_iterate=False, reason=f"max_duration_seconds ({limits.max_duration_seconds}) ran out")
    if evaluation.is_sufficient and limits.min_confidence is None:
        return Decision(will_iterate=False, reason="evaluator judged the answer sufficient")
    if not keywords and not news:
        return Decision(will_iterate=False, reason="no new follow-up keyword phrases")
    return Decision(will_iterate=True, reason=f"confidence {confidence:.0%} < threshold {threshold:.0%}",
                    keywords=keywords, news_query=news)
