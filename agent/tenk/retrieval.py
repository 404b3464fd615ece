"""Retrieval for one 10-K sub-question: TABLE -> ranked table candidates -> LLM table selection -> the
tables as evidence; TEXT -> hybrid search within the routed Items, reranked."""
from __future__ import annotations

from agent.models.corpus import SearchFilters, SearchHit
from agent.models.research import Evidence, Usage
from agent.models.tenk import SelectTablesRequest, SubQuestion, TableCandidate, TenKPlan
from agent.retrieval.hybrid import hybrid_search, or_tsquery_text
from agent.tenk.rules import metric_for
from agent.tenk.statements import caption_statement
from agent.text import content_words, numbers, stem

PREVIEW_ROWS = 8
_CANDIDATES_SQL = """
WITH q AS (SELECT to_tsquery('english', %(tsq)s) AS tsq)
SELECT t.id, t.item, t.caption, t.markdown, t.rows,
       (ts_rank_cd(t.tsv, q.tsq, 1) + 2 * ts_rank_cd(to_tsvector('english', t.caption), q.tsq, 1))
       * (CASE WHEN t.item = ANY(%(items)s) THEN 2 ELSE 1 END) AS rank
FROM tenk_tables t, q
WHERE t.ticker = %(ticker)s AND t.fiscal_year = %(fy)s AND t.tsv @@ q.tsq
ORDER BY rank DESC, t.id
LIMIT %(limit)s
"""


def preview(caption: str, markdown: str, rows: list[list[str]]) -> str:
    """Caption, the first rows as markdown (header, separator, rows) and the labels of the remaining rows,
    so a line item far down a statement ('Inventories') is still visible to the selector."""
    lines = markdown.split("\n")
    head = lines[: PREVIEW_ROWS + 1]
    rest = [r[0] for r in rows[PREVIEW_ROWS:] if r and r[0]]
    out = [caption, *head]
    if rest:
        out.append(("Other rows: " + "; ".join(rest))[:600])
    return "\n".join(out)


def table_candidates(pool, ticker: str, fiscal_year: int, sub_q: SubQuestion, limit: int = 8) -> list[TableCandidate]:
    params = {"tsq": or_tsquery_text(sub_q.keywords), "ticker": ticker.upper(), "fy": fiscal_year,
              "items": [i.upper() for i in sub_q.items], "limit": limit}
    with pool.connection() as conn:
        rows = conn.execute(_CANDIDATES_SQL, params).fetchall()
    return [TableCandidate(table_id=r["id"], item=r["item"], caption=r["caption"],
                           preview=preview(r["caption"], r["markdown"], r["rows"])) for r in rows]


def load_tables(pool, ids: list[int], iteration: int, query: str = "") -> list[Evidence]:
    if not ids:
        return []
    with pool.connection() as conn:
        rows = conn.execute("SELECT id, ticker, fiscal_year, item, caption, markdown FROM tenk_tables WHERE id = ANY(%s)",
                            (list(ids),)).fetchall()
    by_id = {r["id"]: r for r in rows}
    return [Evidence(source_type="10k_table", chunk_id=r["id"], ticker=r["ticker"], fiscal_year=r["fiscal_year"],
                     fiscal_quarter=0, item=r["item"], title=r["caption"], text=f"{r['caption']}\n{r['markdown']}",
                     score=1.0, iteration=iteration, query=query)
            for r in (by_id[i] for i in ids if i in by_id)]


def _stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def rerank(query: str, hits: list[SearchHit]) -> list[SearchHit]:
    """Deterministic rerank: 0.6 x hybrid score + 0.3 x share of query terms present + 0.1 x holds figures."""
    want = _stems(query)
    scored = []
    for h in hits:
        coverage = len(want & _stems(h.text)) / len(want) if want else 0.0
        figures = 1.0 if numbers(h.text) else 0.0
        scored.append(h.model_copy(update={"score": round(0.6 * h.score + 0.3 * coverage + 0.1 * figures, 6)}))
    return sorted(scored, key=lambda h: (-h.score, str(h.chunk_id)))


def as_evidence(hits: list[SearchHit], iteration: int, query: str) -> list[Evidence]:
    return [Evidence(**h.model_dump(), iteration=iteration, query=query) for h in hits]


def text_search(ctx, ticker: str, fiscal_year: int, sub_q: SubQuestion, top_k: int = 8, iteration: int = 1) -> list[Evidence]:
    vec = ctx.embed_query(sub_q.keywords)
    filters = SearchFilters(tickers=[ticker], fiscal_years=[fiscal_year], items=sub_q.items)
    hits = hybrid_search(ctx.pool, sub_q.keywords, vec, filters, corpus="10k", top_k=top_k * 3)
    if not hits and sub_q.items:  # the routed Items hold nothing: search the whole filing
        hits = hybrid_search(ctx.pool, sub_q.keywords, vec, filters.model_copy(update={"items": []}), corpus="10k",
                             top_k=top_k * 3)
    return as_evidence(rerank(sub_q.keywords, hits)[:top_k], iteration, sub_q.keywords)


def statement_search(ctx, ticker: str, fiscal_year: int, sub_q: SubQuestion, top_k: int = 8,
                     iteration: int = 1) -> list[Evidence]:
    """A line item of a filing read page by page (no parsed tables): the chunks of the primary statement pages
    that report it (agent/tenk/statements.py), best first; none when the filing has no such page."""
    metric = metric_for(sub_q)
    kind = caption_statement(metric.caption) if metric and metric.caption else None
    if kind is None:
        return []
    vec = ctx.embed_query(sub_q.keywords)
    filters = SearchFilters(tickers=[ticker], fiscal_years=[fiscal_year], statements=[kind])
    hits = hybrid_search(ctx.pool, sub_q.keywords, vec, filters, corpus="10k", top_k=top_k)
    return as_evidence(hits, iteration, sub_q.keywords)


def retrieve(ctx, llm, question: str, plan: TenKPlan, sub_q: SubQuestion, iteration: int,
             budget_note: str = "") -> tuple[list[Evidence], Usage | None]:
    """The sub-question's evidence, and the usage of the LLM request that picked its tables (None: no request)."""
    if sub_q.kind == "TEXT":
        return text_search(ctx, plan.ticker, plan.fiscal_year, sub_q, iteration=iteration), None
    candidates = table_candidates(ctx.pool, plan.ticker, plan.fiscal_year, sub_q)
    if not candidates:
        found = statement_search(ctx, plan.ticker, plan.fiscal_year, sub_q, iteration=iteration)
        return found or text_search(ctx, plan.ticker, plan.fiscal_year, sub_q, iteration=iteration), None
    ids, usage = llm.select_tables(SelectTablesRequest(question=question, sub_question=sub_q, candidates=candidates,
                                                       budget_note=budget_note))
    known = {c.table_id for c in candidates}
    ids = [i for i in dict.fromkeys(ids) if i in known]
    if not ids:
        return text_search(ctx, plan.ticker, plan.fiscal_year, sub_q, iteration=iteration), usage
    return load_tables(ctx.pool, ids, iteration, query=sub_q.keywords), usage
