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
    return available_periods_many(pool, [(ticker, corpus)], redis, ttl_s)[(ticker, corpus)]


def available_periods_many(pool, wanted: list[tuple[str, str]], redis=None, ttl_s: int = 1800,
                           conn=None) -> dict[tuple[str, str], list[Period]]:
    """(ticker, corpus) -> its periods, for several at once: the cached ones in one Redis round trip (every coordinator
    step reads its companies' periods), the rest from Postgres (on `conn` when given) and then cached."""
    found: dict[tuple[str, str], list[Period]] = {}
    keys = [_KEY.format(corpus=corpus, ticker=ticker.upper()) for ticker, corpus in wanted]
    cached = redis.mget(keys) if redis is not None and keys else [None] * len(keys)
    missing = []
    for want, key, hit in zip(wanted, keys, cached):
        if hit is not None:
            found[want] = [Period.parse_key(k) for k in json.loads(hit)]
        else:
            missing.append((want, key))
    if missing:
        if conn is not None:
            found |= {want: _query(conn, *want) for want, _ in missing}
        else:
            with pool.connection() as own:
                found |= {want: _query(own, *want) for want, _ in missing}
        if redis is not None:
            with redis.pipeline(transaction=False) as pipe:
                for want, key in missing:
                    pipe.set(key, json.dumps([p.key for p in found[want]]), ex=ttl_s)
                pipe.execute()
    return found


def invalidate(redis, ticker: str) -> None:
    if redis is not None:
        redis.delete(*(_KEY.format(corpus=c, ticker=ticker.upper()) for c in _CORPORA))
