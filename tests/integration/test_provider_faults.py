"""Real workers with FINAGENT_LLM_PROVIDER=openai against the fault-injecting OpenAI-compatible server
(tests/support/fault_llm.py): a clean endpoint answers a job end to end over HTTP; an endpoint that fails about 30% of
calls with every kind of fault still ends every job completed or failed with a reason, and the server's records and
the ledgers show the SDK's retries (the task adds none of its own for the endpoint's errors), the one structured-output
repair and the shared breaker."""
from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from agent.infra.error_classes import ERROR_CLASSES
from agent.models.job import JobRequest
from agent.persistence.ledger import load_ledger
from ops.cli.ask import follow_job
from tests.integration.jobs import run_job
from tests.support.fault_llm import ALL_FAULTS, FaultLLMServer

pytestmark = pytest.mark.integration

TOPICS = ["revenue", "gross margin", "operating income", "guidance", "data center revenue", "services revenue"]
QUESTIONS = [f"What did {ticker} report about {topic} last quarter?" for ticker in ("NVDA", "AAPL") for topic in TOPICS]


def provider_env(srv: FaultLLMServer, **extra: str) -> dict[str, str]:
    return dict(FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=srv.url, FINAGENT_LLM_API_KEY="sk-fault-server-test",
                FINAGENT_LLM_TIMEOUT_S="2", FINAGENT_LLM_CACHE_TTL_S="0", FINAGENT_TOOL_RETRY_BACKOFF_S="0.05",
                FINAGENT_TOP_K_PER_QUARTER="3") | extra


def test_a_job_over_http_completes_with_a_cited_answer(ctx, sample_corpus, workers_with):
    with FaultLLMServer(seed=1) as srv:
        workers_with(**provider_env(srv))
        job, _ = run_job(ctx, question="What was NVDA's revenue last quarter?", mode="direct")
        calls = srv.chat_calls()
    assert job.status == "completed", (job.status, job.result.error)
    assert job.result.citations and any(f"[{c.marker.strip('[]')}]" in job.result.answer for c in job.result.citations)
    roles = Counter(c.role for c in calls)
    assert {"plan", "extract", "compose", "evaluate"} <= set(roles), roles
    assert {c.form for c in calls if c.role != "compose"} == {"json_schema"}  # auto: an unknown owner gets the OpenAI form
    assert all(c.fault == "ok" and c.status == 200 and not c.repair for c in calls)
    plan = next(c for c in calls if c.role == "plan")
    assert "NVDA" in plan.content and plan.model == "gpt-4o-mini"


class BreakerWatch:
    """Counts the shared LLM breaker's openings by polling its opened_at key in Redis (each opening writes a new one)."""

    def __init__(self, redis, name: str):
        self.key, self.redis = f"finagent:breaker:{name}:opened_at", redis
        self.openings: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            value = self.redis.get(self.key)
            if value:
                self.openings.add(value)

    def __enter__(self) -> BreakerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_faulty_provider_ends_every_job_completed_or_failed_with_a_reason(ctx, sample_corpus, workers_with):
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    with FaultLLMServer(seed=7, hold_s=4.0) as srv:
        # one SDK retry per call (and no Celery retry of what it gave up on), a breaker that opens after 2 failed role
        # calls for 3 s
        workers_with(**provider_env(srv, FINAGENT_MAX_TOOL_RETRIES="1", FINAGENT_CIRCUIT_BREAKER_THRESHOLD="2",
                                    FINAGENT_CIRCUIT_BREAKER_RESET_S="3"))
        srv.set_faults(rate=0.3, kinds=ALL_FAULTS)
        started = time.monotonic()
        with BreakerWatch(ctx.redis, f"llm:{srv.url.split('/')[2]}") as breaker:
            ids = [create(ctx, CeleryDispatcher(), JobRequest(question=q, mode="direct"))[0] for q in QUESTIONS]
            jobs = [follow_job(ctx, job_id, timeout_s=150)[0] for job_id in ids]
        elapsed = time.monotonic() - started
        calls = srv.chat_calls()

    ledgers = {job.id: load_ledger(ctx.pool, job.id) for job in jobs}
    statuses = Counter(job.status for job in jobs)
    for job in jobs:
        assert job.status in ("completed", "failed"), (job.id, job.status, job.step)  # nothing lost, nothing hanging
        if job.status == "failed":
            assert job.result.error and job.result.error_class in ERROR_CLASSES, job.result
        else:
            assert job.result.answer
    faults = Counter(c.fault for c in calls)
    sdk_retries = sum(1 for c in calls if c.retry_count > 0)
    repairs = sum(1 for c in calls if c.repair and c.retry_count == 0)  # an SDK retry re-sends the same repair
    llm_rows = [r for rows in ledgers.values() for r in rows if r["tool"].startswith("llm.")]
    celery_retries = sum(r["retries"] for r in llm_rows)
    failed_calls = Counter(r["error_class"] for r in llm_rows if r["error_class"])
    print(f"provider faults: jobs {dict(statuses)} in {elapsed:.0f} s; {len(calls)} HTTP calls, injected {dict(faults)}; "
          f"SDK retries {sdk_retries}, repairs {repairs}, Celery retries {celery_retries}, calls failed for good "
          f"{dict(failed_calls)}, breaker openings {len(breaker.openings)}; failed: {[j.result.error for j in jobs if j.status == 'failed']}")
    assert sum(n for kind, n in faults.items() if kind != "ok") >= 0.15 * len(calls)  # the server did fail about 30%
    assert len({k for k in faults if k != "ok"}) >= 5
    assert sdk_retries > 0 and repairs > 0
    # a repair answers a reply that broke its schema, never a good one
    assert repairs <= sum(1 for c in calls if c.fault in ("malformed_json", "truncated_json", "off_schema") and c.role != "compose")
    assert statuses["completed"] >= len(jobs) // 2  # retries and the repair absorb most faults


def test_an_outage_fails_one_job_readably_and_the_shared_breaker_holds_the_next_until_it_recovers(ctx, sample_corpus, workers_with):
    """Two 503s in a row: the first job's planner fails after the SDK's retry (the task does not retry it again),
    which opens the breaker, and the job fails naming the error; the next job's planner is refused by the open breaker
    without a request, its task waits for the breaker's trial, and it completes."""
    with FaultLLMServer(seed=3) as srv:
        workers_with(**provider_env(srv, FINAGENT_MAX_TOOL_RETRIES="1", FINAGENT_CIRCUIT_BREAKER_THRESHOLD="1",
                                    FINAGENT_CIRCUIT_BREAKER_RESET_S="3"))
        srv.set_faults(script=["server_503"] * 2)
        with BreakerWatch(ctx.redis, f"llm:{srv.url.split('/')[2]}") as breaker:
            failed, _ = run_job(ctx, question="What did NVDA report about revenue last quarter?", mode="direct")
            calls_before = len(srv.chat_calls())
            recovered, _ = run_job(ctx, question="What did AAPL report about revenue last quarter?", mode="direct")
        calls = srv.chat_calls()
    assert failed.status == "failed" and failed.result.error_class == "system"
    assert failed.result.error.startswith("The planner failed (system error): InternalServerError") and "overloaded" in failed.result.error
    [plan_row] = [r for r in load_ledger(ctx.pool, failed.id) if r["tool"] == "llm.plan"]
    assert plan_row["retries"] == 0 and plan_row["error_class"] == "system"
    assert [c.fault for c in calls[:calls_before]] == ["server_503"] * 2 and len(breaker.openings) == 1
    assert recovered.status == "completed" and recovered.result.citations
    [retried_plan] = [r for r in load_ledger(ctx.pool, recovered.id) if r["tool"] == "llm.plan"]
    assert retried_plan["retries"] == 1 and retried_plan["error_class"] is None  # refused once by the breaker, then served
    assert calls[calls_before].role == "plan" and calls[calls_before].fault == "ok"  # the refused attempt sent nothing
