"""The 10-K agent's domain steps end to end on the real Amazon and Apple 10-Ks (no Celery):
plan_10k -> retrieve per sub-question -> answer_10k -> evaluate_10k, extractive provider, hash embedder.

Figures checked against the filings: Amazon FY2024 cost of sales 326,288 (statement of operations), inventories
33,318 (2023) and 34,214 (2024) (balance sheet), turnover 326,288 / 33,766 = 9.66x; Apple FY2024 total net
sales 391,035, iPhone 201,183, Services 96,169 (net sales by category)."""
from __future__ import annotations

import pytest

from agent.ingest.runner import ingest
from agent.models.tenk import SubQuestion, TenKAnswerRequest, TenKEvaluateRequest, TenKPlanRequest
from agent.providers.llm.extractive import ExtractiveProvider
from agent.retrieval.availability import invalidate
from agent.tenk.retrieval import load_tables, retrieve, table_candidates, text_search
from agent.work.answering import assign_markers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tenks(ctx, shared_data):
    report = ingest(ctx, "10k", [shared_data / "10k" / "AMZN", shared_data / "10k" / "AAPL"], fanout=None, quiet=True)
    assert not report.errors, report.errors
    for t in ("AMZN", "AAPL"):
        invalidate(ctx.redis, t)
    return report


def run_agent(ctx, question: str, ticker: str, fiscal_year: int = 2024):
    llm = ExtractiveProvider()
    plan, _ = llm.plan_10k(TenKPlanRequest(question=question, ticker=ticker, fiscal_year=fiscal_year))
    evidence, seen = [], set()
    for sq in plan.sub_questions:
        found, _ = retrieve(ctx, llm, question, plan, sq, iteration=1)
        evidence += [e for e in found if e.citation_key not in seen]
        seen |= {e.citation_key for e in found}
    markers = assign_markers(evidence)
    answer, _ = llm.answer_10k(TenKAnswerRequest(question=question, plan=plan, evidence=evidence, markers=markers))
    ev, _ = llm.evaluate_10k(TenKEvaluateRequest(question=question, plan=plan, answer=answer.text, evidence=evidence))
    return plan, evidence, markers, answer.text, ev


def test_table_candidates_prefer_routed_statements(ctx, tenks):
    sq = SubQuestion(id=1, text="What were inventories?", kind="TABLE", items=["8"],
                     keywords="inventories consolidated balance sheets")
    cands = table_candidates(ctx.pool, "AMZN", 2024, sq)
    assert 0 < len(cands) <= 8
    assert any(c.caption == "CONSOLIDATED BALANCE SHEETS" for c in cands)
    sheet = next(c for c in cands if c.caption == "CONSOLIDATED BALANCE SHEETS")
    assert "Inventories" in sheet.preview and sheet.item == "8"
    [table] = load_tables(ctx.pool, [sheet.table_id], iteration=2)
    assert table.source_type == "10k_table" and table.chunk_id == sheet.table_id and table.iteration == 2
    assert table.title == "CONSOLIDATED BALANCE SHEETS" and "| Inventories | 33,318 | 34,214 |" in table.text


def test_text_search_stays_in_routed_items(ctx, tenks):
    sq = SubQuestion(id=3, text="How are inventories valued?", kind="TEXT", items=["7"],
                     keywords="inventory valuation inventories lower of cost")
    hits = text_search(ctx, "AMZN", 2024, sq, top_k=5)
    assert hits and all(h.item == "7" and h.ticker == "AMZN" and h.source_type == "10k" for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_inventory_turnover_amazon(ctx, tenks):
    plan, evidence, markers, answer, ev = run_agent(ctx, "What is Amazon's inventory turnover?", "AMZN")
    assert plan.calculation and plan.calculation.startswith("inventory_turnover")
    assert {"8"} == {i for q in plan.sub_questions if q.kind == "TABLE" for i in q.items}
    assert "9.66x" in answer
    for figure in ("326,288", "33,318", "34,214", "33,766"):
        assert figure in answer
    calc_line = next(line for line in answer.splitlines() if line.startswith("- Inventory turnover"))
    sheet = next(e for e in evidence if e.title == "CONSOLIDATED BALANCE SHEETS")
    assert markers[sheet.citation_key] in calc_line
    assert ev.quality >= 0.9, (answer, ev)


def test_apple_net_sales_split_by_product(ctx, tenks):
    _, _, _, answer, ev = run_agent(ctx, "What was Apple's total net sales in fiscal 2024 and how did it split by product?",
                                    "AAPL")
    assert "391,035" in answer
    assert "iPhone 201,183" in answer and "Services 96,169" in answer
    assert all(line.startswith("- ") for line in answer.splitlines())
    assert ev.quality >= 0.9, (answer, ev)
