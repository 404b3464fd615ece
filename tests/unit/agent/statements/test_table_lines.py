"""A filing's statement tables (10-Ks parsed from HTML) read as line items, like a statement page: invented tables."""
from agent.statements.table_lines import table_lines, table_statement

ROWS = [["", "Years ended", "", ""], ["", "October 1, 2033", "October 2, 2032", "October 3, 2031"],
        ["Net sales:", "", "", ""], ["Products", "4,100", "3,900", "3,650"], ["Services", "1,200", "1,050", "980"],
        ["Total net sales", "5,300", "4,950", "4,630"], ["Cost of sales", "3,010", "2,870", "2,700"],
        ["Operating income", "1,120", "990", "905"], ["Earnings per share:", "", "", ""], ["Basic", "$ 2.24", "$ 1.98", "$ 1.81"]]


def test_a_statement_table_becomes_line_items_with_years_scale_and_units():
    lines = table_lines("CONSOLIDATED STATEMENTS OF OPERATIONS", ROWS, 7, "(In millions, except per-share amounts)")
    by = {ln.concept: ln for ln in lines if ln.concept}
    assert [(v.fiscal_year, v.value, v.scale) for v in by["revenue"].values] == [(2033, 5300, 1e6), (2032, 4950, 1e6),
                                                                               (2031, 4630, 1e6)]
    assert by["revenue"].section == "Net sales" and by["revenue"].table_index == 7 and by["revenue"].page is None
    eps = by["eps_basic"]
    assert eps.values[0].unit == "per_share" and eps.values[0].scale == 1.0 and eps.values[0].value == 2.24
    assert by["operating_income"].is_total


def test_only_a_primary_statements_table_is_read():
    assert table_statement("Consolidated Balance Sheets") == "balance"
    assert table_statement("CONSOLIDATED STATEMENTS OF CASH FLOWS") == "cash_flow"
    assert table_statement("Consolidated Statements of Comprehensive Income") is None
    assert table_statement("Balance sheet components") is None
    assert table_lines("Revenue by geography", ROWS, 0) == []
    assert table_lines("Consolidated Balance Sheets", [["Line item", "Amount"], ["Cash", "5"]], 0) == []  # no years
