"""The 10-K agent through the real Celery path: sub-questions, <= 6 parallel retrievals, replanning, [10K] citations."""
from __future__ import annotations

import json

import pytest

from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def real_10k(ctx, shared_data):
    from agent.ingest.runner import ingest

    report = ingest(ctx, "10k", [shared_data / "10k" / "AMZN", shared_data / "10k" / "AAPL"], fanout=None, quiet=True)
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
    assert evaluations[1]["quality"] == {"NVDA:FY2025": 0.95}  # one line of work per filing (company, fiscal year)
    plans = [e.data for e in tenk if e.data["phase"] == "plan"]
    assert len(plans) == 2 and all(any(q.startswith("[TABLE]") for q in p["sub_questions"]["NVDA:FY2025"]) for p in plans)
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


def _intervals(rows) -> list[tuple[float, float]]:
    return [(r["started_at"].timestamp(), r["started_at"].timestamp() + r["duration_ms"] / 1000) for r in rows]


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def test_tenk_retrievals_run_in_parallel_up_to_the_limit_beside_the_transcript_searches(ctx, sample_corpus, workers_with,
                                                                                       script_path):
    subs = [{"id": i, "text": f"line item {i}", "kind": "TABLE", "items": ["8"], "keywords": kw}
            for i, kw in enumerate(["revenue total", "cost of revenue", "inventories", "operating expenses", "net income"], 1)]
    script_path.write_text(json.dumps({
        "plan": {"reasoning": "annual figures and the latest call", "tickers": ["NVDA"], "time_refs": ["fiscal 2025"],
                 "topic": "revenue", "data_sources": ["earnings_transcripts", "10k"], "needs_10k": True,
                 "search_queries": ["revenue growth drivers", "gross margin outlook"], "answer_mode": "standard"},
        "plan_10k": {"sub_questions": subs},
        "evaluate_10k": {"1": {"quality": 0.95}},
        "evaluate": {"1": {"completeness_score": 95, "specificity_score": 95, "accuracy_score": 95, "clarity_score": 95,
                           "is_sufficient": True}},
    }))
    # every LLM call (table selection included) takes 0.6 s, so retrievals that run at once overlap in time
    workers_with(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path),
                 FINAGENT_LLM_LATENCY_S="0.6", FINAGENT_TENK_PARALLELISM="3")
    job, _ = run_job(ctx, question="What was NVIDIA's revenue and cost of revenue in fiscal 2025?")
    ledger = load_ledger(ctx.pool, job.id)
    tenk = [r for r in ledger if r["tool"] in ("tenk_table_search", "tenk_text_search")]
    transcripts = [r for r in ledger if r["tool"] == "transcript_search"]
    assert len(tenk) == 5 and transcripts
    assert _max_overlap(_intervals(tenk)) == 3  # more than one at once, never more than TENK_PARALLELISM
    assert any(ts < ke and ks < te for ts, te in _intervals(transcripts) for ks, ke in _intervals(tenk))


def test_the_overlap_count():
    assert _max_overlap([(0, 2), (1, 3), (2.5, 4)]) == 2 and _max_overlap([(0, 1), (1, 2)]) == 1
