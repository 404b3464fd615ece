"""Hybrid search: 0.7 x cosine similarity + 0.3 x normalised keyword score, both on a 0-1 scale.

Candidates are the top-n semantic rows plus the top-n keyword rows; every candidate is then scored with its true
cosine similarity (1 - cosine distance, below 0 counted as 0) and its keyword score, min-max normalised over the
candidates. The similarity is not stretched over the candidates: min-max would turn the small gap between the best
and the worst semantic candidate into the whole 0-1 range, so 0.7 of it outweighed any keyword score and a chunk
holding a rare exact term of the query but little of its meaning fell out of the top k (docs/benchmarks.md).

The keyword score is BM25's idea on Postgres full text: the sum, over the query's terms a row holds, of the term's
inverse document frequency times ts_rank of that term alone (which grows with the term's count in the row, less and
less). A rare exact term ("CET1" in a corpus of bank calls, a product name) thus outweighs any number of common
words, which ts_rank_cd over the OR of the words did not do.

Keyword-only candidates (the trade-off, see docs/benchmarks.md): no index ranks full-text matches, so ranking every
row that holds any query word (18% of a 100k-chunk corpus for "loan growth guidance") costs hundreds of ms and grows
with the corpus. The candidates therefore come from a bounded set read through the GIN index: the rows holding
*every* query word when there are 1..KEYWORD_MATCH_CAP of them, otherwise the rows holding any *rare* term of the
query (one held by at most KEYWORD_MATCH_CAP rows). A term's document frequency comes from the planner's statistics
when they list it among the column's most common elements, otherwise from a GIN probe counted only up to the cap,
so no statement ever reads a long posting list. A phrase of common words only ("long term") adds no keyword-only
candidates from the GIN side. An unfiltered search on a host whose tantivy index (agent/retrieval/keyword_index.py)
has been built takes the top n by BM25 instead, which ranks such a phrase without reading every match and a rare
term's rows first; the GIN side's candidates serve filtered searches and hosts without the index. All candidates
are ranked by the same keyword score. The indexed and the exact (`exact=True`) paths share
this definition, so they differ only in the HNSW approximation.

A filtered search reads the filtered rows exactly (a MATERIALIZED scope the HNSW index cannot reach), because on
pgvector < 0.8 an HNSW scan followed by a WHERE filter can return nothing; on pgvector >= 0.8 a large scope goes
through an iterative index scan instead (agent/retrieval/filtered_hnsw.py). An unfiltered search uses the HNSW
index (m 24, migration 0009) with hnsw.ef_search = EF_SEARCH for the semantic candidates, and runs its keyword
statement on a second pooled connection at the same time, so it costs the slower of the two rather than their sum.
Semantic and keyword ties break by id, so the exact path is deterministic.
"""
from __future__ import annotations

import functools
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from psycopg import sql

from agent.db import reading
from agent.models.corpus import SearchFilters, SearchHit
from agent.retrieval import filtered_hnsw, keyword_index

Corpus = Literal["transcript", "10k"]

_TABLES = {
    "transcript": ("transcript_chunks", "id, document_id, chunk_index, ticker, fiscal_year, fiscal_quarter, speaker, section, text"),
    "10k": ("tenk_chunks", "id, document_id, chunk_index, ticker, fiscal_year, fiscal_quarter, item, item_title, page, text"),
}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.\-]*")
KEYWORD_MATCH_CAP = 500  # a match set (or a term) of at most this many rows is selective: its rows are candidates
EF_SEARCH = 150  # hnsw.ef_search of the unfiltered path (at least n); recall vs latency in docs/benchmarks.md
# A larger graph needs a wider beam for the same recall: at a million chunks ef 150 found 0.86 of the exact semantic
# top 15, ef 250-600 about 0.93. Tables over LARGE_TABLE rows search with EF_SEARCH_LARGE; at 1M, from ef 400 to 200
# hybrid recall fell from 0.965 to 0.95 while the search's time moved less than its warm-up did (bench/search_ef.py, in git history).
LARGE_TABLE, EF_SEARCH_LARGE = 300_000, 400
_SIZE_TTL_S = 60.0
_sizes: dict[tuple[str, str], tuple[float, float]] = {}


def ef_search_for(pool, corpus: Corpus) -> int:
    """The unfiltered path's ef_search for the table's size (the planner's row estimate, re-read once a minute)."""
    key = (str(getattr(pool, "conninfo", id(pool))), corpus)
    now = time.monotonic()
    if key not in _sizes or now - _sizes[key][1] > _SIZE_TTL_S:
        with pool.connection() as conn:
            row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (_TABLES[corpus][0],)).fetchone()
        _sizes[key] = (float(row["reltuples"]), now)
    return EF_SEARCH_LARGE if _sizes[key][0] > LARGE_TABLE else EF_SEARCH


def query_words(text: str) -> list[str]:
    words = [w.strip(".-&") for w in _WORD.findall(text)]
    return list(dict.fromkeys(w.lower() for w in words if len(w) > 1))


def or_tsquery_text(text: str) -> str:
    """Words joined with OR, so a keyword phrase ranks chunks by how many of its terms they hold."""
    return " | ".join(query_words(text)) or "''"


def and_tsquery_text(text: str) -> str:
    """Words joined with AND: the rows that hold every word of the phrase."""
    return " & ".join(query_words(text)) or "''"


_NO_FILTER = sql.SQL("")  # filter_clause's WHERE for no filter: the whole table


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
        return _NO_FILTER, params
    return sql.SQL("WHERE ") + sql.SQL(" AND ").join(clauses), params


_SEMANTIC = "sem AS (SELECT id FROM {source} ORDER BY {order} LIMIT %(n)s)"
# The query's terms (the lexemes of its words), each with its document frequency (df) in the search's scope and
# BM25's inverse document frequency of it. For a whole table a term the planner's statistics list among the
# column's most common elements takes its df from there (ANALYZE's sample: no index read at all); any other term,
# and every term of a filtered scope, is counted by a bounded probe of the GIN index, only up to cap + 1 rows, so a
# term is "rare" (held by at most cap rows) or not without ever reading a long posting list. The probe selects no
# column (SELECT FROM): a bitmap scan that needs none skips the heap pages the visibility map marks all-visible
# (at 1M chunks 148 blocks hit instead of 599 for a term held by more than cap rows, 3.2 against 4.0 ms).
_WORDS = """
    terms AS (SELECT DISTINCT quote_literal(lexeme)::tsquery AS q, lexeme
              FROM unnest(%(words)s::text[]) w, unnest(tsvector_to_array(to_tsvector('english', w))) lexeme),
    common AS MATERIALIZED ({common}),
    total AS MATERIALIZED ({total}),
    probes AS MATERIALIZED (
        SELECT t.q, t.lexeme, coalesce(
            c.freqs[array_position(c.lexemes, t.lexeme)] * total.n,
            (SELECT count(*) FROM (SELECT FROM {source} WHERE tsv @@ t.q LIMIT %(cap1)s) p)::float8) AS df
        FROM terms t CROSS JOIN total LEFT JOIN common c ON true),
    words AS MATERIALIZED (
        SELECT q, lexeme, df <= %(cap)s AS rare, ln(1 + (total.n - df + 0.5) / (df + 0.5)) AS idf
        FROM probes, total WHERE df > 0)"""
# the most common elements of a table's tsv column and their frequencies, as pg_stats holds them: one row of two
# arrays (the last three numbers of most_common_elem_freqs are the minimum, the maximum and the null frequency, not
# elements'). A term's frequency is looked up by its position (array_position): unnesting the up to 1,000 elements
# into rows and scanning them once per term cost 0.7 ms of server CPU per search at 10k chunks (bench/search_ab.py, in git history).
_COMMON_TERMS = """SELECT s.most_common_elems::text::text[] AS lexemes, s.most_common_elem_freqs AS freqs FROM pg_stats s
                 WHERE s.schemaname = current_schema() AND s.tablename = {table} AND s.attname = 'tsv'
                   AND NOT s.inherited"""
_NO_COMMON_TERMS = "SELECT NULL::text[] AS lexemes, NULL::float4[] AS freqs WHERE false"
_TABLE_SIZE = """SELECT CASE WHEN c.reltuples >= 10000 THEN c.reltuples::float8
                          ELSE (SELECT count(*) FROM {t})::float8 END AS n FROM pg_class c WHERE c.oid = {reg}::regclass"""
_SCOPE_SIZE = "SELECT count(*)::float8 AS n FROM {source}"
# A row's keyword score: the idf-weighted sum, over the query words it holds, of ts_rank of that word alone (which
# grows with the word's count in the row, but less and less): a rare exact term outweighs any number of common ones.
_KEYWORD_SCORE = "(SELECT coalesce(sum(w.idf * ts_rank({row}.tsv, w.q)), 0) FROM words w WHERE {row}.tsv @@ w.q)"
# Keyword-only candidates: BM25's top n when the host has the index and it holds every row (none past its
# watermark); otherwise the rows holding every query word when there are 1..cap of them, else the rows holding any of
# the query's rare terms (those held by at most cap rows), each read through the GIN index, beside BM25's. BM25
# already ranks a rare term's rows first, and the GIN probes would bring up to cap rows per rare term to be scored one
# by one (tens of ms at 10k chunks, where many terms are under the cap).
_KEYWORD = """
    gin AS MATERIALIZED (SELECT %(bm25_watermark)s::int8 IS NULL
                                OR EXISTS (SELECT 1 FROM {source} WHERE id > %(bm25_watermark)s) AS probe),
    m_and AS MATERIALIZED (SELECT id FROM {source} WHERE (SELECT probe FROM gin)
                           AND tsv @@ to_tsquery('english', %(andq)s) LIMIT %(cap1)s),
    use_and AS MATERIALIZED (SELECT count(*) BETWEEN 1 AND %(cap)s AS yes FROM m_and),
    m AS (SELECT id FROM m_and WHERE (SELECT yes FROM use_and)
          UNION SELECT r.id FROM words, LATERAL (SELECT id FROM {source} WHERE tsv @@ words.q LIMIT %(cap1)s) r
                WHERE (SELECT probe FROM gin) AND words.rare AND NOT (SELECT yes FROM use_and)
          UNION SELECT unnest(%(bm25_ids)s::int8[])),
    kw AS (SELECT s.id, """ + _KEYWORD_SCORE.format(row="s") + """ AS rank FROM m JOIN {source} s USING (id)
           ORDER BY rank DESC, s.id LIMIT %(n)s)"""
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
# Hybrid's indexed path runs two statements at once: "semantic_terms", the semantic candidates each with ts_rank of
# every query term it holds (`term_ranks`), and "keyword", the keyword candidates scored, each row also carrying the
# terms' idf (`idfs`, and one row of idfs alone when there is no keyword candidate). The semantic candidates' keyword
# score is then summed in Python (term_score), so the terms' frequencies are probed once per search, not twice.
Part = Literal["both", "both_ranked", "semantic", "semantic_terms", "keyword", "ranked_keyword", "idf_keyword"]
_TERM_RANKS = """(SELECT coalesce(jsonb_object_agg(t.lexeme, ts_rank(c.tsv, t.q)), '{}'::jsonb)
                  FROM terms t WHERE c.tsv @@ t.q)"""
# MATERIALIZED: the terms are read once per candidate row (_TERM_RANKS); inlined, each row stemmed the words again
_TERMS_ONLY = """
    terms AS MATERIALIZED (SELECT DISTINCT quote_literal(lexeme)::tsquery AS q, lexeme
              FROM unnest(%(words)s::text[]) w, unnest(tsvector_to_array(to_tsvector('english', w))) lexeme)"""
_WITH_IDFS = """
    SELECT s.*, i.idfs FROM (SELECT coalesce(jsonb_object_agg(lexeme, idf), '{{}}'::jsonb) AS idfs FROM words) i
    LEFT JOIN ({scored}) s ON true"""
Mode = Literal["hybrid", "semantic", "keyword"]  # which side of the search ranks: both fused, or one alone
# Where hybrid's keyword-only candidates come from: "selective" (the rows holding all the words, capped, see the
# module's docstring) or "ranked" (the top n by rank of every row holding any word: deeper, slower).
KeywordCandidates = Literal["selective", "ranked"]


def _query(corpus: Corpus, where: sql.Composable, exact: bool, part: Part = "both") -> sql.Composed:
    """The candidates of `part`, each scored with its cosine similarity and keyword rank.

    Parameters: vec, n, orq / andq (tsquery texts), cap and cap1 (= cap + 1)."""
    table, cols = _TABLES[corpus]
    t = sql.Identifier(table)
    whole_table = where == _NO_FILTER
    ctes: list[sql.Composable] = []
    if exact:
        ctes.append(sql.SQL("scope AS MATERIALIZED (SELECT id, embedding, tsv FROM {t} {where})").format(t=t, where=where))
        source: sql.Composable = sql.SQL("scope")
        order = sql.SQL("(embedding <=> %(vec)s) + 0, id")  # "+ 0": never the index, the exact order
    elif whole_table:
        source, order = t, sql.SQL("embedding <=> %(vec)s")
    else:  # a large filtered scope on pgvector >= 0.8: an iterative HNSW scan (agent/retrieval/filtered_hnsw.py).
        # Inlined where it is read, so the semantic side's ORDER BY ... LIMIT reaches the index; a CTE rather than a
        # bare subquery, which needs an alias before PostgreSQL 16 and is also joined under one of its own
        ctes.append(sql.SQL("scope AS NOT MATERIALIZED (SELECT * FROM {t} {where})").format(t=t, where=where))
        source = sql.SQL("scope")
        order = sql.SQL("embedding <=> %(vec)s")
    if part in ("both", "both_ranked", "semantic", "semantic_terms"):
        ctes.append(sql.SQL(_SEMANTIC).format(source=source, order=order))
    if part == "semantic_terms":
        ctes.append(sql.SQL(_TERMS_ONLY))
    if part in ("both", "keyword"):
        if whole_table:  # its statistics know the common terms
            total: sql.Composable = sql.SQL(_TABLE_SIZE).format(t=t, reg=sql.Literal(table))
            common: sql.Composable = sql.SQL(_COMMON_TERMS).format(table=sql.Literal(table))
        else:
            total = sql.SQL(_SCOPE_SIZE).format(source=source)
            common = sql.SQL(_NO_COMMON_TERMS)
        ctes.append(sql.SQL(_WORDS).format(source=source, total=total, common=common))
    if part in ("both", "keyword"):
        ctes.append(sql.SQL(_KEYWORD).format(source=source))
    if part in ("both_ranked", "ranked_keyword"):
        ctes.append(sql.SQL(_RANKED_KEYWORD).format(source=source))
    if part == "idf_keyword":
        ctes.append(sql.SQL(_IDF_KEYWORD).format(source=source))
    union = "(SELECT id FROM sem UNION SELECT id FROM kw) cand"
    cand = {"both": union, "both_ranked": union, "semantic": "sem", "semantic_terms": "sem"}.get(part, "kw")
    # the IDF rank and the selective keyword side's idf score are computed with their candidates; the union of both
    # sides scores each of its rows
    rank = {"idf_keyword": "kw.rank", "both": _KEYWORD_SCORE.format(row="c"), "keyword": "kw.rank",
            "semantic_terms": _TERM_RANKS}.get(part, _TS_RANK)
    scored = sql.SQL(_SCORED).format(
        cand=sql.SQL(cand), t=t, rank=sql.SQL(rank), cols=sql.SQL(", ").join(sql.SQL("c.") + sql.Identifier(x.strip()) for x in cols.split(",")))
    if part == "keyword":
        scored = sql.SQL(_WITH_IDFS).format(scored=scored)
    return sql.SQL("WITH ") + sql.SQL(",\n").join(ctes) + scored


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="keyword-candidates")


os.register_at_fork(after_in_child=_executor.cache_clear)  # a forked child needs its own threads


@functools.cache
def _indexed_query(corpus: Corpus, part: Part) -> sql.Composed:
    """An unfiltered (HNSW) statement: it has no WHERE, so it is composed once per corpus and part."""
    return _query(corpus, _NO_FILTER, False, part)


# The unfiltered statements are planned once per connection, not once per search. With PostgreSQL's default a
# prepared statement is planned again with each search's values whenever that plan looks cheaper than a generic one,
# and at 1M chunks both statements were planned again on every search (pg_prepared_statements): about 2.8 ms of
# server CPU per search. The generic plans return the same top 15 (bench/search_ab.py, in git history).
GENERIC_PLAN = {"plan_cache_mode": "force_generic_plan"}


def _fetch(pool, query: sql.Composed, params: dict, ef_search: int | None = None, settings: dict | None = None) -> list[dict]:
    local = ({"hnsw.ef_search": ef_search} if ef_search else {}) | (settings or {})
    if not local:  # one statement needs no transaction: no BEGIN and COMMIT around it
        with reading(pool) as conn:
            return conn.execute(query, params).fetchall()
    with pool.connection() as conn, conn.transaction():
        # every setting in one message (no parameters: the simple protocol takes several statements at once)
        conn.execute(sql.SQL("; ").join(sql.SQL("SET LOCAL {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(str(value)))
                                        for name, value in local.items()))
        return conn.execute(query, params).fetchall()


def _with_bm25(params: dict, bm25) -> dict:
    """The parameters with BM25's candidates, when there is an index to ask. BM25 already ranks the rows holding
    every word, and those holding a rare term, first, so the GIN probes for those rows (every posting of every word:
    13 ms for three common words at 1M chunks) run only for rows the index does not hold yet."""
    found = bm25() if bm25 else keyword_index.Candidates()
    return params | {"bm25_ids": found.ids, "bm25_watermark": found.watermark if found.ids else None}


def _candidates(pool, corpus: Corpus, where: sql.Composable, exact: bool, params: dict, mode: Mode = "hybrid",
                keyword_candidates: KeywordCandidates = "selective", bm25=None) -> list[dict]:
    """Scored candidate rows. The exact path is one statement; the indexed one runs its keyword side (BM25, then
    the keyword statement) on a second thread and connection while the HNSW scan runs on this one, so an unfiltered
    search costs the slower side, not the sum."""
    if mode == "keyword":  # no vector index involved: the filtered scope, or the whole table
        return _fetch(pool, _query(corpus, where, exact, "idf_keyword"), params)
    whole_table = where == _NO_FILTER
    iterative = None if exact or whole_table else filtered_hnsw.SETTINGS
    if mode == "semantic":
        return _fetch(pool, _query(corpus, where, exact, "semantic"), params,
                      ef_search=None if exact else _ef_search(pool, corpus, params["n"], iterative), settings=iterative)
    ranked = keyword_candidates == "ranked"
    if exact:
        return _fetch(pool, _query(corpus, where, True, "both_ranked" if ranked else "both"), _with_bm25(params, bm25))
    statement = _indexed_query if whole_table else functools.partial(_query, where=where, exact=False)
    keyword_statement = statement(corpus, part="ranked_keyword" if ranked else "keyword")
    generic = GENERIC_PLAN if whole_table else None
    keyword = _executor().submit(lambda: _fetch(pool, keyword_statement, _with_bm25(params, bm25), settings=generic))
    rows = _fetch(pool, statement(corpus, part="semantic" if ranked else "semantic_terms"), params,
                  ef_search=_ef_search(pool, corpus, params["n"], iterative), settings=iterative or generic)
    keyword_rows = keyword.result()
    if not ranked:
        idfs = keyword_rows[0]["idfs"] if keyword_rows else {}
        rows = [r | {"rank": term_score(r["rank"], idfs)} for r in rows]
        keyword_rows = [r for r in keyword_rows if r["id"] is not None]
    seen = {r["id"] for r in rows}
    return rows + [r for r in keyword_rows if r["id"] not in seen]


def _ef_search(pool, corpus: Corpus, n: int, iterative: dict | None) -> int:
    """hnsw.ef_search of an index scan: the table's (ef_search_for), wider for an iterative scan of a filtered scope."""
    return max(ef_search_for(pool, corpus), filtered_hnsw.EF_SEARCH if iterative else 0, n)


def term_score(term_ranks: dict[str, float], idfs: dict[str, float]) -> float:
    """The keyword score (_KEYWORD_SCORE) from a row's per-term ts_rank and the terms' idf."""
    return sum(idfs[lexeme] * rank for lexeme, rank in term_ranks.items() if lexeme in idfs)


def _normalise(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def fused_scores(sims: list[float], ranks: list[float], semantic_weight: float, keyword_weight: float) -> list[float]:
    """The weighted sum of each candidate's similarity (clamped to 0-1) and its min-max normalised keyword score."""
    return [semantic_weight * min(max(s, 0.0), 1.0) + keyword_weight * k for s, k in zip(sims, _normalise(ranks))]


def search_params(query_text: str, query_vec, n: int) -> dict[str, Any]:
    """The statement parameters of a search for `query_text` with `n` candidates per side (filters aside)."""
    return {"orq": or_tsquery_text(query_text), "andq": and_tsquery_text(query_text), "vec": query_vec, "n": n,
            "cap": KEYWORD_MATCH_CAP, "cap1": KEYWORD_MATCH_CAP + 1, "words": query_words(query_text),
            "idf_max_share": IDF_MAX_SHARE, "bm25_ids": [], "bm25_watermark": None}


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
    where, params = filter_clause(corpus, filters)
    if filters.is_filtered and not exact:  # exact, unless pgvector >= 0.8 can scan a large scope through the index
        exact = not filtered_hnsw.use_index(pool, _TABLES[corpus][0], where, params)
    exact = bool(exact)
    params |= search_params(query_text, query_vec, max(top_k * 4, 60))
    bm25 = None
    if where == _NO_FILTER and mode == "hybrid" and keyword_candidates == "selective":
        bm25 = functools.partial(keyword_index.candidates, pool, corpus, query_text, params["n"])
    rows = _candidates(pool, corpus, where, exact, params, mode, keyword_candidates, bm25)
    if not rows:
        return []
    fused = fused_scores([float(r["sim"]) for r in rows], [float(r["rank"]) for r in rows], semantic_weight, keyword_weight)
    scored = sorted(zip(fused, rows), key=lambda x: (-x[0], x[1]["id"]))
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
