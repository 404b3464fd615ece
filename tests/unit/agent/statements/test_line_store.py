"""Which stored figure the calculator reads when several filings print the same line item for the same year."""
from agent.statements.line_store import home_statement, pick
from agent.statements.models import Fact


def _fact(concept: str, year: int, value: float, doc_year: int, statement="income", doc_id=1, page=10, row=0) -> Fact:
    return Fact(concept=concept, label=concept, statement=statement, fiscal_year=year, value=value, scale=1e6,
                document_id=doc_id, page=page, doc_year=doc_year, row=row)


def test_the_report_of_the_year_asked_wins_over_a_later_restatement_and_an_earlier_original():
    facts = [_fact("revenue", 2021, 100, doc_year=2021, doc_id=1), _fact("revenue", 2021, 103, doc_year=2023, doc_id=3),
             _fact("revenue", 2021, 102, doc_year=2022, doc_id=2)]
    assert pick(facts, "revenue", 2021, as_of=2022).value == 102  # the as-of report's comparative
    assert pick(facts, "revenue", 2021, as_of=2021).value == 100
    assert pick(facts, "revenue", 2021, as_of=2024).value == 103  # no 2024 report: the nearest earlier one


def test_a_concept_is_read_from_its_own_statement_first():
    facts = [_fact("depreciation_amortization", 2023, 5, 2023, statement="income", page=50),
             _fact("depreciation_amortization", 2023, 7, 2023, statement="cash_flow", page=54)]
    assert home_statement("depreciation_amortization") == "cash_flow"
    assert pick(facts, "depreciation_amortization", 2023, as_of=2023).value == 7
    assert home_statement("inventory") == "balance" and home_statement("revenue") == "income"


def test_the_first_line_on_the_page_wins_and_nothing_is_invented():
    facts = [_fact("net_income", 2023, 9, 2023, row=30), _fact("net_income", 2023, 8, 2023, row=12)]
    assert pick(facts, "net_income", 2023, as_of=2023).value == 8
    assert pick(facts, "net_income", 2022, as_of=2023) is None
    assert pick(facts, "revenue", 2023, as_of=2023) is None
