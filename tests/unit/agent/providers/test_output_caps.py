"""Output caps: every LLM request asks for at most its role's cap (settings.llm_output_tokens) and never more than the
model's limit (llm_max_output_tokens); an answer mode's max_tokens budgets the evidence, not the reply. Checked on the
wire against the fault server, which refuses a request above its limit as a hosted model does (400)."""
from __future__ import annotations

import pytest

from agent.models.research import Answer, Finding, ResearchPlan, ScopeFindings, Usage
from agent.models.tenk import SubQuestion, TenKAnswerRequest, TenKPlan
from agent.providers.llm.factory import OutputCappedProvider, make_llm
from agent.providers.llm.json_modes import JsonForms
from agent.providers.llm.openai_provider import OpenAIProvider
from agent.providers.llm.roles import ROLES, ComposeRequest, EvaluateRequest, ExtractRequest, PlanRequest
from agent.settings import JSON_ROLES, AnswerMode, LLMOutputTokens, Settings
from tests.support.fault_llm import FaultLLMServer
from tests.unit.agent.providers.test_openai_provider import COMPANIES, MARKERS, QUESTION, evidence, make_settings

HOSTED_LIMIT = 16384


@pytest.fixture
def srv():
    JsonForms.forget()
    with FaultLLMServer(seed=2) as server:
        server.max_output_tokens = HOSTED_LIMIT
        yield server
    JsonForms.forget()


def compose_req(max_tokens: int) -> ComposeRequest:
    plan = ResearchPlan(reasoning="Find cloud revenue.", tickers=["MSFT"], answer_mode=AnswerMode.standard)
    findings = [ScopeFindings(scope="MSFT:2025_q3", findings=[Finding(citation_key="transcript:4101", text="Cloud grew.")])]
    return ComposeRequest(question=QUESTION, plan=plan, findings=findings, evidence=evidence()[:2], markers=MARKERS,
                          max_tokens=max_tokens)


def test_every_role_has_a_cap_and_the_defaults_fit_a_hosted_model():
    settings = Settings(_env_file=None)
    assert set(LLMOutputTokens.model_fields) == set(ROLES) and set(JSON_ROLES) < set(ROLES)
    assert all(settings.output_tokens(role) <= settings.llm_max_output_tokens == HOSTED_LIMIT for role in ROLES)
    assert (settings.output_tokens("plan"), settings.output_tokens("evaluate"), settings.output_tokens("compose")) == (1000, 1000, 4000)
    # the deep_search budget would not fit: it is a context budget, not an output cap
    assert settings.mode(AnswerMode.deep_search).max_tokens > HOSTED_LIMIT


def test_a_cap_above_the_model_limit_is_clamped_and_the_old_settings_fill_unset_roles():
    settings = Settings(_env_file=None, llm_output_tokens={"compose": 30000, "plan": 900}, llm_max_output_tokens=8000,
                        llm_json_max_tokens=400, llm_answer_max_tokens=2500)
    assert settings.output_tokens("compose") == 8000
    assert settings.output_tokens("plan") == 900  # set itself: the deprecated llm_json_max_tokens does not override it
    assert {role: settings.output_tokens(role) for role in JSON_ROLES if role != "plan"} == dict.fromkeys(
        [r for r in JSON_ROLES if r != "plan"], 400)
    assert settings.output_tokens("answer_10k") == 2500


@pytest.mark.parametrize("mode", list(AnswerMode))
def test_no_mode_asks_for_more_output_than_the_caps(srv, mode):
    """Before the caps, deep_search's compose asked for 20,000 tokens and a hosted model refused it (a parameter
    error, never retried). Every role of the pipeline, through the factory as the workers build it."""
    settings = make_settings(llm_base_url=srv.url, max_tool_retries=0)
    llm = make_llm(settings)
    budget = settings.mode(mode).max_tokens
    llm.plan(PlanRequest(question=QUESTION, companies=COMPANIES))
    llm.extract(ExtractRequest(question=QUESTION, reasoning="r", scope="MSFT:2025_q3", evidence=evidence()[:2], markers=MARKERS))
    answer, _ = llm.compose(compose_req(budget))
    llm.evaluate(EvaluateRequest(question=QUESTION, plan=ResearchPlan(reasoning="r", tickers=["MSFT"]), answer=answer,
                                 scope="all", evidence=evidence()[:2], markers=MARKERS))
    calls = srv.chat_calls()
    assert [c.role for c in calls] == ["plan", "extract", "compose", "evaluate"]
    assert all(c.status == 200 for c in calls), [(c.role, c.fault, c.output_tokens) for c in calls]
    for call in calls:
        assert call.output_tokens is not None and call.output_tokens <= settings.output_tokens(call.role), call.role
    compose = next(c for c in calls if c.role == "compose")
    assert compose.output_tokens == min(budget, settings.output_tokens("compose"))
    system = compose.messages[0]["content"]
    assert f"stay within {compose.output_tokens} tokens" in system  # the prompt states the length that is asked for


def test_a_stricter_model_limit_caps_every_request(srv):
    srv.max_output_tokens = 900
    settings = make_settings(llm_base_url=srv.url, max_tool_retries=0, llm_max_output_tokens=900)
    llm = make_llm(settings)
    llm.plan(PlanRequest(question=QUESTION, companies=COMPANIES))
    llm.compose(compose_req(settings.mode(AnswerMode.detailed).max_tokens))
    provider = OpenAIProvider(settings)
    sq = SubQuestion(id=1, text="What was cost of sales?", kind="TABLE", items=["8"], keywords="cost of sales")
    provider.answer_10k(TenKAnswerRequest(question="What was cost of sales?", evidence=evidence()[:1], markers=MARKERS,
                                          plan=TenKPlan(ticker="QRST", fiscal_year=2031, sub_questions=[sq])))
    assert [(c.role, c.status, c.output_tokens) for c in srv.chat_calls()] == [
        ("plan", 200, 900), ("compose", 200, 900), ("answer_10k", 200, 900)]


def test_the_caps_reach_every_provider_and_the_cache_key():
    """The cap wraps the whole provider stack, so the offline providers, the response cache and the rate limiter's
    estimate all see the request as it is sent."""
    seen: list[ComposeRequest] = []

    class Probe:
        name = "probe"

        def compose(self, req: ComposeRequest) -> tuple[Answer, Usage]:
            seen.append(req)
            return Answer(text="ok"), Usage()

    capped = OutputCappedProvider(Probe(), Settings(_env_file=None))
    capped.compose(compose_req(20000))
    capped.compose(compose_req(2000))
    assert [r.max_tokens for r in seen] == [4000, 2000]
    assert isinstance(make_llm(Settings(_env_file=None, llm_provider="extractive")), OutputCappedProvider)
