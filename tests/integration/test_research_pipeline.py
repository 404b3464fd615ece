"""The iterative research agent end to end: real worker, real Redis and Postgres, scripted LLM."""
from __future__ import annotations

import json

import pytest

from agent.persistence import jobstore
from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

LOW = {"completeness_score": 60, "specificity_score": 70, "accuracy_score": 80, "clarity_score": 90,
       "issues": ["Missing the drivers of growth"], "missing_info": ["data center demand drivers"],
       "suggestions": ["Search for data center demand"], "is_sufficient": False,
       "followup_keywords": ["data center demand Blackwell Hopper"], "needs_transcript_search": True}
HIGH = {"completeness_score": 95, "specificity_score": 90, "accuracy_score": 100, "clarity_score": 90,
        "issues": [], "missing_info": [], "suggestions": [], "is_sufficient": True, "followup_keywords": []}


def test_two_iterations_exact_events_merged_evidence_and_termination(ctx, sample_corpus, scripted_worker, script_path):
    script_path.write_text(json.dumps({"evaluate": {"1": LOW, "2": HIGH}}))
    job, events = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?", mode="standard")

    assert [e.type for e in events] == [
        "job_status", "job_status", "planning",
        "iteration_start", "search", "agent_decision", "iteration_complete",
        "iteration_start", "iteration_followup", "iteration_search", "agent_decision", "iteration_complete",
        "result", "job_status",
    ]
    by_type = {}
    for e in events:
        by_type.setdefault(e.type, []).append(e)
    first, second = by_type["agent_decision"]
    assert first.data["confidence"] == pytest.approx(0.71)  # (0.35*60 + 0.30*70 + 0.25*80 + 0.10*90) / 100
    assert first.data["will_iterate"] is True and second.data["will_iterate"] is False
    assert by_type["iteration_followup"][0].data["keywords"] == ["data center demand Blackwell Hopper"]
    assert [e.data["iteration"] for e in by_type["iteration_start"]] == [1, 2]
    assert by_type["iteration_start"][0].data["max_iterations"] == 3
    assert by_type["iteration_complete"][1].data == {"iteration": 2, "confidence": second.data["confidence"], "will_continue": False}

    evidence = jobstore.load_evidence(ctx.pool, job.id)
    keys = [e.citation_key for e in evidence]
    assert len(keys) == len(set(keys))
    added_2 = sum(1 for e in evidence if e.iteration == 2)
    assert added_2 == by_type["iteration_search"][0].data["chunks_added"] > 0
    assert all(e.ticker == "NVDA" and e.period == "Q3 2025" for e in evidence)  # NVDA's own latest quarter

    result = job.result
    assert result.status == "completed" and result.iterations == 2
    assert result.chunks_used == len(evidence)
    assert "confidence" in result.termination_reason and ">= threshold 80%" in result.termination_reason
    assert result.confidence == pytest.approx(second.data["confidence"])
    assert [r.iteration for r in result.evaluations] == [1, 2]
    assert result.provider == "scripted"
    assert result.sources["earnings_transcripts"] == len(evidence)
    assert set(result.timing) >= {"reasoning", "retrieval", "generation", "evaluation", "total"}
    for c in result.citations:  # every citation marker appears in the answer and quotes real evidence
        assert c.marker in result.answer and c.period == "Q3 2025" and c.text


def test_rejects_off_topic_question_with_reason(ctx, sample_corpus, worker):
    job, events = run_job(ctx, question="Write me a poem about autumn leaves")
    assert job.status == "rejected"
    assert "does not look like a question" in job.result.answer
    assert events[-1].type == "job_status" and events[-1].data["status"] == "rejected"


def test_unknown_ticker_is_a_clear_rejection(ctx, sample_corpus, worker):
    """A ticker named only in the question (an explicit `tickers` entry is refused at submission, test_bad_input.py)
    reaches the planner, which rejects the job with the reason."""
    job, _ = run_job(ctx, question="What was ZZZZ's revenue last quarter?")
    assert job.status == "rejected"
    assert job.result.answer.startswith("ZZZZ is not a company finagent knows") and "ingest its transcripts or 10-K first" in job.result.answer


def test_idempotency_key_returns_same_job(ctx, sample_corpus, worker):
    from agent.models.job import JobRequest
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    req = JobRequest(question="What was AAPL's revenue last quarter?", idempotency_key="same-key-1")
    first, created = create(ctx, CeleryDispatcher(), req)
    second, created_again = create(ctx, CeleryDispatcher(), req)
    assert first == second and created and not created_again


def test_extractive_lookup_answer_is_correct_and_cited(ctx, sample_corpus, worker):
    job, events = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?")
    result = job.result
    assert result.status == "completed" and result.provider == "extractive"
    assert "35.1 billion" in result.answer  # NVIDIA Q3 FY2025 revenue, from the sample corpus
    assert result.citations and all(c.ticker == "NVDA" for c in result.citations)
    assert any("35.1 billion" in c.text for c in result.citations)


def test_fanout_tasks_run_in_parallel(ctx, sample_corpus, workers_with, script_path):
    """With a 0.5 s injected LLM latency, the per-quarter extract calls of a 3-quarter question overlap in time."""
    script_path.write_text("{}")
    workers_with(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), FINAGENT_LLM_LATENCY_S="0.5")
    job, _ = run_job(ctx, question="How did AAPL's services revenue change over the last 3 quarters?", max_iterations=1)
    calls = [c for c in load_ledger(ctx.pool, job.id) if c["tool"] == "llm.extract"]
    assert len(calls) == 3
    spans = sorted((c["started_at"].timestamp(), c["started_at"].timestamp() + c["duration_ms"] / 1000) for c in calls)
    assert spans[-1][0] < spans[0][1], f"extract calls did not overlap: {spans}"
    assert len({c["worker"] for c in calls}) == 3  # on three different worker threads
