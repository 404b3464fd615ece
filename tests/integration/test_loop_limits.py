"""The iteration limits through real workers: deep_search runs its 10 iterations, an explicit max_iterations
runs that many, and a direct question never passes 2, router re-routes included."""
from __future__ import annotations

import json

import pytest

from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

PHRASES = ["services revenue growth", "gross margin", "operating expenses", "capital return buyback", "guidance outlook",
           "installed base", "wearables home accessories", "greater china", "research development", "cash flow"]


def low(score: int, iteration: int) -> dict:
    """An evaluation that never reaches a threshold, with a new follow-up phrase and a new issue each iteration."""
    return {"completeness_score": score, "specificity_score": score, "accuracy_score": score, "clarity_score": score,
            "issues": [f"thin answer in round {iteration}"], "missing_info": ["more detail"], "is_sufficient": False,
            "followup_keywords": [PHRASES[(iteration - 1) % len(PHRASES)]], "needs_transcript_search": True}


def script(path, score: int) -> None:
    """A model that reworks its answer from each evaluation's feedback: every refinement round changes the answer."""
    path.write_text(json.dumps({"evaluate": {str(i): low(score, i) for i in range(1, 21)}, "revises": True}))


def test_deep_search_runs_ten_iterations(ctx, sample_corpus, scripted_worker, script_path):
    script(script_path, 80)
    job, events = run_job(ctx, timeout_s=300, question="How did AAPL's services revenue change over the last 3 quarters?",
                          mode="deep_search", max_duration_seconds=900)
    assert job.result.iterations == 10 and job.result.termination_reason.endswith("max iterations (10) reached")
    starts = [e for e in events if e.type == "iteration_start"]
    assert [e.data["iteration"] for e in starts] == list(range(1, 11))
    assert {e.data["max_iterations"] for e in starts} == {10}
    assert job.result.suggestion is None


def test_an_explicit_max_iterations_runs_that_many(ctx, sample_corpus, scripted_worker, script_path):
    script(script_path, 75)
    job, _ = run_job(ctx, timeout_s=300, question="How did AAPL's services revenue change over the last 3 quarters?",
                     max_iterations=6)
    assert job.result.iterations == 6
    assert job.result.suggestion is not None and job.result.suggestion.request.mode == "deep_search"


def test_a_direct_question_never_passes_two_iterations(ctx, sample_corpus, scripted_worker, script_path):
    script_path.write_text(json.dumps({"evaluate": {str(i): low(40, i) | {"followup_keywords": []} for i in range(1, 6)}}))
    job, events = run_job(ctx, question="What was NVDA's revenue last quarter?", mode="direct")
    assert job.result.iterations <= 2
    assert max(e.data["iteration"] for e in events if e.type == "iteration_start") <= 2
