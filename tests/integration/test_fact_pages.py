"""A figure question's input pages come first in a page search: an invented annual report ingested as page texts
(tests/support/invented_filing.py: cover, MD&A prose, income statement p2, balance sheet p3, cash flow statement p4),
its statement lines stored, and the pages printing the lines the measure reads put ahead of the rest."""
from __future__ import annotations

import pytest

from agent.retrieval.page_search import search_pages
from agent.statements.fact_needs import fact_needs
from ops.eval.financebench_filters import planner_filter
from tests.support.invented_filing import COMPANY, write_corpus

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def scopes(ctx, tmp_path_factory):
    from ops.eval.financebench_ingest import ingest_financebench

    report = ingest_financebench(ctx, write_corpus(tmp_path_factory.mktemp("invented_fact_pages")), fanout=None)
    assert not [f for f in report.files if f.status == "error"], report.files
    flt = planner_filter(ctx, f"{COMPANY} FY2023")
    assert flt.scopes
    return [s.filters for s in flt.scopes]


def _pages(ctx, question, scopes, facts):
    return [p for _, p in search_pages(ctx.pool, ctx.embed_query, [question], scopes, "hybrid", facts=facts)]


def test_a_ratios_input_pages_come_first(ctx, scopes):
    question = f"What is {COMPANY}'s FY2023 inventory turnover?"
    needs = fact_needs(question)
    assert {(c, y) for c, y, _ in needs} == {("cost_of_revenue", 2023), ("inventory", 2023), ("inventory", 2022)}
    pages = _pages(ctx, question, scopes, needs)
    assert pages[:2] == [2, 3]  # cost of goods sold on the income statement, inventories on the balance sheet
    assert sorted(pages) == [0, 1, 2, 3, 4]  # the rest of the ranking follows


def test_a_questions_own_definition_names_its_inputs_pages(ctx, scopes):
    question = (f"Define the plant coverage as net cash provided by operating activities divided by total assets. "
                f"What was {COMPANY}'s plant coverage in FY2023?")
    needs = fact_needs(question)
    assert {(c, s) for c, _, s in needs} == {("operating_cash_flow", "cash_flow"), ("total_assets", "balance")}
    assert _pages(ctx, question, scopes, needs)[:2] == [3, 4]


def test_without_a_figure_asked_the_ranking_is_unchanged(ctx, scopes):
    question = f"Why did {COMPANY}'s operating income rise?"
    assert fact_needs(question) == []
    assert _pages(ctx, question, scopes, []) == _pages(ctx, question, scopes, None)
