"""Structured-output forms per server (agent/providers/llm/json_modes.py), over real HTTP against the fault server,
which records the form each request used and can refuse a form the way llama-cpp-python's server does."""
from __future__ import annotations

import logging

import openai
import pytest

from agent.models.corpus import Company
from agent.providers.llm.json_modes import JsonForms, form_for_server, rejects_form, request_kwargs
from agent.providers.llm.openai_provider import OpenAIProvider
from agent.providers.llm.prompts import ExtractOutput, PlanOutput
from agent.providers.llm.roles import PlanRequest
from agent.settings import Settings
from tests.support.fault_llm import FaultLLMServer

REQ = PlanRequest(question="How did Quarstone's operating margin change in Q2 2031?",
                  companies=[Company(ticker="QRST", name="Quarstone Holdings Inc.")])


@pytest.fixture
def srv():
    JsonForms.forget()
    with FaultLLMServer(seed=9) as server:
        yield server
    JsonForms.forget()


def provider(url: str, **settings) -> OpenAIProvider:
    values = dict(llm_provider="openai", llm_base_url=url, llm_api_key="k", max_tool_retries=1, llm_timeout_s=5) | settings
    return OpenAIProvider(Settings(_env_file=None, **values))


@pytest.mark.parametrize("mode", ["json_schema", "json_object_schema", "ollama", "json_object"])
def test_each_mode_sends_its_form(srv, mode):
    plan, _ = provider(srv.url, llm_json_mode=mode).plan(REQ)
    assert plan.tickers == ["QRST"]
    (call,) = srv.chat_calls()
    assert call.form == mode and call.role == "plan" and not srv.calls[0].role == "models"  # explicit: no probe
    schema = PlanOutput.model_json_schema()
    if mode == "json_schema":
        assert call.response_format == {"type": "json_schema", "json_schema": {"name": "PlanOutput", "schema": schema, "strict": False}}
    elif mode == "json_object_schema":
        assert call.response_format == {"type": "json_object", "schema": schema}
    elif mode == "ollama":
        assert call.extra["format"] == schema and call.response_format["type"] == "json_schema"
    else:
        assert call.response_format == {"type": "json_object"}


@pytest.mark.parametrize("owned_by,form", [("me", "json_object_schema"), ("llamacpp", "json_object_schema"),
                                           ("library", "ollama"), ("vllm", "json_schema"), ("someone", "json_schema")])
def test_auto_detects_the_form_once_per_endpoint(srv, owned_by, form):
    srv.owned_by = owned_by
    first, second = provider(srv.url), provider(srv.url)  # two providers of one process share the detection
    first.plan(REQ)
    second.plan(REQ)
    assert [c.role for c in srv.calls] == ["models", "plan", "plan"]
    assert [c.form for c in srv.chat_calls()] == [form, form]


def test_auto_rules_without_a_probe():
    assert form_for_server("api.openai.com", None, None) == "json_schema"
    assert form_for_server("myorg.openai.azure.com", 443, "me") == "json_schema"
    assert form_for_server("localhost", 11434, None) == "ollama"
    assert form_for_server("gpu-box", 8000, None) == "json_schema"


def test_a_failed_probe_is_tried_again(srv):
    p = provider(srv.url.replace("/v1", "/proxy/v1"))  # no /models there (404), and no chat either
    with pytest.raises(openai.NotFoundError):
        p.plan(REQ)
    assert JsonForms._chosen == {}  # nothing cached from a failed probe


def test_a_rejected_form_steps_down_and_stays_there(srv, caplog):
    """llama-cpp-python's answer to json_schema (500, "Input should be 'text' or 'json_object'"): the call is re-sent
    as json_object with the schema (the form that server honours), and every later call of the process starts there."""
    srv.reject_forms = {"json_schema"}
    p = provider(srv.url, llm_json_mode="json_schema")
    with caplog.at_level(logging.WARNING, logger="agent.providers.llm.json_modes"):
        assert p.plan(REQ)[0].tickers == ["QRST"]
        assert provider(srv.url, llm_json_mode="json_schema").plan(REQ)[0].tickers == ["QRST"]
    forms = [(c.form, c.fault) for c in srv.chat_calls()]
    assert forms == [("json_schema", "rejected")] * 2 + [("json_object_schema", "ok")] * 2  # the SDK retried the 500 once
    assert sum("rejected structured output as json_schema" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("form,status,lower", [("json_object_schema", 400, "json_object"), ("ollama", 400, "json_object"),
                                               ("json_schema", 422, "json_object_schema")])
def test_other_rejections_step_down_too(srv, form, status, lower):
    srv.reject_forms, srv.reject_status = {form}, status
    assert provider(srv.url, llm_json_mode=form).plan(REQ)[0].tickers == ["QRST"]
    assert [c.form for c in srv.chat_calls()] == [form, lower]


def test_the_last_resort_is_plain_json_object_with_the_repair(srv):
    srv.reject_forms, srv.reject_status = {"json_schema", "json_object_schema"}, 400
    srv.set_faults(script=["off_schema"])  # a rejected request draws no fault: the first json_object reply breaks the schema
    assert provider(srv.url, llm_json_mode="json_schema").plan(REQ)[0].tickers == ["QRST"]
    assert [(c.form, c.fault, c.repair) for c in srv.chat_calls()] == [
        ("json_schema", "rejected", False), ("json_object_schema", "rejected", False),
        ("json_object", "off_schema", False), ("json_object", "ok", True)]


def test_a_plain_server_error_is_not_a_rejection(srv):
    srv.set_faults(script=["server_500", "server_500"])
    with pytest.raises(openai.InternalServerError) as info:
        provider(srv.url, llm_json_mode="json_schema").plan(REQ)
    assert not rejects_form(info.value)
    assert [c.form for c in srv.chat_calls()] == ["json_schema", "json_schema"]
    assert provider(srv.url, llm_json_mode="json_schema").plan(REQ)[0].tickers == ["QRST"]
    assert srv.chat_calls()[-1].form == "json_schema"  # no fallback was remembered


def test_the_issue_case_json_object_with_schema_against_a_llama_cpp_like_server(srv):
    """What the issue reported: the old default (json_object, schema only in the prompt) against a small model failed
    with "reasoning: Field required" after its repair. `auto` now sends the schema in llama.cpp's own form."""
    srv.owned_by = "me"
    srv.reject_forms = {"json_schema"}
    srv.set_faults(script=["off_schema"])
    assert provider(srv.url).plan(REQ)[0].tickers == ["QRST"]
    first, repair = srv.chat_calls()
    assert (first.form, first.fault, repair.form, repair.repair) == ("json_object_schema", "off_schema", "json_object_schema", True)


def test_request_kwargs_carry_the_schema():
    schema = ExtractOutput.model_json_schema()
    assert request_kwargs("json_object_schema", ExtractOutput)["response_format"]["schema"] == schema
    assert request_kwargs("ollama", ExtractOutput)["extra_body"] == {"format": schema}
    assert "extra_body" not in request_kwargs("json_schema", ExtractOutput)


def test_settings_alias_and_validation(monkeypatch):
    monkeypatch.setenv("FINAGENT_LLM_JSON_SCHEMA", "true")
    assert Settings(_env_file=None).llm_json_mode == "json_schema"
    monkeypatch.setenv("FINAGENT_LLM_JSON_MODE", "ollama")
    assert Settings(_env_file=None).llm_json_mode == "ollama"  # the new setting wins
    monkeypatch.delenv("FINAGENT_LLM_JSON_SCHEMA")
    monkeypatch.setenv("FINAGENT_LLM_JSON_MODE", "grammar")
    with pytest.raises(ValueError, match="FINAGENT_LLM_JSON_MODE"):
        Settings(_env_file=None)
    monkeypatch.delenv("FINAGENT_LLM_JSON_MODE")
    assert Settings(_env_file=None).llm_json_mode == "auto"
