"""bench/search_ef.py's pure parts: the rows over the passes and their table."""
import pytest

from bench import search_ef


def test_rows_take_every_pass_and_recall_from_the_exact_queries_only():
    times = {400: [10.0, 12.0, 30.0, 11.0], 200: [8.0, 9.0, 8.5, 9.5]}
    exact = [[1, 2, 3]]
    ids = {400: [[1, 2, 3], [9, 9, 9]], 200: [[1, 2, 7], [1, 2, 3]]}  # the second query has no exact reference
    rows = search_ef.summary(times, ids, exact)
    assert [r["ef_search"] for r in rows] == [400, 200]
    assert rows[0]["p50_ms"] == 11.5 and rows[0]["p95_ms"] > 12.0
    assert rows[0]["recall_at_15"] == 1.0 and rows[1]["recall_at_15"] == pytest.approx(0.6667, abs=1e-4)
    table = search_ef.markdown(rows, 1000)
    assert "| 200 | 8.75 |" in table and table.startswith("1000 chunks")


def test_a_data_dir_not_kept_by_the_search_bench_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        search_ef.main(["--data-dir", str(tmp_path)])
    assert "was not kept by bench/search.py" in capsys.readouterr().err
