"""bench/search_warmup.py's pure parts: CPU time by kind from /proc/stat, one pass's row, the table."""
import pytest

from bench import search_warmup

STAT = "cpu  {user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_cpu_time_by_kind_from_proc_stat():
    ticks = search_warmup.cpu_ticks(STAT.format(user=100, system=50, idle=800, iowait=30, steal=20))
    assert ticks == {"busy": 150, "idle": 800, "iowait": 30, "steal": 20}


def test_shares_are_of_the_time_between_two_readings():
    before = search_warmup.cpu_ticks(STAT.format(user=100, system=50, idle=800, iowait=30, steal=20))
    after = search_warmup.cpu_ticks(STAT.format(user=160, system=70, idle=900, iowait=30, steal=40))
    # 80 busy, 100 idle, 0 iowait, 20 steal
    assert search_warmup.cpu_shares(before, after) == {"busy_share": 0.4, "iowait_share": 0.0, "steal_share": 0.1}


def test_a_pass_reports_the_blocks_it_caused_not_the_totals():
    before = {"heap_read": 10, "heap_hit": 100, "hnsw_read": 5, "hnsw_hit": 50, "gin_read": 0, "gin_hit": 7,
              "autovacuum_workers": 1}
    after = {"heap_read": 10, "heap_hit": 160, "hnsw_read": 9, "hnsw_hit": 250, "gin_read": 0, "gin_hit": 9,
             "autovacuum_workers": 0}
    row = search_warmup.pass_row(3, 12.34, [10.0, 20.0, 30.0], before, after, {"busy_share": 0.5})
    assert row["heap_read"] == 0 and row["heap_hit"] == 60 and row["hnsw_read"] == 4 and row["hnsw_hit"] == 200
    assert row["autovacuum_workers"] == 0, "the workers seen after the pass, not a difference"
    assert row["p50_ms"] == 20.0 and row["since_start_s"] == 12.3 and row["busy_share"] == 0.5
    table = search_warmup.markdown([row | {"iowait_share": 0.0, "steal_share": 0.0}], 1000)
    assert table.startswith("1000 chunks") and "| 3 | 12.3 | 20.0 |" in table


def test_a_data_dir_not_kept_by_the_search_bench_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        search_warmup.main(["--data-dir", str(tmp_path)])
    assert "was not kept by bench/search.py" in capsys.readouterr().err
