"""Overnight batches as an analyst runs them: Ctrl-C halfway and re-run (nothing runs twice), edit one line
(only it runs again), retry the failed jobs, and at most `batch_concurrency` batch jobs at a time."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from agent import batches
from agent.persistence import jobstore
from tasks.dispatch import CeleryDispatcher
from tests.integration.test_services_cli import FINAGENT, _env

pytestmark = pytest.mark.integration

QUESTIONS = [f"What did {t} say about {topic} last quarter?" for t in ("NVDA", "AAPL", "MSFT")
             for topic in ("revenue", "gross margin", "operating expenses")][:8]


def _jobs_of(ctx, batch_id: str) -> dict[str, str]:
    """Every job ever created for the batch (retired keys included): id -> status."""
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT id, status FROM research_jobs WHERE idempotency_key LIKE %s", (f"batch:{batch_id}:%",)).fetchall()
    return {str(r["id"]): r["status"] for r in rows}


def _cli(*args: str) -> list[str]:
    return [*([str(FINAGENT)] if FINAGENT.exists() else [sys.executable, "-m", "ops.cli.main"]), *args]


def test_interrupted_then_rerun_and_edited_batches_never_run_a_question_twice(ctx, sample_corpus, workers, tmp_path):
    from ops.local.worker_pool import stop_workers

    workers.stop()  # workers an earlier test left running would answer the batch at full speed beside the command's own

    f, out = tmp_path / "night.txt", tmp_path / "night.jsonl"
    f.write_text("\n".join(QUESTIONS) + "\n")
    run = _cli("batch", "run", str(f), "--mode", "direct", "--out", str(out))
    # 0.5 s per LLM call and two jobs at a time, so the questions finish in waves and the Ctrl-C lands between them
    # (eight at once finish within one poll of each other)
    env = _env(ctx, FINAGENT_LLM_LATENCY_S="0.5", FINAGENT_BATCH_CONCURRENCY="2")
    try:
        # Ctrl-C as a terminal delivers it: a test run started in the background of a non-interactive shell (as CI
        # runs) ignores SIGINT, and a child inherits that, so the command would never see the signal
        proc = subprocess.Popen(run, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline, batch_id = time.time() + 120, None
        while time.time() < deadline:  # Ctrl-C once some, not all, of the questions are answered
            batch_id = batch_id or batches.find(ctx, str(f.resolve()))
            progress = batches.batch_progress(ctx.pool, batch_id) if batch_id else None
            if progress and 1 <= progress.counts.get("completed", 0) < len(QUESTIONS):
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert batch_id is not None
        seen = f"exit {proc.returncode}, jobs {_jobs_of(ctx, batch_id)}\nstdout: {stdout}\nstderr: {stderr}"
        assert proc.returncode == 130 and "run the same command again" in " ".join(stderr.split()), seen
        before = _jobs_of(ctx, batch_id)
        assert len(before) == len(QUESTIONS)

        again = subprocess.run(run, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        after = _jobs_of(ctx, batch_id)
        assert after.keys() == before.keys() and set(after.values()) == {"completed"}  # nothing ran twice
        first = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["line"] for r in first] == list(range(1, len(QUESTIONS) + 1))

        lines = QUESTIONS.copy()
        lines[3] = lines[3].replace("last quarter", "in the most recent quarter")
        f.write_text("\n".join(lines) + "\n")
        edited = subprocess.run(run, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert edited.returncode == 0, edited.stderr
        new_jobs = _jobs_of(ctx, batch_id).keys() - after.keys()
        assert len(new_jobs) == 1
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["job_id"] for r in records if r["line"] != 4] == [r["job_id"] for r in first if r["line"] != 4]
        assert records[3]["job_id"] in new_jobs and records[3]["status"] == "completed"
    finally:
        stop_workers(ctx.settings)


def test_retry_failed_gives_only_the_failed_lines_a_new_job(ctx, sample_corpus, workers_with, script_path):
    script_path.write_text(json.dumps({"fail": {"plan": "ConnectionError: provider down"}}))
    workers_with(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), FINAGENT_MAX_TOOL_RETRIES="0")
    lines = batches.parse_lines(QUESTIONS[:2], mode="direct")
    batch_id = batches.create_batch(ctx, CeleryDispatcher(), "retry-failed-test", lines)
    _wait_done(ctx, batch_id)
    failed = batches.batch_items(ctx.pool, batch_id)
    assert [i.status for i in failed] == ["failed", "failed"] and "provider down" in (failed[0].error or "")

    script_path.write_text("{}")  # the provider is back
    assert batches.create_batch(ctx, CeleryDispatcher(), "retry-failed-test", lines) == batch_id
    same = batches.batch_items(ctx.pool, batch_id)
    assert [i.job_id for i in same] == [i.job_id for i in failed]  # a plain re-run keeps the failed jobs

    batches.create_batch(ctx, CeleryDispatcher(), "retry-failed-test", lines, retry_failed=True)
    _wait_done(ctx, batch_id)
    retried = batches.batch_items(ctx.pool, batch_id)
    assert [i.status for i in retried] == ["completed", "completed"] and [i.attempts for i in retried] == [2, 2]
    assert not {i.job_id for i in retried} & {i.job_id for i in failed}
    assert all(jobstore.load_job(ctx.pool, i.job_id).status == "failed" for i in failed if i.job_id)  # kept, for the record


def test_at_most_batch_concurrency_batch_jobs_run_at_once(ctx, sample_corpus, workers_with, monkeypatch):
    workers_with(FINAGENT_BATCH_CONCURRENCY="2", FINAGENT_LLM_LATENCY_S="0.3")
    monkeypatch.setattr(ctx.settings, "batch_concurrency", 2)
    lines = batches.parse_lines([q.replace("last quarter", "recently") for q in QUESTIONS[:6]], mode="direct")
    batch_id = batches.create_batch(ctx, CeleryDispatcher(), "concurrency-test", lines)
    job_ids = [i.job_id for i in batches.batch_items(ctx.pool, batch_id)]
    most, deadline = 0, time.time() + 180
    while time.time() < deadline:
        with ctx.pool.connection() as conn:
            held = conn.execute("SELECT count(*) AS n FROM research_jobs WHERE id = ANY(%s::uuid[]) AND admitted_at IS NOT NULL"
                                " AND status IN ('queued', 'running')", (job_ids,)).fetchone()["n"]
        most = max(most, held)
        if all(s == "completed" for s in jobstore.statuses(ctx.pool, job_ids).values()):
            break
        time.sleep(0.1)
    assert set(jobstore.statuses(ctx.pool, job_ids).values()) == {"completed"}
    assert most == 2  # the slots were used, and never more of them


def _wait_done(ctx, batch_id: str, timeout_s: float = 180) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        p = batches.batch_progress(ctx.pool, batch_id)
        if p is not None and p.done == p.total:
            return
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} did not finish: {batches.batch_progress(ctx.pool, batch_id)}")
