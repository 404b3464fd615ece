"""Bad input on the real stack writes nothing: every refused request, through the HTTP API, the Celery contract's task
and the CLI, leaves the job and batch tables, the broker's queues and the event streams exactly as they were.
Unknown tickers are checked against the companies this database knows."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent.models.job import JobRequest
from agent.submission import InvalidRequest, check_request
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from tests.unit.agent.test_bad_requests import BAD_JOBS, QUESTION

pytestmark = pytest.mark.integration

FINAGENT = Path(sys.executable).with_name("finagent")
UNKNOWN = "ZQXW"  # no company has this symbol


def _message_text(raw: str) -> str:
    """A queued kombu message with its body decoded, so the job ids in its arguments can be read."""
    try:
        msg = json.loads(raw)
    except ValueError:  # a list that is not a queue
        return raw
    body = msg.get("body", "")
    if msg.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body).decode("utf-8", "replace")
    return json.dumps(msg.get("headers", {})) + body


def footprint(ctx) -> dict[str, int]:
    """Everything a submission writes: job and batch rows, broker messages, event streams. A job or batch another test
    module left running on this process's shared stack keeps writing its own keys and messages, so those count only
    when no job or batch row owns them (a refused submission has no row)."""
    with ctx.pool.connection() as conn:
        counts = {t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"] for t in ("research_jobs", "batches", "batch_items")}
        jobs = {str(row["id"]) for row in conn.execute("SELECT id FROM research_jobs UNION ALL SELECT id FROM batches")}
    from workers.app import app as celery_app

    housekeeping = {entry["task"] for entry in celery_app.conf.beat_schedule.values()}
    r = ctx.redis
    queued = [_message_text(m) for k in r.scan_iter(count=1000) if r.type(k) == "list" for m in r.lrange(k, 0, -1)]
    counts["queued messages no job owns"] = sum(
        1 for text in queued if not any(j in text for j in jobs) and not any(f'"task": "{t}"' in text for t in housekeeping))
    counts["job keys no job owns"] = sum(
        1 for k in r.scan_iter(match="finagent:jobs:*", count=1000) if k.split(":")[2] not in jobs)
    return counts


def test_the_footprint_sees_what_a_leaked_submission_would_leave(ctx):
    before = footprint(ctx)
    orphan = f"finagent:jobs:{uuid.uuid4()}:stream"
    body = base64.b64encode(json.dumps([[], {"question": QUESTION, "tickers": [UNKNOWN]}, {}]).encode()).decode()
    message = json.dumps({"body": body, "headers": {"task": "finagent.v1.submit_research"},
                          "properties": {"body_encoding": "base64"}})
    ctx.redis.set(orphan, "1")
    ctx.redis.rpush("test-footprint-queue", message)
    try:
        after = footprint(ctx)
    finally:
        ctx.redis.delete(orphan, "test-footprint-queue")
    assert after["job keys no job owns"] == before["job keys no job owns"] + 1
    assert after["queued messages no job owns"] == before["queued messages no job owns"] + 1
    assert footprint(ctx) == before


@pytest.fixture(scope="module")
def api(ctx):
    return TestClient(create_app(Runtime(settings=ctx.settings)))


def test_known_tickers_in_any_form_pass_and_unknown_ones_are_named(ctx):
    check_request(ctx, JobRequest(question=QUESTION, tickers=["$nvda", " NVDA", "aapl"]))
    with pytest.raises(InvalidRequest) as exc:
        check_request(ctx, JobRequest(question=QUESTION, tickers=["nvda", UNKNOWN.lower(), "$QQZZ"]))
    assert exc.value.field == "tickers" and str(exc.value).startswith(f"tickers: unknown tickers {UNKNOWN}, QQZZ:")


def test_the_api_refuses_everything_and_writes_nothing(ctx, api):
    before = footprint(ctx)
    bodies = [body for body, _ in BAD_JOBS.values()]
    bodies += [{"question": QUESTION, "tickers": ["$nvda", UNKNOWN]},
               {"question": QUESTION, "parent_job_id": str(uuid.uuid4())}]
    for body in bodies:
        resp = api.post("/v1/jobs", json=body, headers={"Idempotency-Key": f"bad-{uuid.uuid4()}"})
        assert resp.status_code == 422, (body, resp.text)
    unknown = api.post("/v1/jobs", json=bodies[-2]).json()["error"]
    assert unknown["code"] == "invalid_request" and unknown["details"][0]["loc"] == ["body", "tickers"]
    assert unknown["message"] == f"invalid request: tickers: unknown ticker {UNKNOWN}: no company with that symbol has been ingested"
    for raw, ctype in ((b'{"question": ', "application/json"), (b"[1]", "application/json"), (b"q=1", "text/plain")):
        assert api.post("/v1/jobs", content=raw, headers={"Content-Type": ctype}).status_code in (415, 422)
    # a batch whose every line is invalid, one of them only for its unknown ticker, is no batch at all
    lines = [json.dumps({"question": QUESTION, "tickers": [UNKNOWN]}), "What was revenue in Q5 2024?", '{"question": "x"}']
    resp = api.post("/v1/batches?name=all-bad", content="\n".join(lines), headers={"Content-Type": "application/x-ndjson"})
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "no_valid_lines", resp.text
    assert [d["loc"] for d in resp.json()["error"]["details"]] == [["body", 1], ["body", 2], ["body", 3]]
    assert UNKNOWN in resp.json()["error"]["details"][0]["msg"]
    assert footprint(ctx) == before


def test_the_celery_contract_refuses_with_a_readable_value_error(ctx):
    from tasks.public import submit_research

    before = footprint(ctx)
    for kwargs, says in (({"question": QUESTION, "tickers": [UNKNOWN]}, f"unknown ticker {UNKNOWN}"),
                         ({"question": "What was revenue in Q5 2024?"}, "is not a quarter"),
                         ({"question": "  \n "}, "the question is empty"),
                         ({"question": QUESTION, "max_iterations": -1}, "max_iterations"),
                         ({"question": QUESTION, "modee": "direct"}, "modee")):
        with pytest.raises(ValueError) as exc:
            submit_research(**kwargs)
        assert says in str(exc.value) and "\n" not in str(exc.value)
    assert footprint(ctx) == before


def _finagent(ctx, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(FINAGENT_DATA_DIR=str(ctx.settings.data_dir), FINAGENT_DATABASE_URL=ctx.database_url,
               FINAGENT_REDIS_URL=ctx.redis_url, FINAGENT_EMBEDDING_PROVIDER="hash", FINAGENT_LLM_PROVIDER="extractive")
    cmd = [str(FINAGENT)] if FINAGENT.exists() else [sys.executable, "-m", "ops.cli.main"]
    return subprocess.run([*cmd, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_the_cli_refuses_unknown_tickers_in_one_line_and_writes_nothing(ctx, tmp_path):
    before = footprint(ctx)
    r = _finagent(ctx, tmp_path, "ask", "--ticker", UNKNOWN, "--ticker", "nvda", QUESTION)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == f"invalid request: tickers: unknown ticker {UNKNOWN}: no company with that symbol has been ingested"
    batch = tmp_path / "questions.jsonl"
    batch.write_text(json.dumps({"question": QUESTION, "tickers": [UNKNOWN]}) + "\nWhat was revenue in fiscal 1850?\n")
    r = _finagent(ctx, tmp_path, "batch", "run", str(batch))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [f"{batch}:1: tickers: unknown ticker {UNKNOWN}: no company with that symbol has been ingested",
                                             f"{batch}:2: question: names a period that cannot exist: 'fiscal 1850' is before 1900: "
                                             "no filing or earnings call covers it",
                                             f"{batch}: no valid question in the file"]
    assert footprint(ctx) == before
