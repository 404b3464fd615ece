"""Postgres access: one psycopg pool per process, pgvector adapters registered on connect."""
from __future__ import annotations

import select
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import Connection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

_pools: dict[tuple[str, float], ConnectionPool] = {}
# how long a checkout waits for a connection by default (psycopg_pool's own default): a worker rides out a restart
DEFAULT_WAIT_S = 30.0
_lock = threading.Lock()


def _configure(conn: Connection) -> None:
    try:
        register_vector(conn)
    except Exception:  # the extension does not exist yet (before the first migration)
        conn.rollback()
    conn.commit()


# A connection given back in good order moments ago, with nothing waiting on its socket, is handed out again without
# the round trip that checks it: that check (one per checkout) was a sixth of a transcript search, which checks out
# four. A server that went away closed the socket, which then reads as ready (end of file): that connection is
# checked, fails, and the pool replaces it, its caller waiting for the database to come back as before, instead of
# failing at once on a dead connection and going through its retries' backoff. The window stays at a second: at 30 s
# one fresh-clone run of the Postgres crash scenario took 13.2 s to recover (6.4-7.0 s at 1 s), the signature of
# dead connections handed out; four local runs at 30 s did not show it, and the longer window bought nothing the
# pipeline bench could see.
RECENTLY_RETURNED_S = 1.0
_returned: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
_returned_lock = threading.Lock()


def _note_return(conn: Connection) -> None:
    with _returned_lock:
        _returned[conn] = time.monotonic()


def _socket_quiet(conn: Connection) -> bool:
    """Nothing to read on an idle connection's socket: no end of file from a server that went away (nor a notice)."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


class ReturnTimedPool(ConnectionPool):
    """psycopg's pool, noting when each connection comes back. Not through the pool's `reset` callback: with one, every
    return goes through the pool's worker thread, and a connection the same thread asks for again a moment later is
    not back yet (the pool grew to 3 connections where 1 served a run of searches, each search 8% slower)."""

    def putconn(self, conn: Connection) -> None:
        _note_return(conn)  # a connection returned broken is discarded by the pool, never handed out with this time
        super().putconn(conn)


def check_unless_recent(conn: Connection) -> None:
    """The pool's checkout check: `ConnectionPool.check_connection`, unless the connection came back in good order
    within `RECENTLY_RETURNED_S` and its socket is quiet."""
    with _returned_lock:
        returned = _returned.pop(conn, None)
    if (returned is not None and time.monotonic() - returned < RECENTLY_RETURNED_S and not conn.broken
            and _socket_quiet(conn)):
        return
    ConnectionPool.check_connection(conn)


def get_pool(url: str, max_size: int = 8, wait_s: float = DEFAULT_WAIT_S) -> ConnectionPool:
    """The process's pool for `url` whose checkouts wait up to `wait_s` for a connection (PoolTimeout after)."""
    with _lock:
        pool = _pools.get((url, wait_s))
        if pool is None:
            pool = ReturnTimedPool(
                url,
                timeout=wait_s,
                min_size=1,
                max_size=max_size,
                kwargs={"row_factory": dict_row, "autocommit": False},
                configure=_configure,
                # a connection broken by a database restart is noticed at checkout and replaced, not handed out
                check=check_unless_recent,
                open=True,
                name="finagent",
            )
            _pools[(url, wait_s)] = pool
        return pool


# A pooled connection's block costs a round trip per statement, plus a BEGIN before the first and a COMMIT after the
# last; each one also hands the GIL away and waits to get it back from the worker's other threads. On the path between
# one stage's end and the next one's start, reads skip the BEGIN and COMMIT, and a transaction's statements travel
# together (psycopg's pipeline mode). Pipeline mode has a cost of its own, about one local round trip: it pays where
# it saves two or more (bench/round_trips.py, in git history, measured each shape).
@contextmanager
def reading(pool: ConnectionPool[Any]) -> Iterator[Connection[DictRow]]:
    """A checkout for reads that need no transaction of their own: no BEGIN or COMMIT. Each statement sees the data
    committed when it runs. Several queries sent before the first fetch go out together inside `conn.pipeline()`."""
    with pool.connection() as conn:
        conn.autocommit = True
        try:
            yield conn
        finally:
            with suppress(psycopg.Error):  # a connection broken meanwhile is discarded by the pool anyway
                conn.autocommit = False


@contextmanager
def one_transaction(pool: ConnectionPool[Any]) -> Iterator[Connection[DictRow]]:
    """A checkout whose statements form one transaction sent with its BEGIN and COMMIT: one round trip when nothing
    is fetched in between. An error in any statement raises when the block ends, and nothing of it is committed."""
    with pool.connection() as conn, conn.pipeline(), conn.transaction():
        yield conn


def close_pools(url: str | None = None) -> None:
    """Close the pool of `url`, or every pool."""
    with _lock:
        for key in [k for k in _pools if url is None or k[0] == url]:
            _pools.pop(key).close()
