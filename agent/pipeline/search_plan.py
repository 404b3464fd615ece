"""The search planner: each company's own periods per data source, and the transcript search fan-out."""
from __future__ import annotations

import re

from agent.models.corpus import Period
from agent.models.research import ResearchPlan, SearchPlan, SearchSpec, TickerPeriods
from agent.pipeline import router
from agent.pipeline.inputs import Availability
from agent.retrieval.periods import resolve
from agent.text import content_words


def plan_search(plan: ResearchPlan, availability: Availability, strategy: str = "transcripts_first",
                current: SearchPlan | None = None, requested: bool = False) -> SearchPlan:
    """Each company's own periods ('last 3 quarters' means that company's latest 3), and every fiscal year the
    question names of its 10-K. The sources are the plan's and the strategy's (router.sources; `requested`: the
    request named the strategy). A re-route keeps what the current plan covers; `broad_window` doubles each company's
    window (at least 4 quarters)."""
    sp = SearchPlan(queries=plan.search_queries, reasoning=plan.reasoning)
    refs = plan.time_refs
    use_transcripts, use_10k = router.sources(plan, strategy, requested)
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
                sp.problems.append(f"no filing is ingested for {ticker}")
            else:
                chosen = _tenk_years(refs, years)
                sp.tenk.append(TickerPeriods(ticker=ticker, periods=[p.key for p in chosen]))
    # a re-route keeps the 10-K filings it read
    for kept in current.tenk if current else []:
        mine = next((tp for tp in sp.tenk if tp.ticker == kept.ticker), None)
        if mine is None:
            sp.tenk.append(kept)
        else:
            mine.periods = sorted(set(mine.periods) | set(kept.periods))
    return sp


def _periods(plan: SearchPlan | None, ticker: str) -> list[str]:
    return [p for tp in (plan.transcripts if plan else []) if tp.ticker == ticker for p in tp.periods]


_LAST_YEARS = re.compile(r"\b(?:last|past|previous|recent|trailing)\s+(\d{1,2}|two|three|four|five)\s+(?:fiscal\s+)?years\b", re.I)
_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5}


def _tenk_years(refs: list[str], years: list[Period]) -> list[Period]:
    """The filings the time references name: each fiscal year named ('FY2023', 'fiscal 2024', 'FY22'), the last N
    fiscal years; the latest filing when they name none the company has."""
    wanted: set[int] = set()
    for ref in refs:
        wanted |= {int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d{2})(?!\d)", ref)}
        wanted |= {2000 + int(y) for y in re.findall(r"\bFY\s*'?(\d{2})\b", ref, re.I)}
        if m := _LAST_YEARS.search(ref):
            n = int(m.group(1)) if m.group(1).isdigit() else _WORDS[m.group(1).lower()]
            wanted |= {p.fiscal_year for p in sorted(years)[-n:]}
    hits = [p for p in years if p.fiscal_year in wanted]
    return hits or years[-1:]


def default_queries(plan: ResearchPlan, question: str) -> list[str]:
    """Search phrases for a plan that has none: its topic and intent, and the question's own words (stop words and
    the companies' tickers left out)."""
    tickers = {t.lower() for t in plan.tickers}
    words = " ".join(w for w in content_words(question) if w not in tickers)
    phrases = [p.strip() for p in (plan.topic, plan.intent, words) if p.strip()]
    return list(dict.fromkeys(phrases)) or [question.strip()]


def search_specs(plan: SearchPlan, queries: list[str]) -> list[SearchSpec]:
    """One search per keyword phrase x company x target quarter."""
    return [SearchSpec(ticker=tp.ticker, period=p, query=q) for q in queries for tp in plan.transcripts for p in tp.periods]
