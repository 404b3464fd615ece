"""Postgres access: one psycopg pool per process, pgvector adapters registered on connect."""
from __future__ import annotations

import threading

from pgvector.psycopg import register_vector
from psycopg import Connection
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

_pools: dict[str, ConnectionPool] = {}
_lock = threading.Lock()


def _configure(conn: Connection) -> None:
    try:
        register_vector(conn)
    except Exception:  # the extension does not exist yet (before the first migration)
        conn.rollback()
    conn.commit()


def get_pool(url: str, max_size: int = 8) -> ConnectionPool:
    with _lock:
        pool = _pools.get(url)
        if pool is None:
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=max_size,
                kwargs={"row_factory": dict_row, "autocommit": False},
                configure=_configure,
                # a connection broken by a database restart is noticed at checkout and replaced, not handed out
                check=ConnectionPool.check_connection,
                open=True,
                name="finagent",
            )
            _pools[url] = pool
        return pool


def close_pools() -> None:
    with _lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()
