"""Routing: the initial strategy, and the retry through a different strategy after a low-confidence answer."""
from __future__ import annotations

from agent.models.job import JobState, RoutingDecision
from agent.models.research import ResearchPlan, SearchPlan

STRATEGIES = ("transcripts_first", "10k_first", "hybrid", "broad_window", "transcripts_first_fallback")


def initial_strategy(plan: ResearchPlan) -> str:
    tenk = plan.needs_10k or "10k" in plan.data_sources
    transcripts = "earnings_transcripts" in plan.data_sources or "hybrid" in plan.data_sources
    if tenk and transcripts:
        return "hybrid"
    return "10k_first" if tenk else "transcripts_first"


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
