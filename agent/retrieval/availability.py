"""Which periods each company has, per corpus; cached in Redis for 30 minutes and
invalidated whenever ingestion writes that company's documents."""
from __future__ import annotations

import json

from agent.models.corpus import Period

_KEY = "finagent:periods:{corpus}:{ticker}"


FILING_KINDS = ["10k", "10q", "8k", "earnings"]  # corpus "filing": every filing, whatever its form
_CORPORA = ("transcript", "10k", "filing")


def _query(conn, ticker: str, corpus: str) -> list[Period]:
    kinds = FILING_KINDS if corpus == "filing" else ["transcript" if corpus == "transcript" else "10k"]
    rows = conn.execute(
        "SELECT DISTINCT fiscal_year, fiscal_quarter FROM documents WHERE ticker = %s AND kind = ANY(%s)"
        " ORDER BY fiscal_year, fiscal_quarter",
        (ticker.upper(), kinds),
    ).fetchall()
    return [Period(fiscal_year=r["fiscal_year"], fiscal_quarter=r["fiscal_quarter"]) for r in rows]


def available_periods(pool, ticker: str, corpus: str = "transcript", redis=None, ttl_s: int = 1800) -> list[Period]:
    key = _KEY.format(corpus=corpus, ticker=ticker.upper())
    if redis is not None:
        cached = redis.get(key)
        if cached is not None:
            return [Period.parse_key(k) for k in json.loads(cached)]
    with pool.connection() as conn:
        periods = _query(conn, ticker, corpus)
    if redis is not None:
        redis.set(key, json.dumps([p.key for p in periods]), ex=ttl_s)
    return periods


def invalidate(redis, ticker: str) -> None:
    if redis is not None:
        redis.delete(*(_KEY.format(corpus=c, ticker=ticker.upper()) for c in _CORPORA))
