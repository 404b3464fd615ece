"""bench/ingest.py --scale: which FinanceBench documents a limited run takes, and the docs section's target line."""
from __future__ import annotations

import gzip

import pytest

from bench import ingest as bench


def _folder(tmp_path, n: int):
    (tmp_path / "pages").mkdir()
    for i in range(n):
        with gzip.open(tmp_path / "pages" / f"DOC{i:02d}_2020_10K.jsonl.gz", "wt") as fh:
            fh.write('{"page": 0, "text": "x"}\n')
    return tmp_path


def test_a_pages_limit_spreads_over_the_documents(tmp_path):
    folder = _folder(tmp_path, 10)
    assert bench.pages_docs(folder, None) == [f"DOC{i:02d}_2020_10K" for i in range(10)]
    assert bench.pages_docs(folder, 3) == ["DOC00_2020_10K", "DOC03_2020_10K", "DOC06_2020_10K"]
    assert len(bench.pages_docs(folder, 99)) == 10


def test_no_pages_files_is_a_clear_exit(tmp_path):
    (tmp_path / "pages").mkdir()
    with pytest.raises(SystemExit, match="no FinanceBench pages files"):
        bench.pages_docs(tmp_path, None)


def _result(docs: int) -> dict:
    passes = [{"corpus": c, "embedder": "hash", "run": r, "files": 2, "chunks": 10 if r == "first" else 0,
               "seconds": s, "peak_rss_mb": 90, "command_s": s + 1}
              for c in bench.CORPORA for r, s in (("first", 5.0), ("again", 0.02), ("again_parse_all", 1.5))]
    result = {"passes": passes, "transcript_files": 2, "financebench_docs": docs, "financebench_docs_available": 74,
              "financebench_pages": 100, "embedders": ["hash"], "cpu_count": 2, "platform": "Linux", "seconds": 20.0,
              "reingest_s": 0.04, "reingest_transcripts_s": 0.02, "reingest_financebench_s": 0.02,
              "reingest_command_s": 2.04, "reingest_parse_all_s": 3.0}
    result["targets"] = bench.common.check_targets(result, bench.SCALE_TARGETS)
    return result


def test_the_section_states_the_command_the_run_and_the_reingest_line():
    text = bench.scale_markdown(_result(74), ".venv/bin/python bench/ingest.py --scale")
    assert text.startswith("## Ingestion at scale")
    assert "all 74 FinanceBench documents with pages" in text
    assert "re-ingest of unchanged corpus: 0.04 s (transcripts 0.02 s, FinanceBench 0.02 s" in text
    assert "parsing every file first, as before: 3.0 s" in text
    assert "**PASS** `reingest_s` = 0.04" in text
    assert ".venv/bin/python bench/ingest.py --scale\n" in text
    limited = bench.scale_markdown(_result(5), "cmd")
    assert "5 of the 74 FinanceBench documents with pages (`--pages`)" in limited
