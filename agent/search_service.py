"""Search with period resolution: what `finagent search` and the search tasks call."""
from __future__ import annotations

from pydantic import BaseModel, Field

from agent.context import Context
from agent.models.corpus import Period, SearchFilters, SearchHit
from agent.retrieval.availability import available_periods
from agent.retrieval.hybrid import Corpus, Mode, hybrid_search
from agent.retrieval.periods import resolve


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=2000)
    tickers: list[str] = Field(default_factory=list)
    time_refs: list[str] = Field(default_factory=list)  # "last 3 quarters", "Q4 2024", "FY2023", "latest"
    items: list[str] = Field(default_factory=list)
    corpus: Corpus = "transcript"
    top_k: int = Field(default=15, ge=1, le=200)
    mode: Mode = "hybrid"  # or rank by one side alone: "semantic" (vector) or "keyword"


class SearchResponse(BaseModel):
    query: str
    corpus: Corpus
    periods: dict[str, list[str]] = Field(default_factory=dict)  # ticker -> resolved period keys
    problems: list[str] = Field(default_factory=list)
    hits: list[SearchHit] = Field(default_factory=list)


def resolve_periods(ctx: Context, tickers: list[str], refs: list[str], corpus: Corpus) -> tuple[dict[str, list[Period]], list[str]]:
    """Each company's own periods for the time references ('last 3 quarters' means its latest 3)."""
    out, problems = {}, []
    for ticker in tickers:
        avail = available_periods(ctx.pool, ticker, corpus, ctx.redis, ctx.settings.quarter_cache_ttl_s)
        if not avail:
            problems.append(f"no {'transcripts' if corpus == 'transcript' else '10-K filings'} are ingested for {ticker}")
            continue
        res = resolve(refs, avail, ticker, default_latest=len(avail) if not refs else 1)
        problems += res.problems
        if res.periods:
            out[ticker] = res.periods
    return out, problems


def search(ctx: Context, req: SearchRequest) -> SearchResponse:
    s = ctx.settings
    resp = SearchResponse(query=req.query, corpus=req.corpus)
    known = _all_tickers(ctx, req.corpus)
    unknown = [t for t in req.tickers if t not in known]
    if unknown:
        what = "transcripts" if req.corpus == "transcript" else "10-K filings"
        resp.problems.append(f"no {what} are ingested for {', '.join(unknown)} "
                             f"(ingested: {', '.join(known) or 'none yet; run finagent ingest'})")
        if len(unknown) == len(req.tickers):
            return resp
    req = req.model_copy(update={"tickers": [t for t in req.tickers if t in known]})
    vec = ctx.embed_query(req.query)
    if not req.time_refs:  # no period asked: search everything matching the other filters
        filters = SearchFilters(tickers=req.tickers, items=req.items)
        resp.hits = hybrid_search(ctx.pool, req.query, vec, filters, req.corpus, req.top_k, s.semantic_weight,
                                  s.keyword_weight, mode=req.mode)
        return resp
    periods, problems = resolve_periods(ctx, req.tickers or known, req.time_refs, req.corpus)
    resp.problems += problems
    resp.periods = {t: [p.key for p in ps] for t, ps in periods.items()}
    hits: list[SearchHit] = []
    for ticker, ps in periods.items():
        filters = SearchFilters(tickers=[ticker], periods=ps, items=req.items)
        hits += hybrid_search(ctx.pool, req.query, vec, filters, req.corpus, req.top_k, s.semantic_weight, s.keyword_weight,
                              mode=req.mode)
    hits.sort(key=lambda h: -h.score)
    resp.hits = hits[: req.top_k * max(1, len(periods))]
    return resp


def _all_tickers(ctx: Context, corpus: Corpus) -> list[str]:
    kind = "transcript" if corpus == "transcript" else "10k"
    with ctx.pool.connection() as conn:
        return [r["ticker"] for r in conn.execute("SELECT DISTINCT ticker FROM documents WHERE kind=%s ORDER BY 1", (kind,))]
