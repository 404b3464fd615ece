"""finagent.client at the network edge (httpx.MockTransport): typed errors carrying the server's error body, the
Idempotency-Key header, and wait() falling back to polling and giving up on time."""
from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path

import httpx
import pytest

from finagent import BadRequest, Conflict, FinagentClient, FinagentError, NotFound, NotReady, ServerError, Unauthorized
from finagent.models import ErrorBody, ErrorInfo

JOB = {"job_id": "j1", "status": "running", "step": "1:search", "question": "What was revenue?"}


def _error(status: int, code: str, message: str = "m") -> httpx.Response:
    return httpx.Response(status, json=ErrorBody(error=ErrorInfo(code=code, message=message)).model_dump())


@pytest.mark.parametrize("status,kind", [(400, BadRequest), (401, Unauthorized), (404, NotFound), (409, Conflict),
                                         (422, BadRequest), (503, NotReady), (500, ServerError)])
def test_errors_are_typed_and_carry_the_body(status, kind):
    client = FinagentClient("http://api", transport=httpx.MockTransport(lambda r: _error(status, "some_code", "what went wrong")))
    with pytest.raises(kind) as exc:
        client.get("j1")
    assert exc.value.status_code == status and exc.value.code == "some_code"
    assert exc.value.error is not None and exc.value.error.message == "what went wrong"


def test_a_503_carries_the_servers_retry_after():
    def down(request: httpx.Request) -> httpx.Response:
        body = ErrorBody(error=ErrorInfo(code="dependency_unavailable", message="postgres is unavailable (...)"))
        return httpx.Response(503, json=body.model_dump(), headers={"Retry-After": "5"})

    with pytest.raises(NotReady) as exc:
        FinagentClient("http://api", transport=httpx.MockTransport(down)).submit("What was revenue?")
    assert exc.value.code == "dependency_unavailable" and exc.value.retry_after == 5.0
    with pytest.raises(NotReady) as exc:  # no header: nothing to wait for that the server said
        FinagentClient("http://api", transport=httpx.MockTransport(lambda r: _error(503, "not_ready"))).get("j1")
    assert exc.value.retry_after is None


def test_a_non_api_error_page_still_raises():
    client = FinagentClient("http://api", transport=httpx.MockTransport(lambda r: httpx.Response(502, text="<html>bad gateway</html>")))
    with pytest.raises(FinagentError) as exc:
        client.get("j1")
    assert exc.value.status_code == 502 and exc.value.error is None and "bad gateway" in str(exc.value)


def test_submit_sends_the_key_and_the_idempotency_header():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202, json={"job_id": "j1", "created": True, "status": "queued", "status_url": "/v1/jobs/j1",
                                         "events_url": "/v1/jobs/j1/events"})

    with FinagentClient("http://api/", api_key="secret", transport=httpx.MockTransport(handler)) as client:
        sub = client.submit("What was revenue?", idempotency_key="req-1", mode="direct", tickers=["ABC"])
    assert sub.job_id == "j1" and sub.created
    req = seen[0]
    assert req.url == "http://api/v1/jobs" and req.headers["Authorization"] == "Bearer secret"
    assert req.headers["Idempotency-Key"] == "req-1"
    assert json.loads(req.content) == {"question": "What was revenue?", "mode": "direct", "tickers": ["ABC"]}


def test_wait_polls_when_the_stream_fails_and_returns_the_finished_job():
    polls = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            raise httpx.ConnectError("stream refused")
        polls.append(time.monotonic())
        return httpx.Response(200, json=JOB | {"status": "completed" if len(polls) >= 3 else "running"})

    client = FinagentClient("http://api", poll_interval=0.01, transport=httpx.MockTransport(handler))
    assert client.wait("j1", timeout=5).status == "completed"
    assert len(polls) == 3


def test_wait_keeps_asking_through_a_server_whose_redis_or_postgres_is_down():
    polls = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):  # Redis down for the whole wait
            return _error(503, "dependency_unavailable", "redis is unavailable (...)")
        polls.append(request)
        if len(polls) <= 2:  # then Postgres too, for two polls
            return _error(503, "dependency_unavailable", "postgres is unavailable (...)")
        return httpx.Response(200, json=JOB | {"status": "completed"})

    client = FinagentClient("http://api", poll_interval=0.01, transport=httpx.MockTransport(handler))
    assert client.wait("j1", timeout=5).status == "completed"
    assert len(polls) == 3


def test_wait_gives_up_on_time():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            raise httpx.ReadTimeout("no events")
        return httpx.Response(200, json=JOB)

    client = FinagentClient("http://api", poll_interval=0.05, transport=httpx.MockTransport(handler))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="j1"):
        client.wait("j1", timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2


def test_events_skip_pings_and_keep_ids():
    stream = ('id: 1-0\nevent: job_status\ndata: {"type": "job_status", "job_id": "j1", "data": {"status": "queued"}}\n\n'
              ": ping - 2026-01-01\n\n"
              'id: 2-0\nevent: planning\ndata: {"type": "planning", "job_id": "j1", "message": "plan"}\n\n')

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("Last-Event-ID") == "0-5"
        return httpx.Response(200, text=stream, headers={"Content-Type": "text/event-stream"})

    client = FinagentClient("http://api", transport=httpx.MockTransport(handler))
    events = list(client.events("j1", last_event_id="0-5"))
    assert [(e.id, e.type) for e in events] == [("1-0", "job_status"), ("2-0", "planning")]


CLIENT_PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "python" / "src" / "finagent"


def test_the_client_imports_only_its_declared_dependencies():
    """The client distribution declares httpx, httpx-sse and pydantic (pydantic-core comes with pydantic); anything
    else it imported would fail in a service's venv (tests/integration/test_client_alone.py installs it alone)."""
    allowed = set(sys.stdlib_module_names) | {"httpx", "httpx_sse", "pydantic", "pydantic_core", "finagent"}
    imported = {}
    for path in CLIENT_PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            imported |= {name.split(".")[0]: path.name for name in names}
    assert {"finagent", "httpx", "pydantic"} <= imported.keys()
    assert {top: where for top, where in imported.items() if top not in allowed} == {}


def test_the_server_answers_with_the_clients_models():
    """One definition of the contract: the server's modules re-export the client's classes, they do not copy them."""
    import finagent.models as contract
    from agent.models import batch, job, research
    from agent.settings import AnswerMode

    assert job.JobRequest is contract.JobRequest and job.JobResult is contract.JobResult
    assert job.FINAL_STATUSES is contract.FINAL_STATUSES
    assert batch.BatchItem is contract.BatchItem and batch.BatchProgress is contract.BatchProgress
    assert research.Citation is contract.Citation and research.Evaluation is contract.Evaluation
    assert AnswerMode is contract.AnswerMode
