"""No secret leaves the process that holds it: distinctive keys are planted in the environment of real workers and of
the API, jobs run that succeed and that fail because a provider answers 401 or 500 with a body that echoes the key
(as OpenAI's does), and Tavily answers 401 echoing its key; then every sink is searched for every planted value.

Sinks, one test each: worker log files; the jobs' event streams; job results (the API's view and Celery's get_job);
every text of every row of every table; what Celery stores and publishes (the result backend, and the task events
Flower receives: task args, kwargs, results, exceptions and tracebacks); the API's responses and its log.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.integration.jobs import run_job
from tests.integration.tavily_server import tavily_server
from tests.support import lexical_model
from tests.support.fault_llm import FaultLLMServer

pytestmark = pytest.mark.integration

TAG = secrets.token_hex(4)
LLM_KEY = f"sk-plantedLLM{TAG}key0001"
OPENAI_KEY = f"sk-proj-plantedOPENAI{TAG}0002"  # what the OpenAI SDK would read from OPENAI_API_KEY itself
TAVILY_KEY = f"tvly-dev-plantedTAVILY{TAG}0003"
API_KEY = f"api-planted-{TAG}-0004"
FLOWER_PASSWORD = f"flowerpw{TAG}0005"
PG_PASSWORD = f"pgpw{TAG}0006"
ADMIN_KEY = f"admin-planted-{TAG}-0007"
PLANTED = [LLM_KEY, OPENAI_KEY, TAVILY_KEY, API_KEY, FLOWER_PASSWORD, PG_PASSWORD, ADMIN_KEY]


def leaks(text: str) -> list[str]:
    # the tag alone is enough to find a key cut short or partly starred
    return [s for s in PLANTED if s in text] + ([f"tag {TAG}"] if TAG in text else [])


class EchoingLLM(FaultLLMServer):
    """The fault server, with OpenAI's habit of echoing the key it refused: `echo` = 401 or 500 answers every call so."""

    echo: int | None = None

    def _complete(self, handler: Any, body: dict[str, Any]) -> None:
        if self.echo is None:
            return super()._complete(handler, body)
        key = handler.headers.get("Authorization", "").removeprefix("Bearer ")
        message = (f"Incorrect API key provided: {key}. You can find your API key at https://platform.openai.com/account/api-keys."
                   if self.echo == 401 else f"The server had an error processing your request with key {key}.")
        self._record(path=handler.path, role=lexical_model.guess_role(body), repair=False, model=str(body.get("model", "")),
                     messages=body.get("messages") or [], response_format=body.get("response_format"), extra={}, form="text",
                     fault=f"echo_{self.echo}", status=self.echo, retry_count=0)
        handler.send_json(self.echo, {"error": {"message": message, "type": "invalid_request_error", "param": None,
                                                "code": "invalid_api_key" if self.echo == 401 else None}})


def with_news(body: dict[str, Any]) -> str:
    """The lexical model, with plans that also ask for the latest news (so the Tavily edge is called)."""
    reply = lexical_model.respond(body)
    if lexical_model.guess_role(body) == "plan":
        plan = json.loads(reply) | {"data_sources": ["earnings_transcripts", "news"], "needs_latest_news": True}
        return json.dumps(plan)
    return reply


def database_url_with_password(url: str) -> str:
    """The embedded Postgres trusts local connections, so a password in its URL is accepted and ignored."""
    parts = urlsplit(url)
    user = parts.username or "postgres"
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{user}:{PG_PASSWORD}@{host}", parts.path, parts.query, parts.fragment))


class TaskEvents:
    """What Flower sees: every Celery task event on the broker, captured from the start of the jobs."""

    def __init__(self) -> None:
        from workers.app import app

        self.app, self.events, self.receiver = app, [], None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.app.connection() as conn:
            self.receiver = self.app.events.Receiver(conn, handlers={"*": self.events.append})
            self.ready.set()
            self.receiver.capture(limit=None, timeout=None, wakeup=False)

    def __enter__(self) -> TaskEvents:
        self.thread.start()
        assert self.ready.wait(30)
        time.sleep(0.5)  # the receiver's queue is bound once capture() runs
        return self

    def __exit__(self, *exc: object) -> None:
        if self.receiver is not None:
            self.receiver.should_stop = True
        self.thread.join(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scenario:
    def __init__(self, ctx, env: dict[str, str], workers_log_dir: Path):
        self.ctx, self.env, self.log_dir = ctx, env, workers_log_dir
        self.jobs: dict[str, Any] = {}
        self.events: dict[str, list] = {}
        self.task_events: list[dict] = []
        self.api_log = Path()
        self.api_responses: list[str] = []


@pytest.fixture(scope="module")
def scenario(ctx, sample_corpus, workers, tmp_path_factory) -> Iterator[Scenario]:
    log_dir = tmp_path_factory.mktemp("secret-logs")
    planted_env = {
        "FINAGENT_LLM_API_KEY": LLM_KEY, "OPENAI_API_KEY": OPENAI_KEY, "FINAGENT_OPENAI_API_KEY": OPENAI_KEY,
        "FINAGENT_TAVILY_API_KEY": TAVILY_KEY, "FINAGENT_API_KEYS": json.dumps([API_KEY]),
        "FINAGENT_ADMIN_API_KEYS": json.dumps([ADMIN_KEY]),
        "FINAGENT_FLOWER_BASIC_AUTH": f"ops:{FLOWER_PASSWORD}", "FINAGENT_DATABASE_URL": database_url_with_password(ctx.database_url),
    }
    with EchoingLLM(seed=3) as llm, tavily_server(401, {"detail": {"error": f"Unauthorized: invalid API key {TAVILY_KEY}"}}) as tavily:
        llm.responder = with_news
        llm.require_key = LLM_KEY
        env = planted_env | {
            "FINAGENT_LLM_PROVIDER": "openai", "FINAGENT_LLM_BASE_URL": llm.url, "FINAGENT_LLM_JSON_MODE": "json_object",
            "FINAGENT_TAVILY_BASE_URL": tavily.url, "FINAGENT_LLM_CACHE_TTL_S": "0", "FINAGENT_MAX_TOOL_RETRIES": "1",
            "FINAGENT_TOOL_RETRY_BACKOFF_S": "0.2", "FINAGENT_CIRCUIT_BREAKER_THRESHOLD": "100",
        }
        workers.ensure(**env)
        sc = Scenario(ctx, env, ctx.settings.data_dir)
        try:
            with TaskEvents() as captured:
                for name, echo in (("succeeds", None), ("llm_401", 401), ("llm_500", 500)):
                    llm.echo = echo
                    job, events = run_job(ctx, timeout_s=240, question=f"What was NVDA revenue last quarter and the latest news? ({name})")
                    sc.jobs[name], sc.events[name] = job, events
                time.sleep(1.0)  # the last task events arrive
            sc.task_events = captured.events
            assert tavily.requests, "the Tavily edge was never called"
            assert {c.fault for c in llm.chat_calls()} >= {"ok", "echo_401", "echo_500"}
            sc.api_log, sc.api_responses = run_api(ctx, env, log_dir, sc.jobs)
            yield sc
        finally:
            workers.stop()


def run_api(ctx, env: dict[str, str], log_dir: Path, jobs: dict[str, Any]) -> tuple[Path, list[str]]:
    """The API in its own process, with the planted keys, asked for the jobs, their events and some bad requests."""
    port = free_port()
    log = log_dir / "api.log"
    api_env = dict(os.environ) | env | {"FINAGENT_REDIS_URL": ctx.redis_url}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api_stub.asgi:app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "debug"], env=api_env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    # the jobs were made without a key (not through the API): over HTTP only an admin key reads them
    good = {"Authorization": f"Bearer {ADMIN_KEY}"}
    responses: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.3)
        with httpx.Client(base_url=url, timeout=30) as c:
            for job in jobs.values():
                responses.append(c.get(f"/v1/jobs/{job.id}", headers=good).text)
                responses.append(c.get(f"/v1/jobs/{job.id}/events", headers=good).text)
            responses.append(c.get("/v1/jobs", headers=good).text)
            responses.append(c.get("/v1/jobs", headers={"X-API-Key": API_KEY}).text)
            # a caller that sends a secret where it does not belong gets an error that does not repeat it
            for bad in ({"Authorization": f"Bearer {LLM_KEY}"}, {"X-API-Key": TAVILY_KEY}, {"Authorization": f"Basic ops:{FLOWER_PASSWORD}"}):
                r = c.get("/v1/jobs", headers=bad)
                assert r.status_code == 401
                responses.append(r.text)
            r = c.post("/v1/jobs", headers=good, json={"question": "What was NVDA revenue?", "mode": LLM_KEY})
            assert r.status_code == 422
            responses.append(r.text)
            responses.append(c.get("/readyz").text)
    finally:
        proc.terminate()
        proc.wait(20)
    return log, responses


# ---------- the jobs did what the scenario needs ----------
def test_the_scenario_reached_every_failure(scenario):
    jobs = scenario.jobs
    assert jobs["succeeds"].status == "completed" and jobs["succeeds"].result.news.startswith("error")
    for name in ("llm_401", "llm_500"):
        assert jobs[name].status == "failed", (name, jobs[name].status)
    # the failures kept their reasons, with the key masked where it was echoed
    assert "Incorrect API key provided" in (jobs["llm_401"].result.error or "")
    assert "authentication" in (jobs["llm_401"].result.error_class or jobs["llm_401"].result.error or "")


# ---------- one sink each ----------
def test_worker_logs_hold_no_secret(scenario):
    logs = {p.name: p.read_text(errors="replace") for p in scenario.log_dir.glob("*.log")}
    text = "\n".join(logs.values())
    assert "failed for good" in text and "Incorrect API key provided" in text  # the failures were logged
    assert {name: leaks(t) for name, t in logs.items() if leaks(t)} == {}


def test_event_streams_hold_no_secret(scenario):
    from agent.infra.events import stream_key

    for name, job in scenario.jobs.items():
        stream = json.dumps([fields for _, fields in scenario.ctx.redis.xrange(stream_key(job.id))], default=str)
        followed = json.dumps([e.model_dump(mode="json") for e in scenario.events[name]])
        assert leaks(stream) == [] and leaks(followed) == [], name
    assert "news" in json.dumps([e.model_dump(mode="json") for e in scenario.events["succeeds"]])


def test_job_results_hold_no_secret(scenario):
    from workers.app import app

    for name, job in scenario.jobs.items():
        assert leaks(job.result.model_dump_json()) == [], name
        # what the Celery contract returns, through the real workers
        view = app.send_task("finagent.v1.get_job", args=[job.id]).get(timeout=60)
        assert view["status"] == job.status and leaks(json.dumps(view)) == [], name


def test_no_row_of_any_table_holds_a_secret(scenario):
    with scenario.ctx.pool.connection() as conn:
        tables = [r["table_name"] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='public' AND table_type='BASE TABLE'").fetchall()]
        dumped = {t: "\n".join(r["row"] for r in conn.execute(f'SELECT t::text AS row FROM "{t}" t').fetchall()) for t in tables}
    assert "job_tool_calls" in dumped and "Incorrect API key provided" in dumped["job_tool_calls"]  # the errors were stored
    assert {t: leaks(text) for t, text in dumped.items() if leaks(text)} == {}


def test_celery_results_and_task_events_hold_no_secret(scenario):
    redis = scenario.ctx.redis
    backend = {k.decode() if isinstance(k, bytes) else k: redis.get(k) for k in redis.scan_iter("celery-task-meta-*")}
    stored = json.dumps({k: (v.decode(errors="replace") if isinstance(v, bytes) else v) for k, v in backend.items()})
    assert '"RETRY"' in stored or "retr" in json.dumps(scenario.task_events)  # the 500s were retried through Celery
    assert leaks(stored) == []
    events = json.dumps(scenario.task_events, default=str)
    kinds = {e.get("type") for e in scenario.task_events}
    # no task-retried: the SDK owns an LLM call's retries (agent/infra/client_retries.py), so the echoing 500 ends the
    # call inside its task, and its error reaches the events and results checked here
    assert {"task-sent", "task-received", "task-succeeded"} <= kinds, kinds
    assert leaks(events) == []


def test_api_responses_and_log_hold_no_secret(scenario):
    assert len(scenario.api_responses) >= 8 and any("Incorrect API key provided" in r for r in scenario.api_responses)
    assert [leaks(r) for r in scenario.api_responses if leaks(r)] == []
    log = scenario.api_log.read_text(errors="replace")
    assert "GET /v1/jobs" in log
    assert leaks(log) == []
