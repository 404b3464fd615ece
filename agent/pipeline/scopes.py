"""Scopes: the unit of extraction and evaluation (a company-quarter, a company's 10-K, or the news)."""
from __future__ import annotations

from collections import defaultdict

from agent.models.corpus import Period
from agent.models.job import JobState
from agent.models.research import Evidence

MAX_EVAL_SCOPES = 8


def scope_key(source_type: str, ticker: str | None, fiscal_year: int | None, fiscal_quarter: int | None) -> str:
    if source_type == "news":
        return "news"
    if source_type in ("10k", "10k_table"):
        return f"{ticker}:10k"
    return f"{ticker}:{fiscal_year}_q{fiscal_quarter}"


def scope_of(ev: Evidence) -> str:
    return scope_key(ev.source_type, ev.ticker, ev.fiscal_year, ev.fiscal_quarter)


def group_by_scope(evidence: list[Evidence]) -> dict[str, list[Evidence]]:
    groups: dict[str, list[Evidence]] = defaultdict(list)
    for ev in evidence:
        groups[scope_of(ev)].append(ev)
    return dict(sorted(groups.items()))


def target_periods(state: JobState) -> dict[str, list[str]]:
    """ticker -> the period labels the search plan targets (transcripts)."""
    if state.search_plan is None:
        return {}
    return {tp.ticker: [Period.parse_key(p).label for p in tp.periods] for tp in state.search_plan.transcripts}


def evaluation_scopes(state: JobState, evidence_scopes: list[str]) -> list[str]:
    """One evaluation per company-period (merged afterwards), including targeted periods that found nothing;
    per company when that would be too many."""
    scopes = set(evidence_scopes)
    if state.search_plan:
        scopes |= {f"{tp.ticker}:{p}" for tp in state.search_plan.transcripts for p in tp.periods}
    if len(scopes) <= MAX_EVAL_SCOPES:
        return sorted(scopes) or ["all"]
    return sorted({s.split(":")[0] for s in scopes if s != "news"})
