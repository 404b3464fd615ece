"""agent.db's `reading` and `one_transaction` checkouts against a real Postgres: statements sent together (pipeline mode) keep
the meaning of the blocks they replaced: a write is all or nothing, a read leaves the connection as it found it."""
from __future__ import annotations

import uuid

import psycopg
import pytest

from agent.db import one_transaction, reading
from agent.models.steps import FailedOutput, StepKey
from agent.persistence import jobstore
from agent.persistence.ledger import load_ledger, record_call

pytestmark = pytest.mark.integration


@pytest.fixture
def table(ctx):
    name = f"rt_{uuid.uuid4().hex[:8]}"
    with ctx.pool.connection() as conn:
        conn.execute(f"CREATE TABLE {name} (k text PRIMARY KEY, v int NOT NULL)")
    yield name
    with ctx.pool.connection() as conn:
        conn.execute(f"DROP TABLE {name}")


def _rows(ctx, table: str) -> dict[str, int]:
    with ctx.pool.connection() as conn:
        return {r["k"]: r["v"] for r in conn.execute(f"SELECT k, v FROM {table}").fetchall()}


def test_a_write_block_commits_every_statement_together(ctx, table):
    with one_transaction(ctx.pool) as conn:
        conn.execute("SET LOCAL synchronous_commit = off")
        conn.execute(f"INSERT INTO {table} VALUES ('a', 1)")
        conn.execute(f"INSERT INTO {table} VALUES ('b', 2)")
        # a fetch in the middle syncs the pipeline and sees the block's own rows
        assert conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"] == 2
    assert _rows(ctx, table) == {"a": 1, "b": 2}


def test_a_failing_statement_raises_at_the_block_and_commits_nothing(ctx, table):
    with pytest.raises(psycopg.errors.NotNullViolation):
        with one_transaction(ctx.pool) as conn:
            conn.execute(f"INSERT INTO {table} VALUES ('a', 1)")
            conn.execute(f"INSERT INTO {table} VALUES ('b', NULL)")  # fails only when the pipeline syncs
            conn.execute(f"INSERT INTO {table} VALUES ('c', 3)")
    assert _rows(ctx, table) == {}
    with one_transaction(ctx.pool) as conn:  # the pool's connection is usable again
        conn.execute(f"INSERT INTO {table} VALUES ('d', 4)")
    assert _rows(ctx, table) == {"d": 4}


def test_a_read_block_needs_no_transaction_and_gives_the_connection_back_as_it_was(ctx, table):
    with one_transaction(ctx.pool) as conn:
        conn.execute(f"INSERT INTO {table} VALUES ('a', 1), ('b', 2)")
    with reading(ctx.pool) as conn:
        first = conn.execute(f"SELECT v FROM {table} WHERE k = 'a'")
        second = conn.execute(f"SELECT v FROM {table} WHERE k = 'b'")
        assert (first.fetchone()["v"], second.fetchone()["v"]) == (1, 2)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # no BEGIN was sent
    with ctx.pool.connection() as conn:  # every checkout is back to the pool's own mode
        assert conn.autocommit is False


def test_a_read_that_fails_leaves_the_pool_working(ctx, table):
    with pytest.raises(psycopg.errors.UndefinedTable):
        with reading(ctx.pool) as conn:
            conn.execute("SELECT * FROM no_such_table_here").fetchall()
    with reading(ctx.pool) as conn:
        assert conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"] == 0


def test_a_calls_ledger_row_and_its_output_are_written_together(ctx):
    job_id, _ = jobstore.create_job(ctx.pool, _state())
    key = StepKey(iteration=1, stage="extract", part="X:2024_q1")
    with record_call(ctx.pool, job_id, str(key), "llm.extract", {}) as rec:
        rec.store_with(jobstore.output_writer(job_id, key, FailedOutput(error="stand-in output")))
    assert [r["call_key"] for r in load_ledger(ctx.pool, job_id)] == [str(key)]
    assert list(jobstore.get_outputs(ctx.pool, job_id, "1:extract:")) == [str(key)]


def _state():
    from agent.models.job import JobRequest, JobState

    return JobState(request=JobRequest(question="How did revenue change?"))
