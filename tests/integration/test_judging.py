"""How an answer is judged, through the real Celery path: a question over two companies is evaluated per scope and
as a whole in the same wave, and the result shows both grades; a provider that cannot rework an answer from
feedback runs no refinement round, and one that changed nothing ends the job; the evaluator's "sufficient" ends a standard job below its threshold."""
from __future__ import annotations

import json

import pytest

from agent.persistence import jobstore
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration


def _eval(score: int, sufficient: bool = False, **fields) -> dict:
    return {"completeness_score": score, "specificity_score": score, "accuracy_score": score, "clarity_score": score,
            "is_sufficient": sufficient} | fields


def test_a_comparison_is_judged_per_company_and_as_a_whole_offline(ctx, sample_corpus, worker):
    job, events = run_job(ctx, question="Compare NVDA's and MSFT's revenue last quarter.")
    result = job.result
    assert result.status == "completed" and result.provider == "extractive"
    stored = jobstore.get_outputs(ctx.pool, job.id, "1:evaluate:")
    assert "1:evaluate:whole" in stored and any(k.startswith("1:evaluate:NVDA:") for k in stored)
    assert any(k.startswith("1:evaluate:MSFT:") for k in stored)
    first = result.evaluations[0]
    assert first.grades is not None and first.grades.whole_answer is not None
    assert {scope.split(":")[0] for scope in first.grades.per_scope} == {"NVDA", "MSFT"}
    mean = sum(first.grades.per_scope.values()) / len(first.grades.per_scope)
    assert first.confidence == pytest.approx((mean + first.grades.whole_answer) / 2, abs=0.01)  # scores are whole numbers
    # offline, compose cannot rework an answer from feedback: no refinement round ever runs
    assert all(e.data.get("phase") != "refinement" for e in events if e.type == "iteration_start")


def test_no_refinement_round_runs_when_the_answer_cannot_change(ctx, sample_corpus, scripted_worker, script_path):
    # above the router's bar, nothing to search, an issue only a rework would fix (the scripted compose is extractive)
    wanting = _eval(75, issues=["no margin figure"], needs_transcript_search=False)
    script_path.write_text(json.dumps({"evaluate": {str(i): wanting for i in range(1, 4)}}))
    job, _ = run_job(ctx, question="What was AAPL's services revenue last quarter?", mode="standard")
    assert job.result.iterations == 1 and job.state.phase_iterations["refinement"] == 0
    assert job.result.termination_reason == ("confidence 75% < threshold 80%; "
                                             "refinement skipped: the answer cannot change without new evidence")


def test_a_refinement_round_that_changed_nothing_ends_the_job(ctx, sample_corpus, scripted_worker, script_path):
    # a model that reworks its answer from feedback, given the same feedback twice: the second rework changes nothing
    wanting = _eval(75, issues=["no margin figure"], needs_transcript_search=False)
    script_path.write_text(json.dumps({"evaluate": {str(i): wanting for i in range(1, 6)}, "revises": True}))
    job, _ = run_job(ctx, question="What was AAPL's services revenue last quarter?", mode="standard",
                          max_iterations=5)
    assert job.result.iterations == 3 and job.state.phase_iterations["refinement"] == 2, job.result.termination_reason
    assert job.result.termination_reason.endswith("refinement skipped: the last refinement round left the answer unchanged")


def test_sufficient_ends_a_standard_job_below_its_threshold(ctx, sample_corpus, scripted_worker, script_path):
    script_path.write_text(json.dumps({"evaluate": {str(i): _eval(65, sufficient=True, followup_keywords=["services growth"])
                                                    for i in range(1, 4)}}))
    job, _ = run_job(ctx, question="What was AAPL's services revenue last quarter?", mode="standard")
    assert job.result.iterations == 1 and job.result.termination_reason == "evaluator judged the answer sufficient"
