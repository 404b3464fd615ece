"""The facts a question's figure is computed from: every (concept, fiscal year) the calculator would read for it, with
the statement that reports the concept. The pages that print those lines answer the question; a page search puts
them first (agent/retrieval/fact_pages.py). Nothing here names a measure: the inputs are read off the expression by
evaluating it against a lookup that records what it is asked and finds nothing, so every alternative of `a|b` and
both years of avg() and change() are read."""
from __future__ import annotations

from agent.statements.formulas import MEASURES, evaluate
from agent.statements.line_store import home_statement
from agent.statements.models import Fact, MeasureQuery
from agent.statements.questions import measure_query

FactNeed = tuple[str, int | None, str]  # (concept, fiscal year or None for any, the statement reporting it)
_ANY_YEAR = 0  # the year an expression is walked at when the question names none; its years are dropped


def query_expression(query: MeasureQuery) -> str | None:
    """The expression the calculator computes: the question's own definition, else the library measure's."""
    measure = MEASURES.get(query.measure or "")
    return query.expression or (measure.expression if measure else None)


def query_years(query: MeasureQuery) -> list[int]:
    """The years the expression is evaluated at: each year asked; a change or CAGR its first and last (one year
    alone is compared with the year before)."""
    years = sorted(set(query.fiscal_years))
    if query.aggregate in ("change", "cagr") and years:
        years = [years[0] - 1, years[0]] if len(years) == 1 else [years[0], years[-1]]
    return years


def expression_inputs(expression: str, years: list[int]) -> list[tuple[str, int]]:
    """Every (concept, year) the expression reads at these years, in the order read; [] for an expression outside
    the formula library's language."""
    read: list[tuple[str, int]] = []

    def record(concept: str, year: int) -> Fact | None:
        read.append((concept, year))
        return None

    try:
        for year in years:
            evaluate(expression, year, record)
    except ValueError:
        return []
    return list(dict.fromkeys(read))


def query_needs(query: MeasureQuery) -> list[FactNeed]:
    expression = query_expression(query)
    if not expression:
        return []
    years = query_years(query)
    if years:
        return [(c, y, home_statement(c)) for c, y in expression_inputs(expression, years)]
    concepts = dict.fromkeys(c for c, _ in expression_inputs(expression, [_ANY_YEAR]))
    return [(c, None, home_statement(c)) for c in concepts]


def fact_needs(question: str) -> list[FactNeed]:
    """The facts the figure a question asks is computed from (the offline reader's measure); [] for a question that
    asks no figure."""
    query = measure_query(question)
    return query_needs(query) if query is not None else []
