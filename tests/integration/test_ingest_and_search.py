"""Ingestion of the real transcripts through the Celery fan-out, and hybrid search over them,
on the embedded Postgres+pgvector and Redis (hash embedder)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from agent.ingest.runner import ingest
from agent.models.corpus import Period, SearchFilters
from agent.providers.embeddings import as_array
from agent.retrieval import keyword_index
from agent.retrieval.availability import invalidate
from agent.retrieval.hybrid import KEYWORD_MATCH_CAP, and_tsquery_text, hybrid_search, query_words
from agent.search_service import SearchRequest, search
from tasks.ingest import EmbedFanOut

pytestmark = pytest.mark.integration

QUERY = "net interest margin and deposit costs"
# the 12 tickers of shared/data/transcripts; other modules' data (the sample corpus) is left alone
REAL_TICKERS = ["AFL", "AGO", "APH", "BDN", "BKU", "BMI", "CFR", "CHH", "CPF", "DRI", "FNB", "SNV"]
SNV_PERIODS = ["2019_q4", "2020_q2", "2020_q4", "2021_q1", "2021_q2", "2021_q3", "2021_q4"]


def _counts(ctx) -> dict[str, int]:
    with ctx.pool.connection() as conn:
        return {
            t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"]
            for t in ("documents", "transcript_chunks", "embedding_cache", "companies")
        }


def _drop_tickers(ctx, tickers: list[str]) -> None:
    with ctx.pool.connection() as conn:
        conn.execute("DELETE FROM documents WHERE ticker = ANY(%s)", (tickers,))  # chunks cascade
        conn.execute("DELETE FROM companies WHERE ticker = ANY(%s)", (tickers,))
    for t in tickers:
        invalidate(ctx.redis, t)


@pytest.fixture(autouse=True)
def no_bm25_index(monkeypatch):
    """These tests recompute the GIN and semantic definition in Python; the workers' beat may have built a BM25 index
    in the session's data dir meanwhile, whose candidates tests/integration/test_keyword_index.py covers."""
    monkeypatch.setattr(keyword_index, "candidates", lambda *args, **kwargs: keyword_index.Candidates())


@pytest.fixture(scope="module")
def ingested(ctx, workers, shared_data) -> SimpleNamespace:
    """All 68 real transcripts, ingested once with the embedding fan-out on a real worker."""
    workers.ensure()
    with ctx.pool.connection() as conn:  # independent of what earlier modules ingested (e.g. the CLI tests' SNV)
        conn.execute("DELETE FROM documents WHERE kind = 'transcript' AND ticker = ANY(%s)", (REAL_TICKERS,))
    for t in REAL_TICKERS:
        invalidate(ctx.redis, t)
    calls_before = ctx.embedder.model_calls
    report = ingest(ctx, "transcript", [shared_data / "transcripts"], fanout=EmbedFanOut, quiet=True)
    # the keyword score reads the planner's statistics: settle them now, or autovacuum's ANALYZE could change them
    # between a test's Python reference and its search
    with ctx.pool.connection() as conn:
        conn.execute("ANALYZE transcript_chunks")
    return SimpleNamespace(report=report, local_model_calls=ctx.embedder.model_calls - calls_before)


@pytest.fixture(scope="module")
def corpus(ingested):
    return ingested.report


# ---------------------------------------------------------------- ingestion


def test_all_real_transcripts_are_added(corpus):
    assert len(corpus.files) == 68
    assert {f.status for f in corpus.files} == {"added"}, [f for f in corpus.files if f.status != "added"]
    assert all(f.chunks > 0 for f in corpus.files)
    assert corpus.chunks_embedded == sum(f.chunks for f in corpus.files)


def test_chunk_counts_in_db_match_the_report(ctx, corpus):
    with ctx.pool.connection() as conn:
        rows = conn.execute(
            "SELECT d.source_path, d.ticker, d.fiscal_year, d.fiscal_quarter, count(c.id) AS n,"
            " min(c.chunk_index) AS lo, max(c.chunk_index) AS hi"
            " FROM documents d JOIN transcript_chunks c ON c.document_id = d.id"
            " WHERE d.kind = 'transcript' AND d.ticker = ANY(%s) GROUP BY d.id", (REAL_TICKERS,)
        ).fetchall()
        total = conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker = ANY(%s)",
                             (REAL_TICKERS,)).fetchone()["n"]
    by_path = {r["source_path"]: r for r in rows}
    assert len(by_path) == 68
    for f in corpus.files:
        r = by_path[f.path]
        assert r["n"] == f.chunks, f.path
        assert (r["lo"], r["hi"]) == (0, f.chunks - 1), f.path  # contiguous chunk indexes
        ticker, year, q = Path(f.path).stem.split("_")
        assert (r["ticker"], r["fiscal_year"], r["fiscal_quarter"]) == (ticker, int(year), int(q[1:]))
    assert total == sum(f.chunks for f in corpus.files)


def test_the_workers_embedded_every_chunk_into_the_shared_cache(ctx, ingested):
    # this process made no model call: every vector it wrote came from the shared cache the worker filled
    assert ingested.local_model_calls == 0
    with ctx.pool.connection() as conn:
        missing = conn.execute(
            "SELECT count(*) AS n FROM transcript_chunks c WHERE c.ticker = ANY(%s) AND NOT EXISTS (SELECT 1"
            " FROM embedding_cache e WHERE e.model = 'hash'"
            " AND e.text_hash = encode(sha256(convert_to(c.text, 'UTF8')), 'hex'))", (REAL_TICKERS,)
        ).fetchone()["n"]
    assert missing == 0


def test_second_ingest_changes_nothing(ctx, corpus, shared_data):
    before = _counts(ctx)
    with ctx.pool.connection() as conn:
        ids_before = [r["id"] for r in conn.execute("SELECT id FROM transcript_chunks ORDER BY id")]
    again = ingest(ctx, "transcript", [shared_data / "transcripts"], fanout=EmbedFanOut, quiet=True)
    assert len(again.files) == 68
    assert {f.status for f in again.files} == {"unchanged"}
    assert again.chunks_embedded == 0
    assert {f.path: f.chunks for f in again.files} == {f.path: f.chunks for f in corpus.files}
    assert _counts(ctx) == before
    with ctx.pool.connection() as conn:
        assert [r["id"] for r in conn.execute("SELECT id FROM transcript_chunks ORDER BY id")] == ids_before


def test_malformed_file_in_a_batch(ctx, corpus, worker, shared_data, tmp_path):
    src = shared_data / "transcripts"
    fake = ["ZZA", "ZZB", "ZZC", "ZZD"]
    shutil.copy(src / "SNV_2021_q1.json", tmp_path / "ZZA_2021_q1.json")
    shutil.copy(src / "BMI_2020_q3.json", tmp_path / "ZZB_2020_q3.json")
    shutil.copy(src / "CPF_2021_q2.json", tmp_path / "ZZC_q2_2021.json")  # upstream name form
    broken = tmp_path / "ZZD_2021_q1.json"
    broken.write_text('{"prepared_remarks": [{"speaker": "Operator", "speech": "Good mor')
    try:
        report = ingest(ctx, "transcript", [tmp_path], fanout=EmbedFanOut, quiet=True)
        by_name = {Path(f.path).name: f for f in report.files}
        assert set(by_name) == {"ZZA_2021_q1.json", "ZZB_2020_q3.json", "ZZC_q2_2021.json", "ZZD_2021_q1.json"}
        bad = by_name["ZZD_2021_q1.json"]
        assert bad.status == "error" and bad.chunks == 0
        assert "malformed JSON" in bad.reason
        assert report.errors == [bad]
        with ctx.pool.connection() as conn:
            docs = conn.execute(
                "SELECT d.ticker, d.fiscal_year, d.fiscal_quarter, d.source_path, count(c.id) AS n FROM documents d"
                " JOIN transcript_chunks c ON c.document_id = d.id WHERE d.ticker = ANY(%s) GROUP BY d.id", (fake,)
            ).fetchall()
            assert conn.execute("SELECT count(*) AS n FROM documents WHERE source_path = %s",
                                (str(broken),)).fetchone()["n"] == 0
            assert conn.execute("SELECT count(*) AS n FROM companies WHERE ticker = 'ZZD'").fetchone()["n"] == 0
        written = {(d["ticker"], d["fiscal_year"], d["fiscal_quarter"]): d for d in docs}
        assert set(written) == {("ZZA", 2021, 1), ("ZZB", 2020, 3), ("ZZC", 2021, 2)}
        for name, key in (("ZZA_2021_q1.json", ("ZZA", 2021, 1)), ("ZZB_2020_q3.json", ("ZZB", 2020, 3)),
                          ("ZZC_q2_2021.json", ("ZZC", 2021, 2))):
            assert by_name[name].status == "added"
            assert written[key]["n"] == by_name[name].chunks > 0
            assert written[key]["source_path"] == by_name[name].path
    finally:
        _drop_tickers(ctx, fake)


def test_changed_content_replaces_the_document(ctx, corpus, shared_data, tmp_path):
    path = tmp_path / "ZZR_2021_q1.json"
    data = json.loads((shared_data / "transcripts" / "CPF_2021_q1.json").read_text())
    path.write_text(json.dumps(data))
    try:
        first = ingest(ctx, "transcript", [path], fanout=None, quiet=True)
        assert [f.status for f in first.files] == ["added"]
        longest = max(range(len(data["q_and_a"])), key=lambda i: len(data["q_and_a"][i]["speech"]))
        removed_text = " ".join(data["q_and_a"][longest]["speech"].split())[:80]
        assert len(removed_text) == 80
        with ctx.pool.connection() as conn:  # the old text is there before the change
            assert conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker = 'ZZR' AND position(%s in text) > 0",
                                (removed_text,)).fetchone()["n"] >= 1
        sentinel = "Zorblax quarterly sentinel remark about widget deposits."
        data["q_and_a"][longest]["speech"] = sentinel
        data["prepared_remarks"] = data["prepared_remarks"][:-1]  # one turn fewer: fewer chunks
        path.write_text(json.dumps(data))

        second = ingest(ctx, "transcript", [path], fanout=None, quiet=True)
        assert [f.status for f in second.files] == ["replaced"]
        assert second.files[0].chunks != first.files[0].chunks
        with ctx.pool.connection() as conn:
            docs = conn.execute("SELECT id, content_hash FROM documents WHERE ticker = 'ZZR'").fetchall()
            assert len(docs) == 1
            chunks = conn.execute("SELECT document_id, chunk_index, text FROM transcript_chunks WHERE ticker = 'ZZR'"
                                  " ORDER BY chunk_index").fetchall()
            orphans = conn.execute("SELECT count(*) AS n FROM transcript_chunks c WHERE NOT EXISTS"
                                   " (SELECT 1 FROM documents d WHERE d.id = c.document_id)").fetchone()["n"]
        assert orphans == 0
        assert len(chunks) == second.files[0].chunks
        assert {c["document_id"] for c in chunks} == {docs[0]["id"]}
        assert [c["chunk_index"] for c in chunks] == list(range(len(chunks)))  # no duplicates, no gaps
        texts = "\n".join(c["text"] for c in chunks)
        assert sentinel in texts
        assert removed_text not in texts

        # the new text is searchable
        vec = ctx.embed_query("Zorblax sentinel widget deposits")
        hits = hybrid_search(ctx.pool, "Zorblax sentinel widget", vec, SearchFilters(tickers=["ZZR"]), top_k=3)
        assert sentinel in hits[0].text
        third = ingest(ctx, "transcript", [path], fanout=None, quiet=True)
        assert [f.status for f in third.files] == ["unchanged"]
    finally:
        _drop_tickers(ctx, ["ZZR"])


class _OtherEmbedder:
    """Another model as far as the store can tell: its own name and vectors."""

    name = "another-model"

    def __init__(self, inner):
        self.inner = inner

    def embed(self, texts):
        return self.inner.embed([t[::-1] for t in texts])


def test_another_embedder_re_ingests_the_same_bytes(ctx, corpus, shared_data, tmp_path):
    """The vectors a document is stored with are its embedder's: the same file re-ingested under another embedder
    is replaced (not skipped as unchanged), and a document stored before recipes were recorded keeps its vectors only
    when they are the current embedder's."""
    path = tmp_path / "ZZQ_2021_q1.json"
    path.write_text((shared_data / "transcripts" / "CPF_2021_q1.json").read_text())
    other = SimpleNamespace(settings=ctx.settings, database_url=ctx.database_url, pool=ctx.pool, redis=ctx.redis,
                            embedder=_OtherEmbedder(ctx.embedder))

    def stored():
        with ctx.pool.connection() as conn:
            doc = conn.execute("SELECT id, recipe FROM documents WHERE ticker = 'ZZQ'").fetchone()
            first = conn.execute("SELECT text, embedding FROM transcript_chunks WHERE document_id = %s"
                                 " ORDER BY chunk_index LIMIT 1", (doc["id"],)).fetchone()
        return doc["recipe"], first["text"], as_array(first["embedding"])

    def forget_recipe():
        with ctx.pool.connection() as conn:
            conn.execute("UPDATE documents SET recipe = NULL WHERE ticker = 'ZZQ'")

    try:
        assert [f.status for f in ingest(ctx, "transcript", [path], fanout=None, quiet=True).files] == ["added"]
        recipe, text, vec = stored()
        assert recipe.startswith(f"embedder={ctx.embedder.name};")
        assert [f.status for f in ingest(other, "transcript", [path], fanout=None, quiet=True).files] == ["replaced"]
        recipe, text, vec = stored()
        assert recipe.startswith("embedder=another-model;")
        assert np.allclose(vec, other.embedder.embed([text])[0], atol=1e-5)
        assert [f.status for f in ingest(other, "transcript", [path], fanout=None, quiet=True).files] == ["unchanged"]

        forget_recipe()  # as stored before recipes: the other model's vectors are not the current embedder's
        assert [f.status for f in ingest(ctx, "transcript", [path], fanout=None, quiet=True).files] == ["replaced"]
        assert np.allclose(stored()[2], ctx.embedder.embed([text])[0], atol=1e-5)
        forget_recipe()  # and now they are: kept, with the recipe recorded
        assert [f.status for f in ingest(ctx, "transcript", [path], fanout=None, quiet=True).files] == ["unchanged"]
        assert stored()[0].startswith(f"embedder={ctx.embedder.name};")
    finally:
        _drop_tickers(ctx, ["ZZQ"])


# ---------------------------------------------------------------- search


def test_search_last_3_quarters_is_the_tickers_own_latest_3(ctx, corpus):
    resp = search(ctx, SearchRequest(query=QUERY, tickers=["SNV"], time_refs=["last 3 quarters"], top_k=60))
    assert resp.problems == []
    assert resp.periods == {"SNV": ["2021_q2", "2021_q3", "2021_q4"]}
    assert len(resp.hits) == 60
    assert {h.ticker for h in resp.hits} == {"SNV"}
    assert {(h.fiscal_year, h.fiscal_quarter) for h in resp.hits} == {(2021, 2), (2021, 3), (2021, 4)}


def test_search_two_companies_resolve_their_own_calendars(ctx, corpus):
    resp = search(ctx, SearchRequest(query=QUERY, tickers=["SNV", "DRI"], time_refs=["last 2 quarters"], top_k=10))
    assert resp.periods == {"SNV": ["2021_q3", "2021_q4"], "DRI": ["2022_q1", "2022_q2"]}
    allowed = {("SNV", 2021, 3), ("SNV", 2021, 4), ("DRI", 2022, 1), ("DRI", 2022, 2)}
    assert {(h.ticker, h.fiscal_year, h.fiscal_quarter) for h in resp.hits} <= allowed
    assert {h.ticker for h in resp.hits} == {"SNV", "DRI"}
    assert len(resp.hits) == 20
    assert [h.score for h in resp.hits] == sorted((h.score for h in resp.hits), reverse=True)


def test_search_missing_quarter_gives_a_problem_and_no_hits(ctx, corpus):
    resp = search(ctx, SearchRequest(query=QUERY, tickers=["SNV"], time_refs=["Q4 2024"]))
    assert resp.hits == []
    assert resp.periods == {}
    assert len(resp.problems) == 1
    assert "Q4 2024" in resp.problems[0] and "SNV" in resp.problems[0]
    assert "Q4 2019" in resp.problems[0] and "Q4 2021" in resp.problems[0]


def test_search_unknown_ticker_is_a_problem(ctx, corpus):
    resp = search(ctx, SearchRequest(query=QUERY, tickers=["NOPE"], time_refs=["latest"]))
    assert resp.hits == [] and "NOPE" in resp.problems[0]


def test_available_periods_match_the_readme(ctx, corpus):
    resp = search(ctx, SearchRequest(query=QUERY, tickers=["SNV"], time_refs=["last 20 quarters"], top_k=1))
    assert resp.periods == {"SNV": SNV_PERIODS}
    assert "7" in resp.problems[0]


class Scope:
    """Every row a search may consider, with its true cosine similarity, keyword score and keyword matches, so
    the hybrid ranking can be recomputed in Python from the definition in agent/retrieval/hybrid.py."""

    def __init__(self, ctx, query: str, vec, where: str = "", params: tuple = ()):
        andq = and_tsquery_text(query)
        with ctx.pool.connection() as conn:
            terms = [r["lexeme"] for r in conn.execute(
                "SELECT DISTINCT lexeme FROM unnest(%s::text[]) w, unnest(tsvector_to_array(to_tsvector('english', w)))"
                " lexeme ORDER BY lexeme", (query_words(query),))]
            per_term = ", ".join(f"tsv @@ quote_literal(%s)::tsquery AS m{i}, ts_rank(tsv, quote_literal(%s)::tsquery) AS r{i}"
                                 for i in range(len(terms)))
            rows = conn.execute(
                f"SELECT id, embedding, tsv @@ to_tsquery('english', %s) AS match_and, {per_term}"
                f" FROM transcript_chunks {where}",
                (andq, *[t for t in terms for _ in range(2)], *params),
            ).fetchall()
            # a whole table's common terms take their document frequency from the planner's statistics
            common = {} if where else {r["lexeme"]: r["freq"] for r in conn.execute(
                "SELECT e.lexeme, e.freq FROM pg_stats s, unnest(s.most_common_elems::text::text[],"
                " s.most_common_elem_freqs) e(lexeme, freq) WHERE s.tablename = 'transcript_chunks'"
                " AND s.attname = 'tsv' AND e.lexeme IS NOT NULL")}
            reltuples = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'transcript_chunks'").fetchone()["reltuples"]
            total = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
        self.ids = np.array([r["id"] for r in rows])
        emb = np.stack([np.asarray(r["embedding"].to_numpy(), dtype=np.float64) for r in rows])
        q = np.asarray(vec, dtype=np.float64)
        self.sims = emb @ q / (np.linalg.norm(emb, axis=1) * np.linalg.norm(q))
        self.match_and = np.array([bool(r["match_and"]) for r in rows])
        n = len(rows) if where else (reltuples if reltuples >= 10000 else total)
        self.ranks = np.zeros(len(rows))
        self.match_rare = np.zeros(len(rows), dtype=bool)
        for i, term in enumerate(terms):
            held = np.array([bool(r[f"m{i}"]) for r in rows])
            df = common[term] * n if term in common else min(int(held.sum()), KEYWORD_MATCH_CAP + 1)
            if df == 0:
                continue
            idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
            self.ranks += np.where(held, idf * np.array([float(r[f"r{i}"]) for r in rows]), 0.0)
            if df <= KEYWORD_MATCH_CAP:
                self.match_rare |= held

    def __len__(self) -> int:
        return len(self.ids)

    def keyword_matches(self, cap: int = KEYWORD_MATCH_CAP) -> np.ndarray:
        """Indices of the rows keyword-only candidates come from: those holding every word when there are
        1..cap of them, else those holding any rare term (one held by at most cap rows)."""
        if 0 < self.match_and.sum() <= cap:
            return np.where(self.match_and)[0]
        return np.where(self.match_rare)[0]

    def ambiguous(self, n: int) -> bool:
        """True when the n-th best similarity or keyword rank is tied (within float noise) with the next one:
        then which of the tied rows become candidates depends on float rounding, and so do the bounds."""
        def tied(values: np.ndarray) -> bool:
            v = np.sort(values)[::-1]
            return len(v) > n and 0 < abs(v[n - 1] - v[n]) <= 1e-6 * max(1.0, abs(v[n]))
        return tied(self.sims) or tied(self.ranks[self.keyword_matches()])

    def ranking(self, n: int, top_k: int) -> tuple[dict[int, float], list[int]]:
        """0.7 x cosine (clamped to 0-1) + 0.3 x min-max(rank) over the top-n semantic and top-n keyword candidates
        (ties by id), every candidate scored with its idf-weighted keyword score."""
        sem = set(self.ids[np.lexsort((self.ids, -self.sims))[:n]])
        kw_idx = self.keyword_matches()
        kw = set(self.ids[kw_idx[np.lexsort((self.ids[kw_idx], -self.ranks[kw_idx]))[:n]]])
        cand = np.isin(self.ids, list(sem | kw))
        ids, s, k = self.ids[cand], self.sims[cand], self.ranks[cand]

        def norm(v):
            if v.max() - v.min() < 1e-12:
                return np.full_like(v, 1.0 if v.max() > 0 else 0.0)
            return (v - v.min()) / (v.max() - v.min())

        score = 0.7 * np.clip(s, 0.0, 1.0) + 0.3 * norm(k)
        order = np.lexsort((ids, -score))
        return {int(i): float(x) for i, x in zip(ids[order], score[order])}, [int(i) for i in ids[order][:top_k]]


def _tie_free_top_k(scope: Scope, candidates) -> int:
    for top_k in candidates:
        if not scope.ambiguous(max(top_k * 4, 60)):
            return top_k
    pytest.fail(f"every top_k in {list(candidates)} has tied candidates at the cut-off")


def _assert_same_ranking(hits, expected_scores: dict[int, float], expected_ids: list[int]):
    got = [h.chunk_id for h in hits]
    assert len(got) == len(expected_ids)
    for h in hits:
        assert h.chunk_id in expected_scores, "a hit outside the candidate set"
        assert h.score == pytest.approx(expected_scores[h.chunk_id], abs=1e-5)
    # identical order, except where two scores tie within float noise
    for a, b in zip(got, expected_ids):
        if a != b:
            assert expected_scores[a] == pytest.approx(expected_scores[b], abs=1e-5)


def test_filtered_search_is_exact_and_returns_top_k(ctx, corpus):
    vec = ctx.embed_query(QUERY)
    periods = [Period(fiscal_year=2021, fiscal_quarter=q) for q in (2, 3, 4)]
    filters = SearchFilters(tickers=["SNV"], periods=periods)
    scope = Scope(ctx, QUERY, vec, "WHERE ticker = %s AND fiscal_year * 10 + fiscal_quarter = ANY(%s)",
                  ("SNV", [20212, 20213, 20214]))
    for top_k in (15, _tie_free_top_k(scope, range(15, 40))):
        hits = hybrid_search(ctx.pool, QUERY, vec, filters, top_k=top_k)
        assert len(scope) > top_k and len(hits) == top_k
        assert {(h.ticker, h.fiscal_year, h.fiscal_quarter) for h in hits} <= {("SNV", 2021, q) for q in (2, 3, 4)}
        exact = hybrid_search(ctx.pool, QUERY, vec, filters, top_k=top_k, exact=True)
        assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact]
    # top_k is tie-free here, so the candidate set, the bounds and the ranking are all determined
    _assert_same_ranking(hits, *scope.ranking(max(top_k * 4, 60), top_k))


def test_filtered_search_over_the_whole_scope(ctx, corpus):
    # n = 4 x top_k covers every row of the scope: no cut-off at all
    vec = ctx.embed_query(QUERY)
    scope = Scope(ctx, QUERY, vec, "WHERE ticker = %s AND fiscal_year = 2019", ("SNV",))
    top_k = len(scope) // 3
    hits = hybrid_search(ctx.pool, QUERY, vec, SearchFilters(tickers=["SNV"], fiscal_years=[2019]), top_k=top_k)
    assert len(hits) == top_k
    _assert_same_ranking(hits, *scope.ranking(max(top_k * 4, 60), top_k))


def test_unfiltered_exact_search_matches_brute_force(ctx, corpus):
    vec = ctx.embed_query(QUERY)
    scope = Scope(ctx, QUERY, vec)
    top_k = _tie_free_top_k(scope, range(20, 60))
    hits = hybrid_search(ctx.pool, QUERY, vec, None, top_k=top_k, exact=True)
    _assert_same_ranking(hits, *scope.ranking(max(top_k * 4, 60), top_k))


def test_unfiltered_hnsw_hits_are_sorted_and_scored_by_the_weights(ctx, corpus):
    vec = ctx.embed_query(QUERY)
    hits = hybrid_search(ctx.pool, QUERY, vec, None, top_k=30)
    assert len(hits) == 30
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 + 1e-9 for s in scores)
    assert len({h.ticker for h in hits}) > 1
    # semantic is the true cosine similarity of the chunk
    with ctx.pool.connection() as conn:
        emb = {r["id"]: np.asarray(r["embedding"].to_numpy(), dtype=np.float64) for r in conn.execute(
            "SELECT id, embedding FROM transcript_chunks WHERE id = ANY(%s)", ([h.chunk_id for h in hits],))}
    q = np.asarray(vec, dtype=np.float64)
    for h in hits:
        e = emb[h.chunk_id]
        assert h.semantic == pytest.approx(float(e @ q / (np.linalg.norm(e) * np.linalg.norm(q))), abs=1e-5)
    # score = 0.7 * sem + 0.3 * (kw - kmin) / krange: linear in (semantic, keyword), the semantic side not stretched
    assert all(h.semantic > 0 for h in hits)
    X = np.array([[h.semantic, h.keyword, 1.0] for h in hits])
    y = np.array(scores)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    assert np.abs(X @ coef - y).max() < 1e-6
    a, b, _ = coef
    assert a > 0 and b >= 0
    assert a == pytest.approx(0.7, abs=1e-6)
    kw_spread = max(h.keyword for h in hits) - min(h.keyword for h in hits)
    assert b * kw_spread <= 0.3 + 1e-6


def test_a_rare_exact_term_puts_its_chunk_in_the_top_15(ctx, corpus):
    """An analyst's query of a rare exact term beside a common word ("<term> outlook"): the chunk holding the term must
    be among hybrid search's top 15, unfiltered and under the chunk's ticker, though most of the query's meaning (and
    the 0.7 semantic weight) points at the many chunks about outlooks. The terms are picked here from the corpus's own
    statistics: words of 4+ letters held by 1 to 3 chunks, in a fixed pseudo-random order."""
    with ctx.pool.connection() as conn:
        words = [r["word"] for r in conn.execute(
            "SELECT word FROM ts_stat(%s) WHERE ndoc BETWEEN 1 AND 3 AND word ~ '^[a-z]{4,}$'"
            " AND plainto_tsquery('english', word)::text = quote_literal(word) ORDER BY md5(word) LIMIT 20",
            (f"SELECT tsv FROM transcript_chunks WHERE ticker IN ({', '.join(map(repr, REAL_TICKERS))})",))]
        holders = {w: conn.execute("SELECT id, ticker FROM transcript_chunks WHERE tsv @@ to_tsquery('english', %s)",
                                   (w,)).fetchall() for w in words}
    assert len(words) == 20
    missed = []
    for i, word in enumerate(words):
        query = f"{word} {('outlook', 'guidance', 'trends')[i % 3]}"
        vec = ctx.embed_query(query)
        ids = {r["id"] for r in holders[word]}
        for filters in (None, SearchFilters(tickers=[holders[word][0]["ticker"]])):
            if not any(h.chunk_id in ids for h in hybrid_search(ctx.pool, query, vec, filters, top_k=15)):
                missed.append((query, filters is not None))
    assert not missed


def test_hnsw_filter_pitfall_and_exact_filtered_search(ctx, corpus, record_property):
    """A WHERE filter applied after an HNSW scan (pgvector < 0.8) sees only ef_search candidates, so a
    rare ticker can come back with fewer than k rows. hybrid_search's filtered path must not."""
    with ctx.pool.connection() as conn:
        rare = conn.execute("SELECT ticker, count(*) AS n FROM transcript_chunks WHERE ticker = ANY(%s)"
                            " GROUP BY ticker ORDER BY 2, 1 LIMIT 1", (REAL_TICKERS,)).fetchone()
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()["extversion"]
    vec = ctx.embed_query(QUERY)
    ticker = rare["ticker"]
    scope = Scope(ctx, QUERY, vec, "WHERE ticker = %s", (ticker,))
    k = _tie_free_top_k(scope, range(15, 40))  # 15 unless ties at the cut-off make the ranking ambiguous
    assert rare["n"] > k
    with ctx.pool.connection() as conn, conn.transaction():
        for knob in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):  # steer the planner to the HNSW index
            conn.execute(f"SET LOCAL {knob} = off")
        sql = "SELECT id FROM transcript_chunks WHERE ticker = %s ORDER BY embedding <=> %s LIMIT %s"
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + sql, (ticker, vec, k)))
        raw = conn.execute(sql, (ticker, vec, k)).fetchall()
    # demonstration only: how many rows the raw filtered HNSW query returned depends on the data
    record_property("pgvector", version)
    record_property("raw_hnsw_rows", len(raw))
    record_property("raw_uses_hnsw", "transcript_chunks_hnsw" in plan)
    print(f"pgvector {version}: raw filtered query on {ticker} returned {len(raw)} of {k} rows "
          f"({'HNSW' if 'transcript_chunks_hnsw' in plan else 'no HNSW'} plan)")

    hits = hybrid_search(ctx.pool, QUERY, vec, SearchFilters(tickers=[ticker]), top_k=k)
    assert len(hits) == k
    assert {h.ticker for h in hits} == {ticker}
    # and they are the exact ranking over all of the ticker's rows
    _assert_same_ranking(hits, *scope.ranking(max(k * 4, 60), k))
