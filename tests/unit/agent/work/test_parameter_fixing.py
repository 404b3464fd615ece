"""A plan naming something finagent does not have (a misspelt ticker, a quarter the company has not reported)
is sent back to the planner once, with what is wrong, and the corrected plan is used."""
from __future__ import annotations

from agent.models.corpus import Company
from agent.models.research import Usage
from agent.providers.llm.roles import PlanRequest
from agent.work.planning import fix_parameters, parameter_problems
from tests.support.machine_driver import AVAILABILITY, plan

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


def test_a_10k_sub_question_routed_to_a_missing_item_is_rerouted_once():
    from agent.models.tenk import SubQuestion, TenKPlan
    from agent.providers.llm.extractive import ExtractiveProvider
    from agent.work.tenk_calls import fix_routing

    sq = SubQuestion(id=1, text="Inventory valuation policy", kind="TEXT", items=["9B"], keywords="inventory valuation")
    plan = TenKPlan(ticker="ACME", fiscal_year=2024, sub_questions=[sq])

    class Replanner:
        def __init__(self, revised):
            self.revised, self.requests = revised, []

        def plan_10k(self, req):
            self.requests.append(req)
            return self.revised, Usage(prompt=3, completion=2)

    rerouted = SubQuestion(id=2, text="Inventory valuation policy", kind="TEXT", items=["7", "15"], keywords="inventories valued")
    llm = Replanner(TenKPlan(ticker="ACME", fiscal_year=2024, sub_questions=[sq, rerouted]))
    fixed, usage = fix_routing(llm, "How are inventories valued?", plan, sq, {"7", "8"})
    assert (fixed.id, fixed.items, fixed.keywords) == (1, ["7"], "inventories valued") and usage.prompt == 3
    assert "Item 9B is not in this filing" in llm.requests[0].missing_info[0] and llm.requests[0].previous == plan

    useless = Replanner(plan)  # the planner changed nothing: search every Item the filing has
    assert fix_routing(useless, "q", plan, sq, {"7", "8"})[0].items == ["7", "8"]
    # the offline planner's own revision, whatever it is, only routes to Items that exist
    assert set(fix_routing(ExtractiveProvider(), "How are inventories valued?", plan, sq, {"7", "8"})[0].items) <= {"7", "8"}
