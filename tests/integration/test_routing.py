"""Routing through the real Celery path: a `hybrid` plan answers from the calls and the 10-K; two fiscal years read
both filings, one 10-K round per filing, in one fan-out; a request may name its strategy."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

SUFFICIENT = {"completeness_score": 95, "specificity_score": 95, "accuracy_score": 95, "clarity_score": 95,
              "is_sufficient": True}
# an invented company with two annual filings (figures made up for the test)
TICKER, NAME = "ZNTV", "Zentrova Systems Inc."


def filing(year: int, rnd: int, sales: int) -> str:
    return f"""<!DOCTYPE html><html><head><meta name="ticker" content="{TICKER}"><meta name="fiscal_year" content="{year}">
<meta name="company" content="{NAME}"><title>{NAME} Form 10-K for fiscal year {year}</title></head><body>
<h2>Item 1. Business</h2><p>{NAME} designs industrial sensing equipment and sells it to factories and utilities
worldwide through direct sales teams and distributors.</p>
<h2>Item 7. Management's Discussion and Analysis of Financial Condition and Results of Operations</h2>
<p>Research and development expense was ${rnd} million in fiscal {year}, reflecting engineering headcount for the
next sensor platform. Net sales were ${sales} million in fiscal {year}.</p>
<h2>Item 8. Financial Statements and Supplementary Data</h2>
<p><b>Consolidated Statements of Operations (in millions)</b></p>
<table><tr><th>Line item</th><th>Fiscal {year}</th></tr>
<tr><td>Net sales</td><td>{sales:,}</td></tr><tr><td>Research and development</td><td>{rnd:,}</td></tr>
<tr><td>Operating income</td><td>{sales // 5:,}</td></tr></table>
</body></html>"""


@pytest.fixture(scope="module")
def two_filings(ctx, tmp_path_factory) -> Path:
    from agent.ingest.runner import ingest

    root = tmp_path_factory.mktemp("two_filings")
    for year, rnd, sales in ((2023, 410, 2_950), (2024, 465, 3_310)):
        (root / f"{TICKER}_{year}_10K.html").write_text(filing(year, rnd, sales))
    report = ingest(ctx, "10k", [root], fanout=None, quiet=True)
    assert not report.errors and len(report.files) == 2
    return root


def test_a_hybrid_plan_answers_from_the_10k_and_the_transcripts(ctx, sample_corpus, scripted_worker, script_path):
    tenk_ticker = next(Path(f.path).name.split("_")[0] for r in sample_corpus for f in r.files if "10k" in Path(f.path).parts)
    script_path.write_text(json.dumps({
        "plan": {"reasoning": "the annual figures and what management said on the calls", "tickers": [tenk_ticker],
                 "time_refs": [], "topic": "revenue", "data_sources": ["hybrid"],
                 "search_queries": ["revenue growth drivers"], "answer_mode": "standard"},
        "evaluate_10k": {"1": {"quality": 0.95}},
        "evaluate": {"1": SUFFICIENT},
    }))
    job, events = run_job(ctx, question=f"What drove {tenk_ticker}'s revenue, per its annual report and its calls?")
    result = job.result
    assert result.status == "completed" and job.state.strategy == "hybrid"
    assert result.sources["10k"] > 0 and result.sources["earnings_transcripts"] > 0
    kinds = {c.source_type for c in result.citations}
    assert any(c.marker.startswith("[10K") for c in result.citations) and "transcript" in kinds
    assert any(c.marker in result.answer for c in result.citations if c.marker.startswith("[10K"))


def test_two_fiscal_years_read_both_filings_in_one_fan_out(ctx, two_filings, scripted_worker, script_path):
    script_path.write_text(json.dumps({
        "plan": {"reasoning": "R&D in each year's filing", "tickers": [TICKER], "time_refs": ["FY2023", "FY2024"],
                 "topic": "research and development expense", "data_sources": ["10k"], "needs_10k": True,
                 "search_queries": ["research and development expense"], "answer_mode": "standard"},
        "plan_10k": {"sub_questions": [{"id": 1, "text": "R&D expense", "kind": "TABLE", "items": ["8"],
                                        "keywords": "research and development"}]},
        "evaluate_10k": {"1": {"quality": 0.95}},
        "evaluate": {"1": SUFFICIENT},
    }))
    job, events = run_job(ctx, question=f"Compare {TICKER}'s R&D expense in FY2023 and FY2024")
    filings = [f"{TICKER}:FY2023", f"{TICKER}:FY2024"]
    plans = [e.data for e in events if e.type == "tenk_search" and e.data["phase"] == "plan"]
    assert [(p["round"], p["filings"]) for p in plans] == [(1, filings)]  # one round, both filings in it
    ledger = load_ledger(ctx.pool, job.id)
    assert sorted(r["call_key"] for r in ledger if r["tool"] == "llm.plan_10k") == [f"1:tenk1:plan:{f}" for f in filings]
    assert sorted(r["call_key"] for r in ledger if r["tool"] == "llm.answer_10k") == [f"1:tenk1:answer:{f}" for f in filings]
    searched = {r["call_key"].split(":retrieve:")[1].rsplit(":", 1)[0] for r in ledger if r["tool"] == "tenk_table_search"}
    assert searched == set(filings)
    assert job.state.tenk.round == 1 and set(job.state.tenk.quality) == set(filings)
    result = job.result
    assert result.status == "completed"
    years = {c.period for c in result.citations if c.marker.startswith("[10K")}
    assert len(years) == 2, [(c.marker, c.period) for c in result.citations]


def test_a_named_strategy_is_used(ctx, sample_corpus, scripted_worker, script_path):
    tenk_ticker = next(Path(f.path).name.split("_")[0] for r in sample_corpus for f in r.files if "10k" in Path(f.path).parts)
    script_path.write_text(json.dumps({
        "plan": {"reasoning": "revenue on the calls", "tickers": [tenk_ticker], "topic": "revenue",
                 "data_sources": ["earnings_transcripts"], "search_queries": ["revenue"], "answer_mode": "direct"},
        "evaluate_10k": {"1": {"quality": 0.95}},
        "evaluate": {"1": SUFFICIENT},
    }))
    job, _ = run_job(ctx, question=f"What was {tenk_ticker}'s revenue?", strategy="10k_first")
    assert job.state.routing_history[0].agent_name == "10k_first" and job.state.request.strategy == "10k_first"
    assert job.result.sources["10k"] > 0 and job.result.sources["earnings_transcripts"] == 0
