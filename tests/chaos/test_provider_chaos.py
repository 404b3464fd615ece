"""The chaos suite's provider scenario: the LLM endpoint (tests/support/fault_llm.py, a real HTTP server at the
network edge) fails 30% of calls with every kind of fault: timeouts, 429 with Retry-After, 500/503, connection
resets, malformed, truncated and off-schema JSON. Every job must still end, completed or failed with a reason."""
from __future__ import annotations

import pytest

from ops.chaos.audit import audit, diagnose, wait_final
from tests.chaos.test_scenarios import check, questions, submit
from tests.support.fault_llm import ALL_FAULTS, FaultLLMServer

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_a_faulty_provider_fails_30_percent_of_calls(ctx, sample_corpus, workers_with, report):
    with FaultLLMServer(seed=5) as srv:
        srv.hold_s = 3.0  # a timeout outlasts the client's 1.5 s
        srv.set_faults(rate=0.3, kinds=ALL_FAULTS)
        workers_with(FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=srv.url, FINAGENT_LLM_API_KEY="sk-chaos-test",
                     FINAGENT_LLM_TIMEOUT_S="1.5", FINAGENT_TOOL_RETRY_BACKOFF_S="0.5", FINAGENT_LLM_CACHE_TTL_S="0",
                     FINAGENT_CIRCUIT_BREAKER_RESET_S="3")
        jobs = submit(ctx, questions(12, 6))
        assert wait_final(ctx, jobs, 300), diagnose(ctx, jobs)
        counts = srv.counts()
    tally = audit(ctx, "faulty_provider", jobs, faults=sum(n for k, n in counts.items() if k != "ok"))
    check(tally, report, f"calls={dict(sorted(counts.items()))} failure_reasons={tally.reasons}")
    injected = {k for k, n in counts.items() if n and k != "ok"}
    assert injected >= {"rate_limit", "server_500", "reset", "malformed_json"}, counts  # the faults really happened
    assert tally.completed >= tally.submitted // 2, tally  # retries and the repair carry most jobs through
