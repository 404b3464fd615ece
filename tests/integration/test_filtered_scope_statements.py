"""The iterative-scan path of a filtered search (pgvector >= 0.8) as real statements, and the scope bench's guard.

Only a scope of more than 20k rows takes that path, which no other test's corpus reaches, so each statement the path
sends is planned here by the real server (EXPLAIN), with the parameters a search binds."""
from __future__ import annotations

import numpy as np
import pytest

from agent.ingest.runner import ingest
from agent.models.corpus import Period, SearchFilters
from agent.retrieval.hybrid import _query, filter_clause, search_params

pytestmark = pytest.mark.integration

PARTS = ("semantic", "semantic_terms", "keyword", "ranked_keyword")


@pytest.mark.parametrize("corpus", ["transcript", "10k"])
def test_every_statement_of_the_iterative_path_is_valid_sql(ctx, corpus):
    filters = SearchFilters(tickers=["AAPL", "MSFT"], periods=[Period(fiscal_year=2024, fiscal_quarter=q) for q in (1, 2)])
    where, params = filter_clause(corpus, filters)
    params |= search_params("revenue growth guidance", np.full(ctx.settings.embedding_dim, 0.05, dtype=np.float32), 60)
    with ctx.pool.connection() as conn:
        for part in PARTS:
            statement = _query(corpus, where, False, part)
            plan = conn.execute(b"EXPLAIN " + statement.as_bytes(conn), params).fetchall()
            assert plan, part
            text = " ".join(r["QUERY PLAN"] for r in plan)
            # the scope is inlined where it is read, so the semantic side's ORDER BY ... LIMIT can reach the index
            assert "CTE Scan on scope" not in text, (part, text)


def test_the_scope_bench_refuses_a_database_holding_real_transcripts(ctx, shared_data):
    from bench.search import existing_chunks

    ingest(ctx, "transcript", sorted((shared_data / "transcripts").glob("*.json"))[:1], fanout=None, quiet=True)
    with pytest.raises(SystemExit, match="not this bench's"):
        existing_chunks(ctx)
