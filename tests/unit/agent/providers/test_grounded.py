"""A model's empty extraction or uncited answer is replaced by the extractive provider's, and nothing else is."""
from __future__ import annotations

from agent.models.research import Answer, Evidence, Finding, ResearchPlan, ScopeFindings
from agent.providers.llm.extractive import ExtractiveProvider
from agent.providers.llm.grounded import GroundedProvider
from agent.providers.llm.roles import ComposeRequest, ExtractRequest, Usage

PASSAGE = "Total revenue for the quarter was $4.2 billion, up 12% from a year ago, driven by subscription growth."


KEY = "transcript:7"


def evidence() -> list[Evidence]:
    return [Evidence(source_type="transcript", chunk_id=7, ticker="ZZQ", fiscal_year=2031, fiscal_quarter=2,
                     speaker="Chief Financial Officer", text=PASSAGE, score=0.9)]


class Model:
    """A model that answers whatever it was told to."""

    name = "small-model"

    def __init__(self, findings: list[Finding] | None = None, text: str = "No."):
        self.findings, self.text, self.calls = findings or [], text, 0

    def extract(self, req):
        self.calls += 1
        return ScopeFindings(scope=req.scope, findings=self.findings), Usage(prompt=50, completion=5)

    def compose(self, req):
        self.calls += 1
        return Answer(text=self.text), Usage(prompt=80, completion=3)

    def evaluate(self, req):
        return "the model's own"


def extract_request(ev=None) -> ExtractRequest:
    ev = evidence() if ev is None else ev
    return ExtractRequest(question="What was ZZQ's revenue last quarter?", reasoning="revenue lookup", scope="ZZQ:2031_q2",
                          evidence=ev, markers={e.citation_key: f"[{i + 1}]" for i, e in enumerate(ev)})


def compose_request(findings: list[ScopeFindings]) -> ComposeRequest:
    ev = evidence()
    plan = ResearchPlan(reasoning="revenue lookup", tickers=["ZZQ"], topic="revenue", intent="lookup")
    return ComposeRequest(question="What was ZZQ's revenue last quarter?", plan=plan, findings=findings, evidence=ev,
                          markers={ev[0].citation_key: "[1]"}, max_tokens=500)


def test_an_empty_extraction_over_passages_takes_the_extractive_findings_and_keeps_the_models_usage():
    grounded = GroundedProvider(Model())
    findings, usage = grounded.extract(extract_request())
    assert [f.citation_key for f in findings.findings] == [KEY] and "4.2 billion" in findings.findings[0].text
    assert usage.prompt == 50


def test_a_models_findings_and_an_extraction_without_passages_are_left_alone():
    own = [Finding(citation_key=KEY, text="Revenue grew 12%.")]
    assert GroundedProvider(Model(own)).extract(extract_request())[0].findings == own
    assert GroundedProvider(Model()).extract(extract_request([]))[0].findings == []


def test_an_answer_citing_none_of_its_findings_is_replaced_by_the_extractive_answer():
    findings = [ScopeFindings(scope="ZZQ:2031_q2", findings=[Finding(citation_key=KEY, text=PASSAGE)])]
    answer, usage = GroundedProvider(Model(text="No.")).compose(compose_request(findings))
    assert "[1]" in answer.text and answer.text != "No." and usage.completion == 3


def test_a_cited_answer_and_an_answer_with_nothing_to_cite_are_the_models():
    findings = [ScopeFindings(scope="ZZQ:2031_q2", findings=[Finding(citation_key=KEY, text=PASSAGE)])]
    assert GroundedProvider(Model(text="Revenue was $4.2 billion [1].")).compose(compose_request(findings))[0].text \
        == "Revenue was $4.2 billion [1]."
    assert GroundedProvider(Model(text="Nothing found.")).compose(compose_request([]))[0].text == "Nothing found."


def test_other_roles_pass_through_and_the_default_fallback_is_extractive():
    grounded = GroundedProvider(Model())
    assert grounded.evaluate(None) == "the model's own" and grounded.name == "small-model"
    assert isinstance(grounded.fallback, ExtractiveProvider)


def test_a_10k_plan_the_model_cannot_write_is_the_rules_plan():
    from agent.models.tenk import TenKPlanRequest
    from agent.providers.llm.grounded import GroundedProvider
    from agent.providers.llm.structured import StructuredOutputError

    class Broken:
        name = "broken"

        def plan_10k(self, req):
            raise StructuredOutputError("plan_10k", "(root): Invalid JSON: EOF while parsing a string")

    plan, _ = GroundedProvider(Broken()).plan_10k(TenKPlanRequest(question="What is QFI's FY2031 current ratio?",
                                                                   ticker="QFI", fiscal_year=2031))
    assert (plan.ticker, plan.fiscal_year) == ("QFI", 2031) and plan.sub_questions


def test_a_10k_plan_the_model_cannot_send_in_time_is_the_rules_plan_and_other_failures_are_raised():
    import httpx
    import pytest

    from agent.models.tenk import TenKPlanRequest

    class Failing:
        name = "failing"

        def __init__(self, exc):
            self.exc = exc

        def plan_10k(self, req):
            raise self.exc

    req = TenKPlanRequest(question="What is QFI's FY2031 current ratio?", ticker="QFI", fiscal_year=2031)
    plan, _ = GroundedProvider(Failing(httpx.ReadTimeout("timed out"))).plan_10k(req)
    assert plan.ticker == "QFI" and plan.sub_questions
    with pytest.raises(ValueError):
        GroundedProvider(Failing(ValueError("invalid param: model"))).plan_10k(req)

