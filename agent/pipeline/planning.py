"""Stage 2 (ReasoningPlanner) and stage 2.1 (SearchPlanner)."""
from __future__ import annotations

import re

from agent.context import Context
from agent.models import Period
from agent.pipeline.budget import budget_note
from agent.pipeline.models import JobState, ResearchPlan, SearchPlan, TickerPeriods
from agent.providers.llm.base import LLMProvider, PlanRequest, Usage
from agent.retrieval.availability import available_periods
from agent.retrieval.companies import load_companies
from agent.retrieval.periods import resolve


def run_planner(ctx: Context, llm: LLMProvider, state: JobState) -> tuple[ResearchPlan, Usage]:
    with ctx.pool.connection() as conn:
        companies = load_companies(conn)
    req = state.request
    plan, usage = llm.plan(PlanRequest(
        question=req.question, companies=companies, tickers_hint=req.tickers or [], feedback=req.feedback,
        budget_note=budget_note(state),
    ))
    known = {c.ticker for c in companies}
    unknown = [t for t in plan.tickers if t not in known]
    if plan.is_valid and unknown:
        names = ", ".join(unknown)
        plan = plan.model_copy(update={
            "is_valid": False,
            "invalid_reason": f"Unknown ticker {names}: no such company is known to finagent. "
                              f"Known companies include {', '.join(sorted(known)[:12])}.",
        })
    return plan, usage


def plan_search(ctx: Context, plan: ResearchPlan, strategy: str = "transcripts_first") -> SearchPlan:
    """Each company's own periods ('last 3 quarters' means that company's latest 3)."""
    sp = SearchPlan(queries=plan.search_queries, reasoning=plan.reasoning)
    refs = plan.time_refs
    if strategy == "broad_window":  # router retry: widen the time window to the last 4 quarters
        refs = ["last 4 quarters"]
    use_transcripts = "earnings_transcripts" in plan.data_sources or "hybrid" in plan.data_sources or strategy == "transcripts_first_fallback"
    use_10k = plan.needs_10k or "10k" in plan.data_sources or strategy == "10k_first"
    ttl = ctx.settings.quarter_cache_ttl_s
    for ticker in plan.tickers:
        if use_transcripts:
            avail = available_periods(ctx.pool, ticker, "transcript", ctx.redis, ttl)
            if not avail:
                sp.problems.append(f"no earnings-call transcripts are ingested for {ticker}")
            else:
                res = resolve(refs, avail, ticker, default_latest=1 if plan.answer_mode == "direct" else min(3, len(avail)))
                sp.problems += res.problems
                if res.periods:
                    sp.transcripts.append(TickerPeriods(ticker=ticker, periods=[p.key for p in res.periods]))
        if use_10k:
            years = available_periods(ctx.pool, ticker, "10k", ctx.redis, ttl)
            if not years:
                sp.problems.append(f"no 10-K filing is ingested for {ticker}")
            else:
                chosen = _tenk_years(refs, years)
                sp.tenk.append(TickerPeriods(ticker=ticker, periods=[p.key for p in chosen]))
    return sp


def _tenk_years(refs: list[str], years: list[Period]) -> list[Period]:
    wanted = {int(y) for ref in refs for y in re.findall(r"(?:19|20)\d{2}", ref)}
    hits = [p for p in years if p.fiscal_year in wanted]
    return hits or years[-1:]
