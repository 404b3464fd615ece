"""bench/search.py --scopes, its pure parts: the scopes it asks for, the forced-index switch and its report."""
import pytest

from agent.retrieval import filtered_hnsw
from bench import search
from bench.search import QUARTERS


def _scope(name, default_path, index=True):
    row = {"scope": name, "rows": 50_000, "default_path": default_path}
    for label, p50 in (("default", 20.0), ("exact", 200.0)) + ((("index", 18.0),) if index else ()):
        row |= {f"{label}_p50_ms": p50, f"{label}_p95_ms": p50 * 1.2, f"{label}_recall_at_15": 0.99,
                f"{label}_short_results": 0, f"{label}_hits_outside_filter": 0}
    return row


def _result(index=True):
    return {"chunks": 100_005, "chunks_requested": 100_000, "queries": 40, "server_version": "15.18", "pgvector": "0.8.0", "shared_buffers": "5GB",
            "min_scope_rows": filtered_hnsw.MIN_SCOPE_ROWS, "iterative_settings": filtered_hnsw.SETTINGS,
            "cpu_count": 2, "platform": "Linux", "load_avg_1m_start": 0.1, "load_avg_1m_end": 0.2,
            "scopes": [_scope("fiscal year, every company", "HNSW, iterative", index)]}


def test_the_scopes_span_every_company_of_a_period():
    scopes = search.scopes()
    assert len(scopes) == 2
    for _, filters in scopes:
        assert not filters.tickers and filters.periods  # every company: the scopes that grow with the corpus
    year = {p.fiscal_year for p in scopes[0][1].periods}
    assert len(year) == 1 and len(scopes[0][1].periods) == sum(1 for y, _ in QUARTERS if y in year)


def test_forcing_the_index_path_puts_the_rule_back_even_on_error():
    rule = filtered_hnsw.scope_is_large
    with pytest.raises(RuntimeError), search.every_scope_large(True):
        assert filtered_hnsw.scope_is_large(None, "t", None, {}) is True  # type: ignore[arg-type]
        raise RuntimeError
    assert filtered_hnsw.scope_is_large is rule
    with search.every_scope_large(False):
        assert filtered_hnsw.scope_is_large is rule


def test_the_report_has_a_row_per_measured_path():
    rows = search.scope_rows(_result())
    assert [r[3] for r in rows] == ["default", "exact=True", "iterative HNSW, forced"]
    assert [r[3] for r in search.scope_rows(_result(index=False))] == ["default", "exact=True"]  # pgvector 0.6
    text = search.scope_markdown(_result(), ".venv/bin/python bench/search.py --scopes --database-url URL")
    assert "--database-url URL" in text and "pgvector 0.8.0" in text and "at 100,000 chunks" in text
    assert f"more than {filtered_hnsw.MIN_SCOPE_ROWS} rows" in text
