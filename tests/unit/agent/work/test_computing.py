"""Which 10-K round computes a figure, and whose reading of the question is used."""
from agent.statements.models import MeasureQuery
from agent.work.computing import is_computing_round, measure_for, years_of


def test_the_report_of_the_last_year_asked_computes():
    q = MeasureQuery(measure="revenue", fiscal_years=[2021, 2022, 2023], aggregate="average")
    assert [y for y in (2021, 2022, 2023) if is_computing_round(q, y, {2021, 2022, 2023})] == [2023]
    # the job reads no report of the year asked: the first later one computes (it prints that year as a comparative)
    asked = MeasureQuery(measure="revenue", fiscal_years=[2022])
    assert [y for y in (2021, 2023, 2024) if is_computing_round(asked, y, {2021, 2023, 2024})] == [2023]
    assert [y for y in (2019, 2020) if is_computing_round(asked, y, {2019, 2020})] == [2020]
    bare = MeasureQuery(measure="revenue")
    assert years_of(bare, 2022) == [2022] and is_computing_round(bare, 2022)


def test_the_plans_measure_wins_and_the_rules_stand_in_for_none():
    named = MeasureQuery(measure="current_ratio", fiscal_years=[2023])
    assert measure_for("anything", named) == (named, "plan")
    empty = MeasureQuery()
    query, by = measure_for("What are the company's main risks?", empty)
    assert (query, by) == (None, "none")
