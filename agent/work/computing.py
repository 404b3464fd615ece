"""A 10-K round's computed figure: the measure the plan names (or the rules read from the question), computed in code
from the company's stored statement lines, every input cited by the page it is printed on."""
from __future__ import annotations

from agent.db import reading
from agent.models.research import Evidence
from agent.statements.line_store import annual_facts, pick
from agent.statements.models import CONCEPTS, Computation, Fact, MeasureQuery
from agent.tenk.retrieval import load_tables

_PAGE_CHUNK_SQL = """
SELECT c.id, c.ticker, c.fiscal_year, c.fiscal_quarter, c.document_id, c.chunk_index, c.page, c.text
FROM tenk_chunks c WHERE c.document_id = %(doc)s AND c.page = %(page)s
ORDER BY (strpos(lower(c.text), lower(%(label)s)) > 0) DESC, c.chunk_index LIMIT 1
"""


def measure_for(question: str, plan_measure: MeasureQuery | None) -> tuple[MeasureQuery | None, str]:
    """The measure to compute and who named it: the plan's (a model's structured output), else the rules'."""
    if plan_measure is not None and (plan_measure.measure or plan_measure.expression):
        return plan_measure, "plan"
    from agent.statements.questions import measure_query

    found = measure_query(question)
    return found, "rules" if found else "none"


def years_of(query: MeasureQuery, filing_year: int) -> list[int]:
    return sorted(set(query.fiscal_years)) or [filing_year]


def is_computing_round(query: MeasureQuery, filing_year: int, filings: set[int] | None = None) -> bool:
    """One filing of the company computes the figure, so several filings' rounds do not state it twice: the report
    of the last year asked (it prints the comparatives the earlier years need), or when the job reads no report of that
    year, the first later one, else the latest. `filings`: the fiscal years of the company's filings in the job."""
    target = max(years_of(query, filing_year))
    years = (filings or set()) | {filing_year}
    later = [y for y in years if y >= target]
    return filing_year == (min(later) if later else max(years))


def compute(pool, ticker: str, query: MeasureQuery, filing_year: int) -> Computation | None:
    from agent.statements.calculator import calculate

    years = years_of(query, filing_year)
    query = query.model_copy(update={"fiscal_years": years})
    span = list(range(min(years) - 1, max(years) + 1))  # averages read the year before the first
    facts = annual_facts(pool, ticker, list(CONCEPTS), span)

    def lookup(concept: str, year: int) -> Fact | None:
        return pick(facts, concept, year, as_of=max(years))

    return calculate(query, lookup)


def input_evidence(pool, computation: Computation, iteration: int) -> tuple[Computation, list[Evidence]]:
    """The page chunk each found input is printed on, as evidence; the computation with each input's citation key."""
    evidence: dict[str, Evidence] = {}
    inputs = []
    with reading(pool) as conn:
        for inp in computation.inputs:
            fact = inp.fact
            if fact is not None and fact.table_id is not None:  # read from a table: the table is the citation
                tables = load_tables(pool, [fact.table_id], iteration, query=f"statement line: {fact.label}")
                if tables:
                    evidence.setdefault(tables[0].citation_key, tables[0])
                    inputs.append(inp.model_copy(update={"fact": fact.model_copy(update={"citation_key": tables[0].citation_key})}))
                    continue
            if fact is None or fact.document_id is None or fact.page is None:
                inputs.append(inp)
                continue
            row = conn.execute(_PAGE_CHUNK_SQL, {"doc": fact.document_id, "page": fact.page, "label": fact.label[:60]}).fetchone()
            if row is None:
                inputs.append(inp)
                continue
            ev = Evidence(source_type="10k", chunk_id=row["id"], ticker=row["ticker"], fiscal_year=row["fiscal_year"],
                          fiscal_quarter=row["fiscal_quarter"], document_id=row["document_id"],
                          chunk_index=row["chunk_index"], page=row["page"], section=f"{fact.statement} statement",
                          text=row["text"], score=1.0, iteration=iteration, query=f"statement line: {fact.label}")
            evidence.setdefault(ev.citation_key, ev)
            inputs.append(inp.model_copy(update={"fact": fact.model_copy(update={"citation_key": ev.citation_key})}))
    return computation.model_copy(update={"inputs": inputs}), list(evidence.values())


def answer_lines(computation: Computation, markers: dict[str, str]) -> list[str]:
    """The answer's '- ' lines that show the work (agent/statements/calculator.render): each formula line cites every
    input found, each input line its own page; a note joins the line before it."""
    from agent.statements.calculator import render

    cites = "".join(dict.fromkeys(markers[i.fact.citation_key] for i in computation.inputs
                                  if i.fact is not None and i.fact.citation_key in markers))
    out: list[str] = []
    for line in render(computation, lambda fact: markers.get(fact.citation_key, "")):
        if line.startswith("  (") and out:
            out[-1] = f"{out[-1].removesuffix(cites).rstrip()} {line.strip()} {cites}".rstrip()
        elif line.startswith("- "):
            out.append(line)
        else:
            out.append(f"- {line} {cites}".rstrip())
    return out
