"""finagent.client at the network edge (httpx.MockTransport): the tool ledger, listing and cancelling batches, and
the two idempotency answers (422: the key reused with another request; 409: a submission with it still in flight)."""
from __future__ import annotations

import datetime as dt

import httpx
import pytest

from finagent import BadRequest, Conflict, FinagentClient
from finagent.models import ErrorBody, ErrorDetail, ErrorInfo

NOW = dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.UTC).isoformat()
CALL = {"call_key": "j1:1:search:0", "tool": "transcript_search", "params": {"ticker": "ACME", "api_key": "********"},
        "started_at": NOW, "duration_ms": 12.5, "result_size": 15, "retries": 1, "error_class": None, "error": None,
        "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "cached": False, "llm_requests": 0}


def _summary(n: int) -> dict:
    return {"batch_id": f"b{n}", "name": f"night-{n}", "created_at": NOW, "updated_at": NOW, "total": 3,
            "counts": {"completed": 2, "queued": 1}, "done": 2}


def test_ledger_reads_the_jobs_tool_calls():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"job_id": "j1", "calls": [CALL], "retries": 1})

    with FinagentClient("http://api", transport=httpx.MockTransport(handler)) as client:
        ledger = client.ledger("j1")
    assert seen[0].method == "GET" and seen[0].url.path == "/v1/jobs/j1/ledger"
    [call] = ledger.calls
    assert (call.tool, call.retries, call.params["ticker"], call.started_at.tzinfo is not None) == ("transcript_search", 1, "ACME", True)
    assert ledger.retries == 1 and ledger.errors == 0


def test_batches_are_listed_page_by_page_and_cancelled():
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.method == "POST":
            return httpx.Response(202, json={"batch_id": "b1", "cancelled": ["j1", "j2"], "finished": 1,
                                             "status_url": "/v1/batches/b1"})
        if request.url.params.get("cursor") == "c2":
            return httpx.Response(200, json={"items": [_summary(3)], "next_cursor": None})
        return httpx.Response(200, json={"items": [_summary(1), _summary(2)], "next_cursor": "c2"})

    with FinagentClient("http://api", transport=httpx.MockTransport(handler)) as client:
        assert [b.batch_id for b in client.iter_batches(page_size=2)] == ["b1", "b2", "b3"]
        assert [dict(r.url.params) for r in requests] == [{"limit": "2"}, {"limit": "2", "cursor": "c2"}]
        done = client.cancel_batch("b1")
    assert requests[-1].method == "POST" and requests[-1].url.path == "/v1/batches/b1/cancel"
    assert done.cancelled == ["j1", "j2"] and done.finished == 1


def _refusal(status: int, code: str, retry_after: str | None = None) -> httpx.MockTransport:
    body = ErrorBody(error=ErrorInfo(code=code, message="idempotency key 'k'", details=[ErrorDetail(loc=["header", "Idempotency-Key"], msg="m")]))
    headers = {"Retry-After": retry_after} if retry_after else {}
    return httpx.MockTransport(lambda r: httpx.Response(status, json=body.model_dump(), headers=headers))


def test_the_two_idempotency_refusals_are_told_apart():
    with pytest.raises(BadRequest) as reused:
        FinagentClient("http://api", transport=_refusal(422, "idempotency_key_reused")).submit("What was revenue?", idempotency_key="k")
    assert reused.value.code == "idempotency_key_reused"
    with pytest.raises(Conflict) as in_flight:
        FinagentClient("http://api", transport=_refusal(409, "idempotency_in_flight", "1")).submit("What was revenue?", idempotency_key="k")
    assert in_flight.value.code == "idempotency_in_flight" and in_flight.value.retry_after == 1.0
