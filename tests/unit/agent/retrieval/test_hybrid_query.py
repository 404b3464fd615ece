"""The tsquery texts and the SQL of hybrid_search (no database)."""
from __future__ import annotations

from agent.models.corpus import Period, SearchFilters
from agent.retrieval.hybrid import _query, and_tsquery_text, filter_clause, or_tsquery_text


def test_or_and_and_tsquery_texts_share_the_words():
    assert or_tsquery_text("Capex guidance, capex!") == "capex | guidance"
    assert and_tsquery_text("Capex guidance, capex!") == "capex & guidance"
    assert and_tsquery_text("data center revenue growth") == "data & center & revenue & growth"
    assert and_tsquery_text("Q4-2023 S&P.") == "q4-2023 & s&p"


def test_empty_query_is_an_empty_tsquery():
    assert or_tsquery_text("a ? !") == "''"
    assert and_tsquery_text("") == "''"


def _sql(corpus, filters, exact):
    where, _ = filter_clause(corpus, filters)
    return " ".join(_query(corpus, where, exact).as_string(None).split())


def _keyword_part(text: str) -> str:
    return text[text.index("terms AS"):text.index(" SELECT c.")]


def test_indexed_and_exact_paths_share_the_keyword_definition():
    indexed, exact = _sql("transcript", SearchFilters(), False), _sql("transcript", SearchFilters(), True)
    table_reads = _keyword_part(indexed).replace('FROM "transcript_chunks" WHERE', "FROM scope WHERE")
    assert table_reads.replace('JOIN "transcript_chunks" s USING', "JOIN scope s USING") == _keyword_part(exact)
    assert "ORDER BY embedding <=> %(vec)s LIMIT" in indexed  # the HNSW index
    assert "(embedding <=> %(vec)s) + 0, id" in exact  # brute force, ties by id
    for text in (indexed, exact):
        assert "ts_rank(s.tsv, w.q)), 0) FROM words w WHERE s.tsv @@ w.q) AS rank" in text  # the idf score
        assert "ORDER BY rank DESC, s.id LIMIT %(n)s" in text  # keyword ties by id
        assert "count(*) BETWEEN 1 AND %(cap)s" in text  # every word's rows, when selective
        assert "WHERE (SELECT probe FROM gin) AND words.rare AND NOT (SELECT yes FROM use_and)" in text  # else the rare terms' rows
        assert "%(bm25_watermark)s::int8 IS NULL OR EXISTS" in text  # GIN probes only for rows BM25 does not hold
        assert "LIMIT %(cap1)s" in text.split("m_and AS")[0]  # a term's frequency is probed only to the cap
        assert "UNION SELECT unnest(%(bm25_ids)s::int8[])" in text  # BM25's candidates join the keyword side
        assert "pg_stats" in text  # a whole table's common terms: from the planner's statistics


def test_filtered_search_reads_a_materialized_scope():
    f = SearchFilters(tickers=["aapl"], periods=[Period(fiscal_year=2024, fiscal_quarter=1)])
    text = _sql("transcript", f, True)
    assert "scope AS MATERIALIZED (SELECT id, embedding, tsv FROM \"transcript_chunks\" WHERE ticker = ANY" in text
    assert "FROM scope WHERE (SELECT probe FROM gin) AND tsv @@ to_tsquery('english', %(andq)s)" in text
    assert "pg_stats" not in text and "SELECT count(*)::float8 AS n FROM scope" in text  # the scope's own frequencies
    assert '"tenk_chunks"' in _sql("10k", SearchFilters(items=["7"]), True)
