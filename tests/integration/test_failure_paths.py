"""Each LLM role failing once (retried by Celery, the ledger records the retry, the job is unharmed) and
failing for good (the job ends with a readable reason, or keeps going without that call's output)."""
from __future__ import annotations

import json

import pytest

from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"
TOOL = {"plan": "llm.plan", "extract": "llm.extract", "compose": "llm.compose", "evaluate": "llm.evaluate"}


@pytest.fixture
def fast_retry_workers(workers_with, script_path):
    """Scripted workers whose retries wait 0.05 s instead of the production backoff."""
    script_path.write_text("{}")
    workers_with(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path),
                 FINAGENT_TOOL_RETRY_BACKOFF_S="0.05")
    return script_path


def _script(path, **script):
    path.with_suffix(".calls.json").unlink(missing_ok=True)
    path.write_text(json.dumps(script))


@pytest.mark.parametrize("role", ["plan", "extract", "compose", "evaluate"])
def test_a_role_failing_once_is_retried_and_the_ledger_counts_it(ctx, sample_corpus, fast_retry_workers, role):
    _script(fast_retry_workers, fail_first={role: 1})
    job, _ = run_job(ctx, question=QUESTION, mode="direct")
    assert job.status == "completed" and job.result.answer and "35.1" in job.result.answer
    rows = [r for r in load_ledger(ctx.pool, job.id) if r["tool"] == TOOL[role]]
    assert rows and max(r["retries"] for r in rows) == 1  # the retried attempt succeeded, and says it was a retry
    assert all(r["error_class"] is None for r in rows)


def test_the_planner_failing_for_good_fails_the_job_readably(ctx, sample_corpus, fast_retry_workers):
    _script(fast_retry_workers, fail={"plan": "ConnectionError: upstream down"})
    job, _ = run_job(ctx, question=QUESTION)
    assert job.status == "failed"
    assert job.result.error == "The planner failed (network error): ConnectionError: upstream down"
    [row] = [r for r in load_ledger(ctx.pool, job.id) if r["tool"] == "llm.plan"]
    assert row["retries"] == 2 and row["error_class"] == "network"  # max_tool_retries, then for good


def test_composing_failing_for_good_fails_a_first_answer(ctx, sample_corpus, fast_retry_workers):
    _script(fast_retry_workers, fail={"compose": "TimeoutError: generator timed out"})
    job, events = run_job(ctx, question=QUESTION)
    assert job.status == "failed" and "answer generation failed (network error)" in job.result.error
    # the evaluations chained behind the compose found no answer: they made no call, stored why, and are no error
    assert not [r for r in load_ledger(ctx.pool, job.id) if r["tool"] == "llm.evaluate"]
    assert not any(e.type == "error" and e.data.get("step") == "evaluate" for e in events)


def test_extraction_failing_for_good_leaves_an_answer_without_findings(ctx, sample_corpus, fast_retry_workers):
    _script(fast_retry_workers, fail={"extract": "ConnectionError: down"})
    job, events = run_job(ctx, question=QUESTION, mode="direct")
    assert job.status == "completed" and job.result.citations == []
    assert "could not find evidence" in job.result.answer


def test_evaluation_failing_for_good_returns_the_unevaluated_answer(ctx, sample_corpus, fast_retry_workers):
    _script(fast_retry_workers, fail={"evaluate": "ConnectionError: down"})
    job, events = run_job(ctx, question=QUESTION)
    assert job.status == "completed" and "35.1" in job.result.answer
    assert job.result.termination_reason == "every evaluation failed; returning the unevaluated answer"
    assert any(e.type == "error" and e.data.get("step") == "evaluate" for e in events)
