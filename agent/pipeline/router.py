"""Routing: the initial strategy, and the retry through a different strategy after a low-confidence answer."""
from __future__ import annotations

from typing import get_args

from agent.models.job import JobState, RoutingDecision, Strategy
from agent.models.research import ResearchPlan, SearchPlan

# the strategies a request may name (JobRequest.strategy, besides `auto`: the router's own choice)
STRATEGIES: tuple[str, ...] = tuple(s for s in get_args(Strategy) if s != "auto")


def initial_strategy(plan: ResearchPlan, requested: str = "auto") -> str:
    """The strategy the request named; with `auto`, the one the plan's sources call for."""
    if requested != "auto":
        return requested
    if plan.uses_10k and plan.uses_transcripts:
        return "hybrid"
    return "10k_first" if plan.uses_10k else "transcripts_first"


# Chosen by the router (or re-routed to), a strategy searches the plan's sources and adds its own: (transcripts, 10-K)
_ADDS: dict[str, tuple[bool, bool]] = {"10k_first": (False, True), "hybrid": (True, True),
                                       "transcripts_first_fallback": (True, False)}
# Named by the request, it decides them (None: the 10-K as the plan asks); what it leaves out comes by a re-route
_OWN: dict[str, tuple[bool, bool | None]] = {"transcripts_first": (True, False), "10k_first": (False, True),
                                             "hybrid": (True, True), "broad_window": (True, None),
                                             "transcripts_first_fallback": (True, None)}


def sources(plan: ResearchPlan, strategy: str, requested: bool = False) -> tuple[bool, bool]:
    """Whether the search reads the earnings calls and the 10-K under `strategy` (news is the plan's own choice)."""
    if requested and strategy in _OWN:
        transcripts, tenk = _OWN[strategy]
        return transcripts, plan.uses_10k if tenk is None else tenk
    add_transcripts, add_tenk = _ADDS.get(strategy, (False, False))
    return plan.uses_transcripts or add_transcripts, plan.uses_10k or add_tenk


def record(state: JobState, strategy: str, confidence: float, reasoning: str) -> None:
    state.strategy = strategy
    state.routing_history.append(RoutingDecision(agent_name=strategy, confidence=round(confidence, 4), reasoning=reasoning))


_ALTERNATIVES = {
    "transcripts_first": ["10k_first", "broad_window"],
    "10k_first": ["transcripts_first_fallback", "broad_window"],
    "hybrid": ["broad_window"],
    "transcripts_first_fallback": ["broad_window"],
    "broad_window": [],
}


def alternatives(strategy: str) -> list[str]:
    """The strategies a low-confidence answer may be re-routed to, in order of preference."""
    return list(_ALTERNATIVES.get(strategy, []))


def widens(current: SearchPlan, candidate: SearchPlan) -> bool:
    """A re-route must search more than before: a source, a company or a period it did not cover."""
    def covered(plan: SearchPlan) -> set[tuple[str, str, str]]:
        return ({("transcript", tp.ticker, p) for tp in plan.transcripts for p in tp.periods}
                | {("10k", tp.ticker, p) for tp in plan.tenk for p in tp.periods})
    before, after = covered(current), covered(candidate)
    return before <= after and after != before


def should_retry(state: JobState, confidence: float, below: float, max_retries: int) -> bool:
    return confidence < below and state.router_retries < max_retries
