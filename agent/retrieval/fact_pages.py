"""The statement pages that print the facts a question's figure is computed from (statement_lines, written at ingest
by agent/statements): for each (concept, year) input, the page of the likeliest document that prints that line for
that year, on the statement that reports the concept when the document prints it there (net income is also on the
cash flow statement, a change in inventories too). The inputs come from the caller (agent/statements/fact_needs.py
reads them off the measure's expression), so no measure is named here."""
from __future__ import annotations

from collections import defaultdict

from agent.db import reading

PageKey = tuple[int, int | None]  # as agent/retrieval/page_search.py: (document_id, page)
FactNeed = tuple[str, int | None, str]  # (concept, fiscal year or None for any, the statement reporting it)
Printed = tuple[int, int, str, str, int | None]  # (document, page, statement, concept, year) of a stored line


def printed_lines(pool, documents: list[int], concepts: list[str]) -> list[Printed]:
    """The (document, page, statement, concept, year) of every stored line of these concepts in these documents."""
    if not documents or not concepts:
        return []
    with reading(pool) as conn:
        rows = conn.execute("SELECT DISTINCT document_id, page, statement, concept, period_year FROM statement_lines"
                            " WHERE document_id = ANY(%s) AND concept = ANY(%s)", (documents, concepts)).fetchall()
    return [(r["document_id"], r["page"], r["statement"], r["concept"], r["period_year"]) for r in rows]


def pages_for_needs(needs: list[FactNeed], documents: list[int], printed: list[Printed]) -> list[PageKey]:
    """For each need, the pages of the first of `documents` printing its concept for its year: those on the need's
    statement if that document has any, else its other pages. Ordered by document, then page."""
    by_doc: dict[int, dict[tuple[str, int | None], list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    for doc, page, statement, concept, year in printed:
        by_doc[doc][(concept, year)].append((page, statement))
        by_doc[doc][(concept, None)].append((page, statement))
    chosen: set[PageKey] = set()
    for concept, year, home in needs:
        for doc in documents:
            found = by_doc.get(doc, {}).get((concept, year))
            if found:
                homes = [p for p, s in found if s == home]
                chosen.update((doc, p) for p in (homes or [p for p, _ in found]))
                break
    place = {d: i for i, d in enumerate(documents)}
    return sorted(chosen, key=lambda p: (place[p[0]], p[1] or 0))


def fact_pages(pool, needs: list[FactNeed], documents: list[int]) -> list[PageKey]:
    """The pages printing each needed fact, from the first of `documents` (likeliest first) that prints it."""
    if not needs or not documents:
        return []
    printed = printed_lines(pool, documents, list(dict.fromkeys(c for c, _, _ in needs)))
    return pages_for_needs(needs, documents, printed)
