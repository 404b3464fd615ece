"""A chunk row stays whole in the heap (migration 0013): its vector and tsvector are not moved to the TOAST relation,
from which a search would fetch them again each time a statement names them."""
from __future__ import annotations

import random
import string

import psycopg
import pytest

pytestmark = pytest.mark.integration

DIM = 384


def _row(seed: int) -> tuple[str, str]:
    """About 1,400 characters of distinct made-up words (a large tsvector that compresses badly) and a vector."""
    rng = random.Random(seed)
    text = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(200))
    return text, "[" + ",".join(f"{rng.uniform(-1, 1):.6f}" for _ in range(DIM)) + "]"


def _toast_rows(conn, table: str) -> int:
    toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = %s::regclass", (table,)).fetchone()
    assert toast and toast[0] != "-", f"{table} has no TOAST relation"
    return conn.execute(f"SELECT count(*) FROM {toast[0]}").fetchone()[0]


INSERTS = {
    "transcript_chunks": "INSERT INTO transcript_chunks (document_id, ticker, fiscal_year, fiscal_quarter, section,"
                         " chunk_index, text, embedding) VALUES (%(doc)s, 'ZZST', 2030, 1, 'qa', 0, %(text)s, %(vec)s)",
    "tenk_chunks": "INSERT INTO tenk_chunks (document_id, ticker, fiscal_year, item, chunk_index, text, embedding)"
                   " VALUES (%(doc)s, 'ZZST', 2030, '7', 0, %(text)s, %(vec)s)",
}


@pytest.mark.parametrize("table", sorted(INSERTS))
def test_a_chunk_row_keeps_its_vector_and_tsvector_in_the_heap(ctx, table):
    text, vec = _row(7)
    with psycopg.connect(ctx.database_url) as conn:  # one transaction, rolled back: nothing is left behind
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # other tests' writes do not move the counts
        conn.execute("INSERT INTO companies (ticker, name) VALUES ('ZZST', 'Storage probe')")
        doc = conn.execute("INSERT INTO documents (kind, ticker, fiscal_year, fiscal_quarter, source_path, content_hash)"
                           " VALUES (%s, 'ZZST', 2030, 1, 'probe', 'probe') RETURNING id",
                           ("transcript" if table == "transcript_chunks" else "10k",)).fetchone()[0]
        # the control: the same row in a table of the same columns and default storage goes partly to TOAST
        conn.execute(f"CREATE TEMP TABLE storage_probe (LIKE {table} INCLUDING DEFAULTS)")
        before = _toast_rows(conn, "storage_probe")
        conn.execute(INSERTS[table].replace(f"INTO {table} (", "INTO storage_probe (tsv, ").replace(
            "VALUES (", "VALUES (to_tsvector('english', %(text)s), "), {"doc": doc, "text": text, "vec": vec})
        assert _toast_rows(conn, "storage_probe") > before
        before = _toast_rows(conn, table)
        conn.execute(INSERTS[table], {"doc": doc, "text": text, "vec": vec})
        assert _toast_rows(conn, table) == before
        size = conn.execute(f"SELECT pg_column_size(t.*) FROM {table} t WHERE ticker = 'ZZST'").fetchone()[0]
        assert 2032 < size < 8160, size  # over the default threshold, under a page: the case the migration is for
        conn.rollback()
