"""Time references: found verbatim in questions, resolved against each company's own periods."""
from __future__ import annotations

import pytest

from agent.models.corpus import Period
from agent.retrieval.periods import find_time_refs, parse_quarters_option, resolve


def P(year: int, quarter: int = 0) -> Period:
    return Period(fiscal_year=year, fiscal_quarter=quarter)


# the real periods of two companies in shared/data (README)
SNV = [P(2019, 4), P(2020, 2), P(2020, 4), P(2021, 1), P(2021, 2), P(2021, 3), P(2021, 4)]
DRI = [P(2020, 4), P(2021, 1), P(2021, 3), P(2021, 4), P(2022, 1), P(2022, 2)]  # fiscal year ends in May


# ---------------------------------------------------------------- find_time_refs


@pytest.mark.parametrize(
    "question,refs",
    [
        ("How did NIM change over the last 3 quarters?", ["last 3 quarters"]),
        ("What did Apple say in Q4 2024 about iPhone?", ["Q4 2024"]),
        ("Compare FY2023 capex", ["FY2023"]),
        ("What is the latest guidance?", ["latest"]),
        ("Compare the last two quarters of loan growth", ["last two quarters"]),
        ("What happened in the third quarter of 2021?", ["third quarter of 2021"]),
        ("Margins in Q3 2021 versus Q4 2021", ["Q3 2021", "Q4 2021"]),
        ("Revenue in FY2023 vs FY2022", ["FY2023", "FY2022"]),
        ("Trends over the Past 4 Quarters", ["Past 4 Quarters"]),  # case preserved
        ("What did they say about deposits?", []),
        ("What cash did the spin-off raise, as of September 14, 2022?", ["September 14, 2022"]),
        ("Headcount in Feb. 2021 and Q2 2021", ["Feb. 2021", "Q2 2021"]),
        ("May we compare the two?", []),  # a month's name as a word
    ],
)
def test_find_time_refs_preserves_phrases(question, refs):
    found = find_time_refs(question)
    assert found == refs
    for r in found:
        assert r in question  # verbatim substrings


def test_find_time_refs_does_not_double_count_overlapping_phrases():
    # "Q4 of FY2024" must not also yield "FY2024"; "latest 2 quarters" must not also yield "latest"
    assert find_time_refs("Results for Q4 of FY2024") == ["Q4 of FY2024"]
    assert find_time_refs("the latest 2 quarters") == ["latest 2 quarters"]


# ---------------------------------------------------------------- resolve


def test_last_n_quarters_are_the_companys_latest_n():
    res = resolve(["last 3 quarters"], SNV, "SNV")
    assert res.periods == [P(2021, 2), P(2021, 3), P(2021, 4)]
    assert res.problems == []


def test_last_two_quarters_in_words():
    assert resolve(["last two quarters"], SNV, "SNV").periods == [P(2021, 3), P(2021, 4)]


def test_two_companies_resolve_last_2_quarters_to_their_own_periods():
    snv = resolve(["last 2 quarters"], SNV, "SNV")
    dri = resolve(["last 2 quarters"], DRI, "DRI")
    assert snv.periods == [P(2021, 3), P(2021, 4)]
    assert dri.periods == [P(2022, 1), P(2022, 2)]


def test_last_n_counts_available_calls_not_calendar_quarters():
    # SNV has no 2020 Q1/Q3 calls: its "last 5 quarters" reach back to Q4 2020
    assert resolve(["last 5 quarters"], SNV, "SNV").periods == SNV[-5:]
    assert SNV[-5] == P(2020, 4)


def test_specific_quarter_present():
    res = resolve(["Q2 2020"], SNV, "SNV")
    assert res.periods == [P(2020, 2)] and res.problems == []


def test_quarter_in_words_present():
    assert resolve(["third quarter of 2021"], SNV, "SNV").periods == [P(2021, 3)]


def test_specific_quarter_absent_is_a_problem_not_a_guess():
    res = resolve(["Q4 2024"], SNV, "SNV")
    assert res.periods == []
    assert len(res.problems) == 1
    msg = res.problems[0]
    assert "Q4 2024" in msg and "SNV" in msg
    assert "Q4 2019" in msg and "Q4 2021" in msg  # what is available


def test_missing_quarter_inside_the_range_is_a_problem():
    res = resolve(["Q3 2020"], SNV, "SNV")  # SNV has 2020 Q2 and Q4 but no Q3
    assert res.periods == [] and "Q3 2020" in res.problems[0]


def test_fiscal_year_selects_its_quarters():
    res = resolve(["FY2020"], SNV, "SNV")
    assert res.periods == [P(2020, 2), P(2020, 4)] and res.problems == []


def test_fiscal_year_absent():
    res = resolve(["FY2023"], SNV, "SNV")
    assert res.periods == [] and "FY2023" in res.problems[0] and "SNV" in res.problems[0]


def test_fiscal_year_is_fiscal_not_calendar():
    # DRI's FY2022 Q1/Q2 are calendar 2021: FY2022 gives exactly those
    assert resolve(["FY2022"], DRI, "DRI").periods == [P(2022, 1), P(2022, 2)]


def test_no_refs_defaults_to_latest():
    assert resolve([], SNV, "SNV").periods == [P(2021, 4)]
    assert resolve([], SNV, "SNV", default_latest=2).periods == [P(2021, 3), P(2021, 4)]


def test_latest():
    assert resolve(["latest"], DRI, "DRI").periods == [P(2022, 2)]
    assert resolve(["most recent quarter"], SNV, "SNV").periods == [P(2021, 4)]


def test_n_larger_than_available_uses_all_and_says_so():
    res = resolve(["last 10 quarters"], SNV, "SNV")
    assert res.periods == SNV
    assert len(res.problems) == 1 and "7" in res.problems[0] and "last 10 quarters" in res.problems[0]


def test_last_zero_quarters_is_not_everything():
    res = resolve(["last 0 quarters"], SNV, "SNV")
    assert res.periods == []
    assert res.problems


def test_several_refs_are_unioned_and_sorted():
    res = resolve(["Q4 2021", "Q4 2019", "Q4 2021"], SNV, "SNV")
    assert res.periods == [P(2019, 4), P(2021, 4)]


def test_unsorted_duplicate_availability_is_normalised():
    res = resolve(["last 2 quarters"], [P(2021, 4), P(2020, 1), P(2021, 4), P(2021, 2)], "X")
    assert res.periods == [P(2021, 2), P(2021, 4)]


def test_no_periods_at_all():
    res = resolve(["latest"], [], "ZZZ")
    assert res.periods == [] and "ZZZ" in res.problems[0]


def test_unknown_reference_is_reported():
    res = resolve(["sometime soon"], SNV, "SNV")
    assert res.periods == [] and "sometime soon" in res.problems[0]


# ---------------------------------------------------------------- CLI --quarters


def test_parse_quarters_option():
    assert parse_quarters_option("last3") == ["last 3 quarters"]
    assert parse_quarters_option("LAST 2") == ["last 2 quarters"]
    assert parse_quarters_option("2024_q4,2025_q1") == ["Q4 2024", "Q1 2025"]
    assert parse_quarters_option(" latest ") == ["latest"]
    assert parse_quarters_option("FY2023") == ["FY2023"]
    assert parse_quarters_option("Q4 2024") == ["Q4 2024"]


def test_quarters_option_round_trips_through_resolve():
    res = resolve(parse_quarters_option("last3"), SNV, "SNV")
    assert res.periods == SNV[-3:]
    res = resolve(parse_quarters_option("2021_q1,2020_q2"), SNV, "SNV")
    assert res.periods == [P(2020, 2), P(2021, 1)]


def test_last_zero_years_is_not_everything():
    assert resolve(["last 0 years"], SNV, "SNV").periods == []


def test_last_n_years():
    assert resolve(["past 2 years"], SNV, "SNV").periods == [P(2020, 2), P(2020, 4), P(2021, 1), P(2021, 2), P(2021, 3), P(2021, 4)]


def test_a_date_resolves_to_the_periods_of_its_year():
    avail = [Period(fiscal_year=2021), Period(fiscal_year=2022), Period(fiscal_year=2022, fiscal_quarter=3)]
    res = resolve(["September 14, 2022"], avail, "ACME")
    assert res.periods == [Period(fiscal_year=2022), Period(fiscal_year=2022, fiscal_quarter=3)] and not res.problems
