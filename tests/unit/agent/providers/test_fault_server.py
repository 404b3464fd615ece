"""The fault-injecting OpenAI-compatible server (tests/support/fault_llm.py) and its lexical model, over real HTTP.

Each fault is checked for what it puts on the wire, with httpx and the real openai SDK; the lexical model's answers
are validated against the very schemas finagent asks for, from the prompts finagent builds.
"""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from agent.models.corpus import Company
from agent.models.research import Answer, EvaluationScores, Evidence, Finding, ResearchPlan, ScopeFindings
from agent.providers.llm import prompts
from agent.providers.llm.roles import ComposeRequest, EvaluateRequest, ExtractRequest, PlanRequest
from tests.support import lexical_model
from tests.support.fault_llm import ALL_FAULTS, FaultLLMServer, off_schema

COMPANIES = [Company(ticker="QRST", name="Quarstone Holdings Inc.", aliases=["Quarstone"]),
             Company(ticker="VELM", name="Velmora Corporation")]
QUESTION = "How did Quarstone's operating margin change in Q2 2031 and what drove it?"
EVIDENCE = [
    Evidence(source_type="transcript", chunk_id=11, ticker="QRST", fiscal_year=2031, fiscal_quarter=2,
             text="Thank you, operator. Operating margin was 14.2%, up 80 basis points, on lower freight costs. We expect more."),
    Evidence(source_type="transcript", chunk_id=12, ticker="QRST", fiscal_year=2031, fiscal_quarter=2,
             text="Revenue grew 6% to $1.3 billion."),
]
MARKERS = {"transcript:11": "[1]", "transcript:12": "[2]"}


def chat(messages: prompts.Messages, **extra) -> dict:
    return {"model": "m", "messages": messages, **extra}


def plan_body(**kw) -> dict:
    return chat(prompts.plan_messages(PlanRequest(question=QUESTION, companies=COMPANIES, **kw)),
                response_format={"type": "json_object"})


def extract_body() -> dict:
    req = ExtractRequest(question=QUESTION, reasoning="r", scope="QRST:2031_q2", evidence=EVIDENCE, markers=MARKERS, max_findings=1)
    return chat(prompts.extract_messages(req), response_format={"type": "json_object"})


@pytest.fixture
def srv():
    with FaultLLMServer(seed=3, hold_s=2.0) as server:
        yield server


# ---------- the lexical model ----------
def test_plan_takes_tickers_and_periods_from_the_prompt():
    plan = prompts.PlanOutput.model_validate_json(lexical_model.respond(plan_body()))
    assert plan.tickers == ["QRST"] and plan.time_refs == ["Q2 2031"] and plan.is_valid
    assert all("?" not in q and q for q in plan.search_queries)
    hinted = prompts.PlanOutput.model_validate_json(lexical_model.respond(plan_body(tickers_hint=["velm"])))
    assert hinted.tickers == ["VELM"]


def test_extract_quotes_the_fenced_passages_with_their_keys():
    out = prompts.ExtractOutput.model_validate_json(lexical_model.respond(extract_body()))
    assert out.findings == [Finding(citation_key="transcript:11", text="Operating margin was 14.2%, up 80 basis points, on lower freight costs.")]


def test_compose_and_evaluate_follow_the_findings_and_markers():
    plan = ResearchPlan(reasoning="r", tickers=["QRST"])
    findings = [ScopeFindings(scope="QRST:2031_q2", findings=[Finding(citation_key="transcript:12", text="Revenue grew 6%.")])]
    body = chat(prompts.compose_messages(ComposeRequest(question=QUESTION, plan=plan, findings=findings, evidence=EVIDENCE,
                                                        markers=MARKERS, max_tokens=500)))
    assert lexical_model.guess_role(body) == "compose"
    answer = lexical_model.respond(body)
    assert "Revenue grew 6%. [2]" in answer
    for text, good in ((answer, True), ("No sources here.", False)):
        req = EvaluateRequest(question=QUESTION, plan=plan, answer=Answer(text=text), scope="all", evidence=EVIDENCE, markers=MARKERS)
        scores = EvaluationScores.model_validate_json(lexical_model.respond(chat(prompts.evaluate_messages(req))))
        assert scores.is_sufficient is good and (scores.completeness_score >= 80) is good


def test_the_role_is_read_from_every_structured_form():
    schema = prompts.ExtractOutput.model_json_schema()
    messages = [{"role": "user", "content": "hi"}]
    for body in (chat(messages, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}),
                 chat(messages, response_format={"type": "json_object", "schema": schema}),
                 chat(messages, format=schema)):
        assert lexical_model.guess_role(body) == "extract"


def test_off_schema_breaks_the_schema_with_valid_json():
    for body, model in ((plan_body(), prompts.PlanOutput), (extract_body(), prompts.ExtractOutput)):
        broken = off_schema(lexical_model.respond(body), lexical_model.request_schema(body))
        json.loads(broken)
        with pytest.raises(ValueError):
            model.model_validate_json(broken)


# ---------- the wire ----------
def test_models_and_a_good_completion(srv):
    models = httpx.get(f"{srv.url}/models").json()
    assert models["data"][0]["owned_by"] == "fault-llm"
    client = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0)
    resp = client.chat.completions.create(**plan_body())
    assert prompts.PlanOutput.model_validate_json(resp.choices[0].message.content).tickers == ["QRST"]
    assert resp.usage is not None and resp.usage.prompt_tokens > 100
    (call,) = srv.chat_calls()
    assert (call.role, call.form, call.fault, call.status, call.retry_count) == ("plan", "json_object", "ok", 200, 0)


@pytest.mark.parametrize("fault,status", [("rate_limit", 429), ("server_500", 500), ("server_503", 503)])
def test_error_faults_send_openai_shaped_errors(srv, fault, status):
    srv.set_faults(script=[fault])
    resp = httpx.post(f"{srv.url}/chat/completions", json=plan_body())
    assert resp.status_code == status and resp.json()["error"]["message"]
    assert (resp.headers.get("retry-after") == "1") is (fault == "rate_limit")


def test_reset_closes_the_connection_without_a_response(srv):
    srv.set_faults(script=["reset"])
    with pytest.raises(httpx.TransportError):
        httpx.post(f"{srv.url}/chat/completions", json=plan_body())
    assert srv.chat_calls()[0].status == 0


def test_timeout_holds_the_request_past_the_clients_timeout(srv):
    srv.set_faults(script=["timeout"])
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{srv.url}/chat/completions", json=plan_body(), timeout=0.5)


@pytest.mark.parametrize("fault", ["malformed_json", "truncated_json", "off_schema"])
def test_content_faults_send_200_with_unusable_content(srv, fault):
    srv.set_faults(script=[fault])
    content = httpx.post(f"{srv.url}/chat/completions", json=plan_body()).json()["choices"][0]["message"]["content"]
    with pytest.raises(ValueError):
        prompts.PlanOutput.model_validate_json(content)
    assert (content.startswith("{")) is (fault != "malformed_json")


def test_rate_draws_are_seeded_and_skip_content_faults_on_free_text_roles():
    def run() -> list[str]:
        with FaultLLMServer(seed=11) as server:
            server.set_faults(rate=0.5, kinds=("server_500", "malformed_json"))
            for _ in range(30):
                httpx.post(f"{server.url}/chat/completions", json=chat([{"role": "user", "content": "Write the answer."}]))
            return [c.fault for c in server.chat_calls()]

    faults = run()
    assert faults == run() and set(faults) == {"ok", "server_500"}  # compose: no JSON to break
    with pytest.raises(ValueError):
        FaultLLMServer().set_faults(kinds=["meteor"])
    assert len(ALL_FAULTS) == 8


def test_every_kind_comes_round_once_per_deck():
    """The chaos scenario asserts each kind really struck: dealt from a deck, 8 faults on JSON roles hold all 8 kinds."""
    with FaultLLMServer(seed=3) as server:
        server.set_faults(rate=1.0)
        server.hold_s = 0.3
        for _ in range(len(ALL_FAULTS) * 2):
            try:
                httpx.post(f"{server.url}/chat/completions", json=plan_body(), timeout=0.2)
            except httpx.HTTPError:
                pass  # the timeout and reset faults
        faults = [c.fault for c in server.chat_calls()]
    assert set(faults[:len(ALL_FAULTS)]) == set(ALL_FAULTS) == set(faults[len(ALL_FAULTS):])


def test_rejected_form_answers_like_llama_cpp_python(srv):
    srv.reject_forms = {"json_schema"}
    schema = prompts.PlanOutput.model_json_schema()
    body = plan_body() | {"response_format": {"type": "json_schema", "json_schema": {"name": "PlanOutput", "schema": schema}}}
    resp = httpx.post(f"{srv.url}/chat/completions", json=body)
    assert resp.status_code == 500 and "Input should be 'text' or 'json_object'" in resp.json()["error"]["message"]
    ok = httpx.post(f"{srv.url}/chat/completions", json=plan_body() | {"response_format": {"type": "json_object", "schema": schema}})
    assert ok.status_code == 200
    assert [(c.form, c.fault) for c in srv.chat_calls()] == [("json_schema", "rejected"), ("json_object_schema", "ok")]
