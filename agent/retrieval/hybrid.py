"""Hybrid search: 0.7 x normalised cosine similarity + 0.3 x normalised full-text rank.

A filtered search reads the filtered rows exactly (a MATERIALIZED scope the HNSW index cannot
reach), because on pgvector < 0.8 an HNSW scan followed by a WHERE filter can return nothing.
An unfiltered search uses the HNSW index for the semantic candidates.
"""
from __future__ import annotations

import re
from typing import Literal

from psycopg import sql

from agent.models import SearchFilters, SearchHit

Corpus = Literal["transcript", "10k"]

_TABLES = {
    "transcript": ("transcript_chunks", "id, ticker, fiscal_year, fiscal_quarter, speaker, section, text"),
    "10k": ("tenk_chunks", "id, ticker, fiscal_year, item, item_title, text"),
}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.\-]*")


def or_tsquery_text(text: str) -> str:
    """Words joined with OR, so a keyword phrase ranks chunks by how many of its terms they hold."""
    words = [w.strip(".-&") for w in _WORD.findall(text)]
    return " | ".join(dict.fromkeys(w.lower() for w in words if len(w) > 1)) or "''"


def _where(corpus: Corpus, f: SearchFilters) -> tuple[sql.Composable, dict]:
    clauses, params = [], {}
    if f.tickers:
        clauses.append(sql.SQL("ticker = ANY(%(tickers)s)"))
        params["tickers"] = [t.upper() for t in f.tickers]
    if f.periods and corpus == "transcript":
        clauses.append(sql.SQL("fiscal_year * 10 + fiscal_quarter = ANY(%(periods)s)"))
        params["periods"] = [p.fiscal_year * 10 + p.fiscal_quarter for p in f.periods]
    years = f.fiscal_years or ([p.fiscal_year for p in f.periods] if corpus == "10k" else [])
    if years:
        clauses.append(sql.SQL("fiscal_year = ANY(%(years)s)"))
        params["years"] = list(dict.fromkeys(years))
    if f.items and corpus == "10k":
        clauses.append(sql.SQL("item = ANY(%(items)s)"))
        params["items"] = [i.upper() for i in f.items]
    if not clauses:
        return sql.SQL(""), params
    return sql.SQL("WHERE ") + sql.SQL(" AND ").join(clauses), params


def _query(corpus: Corpus, where: sql.Composable, exact: bool) -> sql.Composed:
    table, cols = _TABLES[corpus]
    t = sql.Identifier(table)
    if exact:
        scope = sql.SQL("scope AS MATERIALIZED (SELECT id, embedding, tsv FROM {t} {where}),").format(t=t, where=where)
        source = sql.SQL("scope")
    else:
        scope, source = sql.SQL(""), t
    return sql.SQL(
        """
        WITH {scope}
        q AS (SELECT to_tsquery('english', %(tsq)s) AS tsq),
        sem AS (SELECT id FROM {source} ORDER BY embedding <=> %(vec)s LIMIT %(n)s),
        kw AS (SELECT id, ts_rank_cd(tsv, q.tsq) AS rank FROM {source}, q
               WHERE tsv @@ q.tsq ORDER BY rank DESC LIMIT %(n)s),
        cand AS (SELECT id FROM sem UNION SELECT id FROM kw)
        SELECT {cols}, 1 - (c.embedding <=> %(vec)s) AS sim, coalesce(kw.rank, 0) AS rank
        FROM cand JOIN {t} c USING (id) LEFT JOIN kw USING (id)
        """
    ).format(scope=scope, source=source, t=t, cols=sql.SQL(", ").join(sql.SQL("c.") + sql.Identifier(x.strip()) for x in cols.split(",")))


def _normalise(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def hybrid_search(
    pool,
    query_text: str,
    query_vec,
    filters: SearchFilters | None = None,
    corpus: Corpus = "transcript",
    top_k: int = 15,
    semantic_weight: float = 0.7,
    keyword_weight: float = 0.3,
    exact: bool | None = None,
) -> list[SearchHit]:
    filters = filters or SearchFilters()
    exact = bool(exact) or filters.is_filtered  # a filtered search is always exact
    where, params = _where(corpus, filters)
    n = max(top_k * 4, 60)
    params |= {"tsq": or_tsquery_text(query_text), "vec": query_vec, "n": n}
    with pool.connection() as conn, conn.transaction():
        if not exact:
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(100, n))))
        rows = conn.execute(_query(corpus, where, exact), params).fetchall()
    if not rows:
        return []
    sims = _normalise([float(r["sim"]) for r in rows])
    ranks = _normalise([float(r["rank"]) for r in rows])
    hits = []
    for r, s, k in zip(rows, sims, ranks):
        hits.append(
            SearchHit(
                source_type=corpus,
                chunk_id=r["id"],
                ticker=r["ticker"],
                fiscal_year=r["fiscal_year"],
                fiscal_quarter=r.get("fiscal_quarter") or 0,
                item=r.get("item"),
                title=r.get("item_title"),
                speaker=r.get("speaker"),
                section=r.get("section"),
                text=r["text"],
                semantic=float(r["sim"]),
                keyword=float(r["rank"]),
                score=semantic_weight * s + keyword_weight * k,
            )
        )
    hits.sort(key=lambda h: (-h.score, h.chunk_id))
    return hits[:top_k]
