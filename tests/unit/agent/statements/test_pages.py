"""Statement pages read as rows (agent/statements/pages.py), on invented pages in the shapes pypdf prints."""
from __future__ import annotations

from agent.statements.columns import page_scale
from agent.statements.pages import parse_statement_page

INCOME = """Consolidated Statements of Operations
Widgetco Holdings, Inc.
(in millions, except per share data)
Years Ended December 31, 2033 2032 2031
Net sales $ 12,345 $ 11,002 $ 9,870
Cost of goods sold 7,001 6,540 5,932
Gross profit 5,344 4,462 3,938
Selling, general and administrative
expenses 2,100 1,987 1,802
Restructuring charges (see Note 5) 45 — 12
Operating income 3,199 2,475 2,124
Interest expense, net (210) (198) $(187)
Net income attributable to Widgetco $ 2,001 $ 1,530 $ 1,322
Earnings per share: Basic $ 4.12 $ 3.15 $ 2.70
Diluted $ 4.10 $ 3.12 $ 2.68
Weighted-average shares outstanding:
Basic 485 486 490
"""


def _rows(text: str, statement="income"):
    return {line.label: line for line in parse_statement_page(text, statement, 7)}


def _values(line) -> list[float | None]:
    by_column = {v.column: v.value for v in line.values}
    return [by_column.get(n) for n in range(max(by_column) + 1)] if by_column else []


def test_a_three_column_income_statement():
    rows = _rows(INCOME)
    sales = rows["Net sales"]
    assert sales.concept == "revenue" and sales.page == 7 and sales.row == 0
    assert [(v.column, v.fiscal_year, v.months, v.value, v.scale) for v in sales.values] == [
        (0, 2033, 12, 12345, 1e6), (1, 2032, 12, 11002, 1e6), (2, 2031, 12, 9870, 1e6)]
    assert sales.values[0].period_label == "Years Ended December 31, 2033"
    assert rows["Gross profit"].is_total and rows["Operating income"].concept == "operating_income"
    assert rows["Net income attributable to Widgetco"].concept == "net_income_attributable"
    assert rows["Selling, general and administrative expenses"].concept == "sga"  # a wrapped label is one label


def test_a_dash_is_an_empty_cell_that_keeps_its_column():
    restructuring = _rows(INCOME)["Restructuring charges (see Note 5)"]
    assert [(v.column, v.fiscal_year, v.value) for v in restructuring.values] == [(0, 2033, 45), (2, 2031, 12)]


def test_parentheses_are_negative():
    assert _values(_rows(INCOME)["Interest expense, net"]) == [-210, -198, -187]


def test_per_share_rows_and_share_counts():
    rows = _rows(INCOME)
    basic, diluted = rows["Earnings per share: Basic"], rows["Diluted"]
    assert (basic.concept, diluted.concept) == ("eps_basic", "eps_diluted")
    assert {(v.unit, v.scale) for v in basic.values + diluted.values} == {("per_share", 1.0)}
    assert _values(diluted) == [4.10, 3.12, 2.68]
    shares = rows["Basic"]
    assert shares.concept == "shares_basic" and {(v.unit, v.scale) for v in shares.values} == {("shares", 1e6)}


BALANCE = """Widgetco Holdings, Inc.
CONSOLIDATED BALANCE SHEETS
(in thousands, except share and per share amounts)
December 31,
2033 2032
ASSETS
Current assets:
Cash and cash equivalents $ 1,200 $ 900
Accounts receivable, net of allowance of $12 and $10 3,400 3,100
Inventories 2,050 1,980
Total current assets 6,650 5,980
Property, plant and equipment, net 8,000 7,700
Total assets $ 14,650 $ 13,680
LIABILITIES AND STOCKHOLDERS' EQUITY
Current liabilities:
Accounts payable $ 1,100 $ 1,000
Accrued liabilities and other
current obligations 700 650
Total 1,800 1,650
4.25% senior notes due 2040 2,500 2,500
Total stockholders' equity 10,350 9,530
Total liabilities and stockholders' equity $ 14,650 $ 13,680
"""


def test_a_two_column_balance_sheet_with_sections_a_wrapped_label_and_a_split_header():
    rows = _rows(BALANCE, "balance")
    cash = rows["Cash and cash equivalents"]
    assert cash.section == "Current assets" and cash.concept == "cash"
    assert [(v.fiscal_year, v.months, v.period_label, v.scale) for v in cash.values] == [
        (2033, None, "December 31, 2033", 1e3), (2032, None, "December 31, 2032", 1e3)]
    assert rows["Accounts receivable, net of allowance of 12 and 10"].concept == "receivables"
    assert _values(rows["Accounts receivable, net of allowance of 12 and 10"]) == [3400, 3100]
    assert rows["Total current assets"].concept == "current_assets"
    assert rows["Property, plant and equipment, net"].section == ""  # the total closed "Current assets"
    wrapped = rows["Accrued liabilities and other current obligations"]
    assert wrapped.section == "Current liabilities" and _values(wrapped) == [700, 650]
    total = rows["Total"]
    assert total.concept == "current_liabilities" and total.is_total


def test_digits_in_a_label_are_not_values():
    notes = _rows(BALANCE, "balance")["4.25% senior notes due 2040"]
    assert _values(notes) == [2500, 2500]
    text = INCOME.replace("Cost of goods sold 7,001", "Cost of goods sold (Notes 1 and 4) 7,001")
    assert _values(_rows(text)["Cost of goods sold (Notes 1 and 4)"]) == [7001, 6540, 5932]


def test_a_header_split_over_lines_with_one_date_per_column():
    text = BALANCE.replace("December 31,\n2033 2032", "December 31,\n2033\nDecember 25,\n2032")
    cash = _rows(text, "balance")["Cash and cash equivalents"]
    assert [(v.fiscal_year, v.period_label) for v in cash.values] == [(2033, "December 31, 2033"),
                                                                       (2032, "December 25, 2032")]


def test_figures_at_the_start_of_the_next_line():
    """pypdf's other layout: a label, then its figures at the start of the next line, then the next label."""
    text = ("Consolidated Statements of Operations\n(Dollars in billions)\nYears Ended June 30,\n2033 2032 Revenues\n"
            "$ 12.5 $ 11.0 Cost of revenues\n7.1 6.5 Net earnings attributab\nle to Widgetco 2.0 1.5\n")
    rows = _rows(text)
    assert _values(rows["Revenues"]) == [12.5, 11.0] and rows["Revenues"].values[0].scale == 1e9
    assert rows["Cost of revenues"].concept == "cost_of_revenue"
    assert rows["Net earnings attributab le to Widgetco"].concept == "net_income_attributable"


QUARTER = """Widgetco Holdings, Inc.
Condensed Consolidated Statements of Income (Unaudited)
(in thousands, except per share amounts)
Three Months Ended Six Months Ended
June 30, June 30,
2033 2032 2033 2032
Revenues(1) $ 5,100 $ 4,800 $ 10,050 $ 9,300
Cost of revenues 3,000 2,900 5,900 5,600
Net income 800 700 1,500 1,350
"""


def test_a_quarterly_page_with_three_and_six_month_groups():
    rows = _rows(QUARTER)
    revenue = rows["Revenues"]  # the footnote marker is not part of the label
    assert revenue.concept == "revenue"
    assert [(v.fiscal_year, v.months, v.value, v.scale) for v in revenue.values] == [
        (2033, 3, 5100, 1e3), (2032, 3, 4800, 1e3), (2033, 6, 10050, 1e3), (2032, 6, 9300, 1e3)]
    assert revenue.values[0].period_label == "Three Months Ended June 30, 2033"
    assert revenue.values[3].period_label == "Six Months Ended June 30, 2032"


def test_a_row_with_fewer_figures_than_columns_keeps_none():
    text = INCOME.replace("Gross profit 5,344 4,462 3,938", "Gross profit 5,344 4,462")
    gross = _rows(text)["Gross profit"]
    assert gross.values == [] and gross.concept == "gross_profit"


def test_a_restated_header_keeps_its_columns():
    text = BALANCE.replace("December 31,\n2033 2032", "December 31,\n2033 2032\n(As restated)")
    cash = _rows(text, "balance")["Cash and cash equivalents"]
    assert [(v.fiscal_year, v.value) for v in cash.values] == [(2033, 1200), (2032, 900)]
    text = INCOME.replace("2033 2032 2031", "2033 2032 (restated) 2031 (restated)")
    assert [v.fiscal_year for v in _rows(text)["Net sales"].values] == [2033, 2032, 2031]


CASH = """Widgetco Holdings, Inc.
Consolidated Statements of Cash Flows
($ in millions)
Fiscal Year 2033 2032 2031
Cash flows from operating activities:
Net income $ 2,001 $ 1,530 $ 1,322
Depreciation and amortization 400 380 350
Changes in operating assets and liabilities:
Accounts receivable (120) (80) 40
Inventories (60) 25 (30)
Accounts payable 90 (15) 20
Net cash provided by operating activities 2,311 1,840 1,702
Cash flows from investing activities:
Purchases of property and equipment (700) (650) (600)
Net cash used in investing activities (700) (650) (600)
Cash flows from financing activities:
Dividends paid (300) (280) (260)
Repurchases of common stock (500) — (100)
Net cash used in financing activities (800) (280) (360)
"""


def test_working_capital_changes_on_a_cash_flow_statement_are_not_balances():
    rows = _rows(CASH, "cash_flow")
    assert rows["Inventories"].concept is None and rows["Accounts receivable"].concept is None
    assert rows["Accounts payable"].concept is None
    assert rows["Inventories"].section == "Changes in operating assets and liabilities"
    assert rows["Depreciation and amortization"].concept == "depreciation_amortization"
    assert rows["Net cash provided by operating activities"].concept == "operating_cash_flow"
    assert _values(rows["Purchases of property and equipment"]) == [-700, -650, -600]
    assert rows["Purchases of property and equipment"].concept == "capex"
    assert rows["Repurchases of common stock"].concept == "share_repurchases"
    assert [v.months for v in rows["Dividends paid"].values] == [12, 12, 12]


def test_the_scale_and_the_share_scale():
    assert page_scale("(in thousands, except per share amounts)") == (1e3, 1e3)
    assert page_scale("(in thousands, except share and per share data)") == (1e3, 1.0)
    assert page_scale("(Dollars in billions)").value == 1e9
    assert page_scale("In millions of U.S. dollars") == (1e6, 1e6)
    assert page_scale("$ in millions; shares in thousands") == (1e6, 1e3)
    assert page_scale("Statement of Widgets") == (1.0, 1.0)


def test_a_page_without_a_header_gives_no_rows():
    assert parse_statement_page("Net sales 1,234 1,111\nCost of sales 600 550\n", "income", 0) == []


def test_one_figure_a_line():
    text = ("Consolidated Statement of Income\n(Millions, except per share amounts)\nYears ended December 31\n2033\n2032\n"
            "Net sales\n$\n5,100\n$\n4,800\nCost of sales\n3,000\n2,900\nTotal operating expenses\n(1,250)\n(1,100)\n")
    rows = _rows(text)
    assert _values(rows["Net sales"]) == [5100, 4800] and _values(rows["Cost of sales"]) == [3000, 2900]
    assert _values(rows["Total operating expenses"]) == [-1250, -1100]
    assert [v.fiscal_year for v in rows["Cost of sales"].values] == [2033, 2032]


def test_dot_leaders_are_not_part_of_a_label_and_do_not_make_it_a_sentence():
    page = ("Widgetco Holdings, Inc.\nConsolidated Balance Sheets\n(In thousands)\nOctober 1,\n2033\nOctober 2,\n2032\n"
            "Current assets:\nCash and cash equivalents.......................... $ 4,410 $ 3,920\n"
            "Trade receivables, net of allowances of $55 and $61, respectively........ 2,205 1,980\n"
            "Total current assets........................... 6,615 5,900\n")
    lines = parse_statement_page(page, "balance", 4)
    by = {ln.concept: ln for ln in lines}
    assert by["cash"].label == "Cash and cash equivalents"
    assert [v.value for v in by["cash"].values] == [4410, 3920]
    assert [v.value for v in by["receivables"].values] == [2205, 1980]


def test_a_sections_total_printed_without_a_label_is_the_sections_total():
    page = ("Widgetco Holdings, Inc.\nConsolidated Statements of Operations\n(In thousands)\nYear Ended December 31,\n"
            "2033 2032 2031\nRevenues\nProducts 700 650 600\nServices 300 250 200\n1,000 900 800\nExpenses\n"
            "Products 400 380 350\nServices 200 170 150\n600 550 500\nOperating income 400 350 300\n")
    lines = parse_statement_page(page, "income", 2)
    total = next(ln for ln in lines if ln.concept == "revenue")
    assert total.label == "Total revenues" and [v.value for v in total.values] == [1000, 900, 800]
    assert next(ln for ln in lines if ln.concept == "operating_income").values[0].value == 400
