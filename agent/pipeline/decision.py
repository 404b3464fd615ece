"""The iteration decision: merge the round's evaluations into one, then decide what the next round is (a search, a
refinement, a re-route) or why the loop stops.

Confidence. Each scope (a company-period, a company's 10-K, the news) is evaluated on its own; when the answer spans
several periods or companies (`spans_several`), one more evaluation judges the composed answer as a whole (scope
`whole`: does it cover every company and period asked about, does a comparison state both sides in comparable terms,
is a change across periods right), in the same wave. `merge_evaluations` averages the per-scope scores, then weighs
the whole-answer scores as much as that mean: each score is (per-scope mean + whole) / 2, so the confidence computed
from them is the mean of the two grades. Its issues and missing information come first in the union (the per-scope
lists could fill it), its follow-up keywords join after the per-scope ones; the answer is sufficient only if every
evaluation says so. `grades_of` records both for the result (each scope's confidence and the whole answer's).

The order of the checks (the max-iterations check first, so nothing, a re-route included, passes it):
1. the iteration limit (`max_iterations_effective`), then the time budget;
2. confidence at or above the threshold (the mode's, raised by a request's min_confidence);
3. the evaluator judged the answer sufficient: stop, unless the request set min_confidence (then only the threshold
   ends the loop), the confidence is below `sufficient_floor` (a guard against a "sufficient" verdict on a nonsense
   answer), or the answer announces more ("let me also ...");
4. a search round when there is something new to search and the execution phase has room;
5. below the router's bar, a re-route through another strategy that widens the search (planning phase,
   execution phase and retries permitting), searching for what the evaluation found missing;
6. a refinement round (rework the answer from the evidence gathered) when the refinement phase has room -- unless a
   refinement cannot change the answer: the provider cannot rework an answer from feedback (the extractive one), or
   the last refinement round returned the same answer; then stop, saying so (`refine_blocked`);
7. otherwise stop, saying why.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from agent.models.job import JobState
from agent.models.research import Evaluation
from agent.pipeline import router
from agent.pipeline.budget import out_of_time
from agent.settings import Settings
from finagent.models.job_result import Grades

Action = Literal["stop", "search", "refine", "reroute"]

# an answer that announces more work: "let me also check ...", "I'll also ...", "additionally, I will ..."
_CONTINUATION = re.compile(
    r"\blet me (?:also |now |next )?(?:look|check|search|show|add|dig|review|find|pull|expand|break|compare|examine)\b"
    r"|\bi(?:'|’| wi)ll (?:also|next|now) \w+|\badditionally,? i(?:'|’| wi)ll\b|\bnext,? i(?:'|’| wi)ll\b",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^(?:the|a|an|no|missing|lacks?|needs?|what|which|how|why|whether|information on|data on|details on)\s+",
                      re.IGNORECASE)


def announces_more(text: str) -> bool:
    return bool(_CONTINUATION.search(text))


def missing_phrases(evaluation: Evaluation, limit: int = 4) -> list[str]:
    """The evaluation's missing information as declarative keyword phrases (no question words)."""
    phrases = []
    for item in evaluation.missing_info:
        words = re.sub(r"[^\w\s%$.-]", " ", item).strip()
        while (stripped := _LEADING.sub("", words)) != words:
            words = stripped
        words = " ".join(words.split()[:8]).strip(" .").lower()
        if words and words not in phrases:
            phrases.append(words)
    return phrases[:limit]


def spans_several(state: JobState, evidence_scopes: list[str]) -> bool:
    """Whether the answer spans several periods or companies, so that only the whole of it can show a comparison or
    a change across them: the plan names several companies, or the evidence and the targeted periods hold more
    than one company-period or 10-K scope."""
    if state.plan is not None and len(state.plan.tickers) > 1:
        return True
    scopes = {s for s in evidence_scopes if s != "news"}
    if state.search_plan is not None:
        scopes |= {f"{tp.ticker}:{p}" for tp in state.search_plan.transcripts for p in tp.periods}
        scopes |= {f"{tp.ticker}:10k" for tp in state.search_plan.tenk if tp.periods}
    return len(scopes) > 1


def merge_evaluations(parts: list[Evaluation], whole: Evaluation | None = None) -> Evaluation:
    """One evaluation from the per-scope ones and, when there is one, the whole answer's (the module docstring says
    how they combine)."""
    if not parts and whole is None:
        raise ValueError("nothing to merge")
    if whole is not None and not parts:
        return whole.model_copy(update={"scope": "all"})
    if whole is None and len(parts) == 1:
        return parts[0].model_copy(update={"scope": "all"})
    judged = parts + ([whole] if whole is not None else [])

    def score(attr: str) -> int:
        mean = sum(getattr(p, attr) for p in parts) / len(parts)
        return round(mean if whole is None else (mean + getattr(whole, attr)) / 2)

    def union(attr: str, cap: int = 8, whole_first: bool = True) -> list[str]:
        order = [whole, *parts] if whole_first else [*parts, whole]
        return list(dict.fromkeys(x for p in order if p is not None for x in getattr(p, attr)))[:cap]

    news_queries = [p.news_query for p in judged if p.news_query]
    return Evaluation(
        completeness_score=score("completeness_score"),
        specificity_score=score("specificity_score"),
        accuracy_score=score("accuracy_score"),
        clarity_score=score("clarity_score"),
        issues=union("issues"),
        missing_info=union("missing_info"),
        suggestions=union("suggestions"),
        is_sufficient=all(p.is_sufficient for p in judged),
        followup_keywords=union("followup_keywords", 4, whole_first=False),
        needs_transcript_search=any(p.needs_transcript_search for p in judged),
        needs_news_search=any(p.needs_news_search for p in judged),
        news_query=news_queries[0] if news_queries else None,
        scope="all",
    )


def grades_of(parts: dict[str, Evaluation], whole: Evaluation | None = None) -> Grades:
    """What the result shows of an iteration's evaluations: each scope's confidence and the whole answer's."""
    return Grades(per_scope={scope: ev.overall_confidence for scope, ev in parts.items()},
                  whole_answer=whole.overall_confidence if whole is not None else None)


class Decision(BaseModel):
    action: Action
    reason: str
    keywords: list[str] = Field(default_factory=list)
    news_query: str | None = None

    @property
    def will_iterate(self) -> bool:
        return self.action != "stop"


def decide(state: JobState, evaluation: Evaluation, now: float, settings: Settings, reroute: str | None = None,
           refine_blocked: str | None = None) -> Decision:
    """What follows this evaluation. `reroute` is the strategy a re-route would take (None: none is left);
    `refine_blocked` says why a refinement round could not change the answer (None: it could)."""
    limits = state.limits
    assert limits is not None, "decide() runs after planning has set the limits"
    confidence = evaluation.overall_confidence
    threshold = max(limits.confidence_threshold, limits.min_confidence or 0.0)
    done, allowed = state.phase_iterations, limits.phase_limits
    if state.iteration >= limits.max_iterations_effective:
        return Decision(action="stop", reason=f"max iterations ({limits.max_iterations_effective}) reached")
    if out_of_time(state, now):
        return Decision(action="stop", reason=f"max_duration_seconds ({limits.max_duration_seconds}) ran out")
    if settings.enable_dynamic_termination and confidence >= threshold:
        return Decision(action="stop", reason=f"confidence {confidence:.0%} >= threshold {threshold:.0%}")
    continuing = state.answer is not None and announces_more(state.answer.text)
    sufficient = (evaluation.is_sufficient and limits.min_confidence is None
                  and confidence >= settings.sufficient_floor)
    if sufficient and not continuing:
        return Decision(action="stop", reason="evaluator judged the answer sufficient")

    searched = {k for rec in state.iterations for k in rec.keywords} | set(state.pending_keywords)
    keywords = [k for k in evaluation.followup_keywords if k not in searched] if evaluation.needs_transcript_search else []
    news = evaluation.news_query if evaluation.needs_news_search else None
    tenk_gaps = bool(state.search_plan and state.search_plan.tenk and evaluation.missing_info)
    execution_left = done["execution"] < allowed.get("execution", 0)
    refinement_left = done["refinement"] < allowed.get("refinement", 0)
    below = f"confidence {confidence:.0%} < threshold {threshold:.0%}"
    why = below + ("; the answer announces more" if continuing else "")
    if (keywords or news or tenk_gaps) and execution_left:
        return Decision(action="search", reason=why, keywords=keywords, news_query=news)
    if (reroute is not None and router.should_retry(state, confidence, settings.router_retry_below, settings.router_max_retries)
            and done["planning"] < allowed.get("planning", 1) and execution_left):
        return Decision(action="reroute", reason=f"confidence {confidence:.0%} < {settings.router_retry_below:.0%}: "
                                                 f"re-routing to {reroute}",
                        keywords=list(dict.fromkeys(keywords + missing_phrases(evaluation))))
    reworkable = evaluation.issues or evaluation.missing_info or keywords or news or tenk_gaps or continuing
    if reworkable and refinement_left:
        if refine_blocked:
            return Decision(action="stop", reason=f"{why}; refinement skipped: {refine_blocked}")
        return Decision(action="refine", reason=why + "; refining the answer from the evidence gathered")
    if sufficient:
        return Decision(action="stop", reason="evaluator judged the answer sufficient")
    if (keywords or news or tenk_gaps) and not execution_left and not refinement_left:
        return Decision(action="stop", reason=f"execution ({allowed.get('execution')}) and refinement "
                                              f"({allowed.get('refinement')}) phase limits reached")
    return Decision(action="stop", reason="no new follow-up keyword phrases")
