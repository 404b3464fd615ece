"""bench/search_ab.py: the other revision's modules loaded beside ours, the ABBA order, the summary."""
import os
import subprocess
import sys

import pytest

from agent.retrieval import hybrid, keyword_index
from bench import search_ab


def test_the_base_revision_searches_with_its_own_modules():
    search = search_ab.base_search("HEAD")
    base_hybrid = sys.modules["finagent_base_hybrid"]
    assert search is base_hybrid.hybrid_search and search is not hybrid.hybrid_search
    assert base_hybrid.keyword_index is sys.modules["finagent_base_keyword_index"]
    assert base_hybrid.keyword_index is not keyword_index, "the base must read BM25 through its own keyword_index"
    assert base_hybrid.__file__ == "HEAD:agent/retrieval/hybrid.py"


def test_sides_alternate_abba():
    assert search_ab.order(3) == ["base", "head", "head", "base", "base", "head"]


def test_summary_pools_passes_per_side_and_counts_identical_lists():
    passes = [{"side": s, "kind": k, "times": t, "server_cpu_s": c} for s, k, t, c in (
        ("base", "unfiltered", [10.0, 20.0], 0.04), ("head", "unfiltered", [8.0, 9.0], 0.02),
        ("base", "filtered", [5.0, 5.0], 0.01), ("head", "filtered", [4.0, 6.0], 0.01),
        ("base", "unfiltered", [30.0, 40.0], 0.04), ("head", "unfiltered", [10.0, 11.0], 0.02))]
    ids = {"base": {"unfiltered": [[1, 2], [3]], "filtered": [[4]]}, "head": {"unfiltered": [[1, 2], [4]], "filtered": [[4]]}}
    out = search_ab.summary(passes, ids)
    assert out["base_unfiltered"]["passes_p50_ms"] == [15.0, 35.0] and out["base_unfiltered"]["p50_ms"] == 25.0
    assert out["base_unfiltered"]["server_cpu_ms_per_search"] == 20.0, "80 ms of server CPU over 4 searches"
    assert out["head_unfiltered"]["server_cpu_ms_per_search"] == 10.0
    assert out["identical_unfiltered"] == "1/2" and out["identical_filtered"] == "1/1"
    table = search_ab.markdown({"chunks": 10, "base": "abc", "rounds": 2, "summary": out})
    assert "| unfiltered | base | 25.0 |" in table and "unfiltered 1/2" in table


def test_a_data_dir_not_kept_by_the_search_bench_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        search_ab.main(["--data-dir", str(tmp_path), "--base", "HEAD"])
    assert "was not kept by bench/search.py" in capsys.readouterr().err


def test_the_server_cpu_is_read_from_the_kept_stacks_postgres_only(tmp_path):
    """The postmaster named by the data dir's pid file and its children, not any other process called postgres."""
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "postmaster.pid").write_text(f"{os.getpid()}\n{tmp_path}\n")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pids = search_ab.postgres_pids(tmp_path)
        assert os.getpid() in pids and child.pid in pids
        assert os.getppid() not in pids, "a process outside the tree"
    finally:
        child.kill()
        child.wait()
    assert search_ab.postgres_pids(tmp_path / "not-kept") == [], "no pid file: no stack running"
