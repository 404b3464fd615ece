"""What to change so that a failed or rejected job can succeed, read from its reason: the known tickers near an
unknown one (difflib over the registry), or the range of periods a company has when the one asked for is outside it.

The reasons are the ones the plan check (agent/work/planning.py), the offline planner (agent/providers/llm/extractive.py),
the search planner (agent/retrieval/periods.py via agent/pipeline/search_plan.py) and the submission check
(agent/submission.py) write; `suggest` is pure, and
`job_suggestion` reads the registry only for a reason that names an unknown ticker."""
from __future__ import annotations

import difflib
import re
from collections.abc import Collection

from agent.context import Context
from agent.db import reading
from agent.persistence.jobstore import JobRow
from agent.retrieval.companies import load_companies
from finagent.models import Suggestion

_LIST = r"(?P<names>[A-Z0-9][A-Z0-9.\-]*(?:, [A-Z0-9][A-Z0-9.\-]*)*)"
# "Unknown ticker ACMX, ACMY: ..." (the plan check), "unknown tickers ACMX, ACMY: ..." (the submission check),
# "ACMX is not a company finagent knows ..." (the offline planner), "ACMX is not a known ticker" (a plan's problems)
_UNKNOWN = [re.compile(r"(?i:\bunknown tickers?) " + _LIST + r"\s*:"),
            re.compile(r"(?:^|[;.:] )" + _LIST + r" (?:is|are) not (?:a company finagent knows|a known ticker)")]
# "Q4 2030 is not available for ACME (available: Q1 2023 to Q4 2024)", "FY2031 is not available for ..."
_OUT_OF_RANGE = re.compile(r"(?P<asked>[^;]+?) is not available for (?P<ticker>[A-Z0-9][A-Z0-9.\-]*) "
                           r"\(available: (?P<first>[^()]+?) to (?P<last>[^()]+?)\)")
CLOSE_MATCHES = 3
CUTOFF = 0.6  # difflib's default: three letters of four in order (APPL -> AAPL), not two (ZQXW -> nothing)
_FAILED = ("failed", "rejected")


def unknown_tickers(reason: str) -> list[str]:
    """The tickers `reason` says are unknown, in its order."""
    found = [name for pattern in _UNKNOWN for m in pattern.finditer(reason) for name in m["names"].split(", ")]
    return list(dict.fromkeys(found))


def near_tickers(unknown: str, known: Collection[str]) -> list[str]:
    """The known tickers closest to `unknown`, closest first (ties in alphabetical order)."""
    want = unknown.upper()
    scored = [(difflib.SequenceMatcher(None, want, t).ratio(), t) for t in known]
    return [t for score, t in sorted(scored, key=lambda x: (-x[0], x[1])) if score >= CUTOFF][:CLOSE_MATCHES]


def suggest(reason: str | None, known: Collection[str] = ()) -> Suggestion | None:
    """The suggestion for a job that failed or was rejected for `reason`, given the registry's tickers; None when
    the reason allows none (no close ticker, or a failure that is not about a ticker or a period)."""
    if not reason:
        return None
    messages: list[str] = []
    tickers: list[str] = []
    for name in unknown_tickers(reason):
        near = [t for t in near_tickers(name, known) if t not in tickers]
        if near:
            tickers += near
            messages.append(f"did you mean {' or '.join(near)}? ({name} is not a known ticker)")
    available: dict[str, str] = {}
    for m in _OUT_OF_RANGE.finditer(reason):
        ticker = m["ticker"]
        if ticker not in available:
            available[ticker] = f"{m['first']} to {m['last']}"
            messages.append(f"ask about {ticker} for a period from {m['first']} to {m['last']} "
                            f"({m['asked'].strip()} is outside it)")
    if not messages:
        return None
    return Suggestion(message="; ".join(messages), tickers=tickers, available=available)


def job_suggestion(ctx: Context, job: JobRow) -> Suggestion | None:
    """The suggestion for a failed or rejected job (None for any other)."""
    if job.status not in _FAILED or not job.error:
        return None
    known: set[str] = set()
    if unknown_tickers(job.error):
        with reading(ctx.pool) as conn:
            known = {c.ticker for c in load_companies(conn)}
    return suggest(job.error, known)
