"""The API's ledger, suggestions, idempotency answers, POST cancel, and batch listing and cancelling, for real:
uvicorn serving `api_stub` on the tests' stack, driven through `finagent.client`."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from pydantic import SecretStr

from agent.persistence.jobstore import _IDEMPOTENCY_LOCK
from agent.persistence.ledger import record_call
from finagent import BadRequest, Conflict, FinagentClient, NotFound, Unauthorized
from tests.integration.served_api import ServedApp, quick_runtime

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"
KEY = "surface-key"


@pytest.fixture
def fa(api_url, sample_corpus, worker) -> Iterator[FinagentClient]:
    with FinagentClient(api_url, poll_interval=0.3) as client:
        yield client


def test_the_ledger_of_a_job_over_http(fa, ctx, api_url):
    job = fa.wait(fa.submit(QUESTION, mode="direct").job_id, timeout=120)
    assert job.status == "completed"
    secret = "sk-" + uuid.uuid4().hex
    with record_call(ctx.pool, job.job_id, "test:secret", "news_search", {"query": "pricing", "api_key": secret,
                                                                          "note": f"Bearer {secret}"}):
        pass
    ledger = fa.ledger(job.job_id)
    tools = [c.tool for c in ledger.calls]
    assert "llm.plan" in tools and "transcript_search" in tools
    assert [c.started_at for c in ledger.calls] == sorted(c.started_at for c in ledger.calls)
    assert all(c.duration_ms >= 0 and c.call_key for c in ledger.calls)
    searches = [c for c in ledger.calls if c.tool == "transcript_search"]  # one per quarter searched
    assert all(c.params and c.error_class is None for c in searches) and any(c.result_size > 0 for c in searches)
    assert ledger.prompt_tokens == sum(c.prompt_tokens for c in ledger.calls) and ledger.errors == 0
    raw = httpx.get(f"{api_url}/v1/jobs/{job.job_id}/ledger", timeout=30).text
    assert secret not in raw  # a secret in a call's parameters is masked
    masked = next(c for c in ledger.calls if c.call_key == "test:secret")
    assert masked.params["api_key"] == "********" and masked.params["query"] == "pricing"
    for unknown in ("not-a-uuid", str(uuid.uuid4())):
        with pytest.raises(NotFound):
            fa.ledger(unknown)


def test_the_ledger_needs_the_key_when_keys_are_configured(ctx, sample_corpus, worker):
    with ServedApp(quick_runtime(ctx.settings, api_keys=[SecretStr(KEY)])) as served:
        with FinagentClient(served.url, api_key=KEY) as keyed, FinagentClient(served.url) as anonymous:
            job_id = keyed.submit(QUESTION, mode="direct").job_id
            with pytest.raises(Unauthorized):
                anonymous.ledger(job_id)
            keyed.wait(job_id, timeout=120)
            assert keyed.ledger(job_id).job_id == job_id


def test_a_rejected_job_suggests_the_known_ticker_near_its_unknown_one(fa):
    job = fa.wait(fa.submit("What was APPL's revenue last quarter?", mode="direct").job_id, timeout=120)
    assert job.status == "rejected" and job.error and "APPL" in job.error
    assert job.suggestion is not None and job.suggestion.tickers[0] == "AAPL"
    assert "did you mean AAPL" in job.suggestion.message
    done = fa.wait(fa.submit(QUESTION, mode="direct").job_id, timeout=120)
    assert done.status == "completed" and done.suggestion is None
    with pytest.raises(BadRequest) as exc:  # an unknown ticker given as such is refused before any job exists
        fa.submit(QUESTION, tickers=["NVDX"])
    assert "did you mean NVDA?" in exc.value.error.message  # type: ignore[union-attr]


def test_a_period_out_of_range_suggests_the_companys_range(fa):
    job = fa.wait(fa.submit("What did NVDA say about data center revenue in Q1 2031?", mode="direct").job_id, timeout=120)
    assert job.status == "failed" and job.error and "Q1 2031 is not available for NVDA" in job.error
    assert job.suggestion is not None and set(job.suggestion.available) == {"NVDA"}
    assert job.suggestion.available["NVDA"] in job.error and "Q1 2031 is outside it" in job.suggestion.message


def test_idempotency_key_reused_is_422_and_in_flight_is_409(fa, api_url, ctx):
    key = f"surface-{uuid.uuid4()}"
    with psycopg.connect(ctx.database_url, autocommit=True) as other:  # another submission holding the key
        assert other.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_IDEMPOTENCY_LOCK, key)).fetchone()[0]
        with pytest.raises(Conflict) as in_flight:
            fa.submit(QUESTION, idempotency_key=key, mode="direct")
        assert in_flight.value.code == "idempotency_in_flight" and in_flight.value.retry_after == 1.0
        raw = httpx.post(f"{api_url}/v1/jobs", json={"question": QUESTION}, headers={"Idempotency-Key": key}, timeout=30)
        assert raw.status_code == 409 and raw.headers["Retry-After"] == "1"
    first = fa.submit(QUESTION, idempotency_key=key, mode="direct")  # the lock went with the session
    assert first.created
    assert fa.submit(QUESTION, idempotency_key=key, mode="direct").job_id == first.job_id
    with pytest.raises(BadRequest) as reused:
        fa.submit(QUESTION, idempotency_key=key, mode="detailed")
    assert reused.value.status_code == 422 and reused.value.code == "idempotency_key_reused"
    assert first.job_id in reused.value.error.message  # type: ignore[union-attr]
    assert reused.value.error.details[0].loc == ["header", "Idempotency-Key"]  # type: ignore[union-attr]
    fa.wait(first.job_id, timeout=120)


def test_post_cancel_is_delete(fa, api_url):
    done = fa.wait(fa.submit(QUESTION, mode="direct").job_id, timeout=120)
    for method in ("DELETE", "POST"):
        path = f"/v1/jobs/{done.job_id}" + ("/cancel" if method == "POST" else "")
        resp = httpx.request(method, api_url + path, timeout=30)
        assert resp.status_code == 409 and resp.json()["error"]["code"] == "job_finished", (method, resp.text)
    assert httpx.post(f"{api_url}/v1/jobs/{uuid.uuid4()}/cancel", timeout=30).status_code == 404


def test_batches_are_listed_and_cancelled(ctx, sample_corpus, workers_with):
    # one batch job at a time, each model call slow: most of the batch is still waiting when it is cancelled
    workers_with(FINAGENT_LLM_LATENCY_S="1.5", FINAGENT_BATCH_CONCURRENCY="1")
    with ServedApp(quick_runtime(ctx.settings, api_keys=[], batch_concurrency=1)) as served, \
            FinagentClient(served.url, poll_interval=0.3) as fa:
        questions = [f"{QUESTION} (batch line {n})" for n in range(4)]
        first = fa.submit_batch(questions[:1], name=f"surface-{uuid.uuid4().hex[:8]}", mode="direct")
        second = fa.submit_batch(questions[1:], name=f"surface-{uuid.uuid4().hex[:8]}", mode="direct")

        listed: list[str] = []
        page = fa.list_batches(limit=1)
        while True:
            assert len(page.items) == 1
            listed += [b.batch_id for b in page.items]
            if {first.batch_id, second.batch_id} <= set(listed) or not page.next_cursor:
                break
            page = fa.list_batches(limit=1, cursor=page.next_cursor)
        assert listed.index(second.batch_id) < listed.index(first.batch_id)  # newest first, one batch a page
        summary = next(b for b in fa.iter_batches() if b.batch_id == second.batch_id)
        assert summary.total == 3 and sum(summary.counts.values()) == 3 and summary.name == second.name

        cancelled = fa.cancel_batch(second.batch_id)
        assert cancelled.cancelled and len(cancelled.cancelled) + cancelled.finished == 3
        deadline = time.monotonic() + 120
        while (progress := fa.batch(second.batch_id)).done < progress.total:
            assert time.monotonic() < deadline, progress
            time.sleep(0.5)
        # each job asked to stop ends cancelled, unless it was ending anyway as it was asked
        assert progress.counts.get("cancelled", 0) >= 1
        assert progress.counts.get("cancelled", 0) + progress.counts.get("completed", 0) == 3, progress.counts
        with pytest.raises(Conflict) as again:
            fa.cancel_batch(second.batch_id)
        assert again.value.code == "batch_finished"
        with pytest.raises(NotFound):
            fa.cancel_batch(str(uuid.uuid4()))
        [item] = list(fa.batch_results(first.batch_id))
        assert item.job_id and fa.wait(item.job_id, timeout=120).status == "completed"  # nothing left running
