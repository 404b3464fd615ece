"""Fan-out ingestion when the embedding provider fails on the workers: each affected file is reported with the
reason, nothing partial is written, and a later run with a healthy provider ingests them."""
from __future__ import annotations

import shutil

import pytest

from ops.ingest_runner import ingest

pytestmark = pytest.mark.integration


def test_embedding_failure_on_workers_fails_files_cleanly(ctx, workers_with, shared_data, tmp_path):
    src = sorted((shared_data / "transcripts").glob("SNV_*.json"))[:2]
    for f in src:  # private copies under new tickers, so no other test has them
        shutil.copy(f, tmp_path / f.name.replace("SNV_", "ZZF_"))
    workers_with(FINAGENT_EMBEDDING_PROVIDER="openai", FINAGENT_LLM_BASE_URL="http://127.0.0.1:9/v1",
                   FINAGENT_OPENAI_API_KEY="sk-test", FINAGENT_LLM_TIMEOUT_S="2")
    report = ingest(ctx, "transcript", [tmp_path], fanout=True, quiet=True)
    assert len(report.errors) == 2 and all("embedding failed" in f.reason for f in report.errors)
    with ctx.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker='ZZF'").fetchone()["n"] == 0
        assert conn.execute("SELECT count(*) AS n FROM documents WHERE ticker='ZZF'").fetchone()["n"] == 0

    workers_with()  # the provider is back
    report = ingest(ctx, "transcript", [tmp_path], fanout=True, quiet=True)
    assert not report.errors and {f.status for f in report.files} == {"added"}
    with ctx.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker='ZZF'").fetchone()["n"]
    assert n == sum(f.chunks for f in report.files) > 64  # more than one embedding batch
