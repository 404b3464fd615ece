"""The formula library and its evaluator, over invented facts held in memory."""
from __future__ import annotations

import pytest

from agent.statements.formulas import CONCEPT_TERMS, DERIVED, MEASURES, concept_for, evaluate, find_measures, parse_expression
from agent.statements.models import CONCEPTS, Fact

FACTS = {
    ("revenue", 2023): 500.0, ("revenue", 2022): 400.0,
    ("cost_of_revenue", 2023): -300.0,  # printed as a deduction
    ("inventory", 2023): 70.0, ("inventory", 2022): 50.0,
    ("capex", 2023): -25.0, ("operating_income", 2023): 80.0, ("depreciation_amortization", 2023): 15.0,
    ("net_income", 2023): 60.0, ("cash", 2023): 40.0, ("receivables", 2023): 30.0, ("current_liabilities", 2023): 100.0,
    ("pretax_income", 2023): 0.0, ("income_tax_expense", 2023): 12.0,
}


def lookup(concept: str, year: int) -> Fact | None:
    value = FACTS.get((concept, year))
    if value is None:
        return None
    return Fact(concept=concept, label=concept, statement="income", fiscal_year=year, value=value * 1e6, scale=1e6)


def test_every_library_expression_parses_and_names_known_concepts() -> None:
    for measure in MEASURES.values():
        parse_expression(measure.expression)
    assert set(CONCEPT_TERMS) == set(CONCEPTS)


def test_unsafe_or_unknown_expressions_are_refused() -> None:
    for bad in ("__import__('os')", "revenue ** 2", "revenu / cash", "revenue.real", "max(revenue)", "'a'"):
        with pytest.raises(ValueError):
            parse_expression(bad)


def test_a_margin_with_its_formula_in_words_and_values() -> None:
    e = evaluate(MEASURES["gross_margin"].expression, 2023, lookup)
    assert e.value == pytest.approx(0.4)
    assert e.formula == "(revenue - cost of revenue) / revenue"
    assert e.shown == "(500 - 300) / 500"


def test_negative_capex_counts_by_its_size() -> None:
    e = evaluate(MEASURES["ebitda_less_capex"].expression, 2023, lookup)
    assert e.value == pytest.approx((80 + 15 - 25) * 1e6)
    assert e.shown == "80 + 15 - 25"


def test_average_reads_both_years_and_records_every_input() -> None:
    e = evaluate(MEASURES["inventory_turnover"].expression, 2023, lookup)
    assert e.value == pytest.approx(300 / 60)
    assert {(i.name, i.fiscal_year) for i in e.inputs} == {("cost_of_revenue", 2023), ("inventory", 2023), ("inventory", 2022)}


def test_missing_input_is_named_and_the_value_is_none() -> None:
    e = evaluate(MEASURES["inventory_turnover"].expression, 2022, lookup)
    assert e.value is None
    assert e.missing == ["cost of revenue FY2022", "inventory FY2021"]


def test_fallback_takes_the_first_found_alternative() -> None:
    e = evaluate(MEASURES["net_margin"].expression, 2023, lookup)  # no attributable line: net income stands in
    assert e.value == pytest.approx(60 / 500)
    assert [i.name for i in e.inputs if i.fact is not None] == ["net_income", "revenue"]


def test_an_optional_line_counts_as_zero_with_a_note() -> None:
    e = evaluate(MEASURES["quick_ratio"].expression, 2023, lookup)
    assert e.value == pytest.approx(0.7)
    assert e.notes == ["short-term investments FY2023 not found, counted as 0"]


def test_division_by_zero_gives_none_with_a_reason() -> None:
    e = evaluate(MEASURES["effective_tax_rate"].expression, 2023, lookup)
    assert e.value is None
    assert any("division by zero" in n for n in e.notes)


def test_growth_and_change_functions() -> None:
    assert evaluate(MEASURES["revenue_growth"].expression, 2023, lookup).value == pytest.approx(0.25)
    assert evaluate("change(inventory)", 2023, lookup).value == pytest.approx(20e6)


def test_vocabulary_prefers_the_specific_measure() -> None:
    assert find_measures("what was the ebitda less capex")[0][0].name == "ebitda_less_capex"
    assert find_measures("the gross profit margin of the year")[0][0].name == "gross_margin"
    assert find_measures("fixed asset turnover")[0][0].name == "fixed_asset_turnover"
    assert find_measures("how much gross profit")[0][0].name == "gross_profit"
    assert "cash_conversion_cycle" in DERIVED


def test_phrases_map_to_concepts() -> None:
    assert concept_for("total current assets") == "current_assets"
    assert concept_for("the COGS") == "cost_of_revenue"
    assert concept_for("purchases of property, plant and equipment") == "capex"
    assert concept_for("customer goodwill impairment charge") is None


def test_a_line_item_a_filing_may_not_print_falls_back_to_the_one_it_does():
    from agent.statements.formulas import MEASURES
    assert MEASURES["net_income_attributable"].expression == "net_income_attributable|net_income"
    assert MEASURES["revenue"].expression == "revenue"
