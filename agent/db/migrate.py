"""Versioned, idempotent SQL migrations (agent/db/migrations/NNNN_name.sql)."""
from __future__ import annotations

from importlib import resources

import psycopg

LOCK_ID = 0x46494E41  # pg advisory lock so concurrent upgrades serialise


def available() -> list[tuple[str, str]]:
    folder = resources.files("agent.db") / "migrations"
    files = sorted((p for p in folder.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name.removesuffix(".sql"), p.read_text()) for p in files]


def upgrade(url: str) -> list[str]:
    """Apply every migration not yet recorded; returns the versions applied now."""
    applied_now = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_ID,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for version, sql in available():
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(sql)
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
                applied_now.append(version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_ID,))
    return applied_now


def current(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
        assert row is not None  # a SELECT without FROM always returns one row
        exists = row[0]
        if not exists:
            return []
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
