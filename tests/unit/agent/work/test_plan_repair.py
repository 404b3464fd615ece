"""A plan that names no company is repaired from the question (the caller's tickers, a ticker or a registered name in
the question) without a second planner call; several filings' 10-K answers join into one, markers renumbered."""
from __future__ import annotations

from agent.models.corpus import Company
from agent.models.research import Answer, Usage
from agent.models.steps import TenKAnswerOutput
from agent.providers.llm.roles import PlanRequest
from agent.work.answering import findings_from_answer
from agent.work.planning import companies_from_question, fix_parameters
from agent.work.tenk_calls import join_answers
from tests.support.machine_driver import AVAILABILITY, plan

COMPANIES = [Company(ticker="ACME", name="Acme Corp", aliases=["Acme"]), Company(ticker="BETA", name="Beta Holdings")]


class NoPlanner:
    def plan(self, req):
        raise AssertionError("a plan repaired from the question needs no second planner call")


def request(question: str, hint: list[str] | None = None) -> PlanRequest:
    return PlanRequest(question=question, companies=COMPANIES, tickers_hint=hint or [])


def test_a_plan_naming_no_company_takes_the_questions_ticker():
    fixed, _, notes = fix_parameters(NoPlanner(), request("What was ACME's revenue last quarter?"),
                                     plan(tickers=[], time_refs=[]), Usage(), lambda t: AVAILABILITY)
    assert fixed.tickers == ["ACME"] and fixed.is_valid
    assert notes == ["the plan named no known company; the question names ACME"]


def test_a_company_named_by_its_registered_name_or_by_the_caller():
    by_name, notes = companies_from_question(plan(tickers=[]), request("How did Beta Holdings and Acme Corp compare?"))
    assert by_name.tickers == ["BETA", "ACME"] and by_name.question_type == "multiple_companies" and notes
    hinted, _ = companies_from_question(plan(tickers=[]), request("How did revenue change?", hint=["BETA"]))
    assert hinted.tickers == ["BETA"] and hinted.question_type == "single_company"


def test_a_company_written_by_name_in_the_ticker_field_is_its_ticker():
    fixed, _, notes = fix_parameters(NoPlanner(), request("What was revenue last quarter?"),
                                     plan(tickers=["ACME CORP (ALSO: ACME)"], time_refs=[]), Usage(), lambda t: AVAILABILITY)
    assert fixed.tickers == ["ACME"] and notes == ["the plan's company 'ACME CORP (ALSO: ACME)' is ACME"]
    # a ticker nothing places gives way to the company the question names
    fixed, _, _ = fix_parameters(NoPlanner(), request("What was ACME's revenue last quarter?"),
                                 plan(tickers=["Data Sources"], time_refs=[]), Usage(), lambda t: AVAILABILITY)
    assert fixed.tickers == ["ACME"]


def test_nothing_is_invented_for_a_question_that_names_no_company():
    same, notes = companies_from_question(plan(tickers=[]), request("Which companies mention tariffs?"))
    assert same.tickers == [] and notes == []
    named, notes = companies_from_question(plan(tickers=["BETA"]), request("What was ACME's revenue?"))
    assert named.tickers == ["BETA"] and notes == []  # a plan that names a company keeps its own
    rejected = plan(tickers=[], is_valid=False, invalid_reason="not a finance question")
    assert companies_from_question(rejected, request("What was ACME's revenue?"))[0] == rejected


def test_a_question_naming_no_company_is_rejected_as_the_rules_reject_it_unless_news_is_searched():
    """A model's plan with no company, for a question naming none, would search nothing: it is rejected with the
    message the rules' planner gives, not failed after planning."""
    fixed, _, _ = fix_parameters(NoPlanner(), request("Did cash and cash equivalents fall between the two years?"),
                                 plan(tickers=[], time_refs=[]), Usage(), lambda t: AVAILABILITY)
    assert not fixed.is_valid and fixed.invalid_reason.startswith("No known company was named")
    assert "ACME (Acme Corp)" in fixed.invalid_reason
    news, _, _ = fix_parameters(NoPlanner(), request("What is the latest on chip tariffs?"),
                                plan(tickers=[], time_refs=[], data_sources=["news"]), Usage(), lambda t: AVAILABILITY)
    assert news.is_valid  # a news search needs no company


def test_a_corrected_plan_that_drops_the_company_again_is_repaired_too():
    class Corrector:
        def __init__(self):
            self.requests = []

        def plan(self, req):
            self.requests.append(req)
            return plan(tickers=[], time_refs=["latest quarter"]), Usage(prompt=1, completion=1)

    llm = Corrector()
    fixed, _, notes = fix_parameters(llm, request("What was ACME's revenue in Q3 2026?"),
                                     plan(tickers=[], time_refs=["Q3 2026"]), Usage(), lambda t: AVAILABILITY)
    assert len(llm.requests) == 1 and fixed.tickers == ["ACME"] and fixed.time_refs == ["latest quarter"]
    assert notes[0].startswith("the plan named no known company") and "Q3 2026 is not available for ACME" in notes[1]


def test_two_filings_answers_join_with_one_set_of_markers():
    fy23 = TenKAnswerOutput(answer=Answer(text="- R&D was 7 [10K1]\n- Sales rose [10K2]"),
                            markers={"10k:1": "[10K1]", "10k:2": "[10K2]"}, usage=Usage(prompt=3))
    # the later answer's round saw more evidence: the same passage has another marker there
    fy24 = TenKAnswerOutput(answer=Answer(text="- R&D was 9 vs 7 [10K3][10K2]"),
                            markers={"10k:2": "[10K3]", "10k:1": "[10K2]", "10k:9": "[10K1]"}, usage=Usage(prompt=4))
    joined = join_answers([fy23, fy24])
    findings = findings_from_answer("ACME:10k", joined.answer.text, joined.markers)
    assert [(f.citation_key, f.extra_keys, f.text) for f in findings.findings] == [
        ("10k:1", [], "R&D was 7"), ("10k:2", [], "Sales rose"), ("10k:2", ["10k:1"], "R&D was 9 vs 7")]
    assert joined.usage.prompt == 7
