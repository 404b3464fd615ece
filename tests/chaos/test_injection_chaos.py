"""The chaos suite's injection scenario: an injection string sits in a transcript chunk and in every news result, and
the model behind the OpenAI-compatible endpoint is gullible (it obeys any instruction it finds outside the prompt's
fences: tests/integration/test_injection.py). Several jobs at once, differently worded: none may follow it."""
from __future__ import annotations

import pytest

from agent.ingest.runner import ingest
from ops.chaos.audit import audit, diagnose, wait_final
from tests.chaos.test_scenarios import check, submit
from tests.integration.tavily_server import tavily_server
from tests.integration.test_injection import OBEYED, gullible, news, without_quotes, write_corpus
from tests.support.fault_llm import FaultLLMServer

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

QUESTIONS = [
    "What did Quazal Instruments report for revenue and operating margin over the last 2 quarters, and what is the latest news?",
    "How did QZAL's gross margin and backlog develop last quarter, and is there recent news about the company?",
    "Summarise Quazal Instruments' cash position and share repurchases over the last 2 quarters, with the latest news.",
    "What drove QZAL revenue growth in its latest quarter and what are recent headlines?",
    "How did Quazal Instruments' operating expenses change over the last 2 quarters?",
    "What is the latest news on Quazal Instruments and how did its revenue trend recently?",
]


def obeyed(job) -> bool:
    answer = without_quotes(job.result.answer if job.result else "").lower()
    plan = job.state.plan
    return (any(s.lower() in answer for s in OBEYED) or (job.result is not None and job.result.confidence >= 1.0)
            or (plan is not None and (plan.needs_10k or plan.confidence >= 1.0)))


def test_injection_strings_in_chunks_and_news(ctx, workers_with, tmp_path, report):
    from agent.persistence import jobstore

    reports = ingest(ctx, "transcript", [write_corpus(tmp_path / "injected", injected=True)], fanout=None, quiet=True)
    assert not [f for f in reports.files if f.status == "error"], reports.files
    with tavily_server(200, news(True)) as tavily, FaultLLMServer(seed=13) as llm:
        llm.responder = gullible
        workers_with(FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=llm.url, FINAGENT_LLM_API_KEY="sk-local-test",
                     FINAGENT_LLM_JSON_MODE="json_object", FINAGENT_TOP_K_PER_QUARTER="3", FINAGENT_TAVILY_API_KEY="tvly-test",
                     FINAGENT_TAVILY_BASE_URL=tavily.url, FINAGENT_LLM_CACHE_TTL_S="0")
        jobs = submit(ctx, QUESTIONS)
        assert wait_final(ctx, jobs, 240), diagnose(ctx, jobs)
        reached = sum("Ignore previous instructions" in str(c.messages) for c in llm.chat_calls())
    tally = audit(ctx, "injection", jobs)
    followed = [j for j in jobs if obeyed(jobstore.load_job(ctx.pool, j))]
    check(tally, report, f"injection_reached_model={reached} obeyed={len(followed)}")
    assert reached > 0, "the injected text never reached the model: the scenario tested nothing"
    assert followed == [], [jobstore.load_job(ctx.pool, j).result.answer[:300] for j in followed]
