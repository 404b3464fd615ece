"""Real workers against an OpenAI-compatible endpoint that, like a hosted model, refuses a request asking for more
than 16,384 output tokens: a job in every answer mode completes, and no request of any role asks for more than its
configured output cap. (deep_search's compose used to ask for its mode's 20,000-token evidence budget, and failed.)"""
from __future__ import annotations

import pytest

from agent.settings import AnswerMode, Settings
from tests.integration.jobs import run_job
from tests.support.fault_llm import FaultLLMServer

pytestmark = pytest.mark.integration

HOSTED_LIMIT = 16384


def test_no_request_asks_for_more_than_its_cap_in_any_mode(ctx, sample_corpus, workers_with):
    caps = Settings(_env_file=None, llm_output_tokens={"compose": 5000})
    with FaultLLMServer(seed=4) as srv:
        srv.max_output_tokens = HOSTED_LIMIT
        workers_with(FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=srv.url, FINAGENT_LLM_API_KEY="sk-fault-server-test",
                     FINAGENT_LLM_TIMEOUT_S="5", FINAGENT_LLM_CACHE_TTL_S="0", FINAGENT_TOP_K_PER_QUARTER="3",
                     FINAGENT_LLM_OUTPUT_TOKENS__COMPOSE="5000")
        jobs = {}
        for mode in AnswerMode:
            srv.reset_calls()
            job, _ = run_job(ctx, timeout_s=300, question="What did NVDA report about revenue last quarter?", mode=mode.value)
            jobs[mode] = (job, srv.chat_calls())

    for mode, (job, calls) in jobs.items():
        assert job.status == "completed" and job.result.answer, (mode, job.status, job.result.error)
        roles = {c.role for c in calls}
        assert {"plan", "extract", "compose", "evaluate"} <= roles, (mode, roles)
        refused = [(c.role, c.output_tokens) for c in calls if c.fault == "too_many_tokens"]
        assert not refused, (mode, refused)
        for call in calls:
            assert call.output_tokens is not None and call.output_tokens <= caps.output_tokens(call.role), (mode, call.role)
        compose = [c.output_tokens for c in calls if c.role == "compose"]
        assert set(compose) == {min(caps.mode(mode).max_tokens, 5000)}, (mode, compose)
