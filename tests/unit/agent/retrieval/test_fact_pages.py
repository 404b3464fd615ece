"""The pages printing a figure's inputs: for each (concept, year), the first likely document that prints it, on the
statement reporting the concept when that document has it there. Invented documents and pages."""
from __future__ import annotations

from agent.retrieval.fact_pages import pages_for_needs

# (document, page, statement, concept, year)
PRINTED = [
    (7, 40, "income", "cost_of_revenue", 2031), (7, 40, "income", "cost_of_revenue", 2030),
    (7, 41, "balance", "inventory", 2031), (7, 41, "balance", "inventory", 2030),
    (7, 43, "cash_flow", "inventory", 2031),  # the change in inventories on the cash flow statement
    (9, 12, "income", "cost_of_revenue", 2029), (9, 13, "balance", "inventory", 2029),
    (9, 13, "balance", "inventory", 2030),
]


def test_each_input_comes_from_the_first_document_printing_it_on_its_own_statement():
    needs = [("cost_of_revenue", 2031, "income"), ("inventory", 2031, "balance"), ("inventory", 2030, "balance")]
    assert pages_for_needs(needs, [7, 9], PRINTED) == [(7, 40), (7, 41)]


def test_a_year_the_first_document_does_not_print_comes_from_the_next():
    needs = [("inventory", 2030, "balance"), ("inventory", 2029, "balance")]
    assert pages_for_needs(needs, [7, 9], PRINTED) == [(7, 41), (9, 13)]


def test_document_order_is_the_callers_not_the_ids():
    needs = [("inventory", 2030, "balance")]
    assert pages_for_needs(needs, [9, 7], PRINTED) == [(9, 13)]


def test_another_statement_stands_in_when_the_document_prints_the_line_nowhere_else():
    printed = [(3, 5, "cash_flow", "depreciation_amortization", 2031)]
    assert pages_for_needs([("depreciation_amortization", 2031, "income")], [3], printed) == [(3, 5)]


def test_no_year_asked_takes_any_years_line_and_an_unprinted_fact_adds_nothing():
    assert pages_for_needs([("cost_of_revenue", None, "income")], [9, 7], PRINTED) == [(9, 12)]
    assert pages_for_needs([("goodwill", 2031, "balance")], [7, 9], PRINTED) == []
    assert pages_for_needs([("inventory", 2031, "balance")], [], PRINTED) == []
