"""Prototype variants of the unfiltered hybrid search, measured against the current `exact=True` results.

Each variant is the SQL of agent.retrieval.hybrid (unfiltered transcript path) with one knob turned:
  ef     hnsw.ef_search (current: max(100, n))
  n      candidate pool per side (current: 60)
  tb     break keyword-rank ties by id (current: no tie-break, so a parallel scan may pick either tied row)
  kw     "or": rank every OR match (current) | "and": rank at most `cap` rows matching all the words (GIN)
         | "none": no keyword-only candidates
  all    rank every candidate with ts_rank_cd (current: 0 for a semantic candidate outside the keyword top n)
Used by bench/search.py (`breakdown` always, `run_variants` with --variants); nothing in agent/ imports it.
"""
from __future__ import annotations

import time

VARIANTS: dict[str, dict] = {
    "current (ef 100, n 60)": {},
    "tie-break": {"tb": True},
    "tie-break + ef_search 200": {"tb": True, "ef": 200},
    "tie-break + ef_search 400": {"tb": True, "ef": 400},
    "AND-capped 500 keywords + tie-break + ef 400": {"tb": True, "ef": 400, "kw": "and", "cap": 500},
    "semantic pool only (n 200, ef 200), rank all": {"tb": True, "ef": 200, "n": 200, "kw": "none", "all": True},
}
_SEM = "sem AS (SELECT id FROM transcript_chunks ORDER BY {order} LIMIT %(n)s)"
_KW = {
    "or": "kw AS (SELECT id, ts_rank_cd(tsv, q.tsq) AS rank FROM transcript_chunks, q WHERE tsv @@ q.tsq"
          " ORDER BY rank DESC{tb} LIMIT %(n)s)",
    "and": "kw AS (SELECT id, ts_rank_cd(tsv, q.tsq) AS rank FROM (SELECT id, tsv FROM transcript_chunks"
           " WHERE tsv @@ plainto_tsquery('english', %(text)s) LIMIT %(cap)s) s, q ORDER BY rank DESC{tb} LIMIT %(n)s)",
    "none": "kw AS (SELECT NULL::bigint AS id, 0::real AS rank FROM q WHERE false)",
}


def variant_sql(cfg: dict, exact: bool) -> str:
    order = "(embedding <=> %(vec)s) + 0" if exact else "embedding <=> %(vec)s"  # "+ 0": no index, exact order
    kw = _KW[cfg.get("kw", "or")].format(tb=", id" if cfg.get("tb") else "")
    # q is referenced once only (in kw), so Postgres inlines it and plans with the constant tsquery, as in hybrid.py
    rank = "ts_rank_cd(c.tsv, to_tsquery('english', %(tsq)s))" if cfg.get("all") else "coalesce(kw.rank, 0)"
    return (f"WITH q AS (SELECT to_tsquery('english', %(tsq)s) AS tsq), {_SEM.format(order=order)}, {kw},"
            " cand AS (SELECT id FROM sem UNION SELECT id FROM kw)"
            f" SELECT c.id, 1 - (c.embedding <=> %(vec)s) AS sim, {rank} AS rank"
            " FROM cand JOIN transcript_chunks c USING (id) LEFT JOIN kw USING (id)")


def search_ids(conn, cfg: dict, text: str, vec, exact: bool = False, top_k: int = 15) -> tuple[list[int], float]:
    """(top-k ids scored exactly as hybrid_search scores them, milliseconds)."""
    from agent.retrieval.hybrid import _normalise, or_tsquery_text

    n = cfg.get("n", 60)
    params = {"tsq": or_tsquery_text(text), "vec": vec, "n": n, "text": text, "cap": cfg.get("cap", 500)}
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(f"SET LOCAL hnsw.ef_search = {max(int(cfg.get('ef', 100)), n)}")
        rows = conn.execute(variant_sql(cfg, exact), params).fetchall()
    ms = (time.perf_counter() - started) * 1000
    if not rows:
        return [], ms
    sims = _normalise([float(r["sim"]) for r in rows])
    ranks = _normalise([float(r["rank"]) for r in rows])
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
    """Where an unfiltered search spends its time: the HNSW side alone, the keyword side alone, and how many
    chunks the OR tsquery matches (every one of them is ranked)."""
    from agent.retrieval.hybrid import or_tsquery_text

    sem, kw, share = [], [], []
    with ctx.pool.connection() as conn:
        total = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
        for text, vec in zip(queries, vecs):
            tsq = or_tsquery_text(text)
            with conn.transaction():
                conn.execute("SET LOCAL hnsw.ef_search = 100")
                started = time.perf_counter()
                conn.execute("SELECT id FROM transcript_chunks ORDER BY embedding <=> %s LIMIT 60", (vec,)).fetchall()
                sem.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            conn.execute("SELECT id, ts_rank_cd(tsv, to_tsquery('english', %(q)s)) AS rank FROM transcript_chunks"
                         " WHERE tsv @@ to_tsquery('english', %(q)s) ORDER BY rank DESC LIMIT 60", {"q": tsq}).fetchall()
            kw.append((time.perf_counter() - started) * 1000)
            matches = conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE tsv @@ to_tsquery('english', %s)",
                                   (tsq,)).fetchone()["n"]
            share.append(matches / max(1, total))
            conn.commit()
    return {"semantic_part_p50_ms": round(percentile(sem, 50), 2), "keyword_part_p50_ms": round(percentile(kw, 50), 2),
            "keyword_match_share_p50": round(percentile(share, 50), 3)}
