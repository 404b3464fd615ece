"""Prototype variants of the unfiltered hybrid search, measured against the current `exact=True` results.

The current variant is the SQL of agent.retrieval.hybrid itself (unfiltered transcript path); the others turn one knob:
  ef     hnsw.ef_search (current: hybrid.EF_SEARCH)
  n      candidate pool per side (current: 60)
  cap    keyword-only candidates only from a match set (rows holding every query word, else any) of at most
         `cap` rows (current: hybrid.KEYWORD_MATCH_CAP; 0 = semantic candidates only)
  kw     "capped": the current keyword definition | "or": the previous one, which ranked every row holding any
         query word (about 18% of the corpus) and gave a semantic candidate outside the keyword top n rank 0
Used by bench/search.py (`breakdown` always, `run_variants` with --variants); nothing in agent/ imports it.
"""
from __future__ import annotations

import functools
import time

VARIANTS: dict[str, dict] = {
    "current (ef 150, n 60, cap 500)": {},
    "ef_search 100": {"ef": 100},
    "ef_search 200": {"ef": 200},
    "ef_search 400": {"ef": 400},
    "cap 2000": {"cap": 2000},
    "no keyword-only candidates (cap 0)": {"cap": 0},
    "previous: OR, rank every match (ef 100)": {"kw": "or", "ef": 100},
}
_PREVIOUS = (
    "WITH q AS (SELECT to_tsquery('english', %(orq)s) AS tsq),"
    " sem AS (SELECT id FROM transcript_chunks ORDER BY {order} LIMIT %(n)s),"
    " kw AS (SELECT id, ts_rank_cd(tsv, q.tsq) AS rank FROM transcript_chunks, q WHERE tsv @@ q.tsq"
    " ORDER BY rank DESC, id LIMIT %(n)s),"
    " cand AS (SELECT id FROM sem UNION SELECT id FROM kw)"
    " SELECT c.id, 1 - (c.embedding <=> %(vec)s) AS sim, coalesce(kw.rank, 0) AS rank"
    " FROM cand JOIN transcript_chunks c USING (id) LEFT JOIN kw USING (id)"
)


def variant_sql(cfg: dict, exact: bool):
    from psycopg import sql

    from agent.retrieval.hybrid import _query

    if cfg.get("kw", "capped") == "capped":
        return _query("transcript", sql.SQL(""), exact)
    return _PREVIOUS.format(order="(embedding <=> %(vec)s) + 0, id" if exact else "embedding <=> %(vec)s")


def search_ids(conn, cfg: dict, text: str, vec, exact: bool = False, top_k: int = 15) -> tuple[list[int], float]:
    """(top-k ids scored exactly as hybrid_search scores them, milliseconds)."""
    from agent.retrieval import hybrid

    n = cfg.get("n", 60)
    cap = cfg.get("cap", hybrid.KEYWORD_MATCH_CAP)
    params = {"orq": hybrid.or_tsquery_text(text), "andq": hybrid.and_tsquery_text(text), "vec": vec, "n": n,
              "cap": cap, "cap1": cap + 1}
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(f"SET LOCAL hnsw.ef_search = {max(int(cfg.get('ef', hybrid.EF_SEARCH)), n)}")
        rows = conn.execute(variant_sql(cfg, exact), params).fetchall()
    ms = (time.perf_counter() - started) * 1000
    if not rows:
        return [], ms
    sims = hybrid._normalise([float(r["sim"]) for r in rows])
    ranks = hybrid._normalise([float(r["rank"]) for r in rows])
    scored = sorted(((-(0.7 * s + 0.3 * k), r["id"]) for r, s, k in zip(rows, sims, ranks)))
    return [i for _, i in scored[:top_k]], ms


def _semantics(cfg: dict) -> tuple:
    """Variants with the same key have the same exact results (ef only changes the approximation)."""
    return tuple(sorted((k, v) for k, v in cfg.items() if k != "ef"))


def run_variants(ctx, queries: list[str], vecs, current_exact: list[list], percentile, recall) -> list[dict]:
    """Per variant: recall against the current exact results and against its own exact results, p50/p95 ms."""
    out, own_exact = [], {_semantics({}): current_exact}
    with ctx.pool.connection() as conn:
        for name, cfg in VARIANTS.items():
            key = _semantics(cfg)
            if key not in own_exact:
                own_exact[key] = [search_ids(conn, cfg, q, v, exact=True)[0] for q, v in zip(queries, vecs)]
            search_ids(conn, cfg, queries[0], vecs[0])  # warm-up
            runs = [search_ids(conn, cfg, q, v) for q, v in zip(queries, vecs)]
            times = [ms for _, ms in runs]
            out.append({"variant": name, **cfg, "recall_vs_current_exact": recall([r for r, _ in runs], current_exact),
                        "recall_vs_own_exact": recall([r for r, _ in runs], own_exact[key]),
                        "p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1)})
    return out


def breakdown(ctx, queries: list[str], vecs, percentile) -> dict:
    """Where an unfiltered search spends its time: the HNSW read of the candidates' ids alone, the semantic statement
    the search runs (that read, then each candidate's similarity and per-term ranks), the keyword side alone (the capped
    match set and the ranking of at most `cap` rows), the share of chunks in the keyword match set (rows holding
    every query word, else any), the share of queries whose match set is over the cap, and the share of queries that
    get no keyword-only candidates at all (every word, and the rows holding all of them, over the cap)."""
    from agent.retrieval import hybrid, keyword_index

    cap = hybrid.KEYWORD_MATCH_CAP
    keyword_sql = hybrid._indexed_query("transcript", "keyword")
    semantic_sql = hybrid._indexed_query("transcript", "semantic_terms")
    hnsw, sem, kw, bm25, share, over, empty = [], [], [], [], [], [], []
    with ctx.pool.connection() as conn:
        total = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
        for text, vec in zip(queries, vecs):
            started = time.perf_counter()
            p = hybrid._with_bm25(hybrid.search_params(text, vec, 60),
                                  functools.partial(keyword_index.candidates, ctx.pool, "transcript", text, 60))
            bm25.append((time.perf_counter() - started) * 1000)
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {hybrid.ef_search_for(ctx.pool, 'transcript')}")
                started = time.perf_counter()
                conn.execute("SELECT id FROM transcript_chunks ORDER BY embedding <=> %s LIMIT 60", (vec,)).fetchall()
                hnsw.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                conn.execute(semantic_sql, p).fetchall()
                sem.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            got = conn.execute(keyword_sql, p).fetchall()
            kw.append((time.perf_counter() - started) * 1000)
            empty.append(0.0 if any(r["id"] is not None for r in got) else 1.0)
            matches = conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE tsv @@ to_tsquery('english', %s)",
                                   (p["andq"],)).fetchone()["n"]
            if not matches:
                matches = conn.execute("SELECT count(*) AS n FROM transcript_chunks"
                                       " WHERE tsv @@ to_tsquery('english', %s)", (p["orq"],)).fetchone()["n"]
            share.append(matches / max(1, total))
            over.append(1.0 if matches > cap else 0.0)
            conn.commit()
    return {"hnsw_part_p50_ms": round(percentile(hnsw, 50), 2), "semantic_part_p50_ms": round(percentile(sem, 50), 2),
            "keyword_part_p50_ms": round(percentile(kw, 50), 2),
            "bm25_part_p50_ms": round(percentile(bm25, 50), 2),
            "keyword_match_share_p50": round(percentile(share, 50), 4),
            "keyword_over_cap_share": round(sum(over) / max(1, len(over)), 3),
            "keyword_no_candidates_share": round(sum(empty) / max(1, len(empty)), 3)}
