"""One iteration's searches of one quarter find the same passages whichever finishes first; a later iteration's
search never retrieves a passage again."""
from __future__ import annotations

import pytest

from agent.models.corpus import Period, SearchFilters
from agent.models.job import JobRequest, JobState
from agent.models.research import SearchSpec
from agent.persistence import jobstore
from agent.retrieval.availability import available_periods
from agent.retrieval.hybrid import hybrid_search
from agent.work.search import run_search_spec

pytestmark = pytest.mark.integration

QUERIES = ("revenue growth quarterly results", "year over year growth sequential change")


def test_sibling_searches_do_not_depend_on_their_order_and_a_later_iteration_finds_only_new_passages(ctx, sample_corpus):
    ticker, period = _a_quarter(ctx)
    with ctx.pool.connection() as conn:
        chunks = conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker = %s AND fiscal_year = %s"
                              " AND fiscal_quarter = %s", (ticker, period.fiscal_year, period.fiscal_quarter)).fetchone()["n"]
    top_k = chunks // 2 + 1  # two searches of top_k passages each must share one
    tops = [{h.citation_key for h in _search(ctx, q, ticker, period, top_k)} for q in QUERIES]
    assert tops[0] & tops[1]

    def evidence_after(queries) -> tuple[str, dict[str, float]]:
        job_id, _ = jobstore.create_job(ctx.pool, JobState(request=JobRequest(question="order test", batch=True)))
        for q in queries:
            run_search_spec(ctx, job_id, 1, SearchSpec(ticker=ticker, period=period.key, query=q), top_k)
        return job_id, {e.citation_key: e.score for e in jobstore.load_evidence(ctx.pool, job_id)}

    job_id, forward = evidence_after(QUERIES)
    _, backward = evidence_after(reversed(QUERIES))
    assert set(forward) == tops[0] | tops[1]
    assert forward == backward

    added = run_search_spec(ctx, job_id, 2, SearchSpec(ticker=ticker, period=period.key, query=QUERIES[0]), top_k)
    later = {e.citation_key for e in jobstore.load_evidence(ctx.pool, job_id) if e.iteration == 2}
    assert added == len(later) > 0
    assert not later & set(forward)


def _a_quarter(ctx) -> tuple[str, Period]:
    with ctx.pool.connection() as conn:
        ticker = conn.execute("SELECT min(ticker) AS t FROM documents WHERE kind = 'transcript'").fetchone()["t"]
    return ticker, available_periods(ctx.pool, ticker, "transcript")[-1]


def _search(ctx, query: str, ticker: str, period: Period, top_k: int):
    s = ctx.settings
    return hybrid_search(ctx.pool, query, ctx.embed_query(query), SearchFilters(tickers=[ticker], periods=[period]),
                         "transcript", top_k, s.semantic_weight, s.keyword_weight)
