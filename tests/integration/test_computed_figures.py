"""A figure computed from the statements, through the real Celery path: an invented annual report ingested as page
texts (tests/support/invented_filing.py), its statements stored as line items, and a research job whose answer shows
the formula, every input with its page, and a confidence that knows what was found."""
from __future__ import annotations

import re

import pytest

from agent.persistence.ledger import load_ledger
from tests.integration.jobs import run_job
from tests.support.invented_filing import COMPANY, write_corpus

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def invented_filing(ctx, tmp_path_factory):
    from ops.eval.financebench_ingest import ingest_financebench

    report = ingest_financebench(ctx, write_corpus(tmp_path_factory.mktemp("invented")), fanout=None)
    assert not [f for f in report.files if f.status == "error"], report.files
    with ctx.pool.connection() as conn:
        ticker = conn.execute("SELECT ticker FROM companies WHERE name = %s", (COMPANY,)).fetchone()["ticker"]
    from agent.models.job import JobRequest

    assert JobRequest(question="What was revenue?", tickers=[ticker]).tickers == [ticker]  # a long name's key is still a ticker
    return ticker


def test_the_statements_are_stored_as_line_items(ctx, invented_filing):
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT concept, period_year, value, scale, page FROM statement_lines WHERE ticker = %s"
                            " AND concept IN ('revenue', 'inventory', 'capex') ORDER BY concept, period_year",
                            (invented_filing,)).fetchall()
    got = {(r["concept"], r["period_year"]): (r["value"], r["scale"], r["page"]) for r in rows}
    assert got[("revenue", 2023)] == (12_345, 1e6, 2)
    assert got[("inventory", 2022)] == (2_090, 1e6, 3)
    assert got[("capex", 2021)] == (-910, 1e6, 4)
    assert ("inventory", 2021) not in got  # the cash flow statement's change in inventories is not the balance


def test_a_computed_answer_shows_the_formula_and_cites_each_inputs_page(ctx, invented_filing, worker):
    job, _ = run_job(ctx, question=f"What is {COMPANY}'s FY2023 operating margin? Round to one decimal place.")
    result = job.result
    assert result.status == "completed", result
    answer = result.answer
    assert "25.9%" in answer  # 3,199 / 12,345
    assert "3,199" in answer and "12,345" in answer and "/" in answer
    cited_pages = {c.page for c in result.citations if c.marker.startswith("[10K")}
    assert 2 in cited_pages  # the income statement's page
    ledger = load_ledger(ctx.pool, job.id)
    computed = [r for r in ledger if r["tool"] == "statements.compute"]
    assert computed and computed[0]["params"]["named_by"] == "rules"


def test_an_input_not_in_the_statements_is_named_and_confidence_drops(ctx, invented_filing, worker):
    complete, _ = run_job(ctx, question=f"What is {COMPANY}'s FY2023 current ratio?")
    # the balance sheet prints two years: the 2021 inventory an average for FY2022 needs is not there
    partial, _ = run_job(ctx, question=f"What is {COMPANY}'s FY2022 inventory turnover ratio?")
    assert complete.result.status == partial.result.status == "completed"
    assert "2.42" in complete.result.answer  # 5,410 / 2,240
    assert re.search(r"not computed; missing [^\n]*inventory FY2021", partial.result.answer), partial.result.answer
    assert partial.result.confidence < complete.result.confidence
