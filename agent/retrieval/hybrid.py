"""Hybrid search: 0.7 x normalised cosine similarity + 0.3 x normalised full-text rank.

Candidates are the top-n semantic rows plus, when the keyword match is selective, the top-n keyword rows; every
candidate is then scored with its true cosine similarity and its ts_rank_cd against the OR of the query words, and
both are min-max normalised over the candidates.

Keyword candidates (the trade-off, see docs/benchmarks.md): ts_rank_cd has no index, so ranking every row that holds
any query word (18% of a 100k-chunk corpus for a phrase like "loan growth guidance") costs hundreds of ms. Keyword-only
candidates therefore come from the rows holding *all* the query words (or, when no row does, any of them), and only
when that match set holds at most KEYWORD_MATCH_CAP rows in the search's scope; they are the top n of it by rank
(ties by id). A phrase of common words ("long term", matching thousands of chunks) adds no keyword-only candidates:
its words do not single out rows, and the semantic candidates still get their keyword rank. The indexed and the exact
(`exact=True`) paths share this definition, so they differ only in the HNSW approximation.

A filtered search reads the filtered rows exactly (a MATERIALIZED scope the HNSW index cannot reach), because on
pgvector < 0.8 an HNSW scan followed by a WHERE filter can return nothing. An unfiltered search uses the HNSW index
(m 24, migration 0009) with hnsw.ef_search = EF_SEARCH for the semantic candidates, and runs its keyword statement
on a second pooled connection at the same time, so it costs the slower of the two rather than their sum. Semantic and
keyword ties break by id, so the exact path is deterministic.
"""
from __future__ import annotations

import functools
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from psycopg import sql

from agent.models.corpus import SearchFilters, SearchHit

Corpus = Literal["transcript", "10k"]

_TABLES = {
    "transcript": ("transcript_chunks", "id, document_id, chunk_index, ticker, fiscal_year, fiscal_quarter, speaker, section, text"),
    "10k": ("tenk_chunks", "id, document_id, chunk_index, ticker, fiscal_year, fiscal_quarter, item, item_title, page, text"),
}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.\-]*")
KEYWORD_MATCH_CAP = 500  # keyword-only candidates only from a match set of at most this many rows
EF_SEARCH = 150  # hnsw.ef_search of the unfiltered path (at least n); recall vs latency in docs/benchmarks.md


def _words(text: str) -> list[str]:
    words = [w.strip(".-&") for w in _WORD.findall(text)]
    return list(dict.fromkeys(w.lower() for w in words if len(w) > 1))


def or_tsquery_text(text: str) -> str:
    """Words joined with OR, so a keyword phrase ranks chunks by how many of its terms they hold."""
    return " | ".join(_words(text)) or "''"


def and_tsquery_text(text: str) -> str:
    """Words joined with AND: the rows that hold every word of the phrase."""
    return " & ".join(_words(text)) or "''"


def filter_clause(corpus: Corpus, f: SearchFilters) -> tuple[sql.Composable, dict[str, Any]]:
    clauses: list[sql.Composable] = []
    params: dict[str, Any] = {}
    if f.tickers:
        clauses.append(sql.SQL("ticker = ANY(%(tickers)s)"))
        params["tickers"] = [t.upper() for t in f.tickers]
    if f.periods:  # filings: a 10-K is its fiscal year's quarter 0, a 10-Q or an earnings release its quarter
        clauses.append(sql.SQL("fiscal_year * 10 + fiscal_quarter = ANY(%(periods)s)"))
        params["periods"] = [p.fiscal_year * 10 + p.fiscal_quarter for p in f.periods]
    years = f.fiscal_years
    if years:
        clauses.append(sql.SQL("fiscal_year = ANY(%(years)s)"))
        params["years"] = list(dict.fromkeys(years))
    if f.items and corpus == "10k":
        clauses.append(sql.SQL("item = ANY(%(items)s)"))
        params["items"] = [i.upper() for i in f.items]
    if f.statements and corpus == "10k":
        clauses.append(sql.SQL("statement = ANY(%(statements)s)"))
        params["statements"] = list(f.statements)
    if not clauses:
        return sql.SQL(""), params
    return sql.SQL("WHERE ") + sql.SQL(" AND ").join(clauses), params


_SEMANTIC = "sem AS (SELECT id FROM {source} ORDER BY {order} LIMIT %(n)s)"
_KEYWORD = """
    m_and AS MATERIALIZED (SELECT id FROM {source} WHERE tsv @@ to_tsquery('english', %(andq)s) LIMIT %(cap1)s),
    m_or AS MATERIALIZED (SELECT id FROM {source}
                          WHERE NOT EXISTS (SELECT 1 FROM m_and) AND tsv @@ to_tsquery('english', %(orq)s)
                          LIMIT %(cap1)s),
    m AS (SELECT id FROM m_and UNION ALL SELECT id FROM m_or),
    kw AS (SELECT s.id FROM m JOIN {source} s USING (id) WHERE (SELECT count(*) FROM m) <= %(cap)s
           ORDER BY ts_rank_cd(s.tsv, to_tsquery('english', %(orq)s)) DESC, s.id LIMIT %(n)s)"""
# keyword-only search ranks every row holding any query word: no cap, no AND pre-selection (an eval and a
# diagnostic, not the interactive path)
_RANKED_KEYWORD = """
    kw AS (SELECT id FROM {source} WHERE tsv @@ to_tsquery('english', %(orq)s)
           ORDER BY ts_rank_cd(tsv, to_tsquery('english', %(orq)s)) DESC, id LIMIT %(n)s)"""
# keyword-only search weighs each query word by its rarity in the search's scope (inverse document frequency, as
# BM25 does): ts_rank_cd alone counts a word every chunk holds ("revenue", a fiscal year) as much as the one that
# singles out a company or a line item. A word held by more than IDF_MAX_SHARE of the scope is left out, unless
# every word is.
_IDF_KEYWORD = """
    words AS (SELECT q FROM unnest(%(words)s::text[]) w, plainto_tsquery('english', w) q WHERE numnode(q) > 0),
    total AS (SELECT count(*)::float8 AS n FROM {source}),
    held AS (SELECT q, df, ln(1 + (total.n - df + 0.5) / (df + 0.5)) AS idf,
                    df <= greatest(%(idf_max_share)s * total.n, 1) AS rare
             FROM (SELECT q, (SELECT count(*) FROM {source} WHERE tsv @@ words.q)::float8 AS df FROM words) d, total
             WHERE df > 0),
    q AS (SELECT q, idf FROM held WHERE rare OR NOT EXISTS (SELECT 1 FROM held WHERE rare)),
    kept AS (SELECT coalesce(string_agg('(' || q::text || ')', ' | '), '')::tsquery AS q FROM q),
    kw AS (SELECT s.id, ts_rank_cd(s.tsv, kept.q) * (SELECT sum(q.idf) FROM q WHERE s.tsv @@ q.q) AS rank
           FROM {source} s, kept WHERE s.tsv @@ kept.q ORDER BY rank DESC, s.id LIMIT %(n)s)"""
IDF_MAX_SHARE = 0.3
_SCORED = """
    SELECT {cols}, 1 - (c.embedding <=> %(vec)s) AS sim, {rank} AS rank
    FROM {cand} JOIN {t} c USING (id)"""
_TS_RANK = "ts_rank_cd(c.tsv, to_tsquery('english', %(orq)s))"
Part = Literal["both", "both_ranked", "semantic", "keyword", "ranked_keyword", "idf_keyword"]
Mode = Literal["hybrid", "semantic", "keyword"]  # which side of the search ranks: both fused, or one alone
# Where hybrid's keyword-only candidates come from: "selective" (the rows holding all the words, capped, see the
# module's docstring) or "ranked" (the top n by rank of every row holding any word: deeper, slower).
KeywordCandidates = Literal["selective", "ranked"]


def _query(corpus: Corpus, where: sql.Composable, exact: bool, part: Part = "both") -> sql.Composed:
    """The candidates of `part`, each scored with its cosine similarity and keyword rank.

    Parameters: vec, n, orq / andq (tsquery texts), cap and cap1 (= cap + 1)."""
    table, cols = _TABLES[corpus]
    t = sql.Identifier(table)
    ctes = []
    if exact:
        ctes.append(sql.SQL("scope AS MATERIALIZED (SELECT id, embedding, tsv FROM {t} {where})").format(t=t, where=where))
        source: sql.Composable = sql.SQL("scope")
        order = sql.SQL("(embedding <=> %(vec)s) + 0, id")  # "+ 0": never the index, the exact order
    else:
        source, order = t, sql.SQL("embedding <=> %(vec)s")
    if part in ("both", "both_ranked", "semantic"):
        ctes.append(sql.SQL(_SEMANTIC).format(source=source, order=order))
    if part in ("both", "keyword"):
        ctes.append(sql.SQL(_KEYWORD).format(source=source))
    if part in ("both_ranked", "ranked_keyword"):
        ctes.append(sql.SQL(_RANKED_KEYWORD).format(source=source))
    if part == "idf_keyword":
        ctes.append(sql.SQL(_IDF_KEYWORD).format(source=source))
    union = "(SELECT id FROM sem UNION SELECT id FROM kw) cand"
    cand = {"both": union, "both_ranked": union, "semantic": "sem"}.get(part, "kw")
    rank = "kw.rank" if part == "idf_keyword" else _TS_RANK  # the IDF rank is computed with its candidates
    scored = sql.SQL(_SCORED).format(
        cand=sql.SQL(cand), t=t, rank=sql.SQL(rank), cols=sql.SQL(", ").join(sql.SQL("c.") + sql.Identifier(x.strip()) for x in cols.split(",")))
    return sql.SQL("WITH ") + sql.SQL(",\n").join(ctes) + scored


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="keyword-candidates")


os.register_at_fork(after_in_child=_executor.cache_clear)  # a forked child needs its own threads


@functools.cache
def _indexed_query(corpus: Corpus, part: Part) -> sql.Composed:
    """An unfiltered (HNSW) statement: it has no WHERE, so it is composed once per corpus and part."""
    return _query(corpus, sql.SQL(""), False, part)


def _fetch(pool, query: sql.Composed, params: dict, ef_search: int | None = None) -> list[dict]:
    with pool.connection() as conn, conn.transaction():
        if ef_search:
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))
        return conn.execute(query, params).fetchall()


def _candidates(pool, corpus: Corpus, where: sql.Composable, exact: bool, params: dict, mode: Mode = "hybrid",
                keyword_candidates: KeywordCandidates = "selective") -> list[dict]:
    """Scored candidate rows. The exact path is one statement; the indexed one runs its keyword statement on a
    second connection while the HNSW scan runs on this one, so an unfiltered search costs the slower side,
    not the sum."""
    if mode == "keyword":  # no vector index involved: the filtered scope, or the whole table
        return _fetch(pool, _query(corpus, where, exact, "idf_keyword"), params)
    if mode == "semantic":
        return _fetch(pool, _query(corpus, where, exact, "semantic"), params, ef_search=None if exact else max(EF_SEARCH, params["n"]))
    ranked = keyword_candidates == "ranked"
    if exact:
        return _fetch(pool, _query(corpus, where, True, "both_ranked" if ranked else "both"), params)
    keyword = _executor().submit(_fetch, pool, _indexed_query(corpus, "ranked_keyword" if ranked else "keyword"), params)
    rows = _fetch(pool, _indexed_query(corpus, "semantic"), params, ef_search=max(EF_SEARCH, params["n"]))
    seen = {r["id"] for r in rows}
    return rows + [r for r in keyword.result() if r["id"] not in seen]


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
    mode: Mode = "hybrid",
    keyword_candidates: KeywordCandidates = "selective",
) -> list[SearchHit]:
    """The top_k chunks by the weighted, normalised scores; `mode` "semantic" or "keyword" ranks by one side alone."""
    filters = filters or SearchFilters()
    if mode != "hybrid":
        semantic_weight, keyword_weight = (1.0, 0.0) if mode == "semantic" else (0.0, 1.0)
    exact = bool(exact) or filters.is_filtered  # a filtered search is always exact
    where, params = filter_clause(corpus, filters)
    n = max(top_k * 4, 60)
    params |= {"orq": or_tsquery_text(query_text), "andq": and_tsquery_text(query_text), "vec": query_vec, "n": n,
               "cap": KEYWORD_MATCH_CAP, "cap1": KEYWORD_MATCH_CAP + 1, "words": _words(query_text),
               "idf_max_share": IDF_MAX_SHARE}
    rows = _candidates(pool, corpus, where, exact, params, mode, keyword_candidates)
    if not rows:
        return []
    sims = _normalise([float(r["sim"]) for r in rows])
    ranks = _normalise([float(r["rank"]) for r in rows])
    scored = sorted(((semantic_weight * s + keyword_weight * k, r) for r, s, k in zip(rows, sims, ranks)),
                    key=lambda x: (-x[0], x[1]["id"]))
    return [
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
            document_id=r.get("document_id"),
            chunk_index=r.get("chunk_index"),
            page=r.get("page"),
            text=r["text"],
            semantic=float(r["sim"]),
            keyword=float(r["rank"]),
            score=score,
        )
        for score, r in scored[:top_k]
    ]
