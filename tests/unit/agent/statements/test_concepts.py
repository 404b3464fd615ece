"""The concept vocabulary (agent/statements/concepts.py) on general caption wording."""
from __future__ import annotations

import pytest

from agent.statements.concepts import clean_label, concept_of, is_total_label
from agent.statements.models import CONCEPTS


@pytest.mark.parametrize("label, statement, concept", [
    ("Total revenues", "income", "revenue"),
    ("Net sales", "income", "revenue"),
    ("Net revenues", "income", "revenue"),
    ("Total net sales", "income", "revenue"),
    ("Cost of sales", "income", "cost_of_revenue"),
    ("Cost of products sold", "income", "cost_of_revenue"),
    ("Total cost of revenues", "income", "cost_of_revenue"),
    ("Gross margin", "income", "gross_profit"),
    ("Selling, general, and administrative expenses", "income", "sga"),
    ("Income from operations", "income", "operating_income"),
    ("Operating income (loss)", "income", "operating_income"),
    ("Operating profit", "income", "operating_income"),
    ("Income before income taxes", "income", "pretax_income"),
    ("Provision for income taxes", "income", "income_tax_expense"),
    ("Net income", "income", "net_income"),
    ("Net income attributable to common shareholders", "income", "net_income_attributable"),
    ("Net income attributab le to Widgetco Inc.", "income", "net_income_attributable"),  # a word split by extraction
    ("Net income attributable to noncontrolling interests", "income", None),
    ("Accounts receivable, net", "balance", "receivables"),
    ("Trade receivables, net", "balance", "receivables"),
    ("Receivables, net of allowance for doubtful accounts", "balance", "receivables"),
    ("Inventories", "balance", "inventory"),
    ("Property and equipment, net", "balance", "ppe_net"),
    ("Net property, plant and equipment", "balance", "ppe_net"),
    ("Accounts payable", "balance", "payables"),
    ("Trade accounts payable", "balance", "payables"),
    ("Accounts payable and accrued liabilities", "balance", None),  # not only payables
    ("Total current liabilities", "balance", "current_liabilities"),
    ("Total stockholders' equity", "balance", "shareholders_equity"),
    ("Total equity", "balance", "total_equity"),
    ("Total liabilities and shareholders’ equity", "balance", "liabilities_and_equity"),
    ("Purchases of property and equipment", "cash_flow", "capex"),
    ("Capital expenditures", "cash_flow", "capex"),
    ("Additions to property, plant and equipment", "cash_flow", "capex"),
    ("Payments for property, plant and equipment", "cash_flow", "capex"),
    ("Capital spending", "cash_flow", "capex"),
    ("Cash dividends paid", "cash_flow", "dividends_paid"),
    ("Payments of dividends", "cash_flow", "dividends_paid"),
    ("Dividends paid to noncontrolling interests", "cash_flow", None),
    ("Purchases of treasury stock", "cash_flow", "share_repurchases"),
    ("Share repurchases", "cash_flow", "share_repurchases"),
    ("Depreciation, depletion and amortization", "cash_flow", "depreciation_amortization"),
    ("Depreciation and amortization expense", "income", "depreciation_amortization"),
    ("Net cash provided by (used in) operating activities", "cash_flow", "operating_cash_flow"),
    ("Net cash used in investing activities", "cash_flow", "investing_cash_flow"),
    ("Inventories", "cash_flow", None),  # a change in working capital, not the balance
    ("Accounts receivable, net", "cash_flow", None),
    ("Proceeds from sale of property and equipment", "cash_flow", None),
    ("Other, net", "income", None),
])
def test_a_caption_names_its_concept(label, statement, concept):
    assert concept_of(label, statement) == concept
    assert concept is None or concept in CONCEPTS


def test_the_section_decides_a_bare_total_and_the_basic_and_diluted_lines():
    assert concept_of("Total", "balance", "Current assets") == "current_assets"
    assert concept_of("Total", "balance", "Current liabilities") == "current_liabilities"
    assert concept_of("Total", "balance", "Stockholders' equity") is None
    assert concept_of("Basic", "income", "Earnings per share") == "eps_basic"
    assert concept_of("Diluted", "income", "Net income per share:") == "eps_diluted"
    assert concept_of("Diluted", "income", "Weighted-average shares outstanding") == "shares_diluted"
    assert concept_of("Basic earnings per share", "income") == "eps_basic"


@pytest.mark.parametrize("label, total", [
    ("Total current assets", True), ("Gross profit", True), ("Operating income", True), ("Net income", True),
    ("Income before income taxes", True), ("Net cash provided by operating activities", True),
    ("Net loss attributable to Widgetco", True), ("Cost of sales", False), ("Net sales", False),
    ("Net income per share", False), ("Inventories", False),
])
def test_is_total_label(label, total):
    assert is_total_label(label) is total


def test_footnote_markers_leave_the_label():
    assert clean_label("Revenues(1)") == "Revenues"
    assert clean_label("Net sales (a)") == "Net sales"
    assert clean_label("Other expense, net*") == "Other expense, net"


def test_depreciation_and_amortization_of_named_assets_is_d_and_a():
    from agent.statements.concepts import concept_of
    assert concept_of("Depreciation and amortization of property, equipment and intangibles", "cash_flow") == "depreciation_amortization"
    assert concept_of("Amortization of acquired content assets", "cash_flow") is None
