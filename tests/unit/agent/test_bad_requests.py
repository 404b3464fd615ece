"""Bad input is refused before anything is touched: the HTTP API answers 4xx with one readable line in the error
shape, the Celery contract raises ValueError, and the CLI exits non-zero with one line and no traceback. The app here
has no services at all (its context raises), so a refusal that reached Postgres or Redis would fail the test.
What needs the database (unknown tickers, nothing written) is in tests/integration/test_bad_input.py."""
from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from typer.testing import CliRunner

from agent import batches
from agent.models.job import JobRequest
from agent.settings import Settings
from agent.submission import InvalidRequest, check_question
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from finagent.models import ErrorBody

SETTINGS = Settings(api_keys=[])
QUESTION = "How did gross margin change last quarter?"


class NoServices(Runtime):
    """A runtime whose services must never be reached: every bad request is refused before them."""

    @property  # type: ignore[override]
    def ctx(self):
        raise AssertionError("a bad request reached the database or the broker")

    @property  # type: ignore[override]
    def dispatcher(self):
        raise AssertionError("a bad request reached the dispatcher")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(NoServices(settings=SETTINGS)), raise_server_exceptions=True)


def _refused(resp, status: int) -> ErrorBody:
    assert resp.status_code == status, resp.text
    body = ErrorBody.model_validate(resp.json())
    assert body.error.message and "\n" not in body.error.message and "Traceback" not in body.error.message
    return body


# (body, what the message must say); each is a JSON object of a job request
BAD_JOBS: dict[str, tuple[dict, str]] = {
    "empty question": ({"question": ""}, "question"),
    "whitespace-only question": ({"question": " \t\n  \r\n "}, "the question is empty"),
    "too-short question": ({"question": "ok"}, "at least 3"),
    "huge question": ({"question": "revenue " * 300}, "at most 2000"),
    "NUL byte": ({"question": "What was\x00 revenue?"}, "control character U+0000"),
    "escape sequence": ({"question": "What was \x1b[2J revenue?"}, "control character U+001B"),
    "C1 control": ({"question": "What was revenue?\x85"}, "control character U+0085"),
    "bell in feedback": ({"question": QUESTION, "feedback": "shorter\x07"}, "feedback"),
    "quarter five": ({"question": "What was revenue in Q5 2024?"}, "'Q5 2024' is not a quarter"),
    "quarter zero": ({"question": "What was revenue in 2024 Q0?"}, "is not a quarter"),
    "fifth quarter in words": ({"question": "How did margins do in the fifth quarter of 2023?"}, "is not a quarter"),
    "fiscal 1850": ({"question": "What was revenue in fiscal 1850?"}, "before 1900"),
    "a quarter decades ahead": ({"question": "What will revenue be in Q3 2099?"}, "years ahead"),
    "no periods": ({"question": "How did revenue change over the last 0 quarters?"}, "asks for no periods"),
    "invalid mode": ({"question": QUESTION, "mode": "turbo"}, "mode"),
    "mode of the wrong type": ({"question": QUESTION, "mode": 3}, "mode"),
    "ticker with a space": ({"question": QUESTION, "tickers": ["AB CD"]}, "'AB CD' is not a ticker symbol"),
    "empty ticker": ({"question": QUESTION, "tickers": [""]}, "is not a ticker symbol"),
    "ticker not a string": ({"question": QUESTION, "tickers": [42]}, "tickers.0"),
    "tickers not a list": ({"question": QUESTION, "tickers": "ABC"}, "tickers"),
    "too many tickers": ({"question": QUESTION, "tickers": [f"T{i}" for i in range(21)]}, "tickers"),
    "negative max_iterations": ({"question": QUESTION, "max_iterations": -1}, "max_iterations"),
    "zero max_iterations": ({"question": QUESTION, "max_iterations": 0}, "max_iterations"),
    "absurd max_iterations": ({"question": QUESTION, "max_iterations": 10**12}, "max_iterations"),
    "boolean max_iterations": ({"question": QUESTION, "max_iterations": True}, "max_iterations"),
    "fractional max_iterations": ({"question": QUESTION, "max_iterations": 2.5}, "max_iterations"),
    "negative duration": ({"question": QUESTION, "max_duration_seconds": -30}, "max_duration_seconds"),
    "absurd duration": ({"question": QUESTION, "max_duration_seconds": 86400 * 365}, "max_duration_seconds"),
    "negative confidence": ({"question": QUESTION, "min_confidence": -0.1}, "min_confidence"),
    "confidence over 1": ({"question": QUESTION, "min_confidence": 1.5}, "min_confidence"),
    "empty idempotency key": ({"question": QUESTION, "idempotency_key": ""}, "idempotency_key"),
    "control character in the key": ({"question": QUESTION, "idempotency_key": "k\x00"}, "idempotency_key"),
    "parent not a job id": ({"question": QUESTION, "parent_job_id": "../etc"}, "parent_job_id"),
    "unknown field": ({"question": QUESTION, "max_iteration": 2}, "max_iteration: Extra inputs are not permitted"),
}


@pytest.mark.parametrize("name", BAD_JOBS)
def test_bad_job_requests_are_422_naming_the_field(client, name):
    body, expected = BAD_JOBS[name]
    error = _refused(client.post("/v1/jobs", json=body), 422).error
    assert expected in error.message, error.message
    assert error.details and error.details[0].loc[0] == "body"


@pytest.mark.parametrize("name", BAD_JOBS)
def test_the_celery_contract_and_the_batch_lines_refuse_the_same(name):
    """Every entry point validates through JobRequest and check_question: the same request fails the same way."""
    body, expected = BAD_JOBS[name]
    with pytest.raises((ValidationError, InvalidRequest)) as exc:
        check_question(JobRequest.model_validate(body))
    assert expected.split(": ")[-1] in str(exc.value)
    line = batches.parse_line(1, json.dumps(body))
    if "parent_job_id" not in body and "idempotency_key" not in body:  # a batch sets these two itself
        assert line.request is None and line.error and "\n" not in line.error


def test_non_finite_confidence_is_refused(client):
    for raw in (b'{"question": "What was revenue?", "min_confidence": NaN}',
                b'{"question": "What was revenue?", "min_confidence": Infinity}'):
        _refused(client.post("/v1/jobs", content=raw, headers={"Content-Type": "application/json"}), 422)


@pytest.mark.parametrize("raw,status,says", [
    (b'{"question": "What was revenue?"', 422, "not valid JSON"),
    (b"{'question': 'single quotes'}", 422, "not valid JSON"),
    (b"", 422, "Field required"),
    (b"[]", 422, "valid dictionary"),
    (b'["What was revenue?"]', 422, "valid dictionary"),
    (b'"What was revenue?"', 422, "valid dictionary"),
    (b"null", 422, "valid dictionary"),
    (b"42", 422, "valid dictionary"),
    (b'{"question": "caf\xe9 revenue?"}', 400, "parsing the body"),  # Latin-1 bytes: not UTF-8 JSON
    (b'{"question": "What was \\ud800 revenue?"}', 422, "question"),  # a lone surrogate escape
])
def test_bodies_that_are_not_a_json_object_are_refused(client, raw, status, says):
    error = _refused(client.post("/v1/jobs", content=raw, headers={"Content-Type": "application/json"}), status).error
    assert says in error.message


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "application/xml", "multipart/form-data"])
def test_wrong_content_types_are_415(client, ctype):
    resp = client.post("/v1/jobs", content=json.dumps({"question": QUESTION}), headers={"Content-Type": ctype})
    assert _refused(resp, 415).error.code == "unsupported_media_type"


def test_a_body_over_the_cap_is_413_before_it_is_parsed(client):
    resp = client.post("/v1/jobs", content=b'{"question": "' + b"x" * (SETTINGS.api_max_body_bytes + 1) + b'"}',
                       headers={"Content-Type": "application/json"})
    assert _refused(resp, 413).error.code == "payload_too_large"


@pytest.mark.parametrize("query,loc", [
    ("limit=-1", "limit"), ("limit=0", "limit"), ("limit=100000000000000000000", "limit"), ("limit=ten", "limit"),
    ("status=finished", "status"), ("created_after=last%20tuesday", "created_after"),
])
def test_bad_list_parameters_are_422(client, query, loc):
    assert _refused(client.get(f"/v1/jobs?{query}"), 422).error.details[0].loc[-1] == loc


@pytest.mark.parametrize("cursor", ["garbage", "%00", "eyJ0IjoiMjAyNiIsImlkIjoieCJ9", "x" * 500])
def test_bad_cursors_are_400(client, cursor):
    assert _refused(client.get(f"/v1/jobs?cursor={cursor}"), 400).error.code == "bad_cursor"


@pytest.mark.parametrize("feedback", ["", "   ", "more\x1b[0m detail", "x" * 2001])
def test_bad_feedback_is_422(client, feedback):
    resp = client.post(f"/v1/jobs/{uuid.uuid4()}/feedback", json={"feedback": feedback})
    assert _refused(resp, 422).error.details[0].loc == ["body", "feedback"]


@pytest.mark.parametrize("raw,ctype,query,status", [
    (b"\xff\xfeW\x00h\x00a\x00t\x00", "text/plain", "", 400),  # UTF-16
    (b"What was revenue?\n\x80\x81 binary\n", "application/x-ndjson", "", 400),
    (b'{"question": "x"}', "application/json", "", 422),  # a JSON batch is a list
    (b"", "text/plain", "", 422),
    (b"What was revenue in Q5 2024?\nok\n", "text/plain", "", 422),  # every line invalid: no batch at all
    (b"What was revenue?\n", "text/plain", "mode=turbo", 422),
    (b"What was revenue?\n", "text/plain", "name=a%00b", 422),
    (b"What was revenue?\n", "text/plain", "name=", 422),
    (b"What was revenue?\n", "image/png", "", 415),
])
def test_bad_batches_are_refused_whole(client, raw, ctype, query, status):
    _refused(client.post(f"/v1/batches?{query}", content=raw, headers={"Content-Type": ctype}), status)


def test_legitimate_requests_are_normalised_not_refused():
    req = JobRequest(question="  What was\trevenue\r\nlast  quarter?\n", tickers=["$abc", " abc ", "brk.b"],
                     min_confidence=0, max_iterations=20)
    assert req.question == "What was revenue last quarter?"
    assert req.tickers == ["ABC", "BRK.B"]
    for question in ("How did revenue grow for the fifth consecutive quarter?", "The company was founded in 1850; how is it doing?",
                     "What is the net zero target for 2050?", "What was revenue in Q4 2024 vs 4Q23 and FY99?",
                     "What is guidance for Q1 2027?", "What are the fiscal 2030 targets?", "Compare 10-Q and 10-K disclosures",
                     "¿Cuál fue el ingreso? 売上高は？ 🚀 émission"):
        check_question(JobRequest(question=question))


# ---------- the CLI: non-zero exit, one line, no traceback, nothing started ----------

@pytest.fixture
def cli(monkeypatch):
    import ops.local.bootstrap

    def no_services(*args, **kwargs):
        raise AssertionError("bad input started the services")

    monkeypatch.setattr(ops.local.bootstrap, "bootstrap", no_services)
    from ops.cli.main import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def _one_line_refusal(result, *expected: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert not isinstance(result.exception, AssertionError), result.exception
    out = result.stderr.strip()
    assert out and "\n" not in out and "Traceback" not in result.output, result.output
    for text in expected:
        assert text in out, out
    return out


@pytest.mark.parametrize("args,says", [
    (["   "], "question"),
    (["What was\x1b[31m revenue?"], "control character U+001B"),
    (["x" * 2001], "at most 2000"),
    (["What was revenue in Q5 2024?"], "'Q5 2024' is not a quarter"),
    (["What was revenue in fiscal 1850?"], "before 1900"),
    ([QUESTION, "--mode", "turbo"], "mode"),
    ([QUESTION, "--ticker", "not a ticker"], "is not a ticker symbol"),
    ([QUESTION, "--max-iterations", "-3"], "max_iterations"),
    ([QUESTION, "--max-iterations", "1000"], "max_iterations"),
    ([QUESTION, "--max-duration", "0"], "max_duration_seconds"),
    ([QUESTION, "--min-confidence", "7"], "min_confidence"),
    ([QUESTION, "--min-confidence", "nan"], "min_confidence"),
    (["--feedback-on", str(uuid.uuid4())], "--feedback"),
    (["--feedback-on", str(uuid.uuid4()), "--feedback", "\x00"], "feedback"),
])
def test_cli_ask_refuses_bad_input_in_one_line(cli, args, says):
    _one_line_refusal(cli("ask", *args), says)


@pytest.mark.parametrize("content,says", [
    ("What was revenue?\n".encode("utf-16"), "not a text file"),
    (b"What was revenue?\nWhat was caf\xe9 revenue?\n", ":2: not UTF-8 text"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a text file"),
    (b"", "no questions"),
    (b"# only a comment\n\n", "no questions"),
])
def test_cli_batch_refuses_unreadable_files_whole(cli, tmp_path, content, says):
    f = tmp_path / "questions.txt"
    f.write_bytes(content)
    _one_line_refusal(cli("batch", "run", str(f)), says)


def test_cli_batch_with_no_valid_line_names_each_and_starts_nothing(cli, tmp_path):
    f = tmp_path / "questions.jsonl"
    f.write_text('What was revenue in Q5 2024?\n{"question": "ok"}\n{"question": "What was revenue?", "mode": "turbo"}\n{broken\n')
    result = cli("batch", "run", str(f))
    assert result.exit_code == 2 and not isinstance(result.exception, AssertionError), result.output
    lines = result.stderr.strip().splitlines()
    assert [ln.split(": ", 1)[0] for ln in lines[:4]] == [f"{f}:{n}" for n in (1, 2, 3, 4)]
    assert lines[-1] == f"{f}: no valid question in the file" and "Traceback" not in result.output


def test_cli_batch_file_over_the_caps_is_refused(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FINAGENT_API_MAX_BATCH_LINES", "2")
    from agent.settings import get_settings

    get_settings.cache_clear()
    try:
        f = tmp_path / "questions.txt"
        f.write_text("What was revenue?\nWhat was margin?\nWhat was cash flow?\n")
        _one_line_refusal(cli("batch", "run", str(f)), "3 questions, over the batch limit of 2")
    finally:
        get_settings.cache_clear()
