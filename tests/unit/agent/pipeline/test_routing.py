"""Routing on the pure machine: `hybrid` reads the calls and the 10-K, `news` means a news search, a request may name
the strategy, several fiscal years run one 10-K round per filing in one fan-out, and a plan without search phrases
searches for the question's words."""
from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from agent.models.job import JobRequest, Strategy, TenKProgress
from agent.models.steps import (
    NewsCall,
    PlanOutput,
    SearchCall,
    TenKAnswerCall,
    TenKEvaluateCall,
    TenKEvaluateOutput,
    TenKPlanCall,
    TenKPlanOutput,
    TenKRetrieveCall,
    TenKRetrieveOutput,
    call_chains,
)
from agent.models.tenk import SubQuestion, TenKEvaluation, TenKPlan
from agent.pipeline import router
from agent.pipeline.search_plan import default_queries, plan_search
from agent.text import STOPWORDS
from tests.support.machine_driver import AVAILABILITY, USAGE, Job, plan, quarters

TWO_YEARS = AVAILABILITY.model_copy(update={"tenk": {"ACME": quarters("FY2023", "FY2024")}})


def planned(job: Job, **plan_fields):
    job.advance()
    return job.respond(lambda c, it: PlanOutput(plan=plan(**plan_fields), usage=USAGE))


def sub_question(i: int, keywords: str) -> SubQuestion:
    return SubQuestion(id=i, text=keywords, kind="TABLE", items=["8"], keywords=keywords)


# ---------- item 1: hybrid and news ----------
def test_hybrid_means_the_transcripts_and_the_10k():
    hybrid = plan(data_sources=["hybrid"])
    assert (hybrid.uses_transcripts, hybrid.uses_10k) == (True, True)
    assert router.initial_strategy(hybrid) == "hybrid"
    sp = plan_search(hybrid, AVAILABILITY, router.initial_strategy(hybrid))
    assert [tp.ticker for tp in sp.transcripts] == ["ACME"] and [(tp.ticker, tp.periods) for tp in sp.tenk] == [
        ("ACME", ["FY2024"])]


def test_hybrid_for_a_company_without_a_filing_searches_its_calls():
    sp = plan_search(plan(tickers=["BETA"], data_sources=["hybrid"]), AVAILABILITY, "hybrid")
    assert [tp.ticker for tp in sp.transcripts] == ["BETA"] and sp.tenk == []
    assert sp.problems == ["no filing is ingested for BETA"]


def test_a_hybrid_plan_starts_the_10k_agent_beside_the_transcript_searches():
    job = Job()
    out = planned(job, data_sources=["hybrid"])
    assert job.state.strategy == "hybrid"
    assert out.calls == [TenKPlanCall(round=1, ticker="ACME", fiscal_year=2024)]
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                                 sub_questions=[sub_question(1, "revenue")])))
    assert {type(c) for c in out.calls} == {TenKRetrieveCall, SearchCall}


def test_news_among_the_sources_means_a_news_search():
    news = plan(data_sources=["news"])
    assert news.uses_news and not news.needs_latest_news and not news.uses_transcripts and not news.uses_10k
    job = Job()
    out = planned(job, data_sources=["news"], topic="pricing")
    assert out.status == "running" and out.calls == [NewsCall(query="Acme Corp (ACME) pricing")]


def test_a_plan_naming_no_source_searches_the_transcripts():
    assert plan(data_sources=[]).uses_transcripts and not plan(data_sources=[]).uses_10k
    flagged = plan(data_sources=[], needs_10k=True, needs_latest_news=True)
    assert (flagged.uses_transcripts, flagged.uses_10k, flagged.uses_news) == (True, True, True)


# ---------- item 2: several fiscal years ----------
def test_every_fiscal_year_named_gets_its_filing():
    def years(*refs: str) -> list[str]:
        return plan_search(plan(data_sources=["10k"], time_refs=list(refs)), TWO_YEARS, "10k_first").tenk[0].periods

    assert years("FY2023", "FY2024") == ["FY2023", "FY2024"]
    assert years("FY2023 and FY2024") == ["FY2023", "FY2024"]
    assert years("FY23") == ["FY2023"]
    assert years("last two fiscal years") == ["FY2023", "FY2024"]
    assert years("last quarter") == ["FY2024"]  # no year named: the latest filing
    assert years("FY2019") == ["FY2024"]


def test_two_fiscal_years_run_one_10k_round_per_filing_in_one_fan_out():
    job = Job(availability=TWO_YEARS)
    out = planned(job, data_sources=["10k"], needs_10k=True, time_refs=["FY2023", "FY2024"])
    assert out.calls == [TenKPlanCall(round=1, ticker="ACME", fiscal_year=2023),
                         TenKPlanCall(round=1, ticker="ACME", fiscal_year=2024)]
    assert [str(c.output_key(1)) for c in out.calls] == ["1:tenk1:plan:ACME:FY2023", "1:tenk1:plan:ACME:FY2024"]
    assert job.state.tenk.open == ["ACME:FY2023", "ACME:FY2024"]

    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                                 sub_questions=[sub_question(1, "research and development")])))
    plan_event = next(e for e in out.events if e.type == "tenk_search")
    assert plan_event.data["filings"] == ["ACME:FY2023", "ACME:FY2024"]
    assert set(plan_event.data["sub_questions"]) == {"ACME:FY2023", "ACME:FY2024"}
    # the same sub-question for two filings is searched once in each: one retrieval chord
    assignments = [a for c in out.calls if isinstance(c, TenKRetrieveCall) for a in c.assignments]
    assert sorted((a.part(), a.sub_question) for a in assignments) == [("ACME:FY2023", 1), ("ACME:FY2024", 1)]

    out = job.respond(lambda c, it: TenKRetrieveOutput(added=2) if isinstance(c, TenKRetrieveCall) else None)
    filings = [(type(c).__name__, c.part()) for c in out.calls if isinstance(c, (TenKAnswerCall, TenKEvaluateCall))]
    assert filings == [("TenKAnswerCall", "ACME:FY2023"), ("TenKEvaluateCall", "ACME:FY2023"),
                       ("TenKAnswerCall", "ACME:FY2024"), ("TenKEvaluateCall", "ACME:FY2024")]
    assert [[c.part() for c in chain] for chain in call_chains(out.calls)][:2] == [["ACME:FY2023"] * 2, ["ACME:FY2024"] * 2]

    job.find(3, "ACME:10k")
    from agent.models.research import Answer
    from agent.models.steps import TenKAnswerOutput

    def chord(c, it):
        if isinstance(c, TenKAnswerCall):
            return TenKAnswerOutput(answer=Answer(text="- R&D was 5 [10K1]"), markers={})
        if isinstance(c, TenKEvaluateCall):  # the FY2023 filing is answered; FY2024's replans
            q = 0.95 if c.fiscal_year == 2023 else 0.4
            return TenKEvaluateOutput(evaluation=TenKEvaluation(quality=q, missing_info=[] if q > 0.9 else ["R&D"]))
        return None

    out = job.respond(chord)
    assert job.state.tenk.quality == {"ACME:FY2023": 0.95, "ACME:FY2024": 0.4}
    assert out.calls == [TenKPlanCall(round=2, ticker="ACME", fiscal_year=2024, missing_info=["R&D"])]


def test_a_state_saved_per_company_loads_and_replans_per_filing():
    job = Job(availability=TWO_YEARS)
    planned(job, data_sources=["10k"], needs_10k=True, time_refs=["FY2023", "FY2024"])
    job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                           sub_questions=[sub_question(1, "revenue")])))
    job.respond(lambda c, it: TenKRetrieveOutput(added=1) if isinstance(c, TenKRetrieveCall) else None)
    # as a job saved before the rounds were per filing holds them: keyed by the ticker, its calls without a year
    legacy = TenKProgress.model_validate({"round": 1, "open": ["ACME"], "missing": {"ACME": ["margin"]},
                                          "retrieved": {"ACME": ["TABLE|8|revenue"]}, "searched": True})
    job.state = job.state.model_copy(update={"tenk": legacy})
    job.last.calls[:] = [TenKAnswerCall(round=1, ticker="ACME"), TenKEvaluateCall(round=1, ticker="ACME")]
    assert [str(c.output_key(1)) for c in job.last.calls] == ["1:tenk1:answer:ACME", "1:tenk1:evaluate:ACME"]
    out = job.respond(lambda c, it: TenKEvaluateOutput(evaluation=TenKEvaluation(quality=0.3, missing_info=["margin"]))
                      if isinstance(c, TenKEvaluateCall) else None)
    assert out.calls == [TenKPlanCall(round=2, ticker="ACME", fiscal_year=fy, missing_info=["margin"]) for fy in (2023, 2024)]
    assert job.state.tenk.open == ["ACME:FY2023", "ACME:FY2024"]


# ---------- item 4: a plan without search phrases ----------
def test_a_plan_without_search_phrases_searches_its_topic_and_the_questions_words():
    queries = default_queries(plan(search_queries=[], topic="", intent="", tickers=["ACME"]),
                              "What was ACME's gross margin in the latest quarter?")
    assert queries == ["gross margin"]
    words = " ".join(default_queries(plan(search_queries=[], topic="", intent=""), "How did the company's revenue change?"))
    assert not set(words.split()) & STOPWORDS
    assert default_queries(plan(topic="pricing", intent="compare pricing"), "What drove pricing power?") == [
        "pricing", "compare pricing", "drove pricing power"]

    job = Job(question="What was ACME's gross margin last quarter?")
    out = planned(job, search_queries=[], topic="", intent="")
    assert {c.spec.query for c in out.calls if isinstance(c, SearchCall)} == {"gross margin"}
    assert job.state.plan is not None and job.state.plan.search_queries == ["gross margin"]
    assert any("no search phrases" in line for line in job.state.reasoning_trace)


# ---------- item 9: the strategy a request names ----------
def test_the_strategies_a_request_may_name_are_the_routers():
    assert set(router.STRATEGIES) == set(get_args(Strategy)) - {"auto"}
    assert JobRequest(question="What was revenue?").strategy == "auto"
    with pytest.raises(ValidationError) as exc:
        JobRequest(question="What was revenue?", strategy="fastest")
    assert exc.value.errors()[0]["loc"] == ("strategy",) and "transcripts_first" in exc.value.errors()[0]["msg"]


@pytest.mark.parametrize("strategy, transcripts, tenk", [
    ("transcripts_first", True, False), ("10k_first", False, True), ("hybrid", True, True),
    ("broad_window", True, False), ("transcripts_first_fallback", True, False)])
def test_a_named_strategy_decides_the_sources(strategy, transcripts, tenk):
    job = Job(strategy=strategy)
    planned(job)  # the plan asks for the transcripts only
    sp = job.state.search_plan
    assert sp is not None and (bool(sp.transcripts), bool(sp.tenk)) == (transcripts, tenk)
    assert job.state.strategy == strategy and job.state.routing_history[0].agent_name == strategy
    assert job.state.routing_history[0].reasoning == f"{strategy}, as the request asks"
    if strategy == "broad_window":
        assert sp.transcripts[0].periods == ["2024_q2", "2024_q3", "2024_q4", "2025_q1"]


def test_auto_is_the_routers_own_choice():
    for sources, expected in ((["earnings_transcripts"], "transcripts_first"), (["10k"], "10k_first"),
                              (["earnings_transcripts", "10k"], "hybrid"), (["hybrid"], "hybrid")):
        job = Job(strategy="auto")
        planned(job, data_sources=sources)
        assert job.state.strategy == expected, sources
        assert router.initial_strategy(plan(data_sources=sources)) == expected


def test_a_named_10k_first_reroutes_to_the_transcripts_when_the_answer_is_weak():
    plan_ = plan()
    first = plan_search(plan_, AVAILABILITY, "10k_first", requested=True)
    assert first.transcripts == [] and first.tenk
    fallback = plan_search(plan_, AVAILABILITY, "transcripts_first_fallback", current=first)
    assert router.widens(first, fallback) and fallback.transcripts and fallback.tenk == first.tenk
