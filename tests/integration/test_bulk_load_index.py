"""A bulk load builds its tables' vector indexes after its last write (agent/ingest/vector_index.py), on the real
embedded Postgres+pgvector: which loads defer, what searches read meanwhile, the rebuild's definition, a load that
fails, a load that dies, and a busy table."""
from __future__ import annotations

import shutil
import threading
import time
import uuid

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

from agent.context import Context
from agent.db import close_pools
from agent.db.migrate import upgrade
from agent.ingest import vector_index
from agent.ingest.runner import ingest
from agent.ingest.vector_index import BULK_LOAD_LOCK, bulk_load, defer, hnsw_indexes, restore, restore_abandoned
from agent.providers.embeddings import as_array
from ops.cli.main import sample_corpus_dir

pytestmark = pytest.mark.integration

DIM = 8


def _connect(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)
    register_vector(conn)
    return conn


@pytest.fixture
def probe(ctx):
    """A table of 300 random vectors with an HNSW index of non-default options, dropped after the test."""
    table = f"bulk_probe_{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(7)
    with _connect(ctx.database_url) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id serial PRIMARY KEY, embedding vector({}))").format(
            sql.Identifier(table), sql.Literal(DIM)))
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops)"
                             " WITH (m = 8, ef_construction = 40)").format(sql.Identifier(f"{table}_hnsw"),
                                                                           sql.Identifier(table)))
        _add_rows(conn, table, rng, 300)
    yield table
    with _connect(ctx.database_url) as conn:
        conn.execute("DELETE FROM deferred_indexes WHERE table_name = %s", (table,))
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))


def _add_rows(conn, table: str, rng, n: int) -> None:
    with conn.cursor() as cur:
        cur.executemany(sql.SQL("INSERT INTO {} (embedding) VALUES (%s)").format(sql.Identifier(table)),
                        [(v,) for v in rng.normal(size=(n, DIM)).astype(np.float32)])


def _nearest(conn, table: str, query: np.ndarray, k: int = 10, force_index: bool = False) -> list[int]:
    with conn.transaction():
        if force_index:
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL hnsw.ef_search = 400")
        rows = conn.execute(sql.SQL("SELECT id FROM {} ORDER BY embedding <=> %s LIMIT %s").format(
            sql.Identifier(table)), (query, k)).fetchall()
    return [r["id"] for r in rows]


def _exact(conn, table: str, query: np.ndarray, k: int = 10) -> list[int]:
    rows = conn.execute(sql.SQL("SELECT id, embedding FROM {}").format(sql.Identifier(table))).fetchall()
    vecs = np.stack([as_array(r["embedding"]) for r in rows]).astype(np.float64)
    q = query.astype(np.float64)
    cos = vecs @ q / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(q))
    return [rows[i]["id"] for i in np.argsort(-cos, kind="stable")[:k]]


def _deferred(conn, table: str) -> list[dict]:
    return conn.execute("SELECT name, definition FROM deferred_indexes WHERE table_name = %s", (table,)).fetchall()


def test_small_loads_and_loads_into_larger_tables_keep_the_index(ctx, probe):
    with _connect(ctx.database_url) as conn:
        before = hnsw_indexes(conn, probe)
        assert defer(conn, probe, incoming=299, min_chunks=100) == []  # fewer than the 300 rows it holds
        assert defer(conn, probe, incoming=5000, min_chunks=10_000) == []  # below the floor
        assert hnsw_indexes(conn, probe) == before
        assert _deferred(conn, probe) == []


def test_a_deferred_index_is_recorded_searched_exactly_and_rebuilt_as_it_was(ctx, probe):
    rng = np.random.default_rng(11)
    with _connect(ctx.database_url) as conn:
        (name, definition), = hnsw_indexes(conn, probe)
        assert "m='8'" in definition and "ef_construction='40'" in definition
        assert defer(conn, probe, incoming=300, min_chunks=100) == [name]
        assert hnsw_indexes(conn, probe) == []
        assert _deferred(conn, probe) == [{"name": name, "definition": definition}]
        _add_rows(conn, probe, rng, 300)  # the load's rows
        query = rng.normal(size=DIM).astype(np.float32)
        assert _nearest(conn, probe, query) == _exact(conn, probe, query)  # no index: every row is read

        rebuilt = [r for r in restore(conn) if r.table == probe]
        assert [(r.name, r.rows) for r in rebuilt] == [(name, 600)]
        assert hnsw_indexes(conn, probe) == [(name, definition)]
        assert _deferred(conn, probe) == []
        # the rebuilt index holds the load's rows: each finds itself through an index scan
        rows = conn.execute(sql.SQL("SELECT id, embedding FROM {} WHERE id > 300 ORDER BY id LIMIT 20").format(
            sql.Identifier(probe))).fetchall()
        for r in rows:
            assert _nearest(conn, probe, as_array(r["embedding"]), k=1, force_index=True) == [r["id"]]


def test_a_load_that_fails_still_rebuilds_the_index(ctx, probe):
    with _connect(ctx.database_url) as conn:
        before = hnsw_indexes(conn, probe)
    with pytest.raises(RuntimeError, match="the load broke"):
        with bulk_load(ctx.database_url, {probe: 400}, min_chunks=100) as load:
            assert load.deferred == [before[0][0]]
            raise RuntimeError("the load broke")
    assert [r.name for r in load.rebuilt] == [before[0][0]]
    with _connect(ctx.database_url) as conn:
        assert hnsw_indexes(conn, probe) == before
        assert _deferred(conn, probe) == []


def test_an_abandoned_deferral_is_rebuilt_at_the_next_start_and_a_running_one_is_not(ctx, probe):
    with _connect(ctx.database_url) as conn:
        before = hnsw_indexes(conn, probe)
    loader = _connect(ctx.database_url)  # a load in another process: its session holds the shared lock
    loader.execute("SELECT pg_advisory_lock_shared(%s)", (BULK_LOAD_LOCK,))
    assert defer(loader, probe, incoming=300, min_chunks=100) == [before[0][0]]
    try:
        assert [r for r in restore_abandoned(ctx.pool) if r.table == probe] == []  # the load is alive
        with _connect(ctx.database_url) as conn:
            assert hnsw_indexes(conn, probe) == []
    finally:
        backend = loader.info.backend_pid
        loader.close()  # the load dies: its session, and the lock with it, end
    _wait_session_gone(ctx, backend)
    rebuilt = [r for r in restore_abandoned(ctx.pool) if r.table == probe]
    assert [r.name for r in rebuilt] == [before[0][0]]
    with _connect(ctx.database_url) as conn:
        assert hnsw_indexes(conn, probe) == before
        assert _deferred(conn, probe) == []


def _wait_session_gone(ctx, pid: int, timeout: float = 30) -> None:
    """A closed client's server process exits, releasing its session locks, a moment after the socket closes."""
    deadline = time.monotonic() + timeout
    with _connect(ctx.database_url) as conn:
        while conn.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()["n"]:
            assert time.monotonic() < deadline, f"server process {pid} still there after {timeout} s"
            time.sleep(0.05)


def test_a_busy_table_is_loaded_through_its_index(ctx, probe, monkeypatch):
    monkeypatch.setattr(vector_index, "DROP_LOCK_TIMEOUT", "300ms")
    writer = _connect(ctx.database_url)
    writer.autocommit = False  # another writer's open transaction holds the table
    _add_rows(writer, probe, np.random.default_rng(3), 1)
    try:
        with _connect(ctx.database_url) as conn:
            before = hnsw_indexes(conn, probe)
            assert defer(conn, probe, incoming=5000, min_chunks=100) == []
            assert hnsw_indexes(conn, probe) == before
            assert _deferred(conn, probe) == []
    finally:
        writer.rollback()
        writer.close()


def test_searches_during_a_deferral_are_not_blocked(ctx, probe):
    """A search runs while the index is gone and while it is built again (CREATE INDEX blocks writers only)."""
    query = np.random.default_rng(5).normal(size=DIM).astype(np.float32)
    with _connect(ctx.database_url) as conn:
        defer(conn, probe, incoming=300, min_chunks=100)
        builder = _connect(ctx.database_url)
        builder.autocommit = False
        (row,) = builder.execute("SELECT definition FROM deferred_indexes WHERE table_name = %s", (probe,)).fetchall()
        builder.execute(row["definition"])  # built, not committed: its lock is held until the rollback
        found: list[list[int]] = []
        reader = threading.Thread(target=lambda: found.append(_nearest(conn, probe, query)))
        reader.start()
        reader.join(timeout=30)
        builder.rollback()
        builder.close()
        assert found == [_exact(conn, probe, query)]
        restore(conn)


@pytest.fixture
def own_database(ctx, tmp_path):
    """A database of its own on the session's server, migrated, with a Context whose loads defer from 50 chunks."""
    name = f"bulk_{uuid.uuid4().hex[:8]}"
    with _connect(ctx.database_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = psycopg.conninfo.make_conninfo(ctx.database_url, dbname=name)
    upgrade(url)
    settings = ctx.settings.model_copy(update={"bulk_load_min_chunks": 50, "data_dir": tmp_path / "data"})
    yield Context(settings, url, ctx.redis_url)
    close_pools(url)
    with _connect(ctx.database_url) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_ingest_builds_the_index_after_a_bulk_load_and_not_after_a_small_one(own_database, tmp_path):
    ctx = own_database
    with ctx.pool.connection() as conn:
        (name, definition), = hnsw_indexes(conn, "transcript_chunks")
        oid = conn.execute("SELECT to_regclass(%s)::oid AS oid", (name,)).fetchone()["oid"]
    files = sorted((sample_corpus_dir() / "transcripts").glob("*"))
    first = tmp_path / "first"
    first.mkdir()
    for f in files[:-1]:
        shutil.copy(f, first / f.name)

    report = ingest(ctx, "transcript", [first], fanout=None, quiet=True)
    assert report.errors == []
    with ctx.pool.connection() as conn:
        chunks = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
        assert chunks == report.chunks_embedded >= 50
        assert [(r.name, r.table, r.rows) for r in report.index_rebuilds] == [(name, "transcript_chunks", chunks)]
        assert hnsw_indexes(conn, "transcript_chunks") == [(name, definition)]
        rebuilt_oid = conn.execute("SELECT to_regclass(%s)::oid AS oid", (name,)).fetchone()["oid"]
        assert rebuilt_oid != oid
        assert conn.execute("SELECT count(*) AS n FROM deferred_indexes").fetchone()["n"] == 0

    # one more call: fewer chunks than the table holds, inserted through the index as it stands
    second = ingest(ctx, "transcript", [files[-1]], fanout=None, quiet=True)
    assert [f.status for f in second.files] == ["added"]
    assert second.index_rebuilds == []
    with ctx.pool.connection() as conn:
        assert conn.execute("SELECT to_regclass(%s)::oid AS oid", (name,)).fetchone()["oid"] == rebuilt_oid
        # every chunk, the bulk load's and the later one's, is found through the index by its own vector
        rows = conn.execute("SELECT id, embedding FROM transcript_chunks ORDER BY id").fetchall()
        for r in rows[:: max(1, len(rows) // 25)] + rows[-3:]:
            with conn.transaction():
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute("SET LOCAL hnsw.ef_search = 200")
                top = conn.execute("SELECT embedding <=> %s AS d FROM transcript_chunks ORDER BY embedding <=> %s"
                                   " LIMIT 1", (r["embedding"], r["embedding"])).fetchone()
            assert top["d"] < 1e-6


def test_an_unchanged_corpus_defers_nothing(own_database, tmp_path):
    ctx = own_database
    folder = tmp_path / "calls"
    shutil.copytree(sample_corpus_dir() / "transcripts", folder)
    assert ingest(ctx, "transcript", [folder], fanout=None, quiet=True).index_rebuilds != []
    again = ingest(ctx, "transcript", [folder], fanout=None, quiet=True)
    assert {f.status for f in again.files} == {"unchanged"}
    assert again.index_rebuilds == []

