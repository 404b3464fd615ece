"""The `finagent` console command, run as a subprocess against the session's embedded servers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from agent.db.migrate import available
from agent.ingest.runner import ingest

pytestmark = pytest.mark.integration

FINAGENT = Path(sys.executable).with_name("finagent")


def _env(ctx, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        FINAGENT_DATA_DIR=str(ctx.settings.data_dir),
        FINAGENT_DATABASE_URL=ctx.database_url,
        FINAGENT_REDIS_URL=ctx.redis_url,
        FINAGENT_EMBEDDING_PROVIDER="hash",
        FINAGENT_LLM_PROVIDER="extractive",
    )
    env.update(extra)
    return env


def finagent(ctx, *args: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    cmd = [str(FINAGENT)] if FINAGENT.exists() else [sys.executable, "-m", "ops.cli.main"]
    return subprocess.run([*cmd, *args], env=_env(ctx, **extra_env), cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def snv_ingested(ctx, shared_data):
    """SNV's 7 calls, whatever ran before (already ingested files are simply 'unchanged')."""
    files = sorted((shared_data / "transcripts").glob("SNV_*.json"))
    report = ingest(ctx, "transcript", files, fanout=None, quiet=True)
    assert not report.errors
    return report


def test_config_show_json_masks_the_api_key(ctx, tmp_path):
    secret = "sk-test-" + uuid.uuid4().hex
    r = finagent(ctx, "config", "show", "--json", cwd=tmp_path, FINAGENT_LLM_API_KEY=secret,
                 FINAGENT_TOP_K_PER_QUARTER="9")
    assert r.returncode == 0, r.stderr
    assert secret not in r.stdout and secret not in r.stderr
    data = json.loads(r.stdout)
    assert data["llm_api_key"] == "********"
    assert data["top_k_per_quarter"] == 9  # the environment reached the command
    assert data["database_url"].endswith("@" + ctx.database_url.split("@", 1)[1])  # same server, credentials masked
    assert data["modes"]["standard"] == {"max_iterations": 3, "max_tokens": 6000, "confidence_threshold": 0.8}


def test_db_upgrade_twice_on_a_fresh_database(ctx, tmp_path):
    name = f"cli_fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ctx.database_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(ctx.database_url, dbname=name)
    try:
        first = finagent(ctx, "db", "upgrade", cwd=tmp_path, FINAGENT_DATABASE_URL=url)
        assert first.returncode == 0, first.stderr
        assert "0001_corpus" in first.stdout and "0002_jobs" in first.stdout
        assert "up to date" not in first.stdout
        second = finagent(ctx, "db", "upgrade", cwd=tmp_path, FINAGENT_DATABASE_URL=url)
        assert second.returncode == 0, second.stderr
        assert "up to date" in second.stdout
        with psycopg.connect(url) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
            assert conn.execute("SELECT to_regclass('transcript_chunks')").fetchone()[0] is not None
        assert versions == [v for v, _ in available()] and versions[:2] == ["0001_corpus", "0002_jobs"]
        assert all(v in first.stdout for v in versions)
    finally:
        with psycopg.connect(ctx.database_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_search_json_last3(ctx, snv_ingested, tmp_path):
    r = finagent(ctx, "search", "net interest margin", "--ticker", "snv", "--quarters", "last3", "--json",
                 "--top-k", "10", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["periods"] == {"SNV": ["2021_q2", "2021_q3", "2021_q4"]}
    assert data["problems"] == []
    assert len(data["hits"]) == 10
    assert {h["ticker"] for h in data["hits"]} == {"SNV"}
    assert {(h["fiscal_year"], h["fiscal_quarter"]) for h in data["hits"]} <= {(2021, 2), (2021, 3), (2021, 4)}
    assert any("interest" in h["text"].lower() for h in data["hits"])
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_search_unknown_ticker_and_missing_period_say_so(ctx, snv_ingested, tmp_path):
    r = finagent(ctx, "search", "net interest margin", "--ticker", "ZZZQ", cwd=tmp_path)
    assert r.returncode == 1 and "no transcripts are ingested for ZZZQ" in r.stderr and "SNV" in r.stderr
    r = finagent(ctx, "search", "net interest margin", "--ticker", "SNV", "--ticker", "ZZZQ", "--json", cwd=tmp_path)
    data = json.loads(r.stdout)
    assert r.returncode == 0 and {h["ticker"] for h in data["hits"]} == {"SNV"}  # the known ticker still answers
    assert any("ZZZQ" in p for p in data["problems"])
    r = finagent(ctx, "search", "net interest margin", "--ticker", "SNV", "--quarters", "FY2030", cwd=tmp_path)
    assert r.returncode == 1 and "FY2030 is not available for SNV" in r.stderr


def test_ingest_broken_file_exits_2_and_names_it(ctx, tmp_path):
    broken = tmp_path / "SNV_2022_q1.json"
    broken.write_text('{"prepared_remarks": [{"speaker": "Operator", "speech": "Hel')
    r = finagent(ctx, "ingest", "transcripts", str(broken), "--inline", "--json", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    data = json.loads(r.stdout)
    assert data["errors"] == 1
    [f] = data["files"]
    assert f["path"] == str(broken) and f["status"] == "error"
    assert "malformed JSON" in f["reason"]
    with psycopg.connect(ctx.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM documents WHERE source_path = %s", (str(broken),)).fetchone()[0] == 0


def test_batch_runs_good_lines_reports_bad_ones_and_reuses_jobs_on_rerun(ctx, sample_corpus, tmp_path):
    from ops.local.worker_pool import stop_workers

    f = tmp_path / "overnight.txt"
    out, report = tmp_path / "results.jsonl", tmp_path / "morning.html"
    f.write_text("What was NVDA's revenue last quarter?\n"
                 '{"question": "What was AAPL\'s revenue last quarter?", "mode": "turbo"}\n'
                 '{"question": "What was MSFT\'s revenue last quarter?"}\n')
    try:
        first = finagent(ctx, "batch", "run", str(f), "--mode", "direct", "--out", str(out), "--report", str(report), cwd=tmp_path)
        assert first.returncode == 1, first.stderr  # a bad line makes the exit status say so...
        assert f"{f}:2:" in first.stderr and "mode" in first.stderr
        assert "2 questions, 0 already answered, 1 invalid lines skipped" in " ".join(first.stdout.split())  # ...but the good lines ran
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["line"] for r in records] == [1, 2, 3]
        assert records[1]["status"] == "invalid" and "mode" in records[1]["error"]
        assert records[0]["status"] == records[2]["status"] == "completed"
        assert "35.1" in records[0]["result"]["answer"] and records[0]["result"]["citations"]
        assert records[2]["result"]["citations"][0]["ticker"] == "MSFT"
        assert report.is_file() and report.with_suffix(".md").is_file() and "What was MSFT" in report.read_text()
        again = finagent(ctx, "batch", "run", str(f), "--mode", "direct", "--out", str(out), cwd=tmp_path)
        assert "2 already answered" in " ".join(again.stdout.split())
        rerun = [json.loads(line) for line in out.read_text().splitlines()]
        assert again.returncode == 1 and [r.get("job_id") for r in rerun] == [r.get("job_id") for r in records]
        status = finagent(ctx, "batch", "status", str(f.resolve()), "--json", cwd=tmp_path)
        [progress] = json.loads(status.stdout)
        assert progress["counts"] == {"completed": 2, "invalid": 1} and progress["done"] == progress["total"] == 3
        missing = finagent(ctx, "batch", "run", str(tmp_path / "nope.txt"), cwd=tmp_path)
        assert missing.returncode == 2 and missing.stderr.strip().endswith("no such file")
    finally:
        stop_workers(ctx.settings)


def test_embedded_postgres_runs_with_the_tuned_settings(ctx):
    """The session's server was started by ops.local.stack: shared_buffers needs a restart, which must have happened."""
    from ops.local.stack import embedded_pg_settings

    with psycopg.connect(ctx.database_url) as conn:
        got = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in embedded_pg_settings(ctx.settings)}
        pending = conn.execute("SELECT count(*) FROM pg_file_settings WHERE error IS NOT NULL").fetchone()[0]
    assert got == embedded_pg_settings(ctx.settings)
    assert pending == 0


def test_services_status_says_whether_postgres_is_on_huge_pages(ctx, tmp_path):
    """The embedded server's buffer cache on 2 MB pages or not, read from its own process, and how many it needs."""
    from ops.local import pg_memory

    r = finagent(ctx, "services", "status", "--json", cwd=tmp_path, FINAGENT_DATABASE_URL="", FINAGENT_REDIS_URL="")
    assert r.returncode == 0, r.stderr
    huge = json.loads(r.stdout)["postgres_huge_pages"]
    with psycopg.connect(ctx.database_url) as conn:
        needed = int(conn.execute("SHOW shared_memory_size_in_huge_pages").fetchone()[0])
        buffers_mb = conn.execute("SELECT setting::int8 * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'").fetchone()[0]
    assert huge["setting"] == "try" and huge["needed"] == needed and needed * 2 > buffers_mb
    assert huge["reserved"] == pg_memory.proc_kb(Path("/proc/meminfo").read_text(), "HugePages_Total")
    assert isinstance(huge["in_use"], bool)
    if huge["reserved"] < needed:  # a host without enough reserved: the server cannot be on them, and is told how
        assert huge["in_use"] is False and f"vm.nr_hugepages={needed}" in huge["advice"]


@pytest.mark.skipif(Path("/proc/sys/vm/overcommit_memory").read_text().strip() != "0",
                    reason="only the kernel's heuristic overcommit refuses a mapping larger than the machine")
@pytest.mark.parametrize("command", [("services", "start", "--no-workers"), ("search", "net interest margin")])
def test_a_server_that_cannot_restart_with_its_settings_says_why(ctx, tmp_path, command):
    """A buffer cache larger than the machine: the restart that applies it fails, and any command that started the
    server says why and where the log is, in one line, instead of pg_ctl's exit status and a traceback."""
    r = finagent(ctx, *command, cwd=tmp_path, FINAGENT_DATABASE_URL="", FINAGENT_REDIS_URL="",
                 FINAGENT_DATA_DIR=str(tmp_path / "data"), FINAGENT_EMBEDDED_PG_SHARED_BUFFERS="1000GB")
    assert r.returncode == 2
    assert "the embedded Postgres did not restart with {'shared_buffers': '1000GB'" in r.stderr
    assert "FATAL:  could not map anonymous shared memory" in r.stderr and str(tmp_path / "data" / "pg" / "log") in r.stderr
    assert "Traceback" not in r.stderr
