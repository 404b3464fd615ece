"""The calculator and its rendering, over invented facts held in memory."""
from __future__ import annotations

import re

import pytest

from agent.statements.calculator import calculate, format_result, render
from agent.statements.models import Computation, Fact, MeasureQuery

MILLIONS = {
    ("revenue", 2020): 1000.0, ("revenue", 2021): 1100.0, ("revenue", 2022): 1331.0,
    ("operating_income", 2020): 100.0, ("operating_income", 2021): 121.0, ("operating_income", 2022): 150.0,
    ("depreciation_amortization", 2022): 30.0, ("capex", 2022): -45.5,
    ("current_assets", 2022): 600.0, ("current_liabilities", 2022): 400.0,
    ("cost_of_revenue", 2022): 800.0, ("payables", 2022): 90.0, ("payables", 2021): 70.0,
    ("inventory", 2022): 120.0, ("inventory", 2021): 100.0,
}
STATEMENT = {"capex": "cash_flow", "depreciation_amortization": "cash_flow", "current_assets": "balance",
             "current_liabilities": "balance", "payables": "balance", "inventory": "balance"}


def lookup(concept: str, year: int) -> Fact | None:
    value = MILLIONS.get((concept, year))
    if value is None:
        return None
    return Fact(concept=concept, label=concept.replace("_", " ").title(), statement=STATEMENT.get(concept, "income"),  # type: ignore[arg-type]
                fiscal_year=year, value=value * 1e6, scale=1e6, page=41, document="NORTHWIND_2022_10K")


def cite(fact: Fact) -> str:
    return f"[{fact.concept[:3]}{fact.fiscal_year}]"


def last_figure(line: str) -> str:
    return re.findall(r"-?[\d,]+(?:\.\d+)?", line.rsplit("=", 1)[1])[-1]


def compute(**kwargs: object) -> Computation:
    c = calculate(MeasureQuery(**kwargs), lookup)  # type: ignore[arg-type]
    assert c is not None
    return c


def test_money_measure_with_negative_capex_and_its_working() -> None:
    c = compute(measure="ebitda_less_capex", fiscal_years=[2022])
    assert c.value == pytest.approx(134.5e6)
    assert c.result == "$135 million"  # money to whole units of the scale by default
    lines = render(c, cite)
    assert lines[0].startswith("EBITDA less capex (FY2022) = operating income + depreciation and amortization - capital expenditures")
    assert "150 + 30 - 45.5" in lines[0]
    assert last_figure(lines[0]) == "135"
    assert lines[3] == ("- Capital expenditures, FY2022: 45.5 (USD millions), 'Capex' on the cash flow statement, page 42 [cap2022]")


def test_scale_and_decimals_as_asked() -> None:
    c = compute(measure="revenue", fiscal_years=[2022], scale=1e9, decimals=3)
    assert c.result == "$1.331 billion"
    c = compute(measure="working_capital", fiscal_years=[2022], scale=1e3)
    assert c.result == "$200,000 thousand"


def test_percent_ratio_times_and_days_kinds() -> None:
    assert compute(measure="operating_margin", fiscal_years=[2021]).result == "11.0%"
    assert compute(measure="current_ratio", fiscal_years=[2022]).result == "1.50"
    assert compute(measure="current_ratio", fiscal_years=[2022], percent=True).result == "150.0%"
    assert compute(measure="inventory_turnover", fiscal_years=[2022]).result == "7.27"
    assert compute(measure="dpo", fiscal_years=[2022], decimals=2).result == "36.50 days"


def test_half_rounds_up() -> None:
    assert format_result(0.11125, "percent", decimals=2)[0] == "11.13%"
    assert format_result(-2_500_000.0, "money", 1e6, decimals=0)[0] == "-$3 million"


def test_average_over_years() -> None:
    c = compute(measure="operating_margin", fiscal_years=[2020, 2021, 2022], aggregate="average")
    assert c.value == pytest.approx((0.1 + 0.11 + 150 / 1331) / 3)
    lines = render(c, cite)
    assert "by year: FY2020 100 / 1,000 -> 10.0%" in lines[0]
    assert lines[1].startswith("Operating margin 3-year average (FY2020-FY2022) = (10.0% + 11.0% + 11.3%) / 3 =")
    assert last_figure(lines[1]) == "10.8"


def test_cagr_between_first_and_last_year() -> None:
    c = compute(measure="revenue", fiscal_years=[2020, 2021, 2022], aggregate="cagr")
    assert c.value == pytest.approx(1.331 ** 0.5 - 1)  # two years of growth
    assert [i.fiscal_year for i in c.inputs] == [2020, 2022]
    assert last_figure(render(c, cite)[1]) == "15.4"


def test_change_in_percent_and_margin_change_in_points() -> None:
    assert compute(measure="revenue", fiscal_years=[2021], aggregate="change").result == "10.0%"  # against the year before
    c = compute(measure="operating_margin", fiscal_years=[2020, 2021], aggregate="change")
    assert c.result == "1.0 percentage points"


def test_question_definition_overrides_the_library() -> None:
    c = compute(measure="dpo", expression="365 * avg(payables) / (cost_of_revenue + change(inventory))", label="DPO",
                fiscal_years=[2022], decimals=2)
    assert c.value == pytest.approx(365 * 80 / 820)
    assert c.result == "35.61 days"
    assert render(c, cite)[0].startswith("DPO (FY2022) = 365 * average accounts payable / (cost of revenue + change in inventory)")


def test_missing_input_gives_none_and_names_it() -> None:
    c = compute(measure="inventory_turnover", fiscal_years=[2021])
    assert c.value is None and not c.complete
    assert c.missing == ["cost of revenue FY2021", "inventory FY2020"]
    lines = render(c, cite)
    assert "=" not in lines[0]
    assert "- Inventory, FY2020: not found in the filings' statements" in lines


def test_nothing_to_compute() -> None:
    assert calculate(MeasureQuery(measure="no_such_measure", fiscal_years=[2022]), lookup) is None
    assert calculate(MeasureQuery(measure="revenue"), lookup) is None


def test_render_reads_a_plain_computation() -> None:
    c = compute(measure="current_ratio", fiscal_years=[2022])
    plain = Computation.model_validate(c.model_dump(include=set(Computation.model_fields)))
    lines = render(plain, cite)
    assert last_figure(lines[0]) == "1.50"
    assert len(lines) == 3


def test_a_yes_no_question_about_the_figure_gets_its_verdict_first() -> None:
    rising = compute(measure="operating_margin", fiscal_years=[2022], aggregate="change", asks="rise")
    assert rising.verdict.startswith("Yes: the operating margin rose from 11.0% in FY2021 to 11.3% in FY2022")
    assert render(rising, cite)[0] == rising.verdict
    falling = compute(measure="operating_margin", fiscal_years=[2022], aggregate="change", asks="fall")
    assert falling.verdict.startswith("No: ")
    healthy = compute(measure="current_ratio", fiscal_years=[2022], asks="healthy")
    assert healthy.verdict.startswith("Yes: the current ratio of 1.50 in FY2022 is at or above 1")
    assert compute(measure="current_ratio", fiscal_years=[2022]).verdict == ""
    # an input missing: no verdict, the missing input is named instead
    assert compute(measure="inventory_turnover", fiscal_years=[2021], asks="rise", aggregate="change").verdict == ""
