"""The migration runner's pure parts: which migrations run outside a transaction, how their statements are split,
what a process that finds the schema behind says."""
from __future__ import annotations

import pytest

from agent.db.migrate import (
    NO_TRANSACTION,
    SchemaBehind,
    available,
    concurrent_index_name,
    is_transactional,
    schema_behind_message,
    state_of,
    statements,
)


def test_statements_split_at_line_ending_semicolons_and_drop_comments():
    sql = (f"{NO_TRANSACTION}\n-- a note; with a semicolon\nALTER TABLE t ADD COLUMN IF NOT EXISTS c text;\n"
           "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_c ON t\n    USING btree (c) WHERE c <> ';';\n")
    assert statements(sql) == ["ALTER TABLE t ADD COLUMN IF NOT EXISTS c text",
                               "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_c ON t\n    USING btree (c) WHERE c <> ';'"]
    assert not is_transactional(sql) and is_transactional("CREATE TABLE t (id int);")


def test_the_index_a_concurrent_build_names():
    assert concurrent_index_name("create unique index concurrently if not exists orders_ref on orders (ref)") == "orders_ref"
    assert concurrent_index_name("CREATE INDEX CONCURRENTLY orders_ref ON orders (ref)") is None  # no IF NOT EXISTS
    assert concurrent_index_name("CREATE INDEX IF NOT EXISTS orders_ref ON orders (ref)") is None


def test_the_shipped_index_rebuilds_run_concurrently_and_outside_a_transaction():
    migrations = dict(available())
    for version in ("0004_transcript_hnsw_m32", "0008_statement_pages", "0009_transcript_hnsw_m24", "0016_owners"):
        sql = migrations[version]
        assert not is_transactional(sql), version
        creates = [s for s in statements(sql) if s.upper().startswith("CREATE INDEX")]
        assert creates and all(concurrent_index_name(s) for s in creates), version
        assert "DO $$" not in sql  # a DO block is one statement: it could not build CONCURRENTLY
    for version, sql in migrations.items():  # every other migration keeps its one transaction
        if is_transactional(sql):
            assert "CONCURRENTLY" not in sql.upper(), version


def test_schema_state_pending_and_newer():
    known = ["0001_a", "0002_b", "0003_c"]
    assert state_of(["0001_a", "0002_b", "0003_c"], known).pending == []
    behind = state_of(["0001_a"], known)
    assert behind.pending == ["0002_b", "0003_c"] and behind.unknown == []
    newer = state_of(["0001_a", "0002_b", "0003_c", "0004_d"], known)  # a newer finagent migrated: accepted
    assert newer.pending == [] and newer.unknown == ["0004_d"]


def test_schema_behind_is_one_line_naming_the_upgrade_command():
    message = schema_behind_message(["0016_x", "0017_y"])
    assert "\n" not in message and "`finagent db upgrade`" in message and "0016_x and 1 more" in message
    with pytest.raises(SchemaBehind) as raised:
        raise SchemaBehind(["0016_x"])
    assert raised.value.pending == ["0016_x"] and "1 migration(s) pending: 0016_x)" in str(raised.value)
