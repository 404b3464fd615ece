"""Statement pages and the statements a question needs (agent/tenk/statements.py), on made-up filings."""
from __future__ import annotations

import pytest

from agent.tenk.statements import classify_pages, page_statement, question_statements


def _table(caption: str, rows: int = 25, head: str = "Widgetco Holdings, Inc.\n") -> str:
    lines = [f"Line item {i}\n$ {1000 + 37 * i:,} \n {900 + 29 * i:,} " for i in range(rows)]
    return f"{head}{caption}\n(in millions, except per share data)\nYear ended June 30, 2031 2030\n" + "\n".join(lines)


@pytest.mark.parametrize("caption, kind", [
    ("CONSOLIDATED STATEMENTS OF OPERATIONS", "income"),
    ("Consolidated Statement of Earnings", "income"),
    ("Condensed Consolidated Statements of Income (Unaudited)", "income"),
    ("Consolidated Statem ents of Operations and Comprehensive Loss", "income"),  # split by PDF extraction
    ("CONSOLIDATED BALANCE SHEETS", "balance"),
    ("Consolidated Balance Shee t", "balance"),
    ("Consolidated Statements of Financial Position", "balance"),
    ("STATEMENTS OF CONSOLIDATED CASH FLOWS", "cash_flow"),
    ("Consolidated Statements of Cash Flows", "cash_flow"),
    ("CASH FLOW S\nTATEMENTS", "cash_flow"),
    ("WIDGETCO HOLDINGS AND\nSUBSIDIARIESCONSOLIDATED\nSTATEMENTS\nOF\nOPERATIONS(In millions, except per share data)", "income"),
])
def test_a_captioned_table_is_its_statement(caption, kind):
    assert page_statement(_table(caption)) == kind


def test_a_caption_alone_or_quoted_is_not_a_statement():
    assert page_statement("CONSOLIDATED BALANCE SHEETS\nSee the accompanying notes, which are an integral part.") is None
    assert page_statement(_table("NOTES TO CONSOLIDATED FINANCIAL STATEMENTS\nNote 4. Balance sheet components")) is None
    assert page_statement(_table("Consolidated Statements of Comprehensive Income")) is None  # another statement
    assert page_statement(_table("Segment information", head="")) is None
    prose = "Management's discussion. " * 40 + "CONSOLIDATED BALANCE SHEETS"  # a caption deep in the page
    assert page_statement(prose + _table("", head="")) is None


@pytest.mark.parametrize("caption", [
    "Amounts are recorded as other assets in our consolidated balance sheets and amortised.",  # a sentence
    "the gains are presented on the consolidated\nstatements of income as other income",  # a sentence across lines
    "TABLE 4: SELECTED INCOME STATEMENT DATA",
    "NOTE 9. Supplemental Balance Sheet Information",
    "Off-balance sheet arrangements and contractual obligations",
    "ANALYSIS OF THE CONDENSED CONSOLIDATED STATEMENTS OF CASH FLOWS",
    "Consolidated Statement of Operations Data:",
    "Statement of Income Location of Hedging Gains",
    "OTHER CONSOLIDATED BALANCE SHEET COMPONENTS",
    "Condensed Consolidating Statement of Operations",
])
def test_a_caption_inside_a_sentence_or_a_qualified_title_is_not_a_statement(caption):
    assert page_statement(_table(caption)) is None


def test_a_statement_continues_onto_one_uncaptioned_page():
    pages = [_table("Consolidated Balance Sheets"), _table("Liabilities and equity", head=""),
             _table("Commitments", head=""), _table("Notes to Consolidated Financial Statements", head="")]
    assert classify_pages(pages) == ["balance", "balance", None, None]
    assert classify_pages([_table("Index to exhibits", head=""), _table("Liabilities", head="")]) == [None, None]


@pytest.mark.parametrize("question, needed", [
    ("What is the FY2031 quick ratio for Widgetco?", ["balance"]),
    ("Using the cash flow statement, what were Widgetco's capital expenditures in FY2030?", ["cash_flow"]),
    ("What is capex as a percentage of revenue for FY2031?", ["income", "cash_flow"]),
    ("Compute days payable outstanding for FY2031.", ["income", "balance"]),
    ("What was the dividend payout ratio?", ["income", "cash_flow"]),
    ("Who chairs the audit committee, and which exchange lists the notes?", []),
])
def test_a_question_needs_the_statements_its_line_items_are_on(question, needed):
    assert question_statements(question) == needed


def test_an_index_header_is_not_an_index():
    header = "Index to Consolidated Financial Statements\n"
    assert page_statement(_table("CONSOLIDATED BALANCE SHEETS", head=header)) == "balance"
    index = (header + "Consolidated Statements of Operations 52\nConsolidated Balance Sheets 54\n"
             "Consolidated Statements of Cash Flows 55\n" + _table("", head=""))
    assert page_statement(index) is None
