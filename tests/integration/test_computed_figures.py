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


HTML_TICKER, HTML_NAME = "VRLX", "Veralux Optics Inc."


def html_filing() -> str:
    """An invented 10-K in HTML: its statements are tables, read into line items the same way as pages."""
    return f"""<!DOCTYPE html><html><head><meta name="ticker" content="{HTML_TICKER}"><meta name="fiscal_year" content="2032">
<meta name="company" content="{HTML_NAME}"><title>{HTML_NAME} Form 10-K for fiscal year 2032</title></head><body>
<h2>Item 7. Management's Discussion and Analysis of Financial Condition and Results of Operations</h2>
<p>Net sales rose on demand for coated lenses; gross margin improved with a better mix.</p>
<h2>Item 8. Financial Statements and Supplementary Data</h2>
<p><b>CONSOLIDATED STATEMENTS OF OPERATIONS</b></p><p>(In millions)</p>
<table><tr><th></th><th>Fiscal 2032</th><th>Fiscal 2031</th></tr>
<tr><td>Net sales</td><td>2,480</td><td>2,210</td></tr><tr><td>Cost of sales</td><td>1,364</td><td>1,259</td></tr>
<tr><td>Gross margin</td><td>1,116</td><td>951</td></tr><tr><td>Operating income</td><td>434</td><td>352</td></tr></table>
</body></html>"""


@pytest.fixture(scope="module")
def html_10k(ctx, tmp_path_factory):
    from agent.ingest.runner import ingest

    root = tmp_path_factory.mktemp("html_10k")
    (root / f"{HTML_TICKER}_2032_10K.html").write_text(html_filing())
    report = ingest(ctx, "10k", [root], fanout=None, quiet=True)
    assert not report.errors
    return HTML_TICKER


def test_a_filing_parsed_from_html_computes_from_its_statement_tables_and_cites_the_table(ctx, html_10k, worker):
    job, _ = run_job(ctx, question=f"What was {HTML_NAME}'s gross margin in FY2032?")
    result = job.result
    assert result.status == "completed", result
    assert "45.0%" in result.answer  # (2,480 - 1,364) / 2,480
    assert any(c.source_type == "10k_table" and c.marker in result.answer for c in result.citations)


def test_the_statements_command_shows_the_stored_lines_and_computes_with_the_working(ctx, invented_filing, tmp_path):
    import json

    from tests.integration.test_services_cli import finagent

    shown = finagent(ctx, "statements", "show", invented_filing, "--concept", "inventory", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert {(r["fiscal_year"], r["value"], r["page"]) for r in rows} == {(2023, 2.21e9, 3), (2022, 2.09e9, 3)}
    computed = finagent(ctx, "statements", "compute", invented_filing, "FY2023 current ratio", cwd=tmp_path)
    assert computed.returncode == 0, computed.stderr
    assert "5,410 / 2,240 = 2.42" in computed.stdout and "page 4" in computed.stdout
    missing = finagent(ctx, "statements", "compute", invented_filing, "FY2022 inventory turnover", cwd=tmp_path)
    assert missing.returncode == 1 and "missing" in missing.stdout and "inventory FY2021" in missing.stdout
    unknown = finagent(ctx, "statements", "show", "NOSUCHCO", cwd=tmp_path)
    assert unknown.returncode == 2 and "not a company finagent knows" in unknown.stderr
