"""The offline question reader on invented questions in varied phrasing."""
from __future__ import annotations

import pytest

from agent.statements.questions import fiscal_years, measure_query

# question -> (measure, fiscal years, aggregate, scale, decimals, percent)
CASES = [
    ("What is Zentro Corp's FY2021 gross margin, in units of percents, rounded to one decimal place?",
     ("gross_margin", [2021], "each", None, 1, True)),
    ("What is the 3 year average operating margin for Quillon from FY2018 - FY2020?",
     ("operating_margin", [2018, 2019, 2020], "average", None, None, None)),
    ("What is the revenue CAGR of Harbin Tools from FY2017 to FY2020?", ("revenue", [2017, 2018, 2019, 2020], "cagr", None, None, None)),
    ("Compute the compound annual growth rate of net income between fiscal 2019 and fiscal 2021.",
     ("net_income", [2019, 2020, 2021], "cagr", None, None, None)),
    ("What was the year-over-year change in net income from FY2020 to FY2021?", ("net_income", [2020, 2021], "change", None, None, None)),
    ("What is the FY2022 EBITDA less capex for Vortel in USD millions?", ("ebitda_less_capex", [2022], "each", 1e6, None, None)),
    ("What is the FY2019 capital expenditure (in USD billions) for Acme Lattice?", ("capex", [2019], "each", 1e9, None, None)),
    ("How much cost of goods sold did Ferrovia report in FY2018? Answer in USD thousands.",
     ("cost_of_revenue", [2018], "each", 1e3, None, None)),
    ("What is Tandem Oil's FY2020 quick ratio? Round to two decimal places.", ("quick_ratio", [2020], "each", None, 2, None)),
    ("What is the dividend payout ratio of Corvex in FY2021 using cash dividends paid?",
     ("dividend_payout_ratio", [2021], "each", None, None, None)),
    ("What is the FY2019 return on assets for Bexley?", ("roa", [2019], "each", None, None, None)),
    ("What is the FY2021 effective tax rate of Kestrel?", ("effective_tax_rate", [2021], "each", None, None, None)),
    ("What was Lumo's free cash flow in fiscal 2020 in USD millions?", ("free_cash_flow", [2020], "each", 1e6, None, None)),
    ("What is the FY2022 fixed asset turnover for Pinecrest?", ("fixed_asset_turnover", [2022], "each", None, None, None)),
    ("By how much did total assets grow year-over-year in FY2021?", ("total_assets", [2021], "change", None, None, None)),
    ("What is Omnidrive's net debt at the end of FY2023 (in millions)?", ("net_debt", [2023], "each", 1e6, None, None)),
    ("What is the FY2020 cash conversion cycle for Rulo Retail?", ("cash_conversion_cycle", [2020], "each", None, None, None)),
    ("What is the FY22 operating cash flow ratio for Demble?", ("operating_cash_flow_ratio", [2022], "each", None, None, None)),
    ("What was Yarrow's interest coverage ratio in FY2018?", ("interest_coverage", [2018], "each", None, None, None)),
    ("What is the debt-to-equity ratio of Calder at FY2021 year end?", ("debt_to_equity", [2021], "each", None, None, None)),
    ("What is the FY2020 DSO for Petrix? Round to the nearest tenth.", ("dso", [2020], "each", None, 1, None)),
    ("What is the total payout ratio for Sorrel in FY2019, as a %?", ("total_payout_ratio", [2019], "each", None, None, True)),
    ("What was Hightide's net PP&E at the end of fiscal year 2021?", ("ppe_net", [2021], "each", None, None, None)),
    ("How much cash from operations did Tessaly generate in FY2018?", ("operating_cash_flow", [2018], "each", None, None, None)),
    ("What was the capital intensity of Mobri in FY2022? Round to the nearest whole number.",
     ("capex_to_revenue", [2022], "each", None, 0, None)),
    ("What is Wexford's FY2021 EBITDA margin?", ("ebitda_margin", [2021], "each", None, None, None)),
    ("What is the FY2019 - FY2021 average ROE for Quarry Co?", ("roe", [2019, 2020, 2021], "average", None, None, None)),
    ("What was the revenue growth for Lenticor in FY2020?", ("revenue", [2020], "change", None, None, None)),
    ("What were accounts payable at year end FY2018 for Osk Ltd?", ("payables", [2018], "each", None, None, None)),
    ("What is the FY2017 inventory turnover for Fenwick, using two decimals?", ("inventory_turnover", [2017], "each", None, 2, None)),
]


@pytest.mark.parametrize(("question", "expected"), CASES)
def test_reads_measure_years_aggregate_scale_decimals_percent(question: str, expected: tuple[object, ...]) -> None:
    q = measure_query(question)
    assert q is not None
    assert (q.measure, q.fiscal_years, q.aggregate, q.scale, q.decimals, q.percent) == expected


def test_a_question_definition_becomes_the_expression() -> None:
    q = measure_query("Using the balance sheet, what was Pellmark's working capital ratio at year end FY2019? Define working "
                      "capital ratio as total current assets divided by total current liabilities. Round to two decimal places.")
    assert q is not None
    assert (q.measure, q.expression, q.label, q.fiscal_years, q.decimals) == (
        "current_ratio", "current_assets / current_liabilities", "Working capital ratio", [2019], 2)


def test_a_definition_with_period_functions_and_its_own_years() -> None:
    q = measure_query("What is the FY2017 days payable outstanding for Brightmill? DPO is defined as: 365 * (average accounts "
                      "payable between FY2016 and FY2017) / (FY2017 COGS + change in inventory between FY2016 and FY2017).")
    assert q is not None
    assert q.expression == "365 * (avg(payables)) / (cost_of_revenue + change(inventory))"
    assert q.fiscal_years == [2017]  # the definition's years are its terms' periods, not more years asked


def test_numerator_and_denominator_phrasing() -> None:
    q = measure_query("What is the FY2022 inventory turnover for Glimmer, using cost of sales as the numerator and average "
                      "inventories as the denominator?")
    assert q is not None and q.expression == "(cost_of_revenue) / (avg(inventory))"


def test_a_prior_year_term_in_a_definition() -> None:
    q = measure_query("What is Lorn's FY2021 asset growth? Define it as FY2021 total assets divided by FY2020 total assets minus 1.")
    assert q is not None and q.expression == "total_assets / prior(total_assets) - 1"


def test_an_unmappable_definition_falls_back_to_the_library() -> None:
    q = measure_query("What is the FY2020 current ratio? Define current ratio as current assets excluding restricted "
                      "escrow deposits divided by current liabilities.")
    assert q is not None and (q.measure, q.expression) == ("current_ratio", None)


@pytest.mark.parametrize("question", ["What are the main risks Nordwell faces?", "Why did gross margin decline at Nordwell in 2022?",
                                      "Who is the chief executive of Nordwell?"])
def test_no_figure_asked(question: str) -> None:
    assert measure_query(question) is None


def test_year_forms() -> None:
    assert fiscal_years("from FY2016 to FY2017") == [2016, 2017]
    assert fiscal_years("FY2018-FY2020 and fiscal year 2023, FY'15") == [2015, 2018, 2019, 2020, 2023]


@pytest.mark.parametrize("question, asks, aggregate", [
    ("Does Tallowmere have an improving operating margin profile as of FY2031?", "rise", "change"),
    ("Has Tallowmere's days sales outstanding improved in FY2031?", "fall", "change"),  # lower is better
    ("Did Tallowmere's gross margin decline between FY2030 and FY2031?", "fall", "change"),
    ("Is Tallowmere's liquidity healthy based on its current ratio for FY2031?", "healthy", "each"),
    ("What is Tallowmere's FY2031 current ratio?", "value", "each"),
])
def test_yes_no_questions_about_a_figure(question, asks, aggregate):
    q = measure_query(question)
    assert q is not None and (q.asks, q.aggregate) == (asks, aggregate)
