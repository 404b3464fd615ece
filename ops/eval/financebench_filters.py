"""The search scope the product's planner gives a FinanceBench question: its companies and their fiscal periods,
from the question text alone (never the gold document name, company or evidence)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent.context import Context
from agent.models.corpus import Period, SearchFilters
from agent.models.job import JobRequest, JobState
from agent.providers.llm.extractive_rules import asks_outlook
from agent.retrieval.availability import available_periods
from agent.retrieval.periods import resolve
from agent.work.planning import run_planner

Scope = Literal["company_period", "company", "none"]


class CompanyScope(BaseModel):
    ticker: str
    periods: list[Period] = Field(default_factory=list)  # empty: every filing of the company

    @property
    def filters(self) -> SearchFilters:
        return SearchFilters(tickers=[self.ticker], periods=self.periods)


class PlannerFilter(BaseModel):
    """What the planner read from the question, and the filing scope it maps to."""

    tickers: list[str] = Field(default_factory=list)
    time_refs: list[str] = Field(default_factory=list)
    scopes: list[CompanyScope] = Field(default_factory=list)  # empty: no filter, the whole store
    problems: list[str] = Field(default_factory=list)
    invalid_reason: str | None = None

    @property
    def kind(self) -> Scope:
        if not self.scopes:
            return "none"
        return "company_period" if any(s.periods for s in self.scopes) else "company"

    def covers(self, ticker: str, period: Period) -> bool:
        return any(s.ticker == ticker and (not s.periods or period in s.periods) for s in self.scopes)


def planner_filter(ctx: Context, question: str) -> PlannerFilter:
    """Run the configured planner (agent/work/planning.py) on the question text and resolve its time references
    against each named company's filings. A company whose periods resolve to nothing is searched whole; an invalid
    plan or one naming no company gives no filter."""
    plan, _usage, _problems = run_planner(ctx, ctx.llm, JobState(request=JobRequest(question=question)))
    out = PlannerFilter(tickers=plan.tickers, time_refs=plan.time_refs, invalid_reason=plan.invalid_reason)
    if not plan.is_valid:
        return out
    for ticker in plan.tickers:
        avail = available_periods(ctx.pool, ticker, "filing", ctx.redis, ctx.settings.quarter_cache_ttl_s)
        if not avail:
            out.problems.append(f"no filings are ingested for {ticker}")
            continue
        res = resolve(plan.time_refs, avail, ticker, default_latest=len(avail))
        out.problems += res.problems
        periods = list(res.periods)
        if periods and asks_outlook(question):  # a year's outlook is given in the filings of the year before it
            years = {p.fiscal_year - 1 for p in periods}
            periods += [p for p in avail if p.fiscal_year in years and p not in periods]
        else:
            periods = later_year_covers(periods)
        out.scopes.append(CompanyScope(ticker=ticker, periods=periods))
    return out


def later_year_covers(periods: list[Period]) -> list[Period]:
    """A comparison of two consecutive fiscal years is reported in the later year's annual filing, which gives the
    year before as its comparative: search that filing, not the earlier year's too (whose own comparative is
    another year still). Anything else is left as it is."""
    years = sorted({p.fiscal_year for p in periods})
    annual = {p.fiscal_year for p in periods if not p.fiscal_quarter}
    if len(years) == 2 and years[1] - years[0] == 1 and years[1] in annual:
        return [p for p in periods if p.fiscal_year == years[1]]
    return periods
