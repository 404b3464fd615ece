"""Which path a filtered search takes, and the statement of the iterative-scan path (pgvector >= 0.8)."""
from contextlib import contextmanager

from agent.models.corpus import Period, SearchFilters
from agent.retrieval import filtered_hnsw
from agent.retrieval.hybrid import _query, filter_clause


class _Pool:
    """Answers the version query and the bounded scope count, and records what ran."""

    def __init__(self, version: str, scope_rows: int):
        self.version, self.scope_rows, self.statements = version, scope_rows, []
        self.conninfo = f"fake-{version}-{scope_rows}"

    @contextmanager
    def connection(self):
        yield self

    def execute(self, query, params=None):
        text = query if isinstance(query, str) else query.as_string(None)
        self.statements.append(text)
        if "extversion" in text:
            return _Rows({"extversion": self.version})
        limit = int(text.rsplit("LIMIT", 1)[1].split(")")[0])
        return _Rows({"n": min(self.scope_rows, limit)})


class _Rows:
    def __init__(self, row):
        self.row = row

    def fetchone(self):
        return self.row


def _where(filters=SearchFilters(fiscal_years=[2023])):
    return filter_clause("transcript", filters)


def test_versions_parse_and_compare():
    assert filtered_hnsw.parse_version("0.8.0") == (0, 8, 0)
    assert filtered_hnsw.has_iterative_scans((0, 8, 0)) and filtered_hnsw.has_iterative_scans((1, 0))
    assert not filtered_hnsw.has_iterative_scans((0, 6, 2)) and not filtered_hnsw.has_iterative_scans((0, 7, 4))


def test_pgvector_0_6_never_leaves_the_exact_path_nor_counts_the_scope():
    pool = _Pool("0.6.2", 10**6)
    where, params = _where()
    assert not filtered_hnsw.use_index(pool, "transcript_chunks", where, params)
    assert not any("count(*)" in s for s in pool.statements)


def test_pgvector_0_8_uses_the_index_only_for_a_large_scope():
    where, params = _where()
    assert filtered_hnsw.use_index(_Pool("0.8.0", filtered_hnsw.MIN_SCOPE_ROWS + 1), "transcript_chunks", where, params)
    small = _Pool("0.8.0", 300)
    assert not filtered_hnsw.use_index(small, "transcript_chunks", where, params)
    assert f"LIMIT {filtered_hnsw.MIN_SCOPE_ROWS + 1}" in small.statements[-1]


def test_the_iterative_statement_filters_inside_the_index_scan():
    filters = SearchFilters(tickers=["ACME"], periods=[Period(fiscal_year=2023, fiscal_quarter=2)])
    where, _ = filter_clause("transcript", filters)
    text = " ".join(_query("transcript", where, False, "semantic_terms").as_string(None).split())
    assert "MATERIALIZED (SELECT id, embedding, tsv" not in text  # no exact scope
    # an inlined CTE, not a bare subquery: before PostgreSQL 16 a subquery in FROM needs an alias (the statement failed
    # on 15 with pgvector 0.8, found by bench/search.py --scopes)
    assert "scope AS NOT MATERIALIZED (SELECT * FROM \"transcript_chunks\" WHERE ticker = ANY(%(tickers)s)" in text
    assert "FROM (SELECT" not in text
    assert "sem AS (SELECT id FROM scope ORDER BY embedding <=> %(vec)s LIMIT %(n)s" in text and "%(vec)s) + 0" not in text
    assert "pg_stats" not in text  # a scope's term frequencies are counted in the scope, not the table's statistics


def test_an_iterative_scan_searches_with_a_wider_beam_than_the_tables(monkeypatch):
    import time

    from agent.retrieval import hybrid

    pool = _Pool("0.8.0", filtered_hnsw.MIN_SCOPE_ROWS + 1)
    # through monkeypatch: the module's table-size cache is left as it was after the test
    monkeypatch.setitem(hybrid._sizes, (pool.conninfo, "transcript"), (100_000.0, time.monotonic()))  # ef 150 unfiltered
    assert hybrid._ef_search(pool, "transcript", 60, None) == hybrid.EF_SEARCH
    assert hybrid._ef_search(pool, "transcript", 60, filtered_hnsw.SETTINGS) == filtered_hnsw.EF_SEARCH
    assert hybrid._ef_search(pool, "transcript", 900, filtered_hnsw.SETTINGS) == 900  # never fewer than asked for
    monkeypatch.setitem(hybrid._sizes, (pool.conninfo, "transcript"), (2_000_000.0, time.monotonic()))
    assert hybrid._ef_search(pool, "transcript", 60, filtered_hnsw.SETTINGS) == max(hybrid.EF_SEARCH_LARGE, filtered_hnsw.EF_SEARCH)


def test_a_scopes_size_is_counted_once_per_ttl_for_the_same_filter():
    pool = _Pool("0.8.0", 300)
    where, params = _where(SearchFilters(fiscal_years=[2031]))
    counts = lambda: sum("count(*)" in s for s in pool.statements)
    assert not filtered_hnsw.scope_is_large(pool, "transcript_chunks", where, params, now=1000.0)
    pool.scope_rows = filtered_hnsw.MIN_SCOPE_ROWS + 1  # documents ingested meanwhile
    assert not filtered_hnsw.scope_is_large(pool, "transcript_chunks", where, params, now=1001.0)
    assert counts() == 1
    other_where, other_params = _where(SearchFilters(fiscal_years=[2032]))
    assert filtered_hnsw.scope_is_large(pool, "transcript_chunks", other_where, other_params, now=1001.0)
    assert counts() == 2
    assert filtered_hnsw.scope_is_large(pool, "transcript_chunks", where, params, now=1000.0 + filtered_hnsw.SCOPE_TTL_S)
    assert counts() == 3
