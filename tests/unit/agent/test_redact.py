"""agent/redact.py: configured secrets and credential-shaped strings are masked in text, exceptions, log records,
step-output errors and `finagent config show`; ordinary financial prose is left alone."""
from __future__ import annotations

import io
import json
import logging
import os

import httpx
import openai
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from agent import redact
from agent.redact import MASK, Redactor, mask_url, masked_config, scrub_exception
from agent.settings import Settings, get_settings

LLM_KEY = "llm-plain-secret-7f3a9c"  # not key-shaped: only the configured value can find it
OPENAI_KEY = "sk-proj-Zq81planted0penAIkey5551"
TAVILY_KEY = "tvly-dev-planted7TavilyKey42"
API_KEY = "svc-api-key-b81c4e0d"
FLOWER_AUTH = "ops:flower-pw-93d1,audit:second-pw-77ab"
DB_URL = "postgresql://app:pg-pw-4451@db.internal:5432/finagent"
SECRETS = [LLM_KEY, OPENAI_KEY, TAVILY_KEY, API_KEY, "flower-pw-93d1", "second-pw-77ab", "pg-pw-4451"]


@pytest.fixture
def settings(monkeypatch, tmp_path) -> Settings:
    for key in list(os.environ):
        if key.startswith("FINAGENT_") or key in redact.SDK_KEY_VARS:
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no .env
    return Settings(llm_api_key=LLM_KEY, openai_api_key=OPENAI_KEY, tavily_api_key=TAVILY_KEY, api_keys=[SecretStr(API_KEY)],
                    flower_basic_auth=FLOWER_AUTH, database_url=DB_URL, data_dir=tmp_path)


@pytest.fixture
def active(settings, monkeypatch) -> Redactor:
    monkeypatch.setattr(redact, "_active", None)
    return redact.configure(settings)


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_every_configured_secret_is_masked(active):
    text = (f"key={LLM_KEY} openai {OPENAI_KEY} tavily {TAVILY_KEY} api {API_KEY} flower {FLOWER_AUTH} db {DB_URL}")
    out = redact.redact(text)
    assert leaked(out) == [] and out.count(MASK) >= 6
    assert "db postgresql://app:" in out and "@db.internal:5432/finagent" in out  # only the password goes


def test_the_sdk_environment_keys_are_secrets_too(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-openai-key-0000x")
    assert "env-openai-key-0000x" not in Redactor.from_settings(settings)("the key env-openai-key-0000x was refused")


@pytest.mark.parametrize("text, secret", [
    # OpenAI's 401 body echoes the key, partly starred
    ("Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-proj-abcd1234************************wxyz.'}}",
     "sk-proj-abcd1234"),
    ("Tavily: invalid key tvly-prod-9f8e7d6c5b4a", "tvly-prod-9f8e7d6c5b4a"),
    ("headers={'Authorization': 'Bearer some-unlisted-token_99'}", "some-unlisted-token_99"),
    ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ('{"api_key": "unlisted-value-123"}', "unlisted-value-123"),
    ("connecting with password=s3cr3t-pw&sslmode=require", "s3cr3t-pw"),
    ("redis://:cache-pw-8@cache.internal:6379/0 refused", "cache-pw-8"),
    ("postgresql://app:p@ss-w0rd@db/finagent is down", "ss-w0rd"),
])
def test_credential_shapes_are_masked_without_being_configured(text, secret):
    out = Redactor()(text)
    assert secret not in out and MASK in out


@pytest.mark.parametrize("text", [
    "Basic earnings per share were up and diluted earnings per share rose.",
    "password authentication failed for user app",
    "prompt_tokens=1234 completion_tokens=56 at https://api.example.test/v1/chat/completions",
    "The risk-adjusted return and the desk-level limits were unchanged.",
    "redis://cache.internal:6379/0 and postgresql://app@db/finagent",
])
def test_ordinary_text_is_left_alone(text):
    assert Redactor()(text) == text


def test_redaction_is_idempotent(active):
    once = redact.redact(f"Bearer {API_KEY} password={LLM_KEY} {DB_URL} {OPENAI_KEY}")
    assert redact.redact(once) == once


def test_a_provider_401_exception_is_scrubbed_in_place_with_its_cause(active):
    request = httpx.Request("POST", "https://llm.example.test/v1/chat/completions")
    body = {"error": {"message": f"Incorrect API key provided: {LLM_KEY}", "code": "invalid_api_key"}}
    response = httpx.Response(401, request=request, json=body)
    inner = openai.AuthenticationError(f"Error code: 401 - {body}", response=response, body=body)
    try:
        try:
            raise inner
        except openai.AuthenticationError as exc:
            raise RuntimeError(f"plan failed: {exc}") from exc
    except RuntimeError as outer:
        scrub_exception(outer)
        rendered = [str(outer), repr(outer), str(inner), repr(inner), inner.message, json.dumps(inner.body)]
    assert leaked(" ".join(rendered)) == []
    assert "Incorrect API key provided" in str(inner)  # the reason survives, the key does not


def test_log_records_are_redacted_message_args_and_traceback(active, monkeypatch):
    previous = logging.getLogRecordFactory()
    monkeypatch.setattr(redact, "_installed", False)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("finagent.test.redact")
    log.addHandler(handler)
    try:
        redact.install_log_redaction()
        log.warning("calling %s with key %s", "https://llm.example.test", LLM_KEY)
        log.warning(f"inline {OPENAI_KEY} and {API_KEY}")
        try:
            raise ConnectionError(f"401 from Tavily: {TAVILY_KEY}")
        except ConnectionError:
            log.exception("news failed")
    finally:
        log.removeHandler(handler)
        logging.setLogRecordFactory(previous)
    text = stream.getvalue()
    assert leaked(text) == [] and "ConnectionError: 401 from Tavily" in text and "news failed" in text
    assert text.count(MASK) >= 4


def test_masked_config_masks_nested_secrets_urls_and_quoted_values(settings):
    s = settings.model_copy(update={
        "llm_base_url": f"https://gateway:gw-pw-6612@llm.example.test/v1?api_key={LLM_KEY}&region=eu",
        "tavily_base_url": "https://search.example.test?token=tok-31337x",
        "redis_url": "redis://:cache-pw-8@cache.internal:6379/0",
    })
    data = masked_config(s)
    dumped = json.dumps(data)
    assert leaked(dumped) == [] and "gw-pw-6612" not in dumped and "tok-31337x" not in dumped and "cache-pw-8" not in dumped
    assert data["llm_base_url"].startswith("https://gateway:********@llm.example.test/v1?") and "region=eu" in data["llm_base_url"]
    assert data["database_url"] == "postgresql://app:********@db.internal:5432/finagent"
    assert data["flower_basic_auth"] == data["llm_api_key"] == data["api_keys"] == MASK
    assert data["top_k_per_quarter"] == 15 and data["llm_models"]["planner"] == "gpt-4o-mini"  # the rest is shown


def test_mask_url_keeps_everything_but_credentials():
    assert mask_url("https://u:p4ss@h.example.test:8443/x?sslpassword=zz9&a=1") == "https://u:********@h.example.test:8443/x?sslpassword=********&a=1"
    assert mask_url("unix:///tmp/redis.sock") == "unix:///tmp/redis.sock"


@pytest.mark.parametrize("as_json", [True, False])
def test_config_show_masks_every_secret(settings, monkeypatch, as_json):
    from ops.cli.main import app

    env = {"FINAGENT_LLM_API_KEY": LLM_KEY, "FINAGENT_OPENAI_API_KEY": OPENAI_KEY, "FINAGENT_TAVILY_API_KEY": TAVILY_KEY,
           "FINAGENT_API_KEYS": json.dumps([API_KEY]), "FINAGENT_FLOWER_BASIC_AUTH": FLOWER_AUTH,
           "FINAGENT_DATABASE_URL": DB_URL, "FINAGENT_LLM_BASE_URL": f"https://llm.example.test/v1?key={LLM_KEY}",
           "FINAGENT_LLM_MODELS__PLANNER": "planner-model", "COLUMNS": "400"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["config", "show", *(["--json"] if as_json else [])])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert leaked(result.output) == []
    assert "planner-model" in result.output and "llm.example.test" in result.output  # the settings are still shown


@pytest.mark.parametrize("as_json", [True, False])
def test_services_status_prints_no_password_of_a_configured_server(monkeypatch, tmp_path, as_json):
    from rich.console import Console
    from typer.testing import CliRunner

    from agent.settings import Settings
    from ops.cli.main import app

    settings = Settings(data_dir=tmp_path, database_url="postgresql://app:pg-hunter22@127.0.0.1:9/x",
                        redis_url="redis://:rd-hunter22@127.0.0.1:9/0")  # nothing listens: both are "not running"
    monkeypatch.setattr("ops.cli.main.get_settings", lambda: settings)
    monkeypatch.setattr("ops.cli.main.console", Console(width=200))  # wide enough for the whole URL in the table
    result = CliRunner().invoke(app, ["services", "status", *(["--json"] if as_json else [])])
    assert result.exit_code == 0, result.output
    assert "hunter22" not in result.output
    if as_json:
        urls = {s["name"]: s["url"] for s in json.loads(result.output)["services"]}
        assert urls == {"postgres": "postgresql://app:********@127.0.0.1:9/x", "redis": "redis://:********@127.0.0.1:9/0"}
    else:
        assert "postgresql://app:********@127.0.0.1:9/x" in result.output and "redis://:********@127.0.0.1:9/0" in result.output
