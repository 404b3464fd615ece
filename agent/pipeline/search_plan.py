"""The search planner: each company's own periods per data source, and the transcript search fan-out."""
from __future__ import annotations

import re

from agent.models.corpus import Period
from agent.models.research import ResearchPlan, SearchPlan, SearchSpec, TickerPeriods
from agent.pipeline.inputs import Availability
from agent.retrieval.periods import resolve


def plan_search(plan: ResearchPlan, availability: Availability, strategy: str = "transcripts_first",
                current: SearchPlan | None = None) -> SearchPlan:
    """Each company's own periods ('last 3 quarters' means that company's latest 3). A re-route keeps what the
    current plan covers; `broad_window` doubles each company's window (at least 4 quarters)."""
    sp = SearchPlan(queries=plan.search_queries, reasoning=plan.reasoning)
    refs = plan.time_refs
    use_transcripts = ("earnings_transcripts" in plan.data_sources or "hybrid" in plan.data_sources
                       or strategy == "transcripts_first_fallback")
    use_10k = plan.needs_10k or "10k" in plan.data_sources or strategy == "10k_first"
    for ticker in plan.tickers:
        filings_instead = False
        if use_transcripts:
            avail = availability.transcripts.get(ticker, [])
            if not avail and not use_10k and availability.tenk.get(ticker):
                filings_instead = True  # a company with filings and no calls is answered from its filings
                sp.problems.append(f"no earnings-call transcripts are ingested for {ticker}; searching its filings")
            elif not avail:
                sp.problems.append(f"no earnings-call transcripts are ingested for {ticker}")
            else:
                res = resolve(refs, avail, ticker, default_latest=1 if plan.answer_mode == "direct" else min(3, len(avail)))
                sp.problems += res.problems
                keys = [p.key for p in res.periods]
                before = _periods(current, ticker)
                if strategy == "broad_window":
                    width = max(4, 2 * len(before or keys))
                    keys = [p.key for p in sorted(set(avail))[-width:]]
                keys = sorted(set(keys) | set(before), key=lambda k: Period.parse_key(k))
                if keys:
                    sp.transcripts.append(TickerPeriods(ticker=ticker, periods=keys))
        if use_10k or filings_instead:
            years = availability.tenk.get(ticker, [])
            if not years:
                sp.problems.append(f"no 10-K filing is ingested for {ticker}")
            else:
                chosen = _tenk_years(refs, years)
                sp.tenk.append(TickerPeriods(ticker=ticker, periods=[p.key for p in chosen]))
    planned = {tp.ticker for tp in sp.tenk}
    sp.tenk += [tp for tp in (current.tenk if current else []) if tp.ticker not in planned]  # a re-route keeps the 10-K
    return sp


def _periods(plan: SearchPlan | None, ticker: str) -> list[str]:
    return [p for tp in (plan.transcripts if plan else []) if tp.ticker == ticker for p in tp.periods]


def _tenk_years(refs: list[str], years: list[Period]) -> list[Period]:
    wanted = {int(y) for ref in refs for y in re.findall(r"(?:19|20)\d{2}", ref)}
    hits = [p for p in years if p.fiscal_year in wanted]
    return hits or years[-1:]


def search_specs(plan: SearchPlan, queries: list[str]) -> list[SearchSpec]:
    """One search per keyword phrase x company x target quarter."""
    return [SearchSpec(ticker=tp.ticker, period=p, query=q) for q in queries for tp in plan.transcripts for p in tp.periods]
