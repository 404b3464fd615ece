"""The statement lines in Postgres: written with their document, read back as facts per concept and fiscal year."""
from __future__ import annotations

from collections.abc import Callable

from agent.db import reading
from agent.statements.models import Fact, Statement, StatementLine

# where each concept is reported first; the same label elsewhere (net income on the cash flow statement, D&A on the
# income statement) is the next choice
_HOME: dict[str, Statement] = {
    **dict.fromkeys(("revenue", "cost_of_revenue", "gross_profit", "sga", "research_development", "operating_expenses",
                     "operating_income", "interest_expense", "pretax_income", "income_tax_expense", "net_income",
                     "net_income_attributable", "eps_basic", "eps_diluted", "shares_basic", "shares_diluted"), "income"),
    **dict.fromkeys(("depreciation_amortization", "stock_compensation", "operating_cash_flow", "capex",
                     "investing_cash_flow", "dividends_paid", "share_repurchases", "financing_cash_flow"), "cash_flow"),
}


def home_statement(concept: str) -> Statement:
    return _HOME.get(concept, "balance")


def write_lines(conn, document_id: int, ticker: str, lines: list[StatementLine], version: str) -> int:
    """Replace the document's stored lines; the number of figures written. A line read from a table is stored with
    the id of that table of the document (tenk_tables, by its index)."""
    conn.execute("DELETE FROM statement_lines WHERE document_id = %s", (document_id,))
    table_ids: dict[int, int] = {}
    if any(ln.table_index is not None for ln in lines):
        found = conn.execute("SELECT id, table_index FROM tenk_tables WHERE document_id = %s", (document_id,)).fetchall()
        table_ids = {r["table_index"]: r["id"] for r in found}
    rows = [(document_id, ticker, ln.statement, ln.page, table_ids.get(ln.table_index) if ln.table_index is not None else None,
             ln.row, ln.label, ln.section, ln.concept, ln.is_total,
             v.column, v.period_label, v.fiscal_year, v.months, v.value, v.scale, v.unit)
            for ln in lines for v in ln.values]
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO statement_lines (document_id, ticker, statement, page, table_id, row_index, label, section, concept,"
                " is_total, column_index, period_label, period_year, months, value, scale, unit)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows)
    conn.execute("UPDATE documents SET statements_version = %s WHERE id = %s", (version, document_id))
    return len(rows)


_FACTS_SQL = """
SELECT l.concept, l.label, l.statement, l.period_year, l.value, l.scale, l.unit, l.page, l.table_id, l.document_id, l.is_total,
       l.row_index, d.fiscal_year AS doc_year, coalesce(d.source_path, '') AS source_path
FROM statement_lines l JOIN documents d ON d.id = l.document_id
WHERE l.ticker = %(ticker)s AND l.concept = ANY(%(concepts)s)
  AND (%(years)s::int[] IS NULL OR l.period_year = ANY(%(years)s::int[]))
  AND d.fiscal_quarter = 0 AND (l.months IS NULL OR l.months = 12)
ORDER BY l.concept, l.period_year, d.fiscal_year DESC, l.document_id, l.page, l.row_index
"""


def annual_facts(pool, ticker: str, concepts: list[str], years: list[int] | None) -> list[Fact]:
    """Every annual figure of the company for these concepts and years (None: every year), from its annual reports
    (a quarter's columns are left out: a balance at a quarter's end is not the fiscal year's)."""
    with reading(pool) as conn:
        rows = conn.execute(_FACTS_SQL, {"ticker": ticker.upper(), "concepts": concepts, "years": years}).fetchall()
    out = []
    for r in rows:
        scaled = r["value"] * r["scale"] if r["unit"] in ("currency", "shares") else r["value"]
        out.append(Fact(concept=r["concept"], label=r["label"], statement=r["statement"], fiscal_year=r["period_year"],
                        value=scaled, scale=r["scale"], unit=r["unit"], document_id=r["document_id"],
                        document=_doc_name(r["source_path"]), page=r["page"], table_id=r["table_id"],
                        doc_year=r["doc_year"], is_total=r["is_total"], row=r["row_index"]))
    return out


def _doc_name(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.split(".", 1)[0]


def pick(facts: list[Fact], concept: str, year: int, as_of: int | None) -> Fact | None:
    """The figure a reader of the `as_of` annual report would take: from the filing of that year (then the nearest
    later one, then earlier ones: comparatives as that report restated them), on the concept's own statement, the
    first such line on the page."""
    home = home_statement(concept)

    def rank(f: Fact) -> tuple:
        doc_year = f.doc_year if f.doc_year is not None else year
        target = as_of if as_of is not None else year
        distance = (0, doc_year - target) if doc_year >= target else (1, target - doc_year)
        return (distance, f.statement != home, f.document_id or 0, f.page or 0, f.row or 0)

    found = [f for f in facts if f.concept == concept and f.fiscal_year == year]
    return min(found, key=rank) if found else None


def lookup_for(pool, ticker: str, concepts: list[str], years: list[int], as_of: int | None) -> Callable[[str, int], Fact | None]:
    """A calculator's Lookup over one query of the company's facts."""
    facts = annual_facts(pool, ticker, concepts, years)
    return lambda concept, year: pick(facts, concept, year, as_of)


def refresh_from_tables(pool) -> int:
    """Read the statements again of every filing parsed into tables (HTML, or PDF by item) whose lines an older reader
    wrote, or none did, from its stored tables (their units line is not stored: such a refresh reads figures at the
    scale the table's caption and header state). The number of documents read."""
    from agent.statements.reader import reader_version
    from agent.statements.table_lines import table_lines

    version = reader_version()
    with pool.connection() as conn:
        docs = conn.execute("SELECT d.id, d.ticker FROM documents d WHERE d.statements_version IS DISTINCT FROM %s"
                            " AND EXISTS (SELECT 1 FROM tenk_tables t WHERE t.document_id = d.id)", (version,)).fetchall()
    for d in docs:
        with pool.connection() as conn, conn.transaction():
            tables = conn.execute("SELECT table_index, caption, rows FROM tenk_tables WHERE document_id = %s ORDER BY table_index",
                                  (d["id"],)).fetchall()
            lines = [ln for t in tables for ln in table_lines(t["caption"], t["rows"], t["table_index"])]
            write_lines(conn, d["id"], d["ticker"], lines, version)
    return len(docs)
