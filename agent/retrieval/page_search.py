"""Search filings read page by page for the pages that answer a question.

The question alone often misses a financial statement page: it asks for a ratio ("quick ratio", "days payable
outstanding") while the page holds line items under a statement's caption. So the question can be searched together
with search phrases for it (the 10-K planner's: statement captions and line items, agent/tenk/rules.py), and the
pages of every phrase's results are fused by reciprocal rank, each page ranking by its best chunk in each list. A
hybrid page search fuses each phrase's vector and keyword lists the same way (RANK_FUSION): on FinanceBench's
development half that beat hybrid_search's weighted chunk scores (docs/quality.md)."""
from __future__ import annotations

from collections import defaultdict

from agent.models.corpus import SearchFilters, SearchHit
from agent.retrieval.hybrid import KeywordCandidates, Mode, hybrid_search

RRF_K = 60  # the usual reciprocal-rank constant: ranks 1 and 10 weigh 1/61 and 1/70
RANK_FUSION = True  # hybrid: fuse the vector and keyword page lists by rank, not chunk scores by weight
CHUNKS_PER_SEARCH = 60  # a page often holds several of a search's best chunks

PageKey = tuple[int, int | None]  # (document_id, page); page None for a filing parsed by item


def ranked_pages(hits: list[SearchHit]) -> list[PageKey]:
    """The distinct pages of a result list, each at the rank of its best chunk."""
    return list(dict.fromkeys((h.document_id or 0, h.page) for h in hits))


def fuse(page_lists: list[list[PageKey]]) -> list[PageKey]:
    """Reciprocal-rank fusion; ties keep the first list's order."""
    scores: dict[PageKey, float] = defaultdict(float)
    for pages in page_lists:
        for rank, page in enumerate(pages, 1):
            scores[page] += 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda p: -scores[p])


def search_pages(pool, embed, phrases: list[str], scopes: list[SearchFilters] | None, mode: Mode = "hybrid",
                 semantic_weight: float = 0.7, keyword_weight: float = 0.3,
                 keyword_candidates: KeywordCandidates = "ranked") -> list[PageKey]:
    """Pages of the filings for the phrases (the question first), best first. `scopes`: one filter per company (each
    searched on its own, as the search service does), or None for the whole store. `embed(text)` gives a query
    vector."""
    lists = []
    # hybrid: the vector and the keyword page lists of each phrase, fused by rank like the phrases (RRF), or one
    # hybrid_search per phrase whose chunk scores mix both sides by weight
    sides: list[Mode] = ["semantic", "keyword"] if mode == "hybrid" and RANK_FUSION else [mode]
    for phrase in phrases:
        vec = embed(phrase)
        for side in sides:
            hits: list[SearchHit] = []
            for filters in scopes or [SearchFilters()]:
                hits += hybrid_search(pool, phrase, vec, filters, "10k", CHUNKS_PER_SEARCH, semantic_weight, keyword_weight,
                                      mode=side, keyword_candidates=keyword_candidates)
            hits.sort(key=lambda h: -h.score)
            lists.append(ranked_pages(hits))
    return fuse(lists)
