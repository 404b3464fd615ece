"""Schema changes only by `finagent db upgrade` against a configured Postgres: a process started on a database whose
schema is behind refuses with one line naming the command, /readyz says so, and the index builds of the
no-transaction migrations run CONCURRENTLY (an interrupted one, left INVALID, is built again)."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.conninfo import make_conninfo

from agent.db import close_pools
from agent.db.migrate import available, current, upgrade
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from ops.cli import exit_codes

pytestmark = pytest.mark.integration

FINAGENT = Path(sys.executable).with_name("finagent")


def _finagent(ctx, database_url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(FINAGENT_DATA_DIR=str(ctx.settings.data_dir), FINAGENT_DATABASE_URL=database_url,
               FINAGENT_REDIS_URL=ctx.redis_url, FINAGENT_EMBEDDING_PROVIDER="hash", FINAGENT_LLM_PROVIDER="extractive")
    cmd = [str(FINAGENT)] if FINAGENT.exists() else [sys.executable, "-m", "ops.cli.main"]
    return subprocess.run([*cmd, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def fresh_database(ctx) -> Iterator[str]:
    name = f"schema_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ctx.database_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(ctx.database_url, dbname=name)
    finally:
        with psycopg.connect(ctx.database_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _recorded_only(url: str, versions: int) -> None:
    """schema_migrations says the first `versions` migrations are applied (nothing else exists: nothing may be read)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        for version, _ in available()[:versions]:
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))


def _one_behind(url: str) -> str:
    """The database as the previous finagent left it: every migration but the last one applied."""
    upgrade(url)
    last = available()[-1][0]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (last,))
    return last


@pytest.mark.parametrize("command", [["worker", "--queues", "search"], ["beat"], ["jobs", "list"]])
def test_a_process_on_a_schema_behind_refuses_naming_the_upgrade_and_changes_nothing(ctx, fresh_database, tmp_path, command):
    _recorded_only(fresh_database, 3)
    r = _finagent(ctx, fresh_database, *command, cwd=tmp_path)
    assert r.returncode == exit_codes.BAD_INPUT, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "`finagent db upgrade`" in lines[0] and available()[3][0] in lines[0], r.stderr
    assert current(fresh_database) == [v for v, _ in available()[:3]]  # nothing migrated
    with psycopg.connect(fresh_database) as conn:
        assert conn.execute("SELECT to_regclass('transcript_chunks') IS NULL").fetchone() == (True,)


def test_readyz_says_the_schema_is_behind_until_the_upgrade(ctx, fresh_database, tmp_path):
    last = _one_behind(fresh_database)
    settings = ctx.settings.model_copy(update={"api_keys": [], "ready_queues": []})
    rt = Runtime(settings=settings, ready_cache_s=0)
    rt.__dict__["ctx"] = type(ctx)(settings, fresh_database, ctx.redis_url)
    try:
        _readyz_until_upgraded(ctx, rt, fresh_database, last, tmp_path)
    finally:
        close_pools(fresh_database)


def _readyz_until_upgraded(ctx, rt: Runtime, fresh_database: str, last: str, tmp_path: Path) -> None:
    with TestClient(create_app(rt)) as client:
        behind = client.get("/readyz")
        assert behind.status_code == 503
        message = behind.json()["error"]["message"]
        assert "`finagent db upgrade`" in message and last in message
        upgraded = _finagent(ctx, fresh_database, "db", "upgrade", cwd=tmp_path)
        assert upgraded.returncode == 0, upgraded.stderr
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"]["postgres"] == "ok"
    assert _finagent(ctx, fresh_database, "jobs", "list", cwd=tmp_path).returncode == 0  # current: commands start


def _indexes(url: str) -> dict[str, tuple[bool, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
                            " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'transcript_chunks_hnsw%%'"
                            " OR c.relname = 'tenk_chunks_statement'").fetchall()
    return {name: (valid, definition) for name, valid, definition in rows}


def test_an_interrupted_concurrent_build_is_built_again_by_the_next_upgrade(ctx, fresh_database):
    upgrade(fresh_database)
    indexes = _indexes(fresh_database)
    assert set(indexes) == {"transcript_chunks_hnsw", "tenk_chunks_statement"} and all(v for v, _ in indexes.values())
    assert "m='24'" in indexes["transcript_chunks_hnsw"][1]
    # what a CREATE INDEX CONCURRENTLY stopped part-way leaves: the index, INVALID, and the migration unrecorded
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'tenk_chunks_statement'::regclass")
        conn.execute("DELETE FROM schema_migrations WHERE version = '0008_statement_pages'")
    assert upgrade(fresh_database) == ["0008_statement_pages"]
    assert _indexes(fresh_database)["tenk_chunks_statement"][0] is True
    assert current(fresh_database) == [v for v, _ in available()]


def test_concurrent_upgrades_of_a_fresh_database_apply_each_migration_once(ctx, fresh_database):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        applied = list(pool.map(upgrade, [fresh_database] * 3))
    assert sorted(v for run in applied for v in run) == [v for v, _ in available()]
    assert all(v for v, _ in _indexes(fresh_database).values())
