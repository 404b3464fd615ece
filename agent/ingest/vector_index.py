"""Bulk loads without row-by-row vector indexing: a load that brings at least as many chunks as a table already
holds drops the table's HNSW indexes first and builds them again after its last write.

An HNSW index inserted into row by row is the slowest part of writing a chunk (each insert searches the graph and
re-prunes its neighbours' lists), while building the index over rows already in the table is several times faster
per row (docs/benchmarks.md, "Ingestion: the vector index built after a bulk load"). The rule "at least as many
new chunks as the table holds" keeps a rebuild within twice the load's own rows.

While an index is deferred, vector searches on that table read every row (exact: the same or better answers,
slower), and each deferred index's definition is kept in `deferred_indexes`, written in the transaction that drops
it, so a load that dies leaves what to rebuild behind it. A running load holds a shared advisory lock for its
duration; `restore_abandoned` (run by `ops.local.bootstrap.bootstrap`, i.e. every command and service start) rebuilds only
the deferrals no running load holds, and a load that ends rebuilds every deferral, its own and any other's.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from pydantic import BaseModel

log = logging.getLogger(__name__)

BULK_LOAD_LOCK = 0x46494E42  # held shared by every running bulk load; a restore of abandoned deferrals needs it alone
DROP_LOCK_TIMEOUT = "5s"  # a table busy longer than this (a long search or another writer) is loaded row by row


class IndexRebuild(BaseModel):
    """A vector index built again after a bulk load (or after one that died)."""

    name: str
    table: str
    rows: int
    seconds: float


class BulkLoad(BaseModel):
    """What `bulk_load` did: the indexes it dropped, and every index built again when it ended."""

    deferred: list[str] = []
    rebuilt: list[IndexRebuild] = []


def hnsw_indexes(conn, table: str) -> list[tuple[str, str]]:
    """(name, definition) of every HNSW index on `table`, as `pg_get_indexdef` prints them."""
    rows = conn.execute(
        "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
        " WHERE i.indrelid = to_regclass(%s) AND a.amname = 'hnsw' ORDER BY c.relname",
        (table,),
    ).fetchall()
    return [(r["name"], r["definition"]) for r in rows]


def should_defer(incoming: int, existing: int, min_chunks: int) -> bool:
    """A load this large against a table this size builds its index faster afterwards than row by row."""
    return incoming >= min_chunks and incoming >= existing


def defer(conn, table: str, incoming: int, min_chunks: int) -> list[str]:
    """Drop `table`'s HNSW indexes for a load of `incoming` chunks when `should_defer`, recording each definition in
    the same transaction; the names dropped ([] when the load is small, the indexes are already deferred, or the
    table stays busy past DROP_LOCK_TIMEOUT)."""
    if not should_defer(incoming, 0, min_chunks):  # too small even for an empty table: no need to count its rows
        return []
    try:
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(DROP_LOCK_TIMEOUT)))
            existing = conn.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))).fetchone()["n"]
            if not should_defer(incoming, existing, min_chunks):
                return []
            indexes = hnsw_indexes(conn, table)
            for name, definition in indexes:
                conn.execute("INSERT INTO deferred_indexes (name, table_name, definition) VALUES (%s, %s, %s)",
                             (name, table, definition))
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
            return [name for name, _ in indexes]
    except psycopg.errors.LockNotAvailable:
        log.info("%s is busy: this load inserts into its vector index row by row", table)
        return []


def restore(conn, abandoned_only: bool = False) -> list[IndexRebuild]:
    """Build every deferred index again, each in the transaction that removes its record (two restores at once
    build each index once). `abandoned_only`: only when no bulk load is running (none holds BULK_LOAD_LOCK)."""
    done: list[IndexRebuild] = []
    while True:
        with conn.transaction():
            if abandoned_only and not conn.execute("SELECT pg_try_advisory_xact_lock(%s) AS ok",
                                                   (BULK_LOAD_LOCK,)).fetchone()["ok"]:
                return done
            row = conn.execute("DELETE FROM deferred_indexes WHERE name = (SELECT name FROM deferred_indexes"
                               " ORDER BY name LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING name, table_name, definition"
                               ).fetchone()
            if row is None:
                return done
            started = time.perf_counter()
            if conn.execute("SELECT to_regclass(%s) IS NULL AS gone", (row["name"],)).fetchone()["gone"]:
                conn.execute(row["definition"])  # else a migration or another process built it meanwhile
            rows = conn.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(row["table_name"]))
                                ).fetchone()["n"]
            done.append(IndexRebuild(name=row["name"], table=row["table_name"], rows=rows,
                                     seconds=round(time.perf_counter() - started, 2)))


def restore_abandoned(pool) -> list[IndexRebuild]:
    """Rebuild the indexes a bulk load deferred and did not live to build (none while a load is running)."""
    with pool.connection() as conn:
        rebuilt = restore(conn, abandoned_only=True)
    for r in rebuilt:
        log.warning("rebuilt vector index %s over %d rows in %.1f s (a bulk load had deferred it and stopped)",
                    r.name, r.rows, r.seconds)
    return rebuilt


@contextlib.contextmanager
def bulk_load(database_url: str, incoming: dict[str, int], min_chunks: int) -> Iterator[BulkLoad]:
    """For the duration of a load of `incoming` chunks per table: defer the vector indexes of the tables it fills
    (see `defer`), and build every deferred index again when it ends, however it ends."""
    load = BulkLoad()
    if not any(should_defer(n, 0, min_chunks) for n in incoming.values()):
        yield load
        return
    with _connect(database_url) as held:
        held.execute("SELECT pg_advisory_lock_shared(%s)", (BULK_LOAD_LOCK,))
        for table, n in incoming.items():
            load.deferred += defer(held, table, n, min_chunks)
        try:
            yield load
        finally:
            try:  # a fresh connection: the load may have ended because the server restarted
                with _connect(database_url) as conn:
                    load.rebuilt += restore(conn)
            except psycopg.Error:
                log.warning("the vector indexes this load deferred are not rebuilt yet; the next start of any"
                            " finagent command rebuilds them", exc_info=True)


def _connect(database_url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(database_url, autocommit=True, row_factory=dict_row)
