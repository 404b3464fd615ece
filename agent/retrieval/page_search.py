"""Search filings read page by page for the pages that answer a question.

The question alone often misses a financial statement page: it asks for a ratio ("quick ratio", "days payable
outstanding") while the page holds line items under a statement's caption. So the question can be searched together
with search phrases for it (the 10-K planner's: statement captions and line items, agent/tenk/rules.py), and the
pages of every phrase's results are fused by reciprocal rank, each page ranking by its best chunk in each list. A
hybrid page search fuses each phrase's vector and keyword lists the same way (RANK_FUSION): on FinanceBench's
development half that beat hybrid_search's weighted chunk scores (docs/quality.md).

A question about a line item or a ratio needs a primary statement page, which words alone rank poorly (a notes page
says "balance sheet" more often than the balance sheet does). Pages are classified at ingest
(agent/tenk/statements.py); the statement pages the question needs, of the documents it most likely asks about
(the scope's, or in a shared store the first documents of the fused ranking), go first, best ranked first.
No filter is involved: in a shared store the documents are the ranking's own."""
from __future__ import annotations

from collections import defaultdict

from psycopg import sql

from agent.db import reading
from agent.models.corpus import SearchFilters, SearchHit
from agent.retrieval.fact_pages import FactNeed, fact_pages
from agent.retrieval.hybrid import KeywordCandidates, Mode, filter_clause, hybrid_search

RRF_K = 60  # the usual reciprocal-rank constant: ranks 1 and 10 weigh 1/61 and 1/70
RANK_FUSION = True  # hybrid: fuse the vector and keyword page lists by rank, not chunk scores by weight
CHUNKS_PER_SEARCH = 60  # a page often holds several of a search's best chunks

PageKey = tuple[int, int | None]  # (document_id, page); page None for a filing parsed by item
STATEMENT_DOCS = 2  # the statement pages of at most this many documents go first
STATEMENT_PAGES = (3, 2)  # per needed statement: that many pages of the first document, of the second


def ranked_pages(hits: list[SearchHit]) -> list[PageKey]:
    """The distinct pages of a result list, each at the rank of its best chunk."""
    return list(dict.fromkeys((h.document_id or 0, h.page) for h in hits))


def fuse(page_lists: list[list[PageKey]], weights: list[float] | None = None) -> list[PageKey]:
    """Reciprocal-rank fusion; ties keep the first list's order."""
    scores: dict[PageKey, float] = defaultdict(float)
    for i, pages in enumerate(page_lists):
        w = weights[i] if weights else 1.0
        for rank, page in enumerate(pages, 1):
            scores[page] += w / (RRF_K + rank)
    return sorted(scores, key=lambda p: -scores[p])


def within(pages: list[PageKey], reached: list[PageKey]) -> list[PageKey]:
    """The pages of `pages` whose documents `reached` holds a page of, in their order."""
    docs = {doc for doc, _ in reached}
    return [p for p in pages if p[0] in docs]


def statement_pages(pool, documents: list[int], statements: list[str]) -> dict[int, list[tuple[int, str]]]:
    """document -> its (page, statement) pages of the given statements, in page order."""
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    if not documents or not statements:
        return out
    with reading(pool) as conn:
        rows = conn.execute("SELECT DISTINCT document_id, page, statement FROM tenk_chunks WHERE document_id = ANY(%s)"
                            " AND statement = ANY(%s) AND page IS NOT NULL ORDER BY document_id, page",
                            (documents, statements)).fetchall()
    for r in rows:
        out[r["document_id"]].append((r["page"], r["statement"]))
    return out


def scope_documents(pool, scopes: list[SearchFilters]) -> list[int]:
    docs: list[int] = []
    with pool.connection() as conn:
        for f in scopes:
            where, params = filter_clause("10k", f)
            query = sql.SQL("SELECT DISTINCT document_id FROM tenk_chunks {} ORDER BY document_id").format(where)
            docs += [r["document_id"] for r in conn.execute(query, params)]
    return list(dict.fromkeys(docs))


def documents_by_pages(fused: list[PageKey], depth: int = 50) -> list[int]:
    """Documents ranked by all their pages among the first `depth` (reciprocal ranks summed), not by their best
    page alone: in a shared store one stray page of another company's filing should not outrank the filing the
    question is about, whose pages fill the list."""
    score: dict[int, float] = defaultdict(float)
    for i, (doc, _) in enumerate(fused[:depth], 1):
        score[doc] += 1.0 / (RRF_K + i)
    ranked = sorted(score, key=lambda d: -score[d])
    return ranked + [d for d in dict.fromkeys(d for d, _ in fused) if d not in score]


def likely_documents(pool, ranked_docs: list[int], scopes: list[SearchFilters] | None) -> list[int]:
    """The documents a question most likely asks about, likeliest first: the scope's, in the order the ranking puts
    them (one it never reached last), or in a shared store the ranking's own."""
    if not scopes:
        return ranked_docs
    place = {d: i for i, d in enumerate(ranked_docs)}
    return sorted(scope_documents(pool, scopes), key=lambda d: place.get(d, len(place)))


def statements_first(pool, fused: list[PageKey], statements: list[str], scopes: list[SearchFilters] | None,
                     ranked_docs: list[int] | None = None, facts: list[FactNeed] | None = None) -> list[PageKey]:
    """The pages printing the facts the question's figure is computed from (agent/retrieval/fact_pages.py), then the
    needed statement pages of the likeliest documents (`ranked_docs`, by default the fused ranking's), then the rest
    of the fused ranking."""
    if not statements and not facts:
        return fused
    rank = {p: i for i, p in enumerate(fused)}
    candidates = likely_documents(pool, ranked_docs if ranked_docs is not None else documents_by_pages(fused), scopes)
    docs = candidates[:STATEMENT_DOCS]
    # a scope's documents are all the company's and period's; in a shared store only the first few are likely its
    printed = fact_pages(pool, facts or [], candidates if scopes else docs)
    found = statement_pages(pool, docs, statements)
    chosen: list[PageKey] = []
    for doc, cap in zip(docs, STATEMENT_PAGES):
        for kind in statements:
            pages: list[PageKey] = [(doc, page) for page, k in found.get(doc, []) if k == kind]
            chosen += sorted(pages, key=lambda p: rank.get(p, len(fused) + (p[1] or 0)))[:cap]
    # the ranking's favourites first, whichever document; a page it never reached after those it did
    first = sorted(chosen, key=lambda p: (rank.get(p, len(fused)), docs.index(p[0]), p[1] or 0))
    return list(dict.fromkeys(printed + first + fused))


def question_weight(phrases: int) -> float:
    """The weight of the question's own lists against each of its `phrases`' lists: as much as all of them together
    (the phrases are general vocabulary for its topics; the question names what is asked)."""
    return float(max(1, phrases))


def search_pages(pool, embed, phrases: list[str], scopes: list[SearchFilters] | None, mode: Mode = "hybrid",
                 semantic_weight: float = 0.7, keyword_weight: float = 0.3,
                 keyword_candidates: KeywordCandidates = "ranked", statements: list[str] | None = None,
                 facts: list[FactNeed] | None = None) -> list[PageKey]:
    """Pages of the filings for the phrases (the question first), best first. `scopes`: one filter per company (each
    searched on its own, as the search service does), or None for the whole store. `embed(text)` gives a query
    vector. `statements`: the primary statements the question needs (agent/tenk/statements.py), put first; `facts`:
    the (concept, year, statement) inputs of the figure it asks (agent/statements/fact_needs.py), their pages first."""
    # hybrid: the vector and the keyword page lists of each phrase, fused by rank like the phrases (RRF), or one
    # hybrid_search per phrase whose chunk scores mix both sides by weight
    sides: list[Mode] = ["semantic", "keyword"] if mode == "hybrid" and RANK_FUSION else [mode]
    weight = question_weight(len(phrases) - 1)
    runs: list[tuple[Mode, float, list[PageKey]]] = []  # (side, weight, pages) per phrase and side
    for n, phrase in enumerate(phrases):
        vec = embed(phrase)
        for side in sides:
            hits: list[SearchHit] = []
            for filters in scopes or [SearchFilters()]:
                hits += hybrid_search(pool, phrase, vec, filters, "10k", CHUNKS_PER_SEARCH, semantic_weight, keyword_weight,
                                      mode=side, keyword_candidates=keyword_candidates)
            hits.sort(key=lambda h: -h.score)
            runs.append((side, weight if n == 0 else 1.0, ranked_pages(hits)))
    # the documents come from the question's own lists: it names the company and the period, a lexicon phrase
    # ("total current assets consolidated balance sheets") matches every filing alike
    documents = documents_by_pages(fuse([pages for _, _, pages in runs[:len(sides)]]))
    if not scopes and len(sides) > 1:
        # a shared store: a keyword match in another company's filing is mostly noise (the same line items and
        # captions are in every filing), so the keyword lists keep the pages of documents the question's own vector
        # search reached. Not the fused ranking's first documents: that sums pages, and a long filing of the right
        # company outranks the short release that answers the question.
        runs = [(side, w, within(pages, runs[0][2]) if side == "keyword" else pages) for side, w, pages in runs]
    fused = fuse([pages for _, _, pages in runs], [w for _, w, _ in runs])
    return statements_first(pool, fused, statements or [], scopes, documents, facts)
