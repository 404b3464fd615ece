"""A plan naming something finagent does not have (a misspelt ticker, a quarter the company has not reported)
is sent back to the planner once, with what is wrong, and the corrected plan is used."""
from __future__ import annotations

from agent.models.corpus import Company
from agent.models.research import Usage
from agent.providers.llm.base import PlanRequest
from agent.work.planning import fix_parameters, parameter_problems
from tests.unit.machine_driver import AVAILABILITY, plan

COMPANIES = [Company(ticker="ACME", name="Acme Corp"), Company(ticker="BETA", name="Beta Holdings")]


class Planner:
    def __init__(self, *plans):
        self.plans, self.requests = list(plans), []

    def plan(self, req):
        self.requests.append(req)
        return self.plans.pop(0), Usage(prompt=10, completion=5)


def request() -> PlanRequest:
    return PlanRequest(question="How did Acme's revenue change in Q3 2026?", companies=COMPANIES)


def test_a_period_the_company_lacks_is_corrected_by_the_planner():
    wrong = plan(time_refs=["Q3 2026"])
    llm = Planner(plan(time_refs=["latest quarter"]))
    fixed, usage, problems = fix_parameters(llm, request(), wrong, Usage(prompt=10, completion=5), lambda t: AVAILABILITY)
    assert problems == ["Q3 2026 is not available for ACME (available: Q2 2024 to Q1 2025)"]
    assert fixed.time_refs == ["latest quarter"] and (usage.prompt, usage.completion) == (20, 10)
    assert problems[0] in llm.requests[0].feedback and llm.requests[0].previous_plan == wrong


def test_a_misspelt_ticker_is_corrected_once_and_an_uncorrectable_one_rejected():
    llm = Planner(plan(tickers=["ACME"]))
    fixed, _, problems = fix_parameters(llm, request(), plan(tickers=["ACMEE"]), Usage(), lambda t: AVAILABILITY)
    assert fixed.tickers == ["ACME"] and fixed.is_valid and problems[0].startswith("ACMEE is not a known ticker")
    llm = Planner(plan(tickers=["ZED"]))
    rejected, _, _ = fix_parameters(llm, request(), plan(tickers=["ZED"]), Usage(), lambda t: AVAILABILITY)
    assert not rejected.is_valid and rejected.invalid_reason.startswith("Unknown ticker ZED") and len(llm.requests) == 1


def test_a_sound_plan_is_not_sent_back():
    llm = Planner()
    same, _, problems = fix_parameters(llm, request(), plan(), Usage(), lambda t: AVAILABILITY)
    assert same == plan() and problems == [] and llm.requests == []
    assert parameter_problems(plan(), COMPANIES, AVAILABILITY) == []
