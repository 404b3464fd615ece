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


def test_a_composer_that_dropped_the_working_gets_it_appended_cited():
    from agent.models.research import Answer
    from agent.statements.models import Computation, Fact, Input
    from agent.work.answering import with_working

    fact = Fact(concept="revenue", label="Net sales", statement="income", fiscal_year=2023, value=5e9, scale=1e6, page=4,
                citation_key="10k:7")
    c = Computation(label="Revenue", formula="revenue", expression="5,000", value=5e9, result="$5,000 million",
                    fiscal_years=[2023], inputs=[Input(name="revenue", fiscal_year=2023, fact=fact)])
    markers = {"10k:7": "[10K2]"}
    bare = with_working(Answer(text="Revenue grew strongly."), [c], markers)
    assert "Computed from the statements:" in bare.text and "[10K2]" in bare.text and "page 5" in bare.text
    shown = with_working(bare, [c], markers)
    assert shown.text == bare.text  # already shown: nothing appended twice
    assert with_working(Answer(text="x"), [], markers).text == "x"


def test_a_working_kept_by_the_composer_is_not_appended_again_after_a_round_trip():
    from agent.models.research import Answer
    from agent.statements.calculator import calculate
    from agent.statements.models import Computation, Fact, MeasureQuery
    from agent.work.answering import with_working

    fact = Fact(concept="total_assets", label="Total assets", statement="balance", fiscal_year=2031, value=4.2e9, scale=1e6,
                page=9, citation_key="10k:3")
    worked = calculate(MeasureQuery(measure="total_assets", fiscal_years=[2031]), lambda c, y: fact if c == "total_assets" else None)
    assert worked is not None
    stored = Computation.model_validate_json(worked.model_dump_json())  # as a step output saves it
    composed = Answer(text="- 10-K FY2031: Total assets (FY2031) = total assets = 4,200 = 4,200 (USD millions) [10K1]")
    assert with_working(composed, [stored], {"10k:3": "[10K1]"}).text == composed.text
