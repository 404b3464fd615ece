"""The iteration decision: merge per-scope evaluations, then decide what the next round is (a search, a
refinement, a re-route) or why the loop stops.

The order of the checks (the max-iterations check first, so nothing, a re-route included, passes it):
1. the iteration limit (`max_iterations_effective`), then the time budget;
2. confidence at or above the threshold (the mode's, raised by a request's min_confidence);
3. unless the evaluator judged the answer sufficient (at or above `min_confidence_threshold`, and with no
   min_confidence on the request) -- or the answer announces more ("let me also ...") --
   a search round when there is something new to search and the execution phase has room;
4. below the router's bar, a re-route through another strategy that widens the search (planning phase,
   execution phase and retries permitting), searching for what the evaluation found missing;
5. a refinement round (rework the answer from the evidence gathered) when the refinement phase has room;
6. otherwise stop, saying why.
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
    action: Action
    reason: str
    keywords: list[str] = Field(default_factory=list)
    news_query: str | None = None

    @property
    def will_iterate(self) -> bool:
        return self.action != "stop"


def decide(state: JobState, evaluation: Evaluation, now: float, settings: Settings, reroute: str | None = None) -> Decision:
    """What follows this evaluation. `reroute` is the strategy a re-route would take (None: none is left)."""
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

    searched = {k for rec in state.iterations for k in rec.keywords} | set(state.pending_keywords)
    keywords = [k for k in evaluation.followup_keywords if k not in searched] if evaluation.needs_transcript_search else []
    news = evaluation.news_query if evaluation.needs_news_search else None
    tenk_gaps = bool(state.search_plan and state.search_plan.tenk and evaluation.missing_info)
    continuing = state.answer is not None and announces_more(state.answer.text)
    sufficient = (evaluation.is_sufficient and limits.min_confidence is None
                  and confidence >= settings.min_confidence_threshold)
    execution_left = done["execution"] < allowed.get("execution", 0)
    refinement_left = done["refinement"] < allowed.get("refinement", 0)
    below = f"confidence {confidence:.0%} < threshold {threshold:.0%}"
    why = below + ("; the answer announces more" if continuing else "")
    if (not sufficient or continuing) and (keywords or news or tenk_gaps) and execution_left:
        return Decision(action="search", reason=why, keywords=keywords, news_query=news)
    if (reroute is not None and router.should_retry(state, confidence, settings.router_retry_below, settings.router_max_retries)
            and done["planning"] < allowed.get("planning", 1) and execution_left):
        return Decision(action="reroute", reason=f"confidence {confidence:.0%} < {settings.router_retry_below:.0%}: "
                                                 f"re-routing to {reroute}",
                        keywords=list(dict.fromkeys(keywords + missing_phrases(evaluation))))
    reworkable = evaluation.issues or evaluation.missing_info or keywords or news or tenk_gaps or continuing
    if (not sufficient or continuing) and reworkable and refinement_left:
        return Decision(action="refine", reason=why + "; refining the answer from the evidence gathered")
    if sufficient:
        return Decision(action="stop", reason="evaluator judged the answer sufficient")
    if (keywords or news or tenk_gaps) and not execution_left and not refinement_left:
        return Decision(action="stop", reason=f"execution ({allowed.get('execution')}) and refinement "
                                              f"({allowed.get('refinement')}) phase limits reached")
    return Decision(action="stop", reason="no new follow-up keyword phrases")
