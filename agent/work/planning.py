"""The reasoning planner call, and the period availability the search planner reads."""
from __future__ import annotations

from agent.context import Context
from agent.models.job import JobState
from agent.models.research import ResearchPlan, Usage
from agent.pipeline.budget import budget_note
from agent.pipeline.inputs import Availability
from agent.providers.llm.base import LLMProvider, PlanRequest
from agent.retrieval.availability import available_periods
from agent.retrieval.companies import load_companies


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


def load_availability(ctx: Context, tickers: list[str]) -> Availability:
    """Transcript quarters and 10-K years per company (cached in Redis for `quarter_cache_ttl_s`)."""
    ttl = ctx.settings.quarter_cache_ttl_s
    names: dict[str, str] = {}
    if tickers:
        with ctx.pool.connection() as conn:
            names = {c.ticker: c.name for c in load_companies(conn) if c.ticker in tickers}
    return Availability(
        names=names,
        transcripts={t: available_periods(ctx.pool, t, "transcript", ctx.redis, ttl) for t in tickers},
        tenk={t: available_periods(ctx.pool, t, "10k", ctx.redis, ttl) for t in tickers},
    )
