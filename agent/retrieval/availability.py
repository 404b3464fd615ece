"""Which periods each company has, per corpus, and its name; cached in Redis for 30 minutes and
invalidated whenever ingestion writes that company's documents."""
from __future__ import annotations

import contextlib
import json

from agent.models.corpus import Period
from agent.retrieval.companies import company_names

_KEY = "finagent:periods:{corpus}:{ticker}"
_NAME_KEY = "finagent:company-name:{ticker}"


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
    """(ticker, corpus) -> its periods, for several at once: the cached ones in one Redis round trip, the rest from
    Postgres (on `conn` when given) and then cached."""
    return _lookup(pool, [], wanted, redis, ttl_s, conn)[1]


def names_and_periods(pool, tickers: list[str], corpora: list[str], redis=None, ttl_s: int = 1800,
                      conn=None) -> tuple[dict[str, str], dict[tuple[str, str], list[Period]]]:
    """The companies' names (ticker -> name, for the registered ones) and their periods in each corpus, read together:
    every coordinator step reads them for its plan's companies, so when cached they take one Redis round trip and no
    query."""
    return _lookup(pool, tickers, [(t, c) for t in tickers for c in corpora], redis, ttl_s, conn)


def _lookup(pool, named: list[str], wanted: list[tuple[str, str]], redis, ttl_s: int,
            conn) -> tuple[dict[str, str], dict[tuple[str, str], list[Period]]]:
    name_keys = [_NAME_KEY.format(ticker=t.upper()) for t in named]
    keys = [_KEY.format(corpus=corpus, ticker=ticker.upper()) for ticker, corpus in wanted]
    cached = redis.mget(name_keys + keys) if redis is not None and (name_keys or keys) else [None] * (len(named) + len(keys))
    names = {t: hit.decode() if isinstance(hit, bytes) else hit for t, hit in zip(named, cached) if hit is not None}
    unnamed = [t for t in named if t not in names]
    found: dict[tuple[str, str], list[Period]] = {}
    missing = []
    for want, key, hit in zip(wanted, keys, cached[len(named):]):
        if hit is not None:
            found[want] = [Period.parse_key(k) for k in json.loads(hit)]
        else:
            missing.append((want, key))
    if missing or unnamed:
        with contextlib.nullcontext(conn) if conn is not None else pool.connection() as db:
            found |= {want: _query(db, *want) for want, _ in missing}
            fresh_names = company_names(db, unnamed) if unnamed else {}
        names |= fresh_names
        if redis is not None:
            with redis.pipeline(transaction=False) as pipe:
                for want, key in missing:
                    pipe.set(key, json.dumps([p.key for p in found[want]]), ex=ttl_s)
                for ticker, name in fresh_names.items():  # an unregistered ticker is asked again next time
                    pipe.set(_NAME_KEY.format(ticker=ticker.upper()), name, ex=ttl_s)
                pipe.execute()
    return names, found


def invalidate(redis, ticker: str) -> None:
    if redis is not None:
        redis.delete(*(_KEY.format(corpus=c, ticker=ticker.upper()) for c in _CORPORA), _NAME_KEY.format(ticker=ticker.upper()))
