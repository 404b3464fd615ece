"""The 10-K agent through the real Celery path: sub-questions, <= 6 parallel retrievals, replanning, [10K] citations."""
from __future__ import annotations

import json

import pytest

from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def real_10k(ctx, shared_data):
    from ops.ingest_runner import ingest

    report = ingest(ctx, "10k", [shared_data / "10k" / "AMZN", shared_data / "10k" / "AAPL"], fanout=False, quiet=True)
    assert not report.errors
    return report


def test_tenk_loop_replans_once_then_stops_at_quality(ctx, sample_corpus, scripted_worker, script_path):
    script_path.write_text(json.dumps({"evaluate_10k": {
        "1": {"quality": 0.5, "missing_info": ["revenue by market platform"], "answered": [1]},
        "2": {"quality": 0.95, "missing_info": [], "answered": [1, 2]},
    }}))
    job, events = run_job(ctx, question="What was NVIDIA's total revenue in fiscal 2025 and how did it split by market platform?")
    tenk = [e for e in events if e.type == "tenk_search"]
    evaluations = [e.data for e in tenk if e.data["phase"] == "evaluation"]
    assert [(e["round"], e["will_replan"]) for e in evaluations] == [(1, True), (2, False)]
    assert evaluations[1]["quality"] == {"NVDA": 0.95}
    plans = [e.data for e in tenk if e.data["phase"] == "plan"]
    assert len(plans) == 2 and all(any(q.startswith("[TABLE]") for q in p["sub_questions"]["NVDA"]) for p in plans)
    ledger = load_ledger(ctx.pool, job.id)
    assert any(c["tool"] == "llm.plan_10k" for c in ledger)
    retrieve_tasks = {c["call_key"] for c in ledger if c["call_key"].startswith("1:tenk1:retrieve")}
    assert retrieve_tasks  # each sub-question's retrieval is recorded
    result = job.result
    assert result.status == "completed"
    assert any(c.marker.startswith("[10K") for c in result.citations)
    assert result.sources["10k"] > 0
    assert job.state.tenk.round == 2


@pytest.mark.usefixtures("real_10k")
def test_inventory_turnover_shows_inputs_and_arithmetic(ctx, worker):
    job, _ = run_job(ctx, question="What is Amazon's inventory turnover?", timeout_s=240)
    answer = job.result.answer
    assert "326,288" in answer and "33,318" in answer and "34,214" in answer
    assert "9.66" in answer or "9.7" in answer
    assert any(c.marker.startswith("[10K") for c in job.result.citations)


@pytest.mark.usefixtures("real_10k")
def test_apple_net_sales_by_product(ctx, worker):
    job, _ = run_job(ctx, question="What was Apple's total net sales in fiscal 2024 and how did it split by product?", timeout_s=240)
    answer = job.result.answer
    assert "391,035" in answer and "201,183" in answer and "96,169" in answer
