"""Versioned, idempotent SQL migrations (agent/db/migrations/NNNN_name.sql).

`finagent db upgrade` (compose's one-shot `migrate` service) is the only writer of the schema against configured
servers; every other process checks `require_current` at start and refuses while the schema is behind. The embedded
local stack upgrades itself (ops/local/bootstrap.py).

A migration runs in one transaction, unless its first line is `-- finagent: no-transaction`: then each of its
statements runs on its own, outside any transaction, so that it may build an index CONCURRENTLY (no write is blocked
while it builds). Such a migration must be safe to re-run from the start after a failure part-way: statements are
separated by a `;` at the end of a line, and an INVALID index (a concurrent build that was interrupted) of the name
a `CREATE INDEX CONCURRENTLY IF NOT EXISTS` builds is dropped first, since IF NOT EXISTS would keep it.
"""
from __future__ import annotations

import re
import time
from importlib import resources

import psycopg
from psycopg import sql as pgsql
from pydantic import BaseModel

LOCK_ID = 0x46494E41  # pg advisory lock so concurrent upgrades serialise
LOCK_POLL_S = 0.2
NO_TRANSACTION = "-- finagent: no-transaction"
UPGRADE_COMMAND = "finagent db upgrade"
_CONCURRENT_INDEX = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)


class SchemaBehind(RuntimeError):
    """The database lacks migrations this code needs; only `finagent db upgrade` applies them."""

    def __init__(self, pending: list[str]):
        self.pending = pending
        super().__init__(schema_behind_message(pending))


class SchemaState(BaseModel):
    applied: list[str]
    pending: list[str]  # known to this code, not applied
    unknown: list[str]  # applied, unknown to this code (a newer version migrated the database): not an error


def schema_behind_message(pending: list[str]) -> str:
    """The one line a process that will not start on an old schema prints."""
    more = f" and {len(pending) - 1} more" if len(pending) > 1 else ""
    return (f"the database schema is behind this version of finagent ({len(pending)} migration(s) pending: "
            f"{pending[0]}{more}); run `{UPGRADE_COMMAND}` once (compose: the migrate service), then start again")


def available() -> list[tuple[str, str]]:
    folder = resources.files("agent.db") / "migrations"
    files = sorted((p for p in folder.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name.removesuffix(".sql"), p.read_text()) for p in files]


def is_transactional(sql: str) -> bool:
    return not sql.lstrip().startswith(NO_TRANSACTION)


def statements(sql: str) -> list[str]:
    """A no-transaction migration's statements: comment lines dropped, split at each `;` that ends a line."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in re.split(r";[ \t]*(?:\n|$)", body) if s.strip()]


def concurrent_index_name(statement: str) -> str | None:
    """The index a `CREATE INDEX CONCURRENTLY IF NOT EXISTS` statement builds, else None."""
    match = _CONCURRENT_INDEX.search(statement)
    return match.group(1) if match else None


def state_of(applied: list[str], known: list[str]) -> SchemaState:
    done = set(applied)
    return SchemaState(applied=sorted(applied), pending=[v for v in known if v not in done],
                       unknown=sorted(done - set(known)))


def _run_outside_transaction(conn: psycopg.Connection, sql: str) -> None:
    for statement in statements(sql):
        name = concurrent_index_name(statement)
        if name:
            row = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (name,)).fetchone()
            if row is not None and not row[0]:
                conn.execute(pgsql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(pgsql.Identifier(name)))
        conn.execute(statement)


def _lock(conn: psycopg.Connection) -> None:
    """Wait for the upgrade lock by polling: a waiter blocked inside pg_advisory_lock would hold a snapshot, which the
    holder's CREATE INDEX CONCURRENTLY waits for, while the waiter waits for the holder (a deadlock)."""
    while True:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_ID,)).fetchone()
        if row is not None and row[0]:
            return
        time.sleep(LOCK_POLL_S)


def upgrade(url: str) -> list[str]:
    """Apply every migration not yet recorded; returns the versions applied now."""
    applied_now = []
    with psycopg.connect(url, autocommit=True) as conn:
        _lock(conn)
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for version, sql in available():
                if version in done:
                    continue
                if is_transactional(sql):
                    with conn.transaction():
                        conn.execute(sql)
                        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
                else:
                    _run_outside_transaction(conn, sql)
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
                applied_now.append(version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_ID,))
    return applied_now


def applied(conn: psycopg.Connection) -> list[str]:
    """The versions recorded on this connection's database (any row factory)."""
    rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall() if _has_table(conn) else []
    return [next(iter(r.values())) if isinstance(r, dict) else r[0] for r in rows]


def _has_table(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present").fetchone()
    assert row is not None  # a SELECT without FROM always returns one row
    return bool(row["present"] if isinstance(row, dict) else row[0])


def current(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return applied(conn)


def schema_state(url: str) -> SchemaState:
    return state_of(current(url), [v for v, _ in available()])


def pending_on(conn: psycopg.Connection) -> list[str]:
    """The migrations this code knows that the connection's database lacks."""
    return state_of(applied(conn), [v for v, _ in available()]).pending


def require_current(url: str) -> SchemaState:
    """Raise SchemaBehind when a migration this code knows is not applied (a newer schema is accepted)."""
    state = schema_state(url)
    if state.pending:
        raise SchemaBehind(state.pending)
    return state
