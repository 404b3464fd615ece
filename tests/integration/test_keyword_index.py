"""The BM25 keyword index (agent/retrieval/keyword_index.py) against a real Postgres: sync, search, the writer lock,
and how hybrid search takes its candidates."""
from __future__ import annotations

import subprocess
import sys

import pytest
from psycopg import sql

from agent.ingest.runner import ingest
from agent.retrieval import hybrid, keyword_index

pytestmark = pytest.mark.integration

PHRASE = "net interest margin"


@pytest.fixture(scope="module")
def indexed(ctx, shared_data, tmp_path_factory):
    files = sorted((shared_data / "transcripts").glob("*.json"))[:3]
    ingest(ctx, "transcript", files, fanout=None, quiet=True)
    index = keyword_index.KeywordIndex(tmp_path_factory.mktemp("bm25") / "transcript")
    return index, index.sync(ctx.pool, "transcript")


def test_sync_takes_every_chunk_once(ctx, indexed):
    index, first = indexed
    with ctx.pool.connection() as conn:
        row = conn.execute("SELECT count(*) AS n, max(id) AS top FROM transcript_chunks").fetchone()
    assert first.added == row["n"] and first.watermark == row["top"] and not first.skipped
    committed = index.meta_path.stat().st_mtime_ns
    again = index.sync(ctx.pool, "transcript")
    assert again.added == 0 and again.watermark == row["top"]
    # nothing new: no writer and no new meta, so readers do not reload (beat syncs every minute)
    assert index.meta_path.stat().st_mtime_ns == committed


def test_search_ranks_chunks_holding_the_words(ctx, indexed):
    index, _ = indexed
    ids = index.search(PHRASE, 10)
    assert len(ids) == 10 and len(set(ids)) == 10
    with ctx.pool.connection() as conn:
        held = {r["id"]: r["n"] for r in conn.execute(
            "SELECT id, ((tsv @@ to_tsquery('english', 'net'))::int + (tsv @@ to_tsquery('english', 'interest'))::int"
            " + (tsv @@ to_tsquery('english', 'margin'))::int) AS n FROM transcript_chunks WHERE id = ANY(%s)", (ids,))}
    assert all(held[i] >= 1 for i in ids)
    assert held[ids[0]] == 3  # the best match holds every word
    assert index.search("", 10) == [] and index.search('text:"margin" AND -net', 3)  # syntax is plain words only


def test_a_second_writer_is_skipped_not_blocked(ctx, indexed):
    index, _ = indexed
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(index.path / "finagent-write.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert index.sync(ctx.pool, "transcript").skipped
    finally:
        holder.kill()
        holder.wait()
    assert not index.sync(ctx.pool, "transcript").skipped


HOLD_LOCK = """
import sys, time, fasteners
lock = fasteners.InterProcessLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_hybrid_search_scores_bm25_candidates_and_drops_deleted_ones(ctx, indexed, monkeypatch):
    index, _ = indexed
    monkeypatch.setattr(keyword_index, "for_corpus", lambda corpus, data_dir=None: index)
    vec = ctx.embed_query(PHRASE)
    bm25 = keyword_index.candidates(ctx.pool, "transcript", PHRASE, 60).ids
    assert bm25 == index.search(PHRASE, 60)
    # cap 0: the GIN side adds nothing, so the keyword candidates are BM25's alone, ranked by the keyword score
    params = hybrid.search_params(PHRASE, vec, 60) | {"cap": 0, "cap1": 1, "bm25_ids": bm25}
    statement = hybrid._query("transcript", sql.SQL(""), False, "keyword")
    with ctx.pool.connection() as conn:
        rows = conn.execute(statement, params).fetchall()
        assert {r["id"] for r in rows} == set(bm25)
        assert all(r["rank"] > 0 for r in rows)  # each holds a word of the phrase, so it has a keyword score
        # a chunk deleted from the table after the sync is dropped when the candidates are joined to it
        gone = conn.execute("DELETE FROM transcript_chunks WHERE id = %s RETURNING id", (bm25[0],)).fetchone()["id"]
        assert gone not in {r["id"] for r in conn.execute(statement, params).fetchall()}
        conn.rollback()


def test_the_gin_side_adds_candidates_only_while_rows_are_past_the_watermark(ctx, indexed):
    """BM25 ranks every row it holds, a rare term's first; the GIN side's probes (every word's rows, a rare term's
    rows) are for rows it does not hold yet. The BM25 list here leaves out the rare word's rows on purpose, so any of
    them among the candidates came from the GIN side."""
    index, _ = indexed
    with ctx.pool.connection() as conn:
        word = conn.execute(
            "SELECT word FROM ts_stat('SELECT tsv FROM transcript_chunks') WHERE ndoc BETWEEN 2 AND 5"
            " AND word ~ '^[a-z]{5,}$' AND plainto_tsquery('english', word)::text = quote_literal(word)"
            " ORDER BY word LIMIT 1").fetchone()["word"]
        holders = {r["id"] for r in conn.execute(
            "SELECT id FROM transcript_chunks WHERE tsv @@ to_tsquery('english', %s)", (word,))}
    bm25 = [i for i in index.search(PHRASE, 60) if i not in holders]
    statement = hybrid._query("transcript", sql.SQL(""), False, "keyword")
    vec = ctx.embed_query(word)

    def candidates(watermark: int | None) -> set[int]:
        params = hybrid.search_params(word, vec, 60) | {"bm25_ids": bm25, "bm25_watermark": watermark}
        with ctx.pool.connection() as conn:
            return {r["id"] for r in conn.execute(statement, params).fetchall() if r["id"] is not None}

    assert holders and candidates(2**62) == set(bm25)  # the index holds every row: BM25's candidates alone
    assert holders <= candidates(min(holders) - 1)  # rows past the watermark: the GIN side probes again
    assert holders <= candidates(None)  # no BM25 candidates at all


def test_an_index_of_another_database_is_ignored(ctx, indexed, monkeypatch):
    index, _ = indexed
    monkeypatch.setattr(keyword_index, "for_corpus", lambda corpus, data_dir=None: index)
    monkeypatch.setattr(keyword_index, "_system_id_of", lambda pool: "another")
    assert keyword_index.candidates(ctx.pool, "transcript", PHRASE, 60).ids == []
