"""The inputs a question's figure reads, found by walking its expression with a recording lookup: every alternative,
both years of an average or a change, a library measure inside another, and the question's own definition."""
from __future__ import annotations

from agent.models.financials import MeasureQuery
from agent.statements.fact_needs import expression_inputs, fact_needs, query_needs, query_years


def test_an_average_reads_both_years_and_alternatives_are_all_read():
    assert expression_inputs("(gross_profit|revenue) / avg(inventory)", [2031]) == [
        ("gross_profit", 2031), ("revenue", 2031), ("inventory", 2031), ("inventory", 2030)]


def test_a_measure_named_inside_an_expression_is_walked_and_bad_expressions_read_nothing():
    assert ("cost_of_revenue", 2031) in expression_inputs("cash_conversion_cycle", [2031])
    assert expression_inputs("no_such_concept / revenue", [2031]) == []


def test_a_change_or_cagr_reads_its_first_and_last_year_one_year_against_the_year_before():
    assert query_years(MeasureQuery(measure="revenue", fiscal_years=[2029, 2030, 2031], aggregate="cagr")) == [2029, 2031]
    assert query_years(MeasureQuery(measure="revenue", fiscal_years=[2031], aggregate="change")) == [2030, 2031]
    assert query_years(MeasureQuery(measure="revenue", fiscal_years=[2031, 2029], aggregate="each")) == [2029, 2031]


def test_needs_carry_the_statement_reporting_each_concept_and_no_year_means_any():
    assert query_needs(MeasureQuery(measure="capex_to_revenue", fiscal_years=[2031])) == [
        ("capex", 2031, "cash_flow"), ("revenue", 2031, "income")]
    assert query_needs(MeasureQuery(expression="current_assets / current_liabilities")) == [
        ("current_assets", None, "balance"), ("current_liabilities", None, "balance")]
    assert query_needs(MeasureQuery(measure="nothing_known")) == []


def test_a_question_read_offline():
    assert fact_needs("What is Brindlecart's FY2031 inventory turnover?") == [
        ("cost_of_revenue", 2031, "income"), ("inventory", 2031, "balance"), ("inventory", 2030, "balance")]
    assert fact_needs("Why did Brindlecart change its strategy?") == []
