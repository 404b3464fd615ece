"""Routing: the initial strategy, and the retry through a different strategy after a low-confidence answer."""
from __future__ import annotations

from agent.models.job import JobState, RoutingDecision
from agent.models.research import ResearchPlan

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


def retry_strategy(state: JobState, has_10k: bool) -> str | None:
    """The alternative to try after a low-confidence answer, or None when none is left."""
    tried = {r.agent_name for r in state.routing_history}
    order = {
        "transcripts_first": ["10k_first", "broad_window"],
        "10k_first": ["transcripts_first_fallback", "broad_window"],
        "hybrid": ["broad_window"],
        "transcripts_first_fallback": ["broad_window"],
        "broad_window": [],
    }[state.strategy]
    for candidate in order:
        if candidate in tried or (candidate == "10k_first" and not has_10k):
            continue
        return candidate
    return None


def should_retry(state: JobState, confidence: float, below: float, max_retries: int) -> bool:
    return confidence < below and state.router_retries < max_retries
