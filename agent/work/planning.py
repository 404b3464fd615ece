"""The reasoning planner call, and the period availability the search planner reads."""
from __future__ import annotations

from collections.abc import Callable

from agent.context import Context
from agent.db import reading
from agent.models.corpus import Company, Period
from agent.models.job import JobState
from agent.models.research import ResearchPlan, Usage
from agent.pipeline.budget import budget_note
from agent.pipeline.inputs import Availability
from agent.providers.llm.roles import LLMProvider, PlanRequest
from agent.retrieval.availability import names_and_periods
from agent.retrieval.companies import find_tickers, load_companies, match_company, no_company_named
from agent.retrieval.periods import resolve


def run_planner(ctx: Context, llm: LLMProvider, state: JobState) -> tuple[ResearchPlan, Usage, list[str]]:
    """The plan, with its parameters checked against what finagent has: on an unknown ticker or a period a
    company does not have, the planner is asked once to correct them. Returns the problems it was asked to fix."""
    with reading(ctx.pool) as conn:
        companies = load_companies(conn)
    req = state.request
    request = PlanRequest(question=req.question, companies=companies, tickers_hint=req.tickers or [], feedback=req.feedback,
                          budget_note=budget_note(state))
    plan, usage = llm.plan(request)
    return fix_parameters(llm, request, plan, usage, lambda tickers: load_availability(ctx, tickers))


def parameter_problems(plan: ResearchPlan, companies: list[Company], availability: Availability) -> list[str]:
    """What in the plan names something finagent does not have: a ticker, or a period of a company's calls."""
    known = {c.ticker for c in companies}
    problems = [f"{t} is not a known ticker (known: {', '.join(sorted(known)[:20])})" for t in plan.tickers if t not in known]
    if plan.uses_transcripts:
        for ticker in (t for t in plan.tickers if t in known):
            problems += resolve(plan.time_refs, availability.transcripts.get(ticker, []), ticker).problems
    return problems


def companies_from_question(plan: ResearchPlan, request: PlanRequest) -> tuple[ResearchPlan, list[str]]:
    """The plan's companies made ones finagent knows, from what it wrote and from the question, with no planner call:
    a "ticker" that is a registered company's name or alias (or holds its symbol) becomes its ticker; a plan left with
    no known company takes the question's (the caller's tickers, else a ticker or a registered name in the question).
    Unknown tickers it cannot place stay, for the planner to correct. Returns the plan and what was repaired."""
    if not plan.is_valid:
        return plan, []
    known = {c.ticker for c in request.companies}
    tickers: list[str] = []
    unknown: list[str] = []
    notes: list[str] = []
    for written in plan.tickers:
        if written in known:
            tickers.append(written)
            continue
        matched = match_company(written, request.companies)
        found = [matched.ticker] if matched else find_tickers(written, request.companies)
        if found:
            notes.append(f"the plan's company {written!r} is {', '.join(found)}")
            tickers += found
        else:
            unknown.append(written)
    if not tickers:
        asked = [t for t in request.tickers_hint if t in known] or find_tickers(request.question, request.companies)
        if asked:
            notes.append(f"the plan named no known company; the question names {', '.join(asked)}")
            tickers, unknown = asked, []
    tickers = list(dict.fromkeys(tickers + unknown))
    if tickers == plan.tickers:
        return plan, []
    question_type = plan.question_type
    if (len(tickers) > 1) == (question_type == "single_company"):
        question_type = "multiple_companies" if len(tickers) > 1 else "single_company"
    return plan.model_copy(update={"tickers": tickers, "question_type": question_type}), notes


def fix_parameters(llm: LLMProvider, request: PlanRequest, plan: ResearchPlan, usage: Usage,
                   availability_for: Callable[[list[str]], Availability]) -> tuple[ResearchPlan, Usage, list[str]]:
    """The plan with its parameters checked: a plan that names no company takes the question's (and with none there
    either, nor a news search, the question is rejected); an unknown ticker or a period a company does not have goes
    back to the planner once. Returns what was wrong."""
    if not plan.is_valid:
        return plan, usage, []
    plan, repaired = companies_from_question(plan, request)
    if not plan.tickers and not plan.uses_news:
        # neither the plan nor the question names a company: nothing could be searched, so the question is rejected
        # as the rules' planner rejects it (not failed after planning)
        reason = no_company_named(request.companies)
        return plan.model_copy(update={"is_valid": False, "invalid_reason": reason}), usage, repaired
    problems = parameter_problems(plan, request.companies, availability_for(plan.tickers))
    if not problems:
        return plan, usage, repaired
    note = ("Correct the plan's parameters: " + "; ".join(problems)
            + ". Use only listed tickers and periods the company has; keep everything else.")
    fixed, more = llm.plan(request.model_copy(update={"feedback": "\n".join(filter(None, [request.feedback, note])),
                                                      "previous_plan": plan}))
    usage = usage.add(more)
    fixed, _ = companies_from_question(fixed, request)  # the corrected plan may have dropped them again
    if fixed.is_valid and len(parameter_problems(fixed, request.companies, availability_for(fixed.tickers))) < len(problems):
        plan = fixed
    known = {c.ticker for c in request.companies}
    unknown = [t for t in plan.tickers if t not in known]
    if plan.is_valid and unknown:
        plan = plan.model_copy(update={
            "is_valid": False,
            "invalid_reason": f"Unknown ticker {', '.join(unknown)}: no such company is known to finagent. "
                              f"Known companies include {', '.join(sorted(known)[:12])}.",
        })
    return plan, usage, repaired + problems


def load_availability(ctx: Context, tickers: list[str], conn=None) -> Availability:
    """Transcript quarters and 10-K years per company, and their names (cached in Redis for `quarter_cache_ttl_s`).
    What is not cached is read on `conn` when given (the coordinator's, in its step's transaction), else on one pooled
    connection."""
    if not tickers:  # every coordinator step reads this: ask for the plan's companies only
        return Availability()
    names, periods = names_and_periods(ctx.pool, tickers, ["transcript", "filing"], ctx.redis, ctx.settings.quarter_cache_ttl_s, conn)
    return Availability(
        names=names,
        transcripts={t: periods[(t, "transcript")] for t in tickers},
        tenk={t: filing_years(periods[(t, "filing")]) for t in tickers},
    )


def filing_years(periods: list[Period]) -> list[Period]:
    """The fiscal years a company has any filing of (a 10-K, a 10-Q, an earnings release, an 8-K), each as its year's
    period: the filings agent reads a company's filings of a fiscal year together, so a company whose only filing of
    the year asked is a 10-Q or an earnings release is still answered from it."""
    return [Period(fiscal_year=y, fiscal_quarter=0) for y in sorted({p.fiscal_year for p in periods})]
