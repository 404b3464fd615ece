"""One layer owns the LLM's retries: real workers against the fault-injecting endpoint answering every request with a
503 (or a connection reset). The openai SDK makes 1 + max_tool_retries attempts and the Celery task around it adds
none, so the planner's call reaches the server exactly that often, counted across the task's executions, and the job
fails at once, naming the error and the attempts, instead of retrying (1 + r) x (1 + r) times."""
from __future__ import annotations

import pytest

from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job
from tests.support.fault_llm import FaultLLMServer

pytestmark = pytest.mark.integration

MAX_TOOL_RETRIES = 2


@pytest.mark.parametrize("fault, error_class, error_name", [("server_503", "system", "InternalServerError"),
                                                            ("reset", "network", "APIConnectionError")])
def test_a_failing_endpoint_gets_max_tool_retries_plus_one_attempts_per_call(ctx, sample_corpus, workers_with, fault,
                                                                            error_class, error_name):
    with FaultLLMServer(seed=11) as srv:
        # a lenient breaker, so that only the retry policy decides how many requests are sent
        workers_with(FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=srv.url, FINAGENT_LLM_API_KEY="sk-fault-server-test",
                     FINAGENT_LLM_TIMEOUT_S="2", FINAGENT_LLM_CACHE_TTL_S="0", FINAGENT_TOOL_RETRY_BACKOFF_S="0.05",
                     FINAGENT_MAX_TOOL_RETRIES=str(MAX_TOOL_RETRIES), FINAGENT_CIRCUIT_BREAKER_THRESHOLD="50")
        srv.set_faults(rate=1.0, kinds=(fault,))
        job, _ = run_job(ctx, question="What did NVDA report about revenue last quarter?", mode="direct")
        calls = srv.chat_calls()

    attempts = MAX_TOOL_RETRIES + 1
    assert [c.role for c in calls] == ["plan"] * len(calls) and len(calls) <= attempts
    assert [(c.fault, c.retry_count) for c in calls] == [(fault, n) for n in range(attempts)]  # the SDK's, not the task's
    assert job.status == "failed" and job.result.error_class == error_class
    assert job.result.error.startswith(f"The planner failed ({error_class} error): {error_name}"), job.result.error
    assert f"{attempts} HTTP attempts, not retried again" in job.result.error
    [plan_row] = [r for r in load_ledger(ctx.pool, job.id) if r["tool"] == "llm.plan"]
    assert plan_row["retries"] == 0 and plan_row["error_class"] == error_class  # the task ran once
