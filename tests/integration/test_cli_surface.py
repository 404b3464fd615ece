"""The `finagent` command's machine-readable outputs, run as a subprocess against the session's servers: events as
JSON lines (also into a closed pipe), --json on jobs cancel, jobs ledger, db status|upgrade and services
start|stop, and listing and cancelling batches."""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agent.models.job import JobRequest
from agent.submission import create
from tests.integration.test_services_cli import FINAGENT, _env, finagent

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"


@pytest.fixture(scope="module")
def finished_job(ctx, sample_corpus, workers) -> str:
    from ops.cli.ask import follow_job
    from tasks.dispatch import CeleryDispatcher

    workers.ensure()
    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question=QUESTION, mode="direct"))
    job, _ = follow_job(ctx, job_id, timeout_s=120)
    assert job.status == "completed"
    return job.id


def _cmd(*args: str) -> list[str]:
    return [str(FINAGENT), *args] if FINAGENT.exists() else ["python", "-m", "ops.cli.main", *args]


def test_events_json_is_one_event_a_line_and_head_ends_it_cleanly(ctx, finished_job, tmp_path):
    r = finagent(ctx, "jobs", "events", finished_job, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[0]["type"] == "job_status" and events[0]["data"]["status"] == "queued"
    assert events[-1]["data"]["status"] == "completed" and all(e["job_id"] == finished_job for e in events)

    piped = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "finagent", *_cmd("jobs", "events", finished_job, "--json")],
                           env=_env(ctx), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    [line] = piped.stdout.splitlines()
    assert json.loads(line) == events[0]
    # a reader gone before the first line: nothing to say on stderr, no traceback, exit status 0
    read, write = os.pipe()
    os.close(read)
    closed = subprocess.run(_cmd("jobs", "events", finished_job, "--json"), env=_env(ctx), cwd=tmp_path, stdout=write,
                            stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert closed.returncode == 0 and closed.stderr == "", closed.stderr


def test_jobs_ledger_and_cancel_json(ctx, finished_job, tmp_path):
    r = finagent(ctx, "jobs", "ledger", finished_job, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ledger = json.loads(r.stdout)
    assert ledger["job_id"] == finished_job and {"llm.plan", "transcript_search"} <= {c["tool"] for c in ledger["calls"]}
    table = finagent(ctx, "jobs", "ledger", finished_job, cwd=tmp_path)
    assert table.returncode == 0 and f"{len(ledger['calls'])} calls, 0 failed" in table.stdout
    assert finagent(ctx, "jobs", "ledger", str(uuid.uuid4()), cwd=tmp_path).returncode == 1

    r = finagent(ctx, "jobs", "cancel", finished_job, "--json", cwd=tmp_path)
    assert r.returncode == 1 and "already ended: completed" in r.stderr  # nothing to cancel
    view = json.loads(r.stdout)
    assert view["job_id"] == finished_job and view["status"] == "completed"


def test_db_and_services_json(ctx, tmp_path):
    status = finagent(ctx, "db", "status", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    assert rows[0] == {"version": "0001_corpus", "applied": True} and all(r["applied"] for r in rows)
    upgrade = finagent(ctx, "db", "upgrade", "--json", cwd=tmp_path)
    assert upgrade.returncode == 0 and json.loads(upgrade.stdout) == {"applied": []}

    started = finagent(ctx, "services", "start", "--no-workers", "--json", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    data = json.loads(started.stdout)
    assert data["ready"] is True and data["workers"] is False and data["postgres"] and data["redis"]
    # another data dir, with no server configured or running there: nothing to stop
    stopped = finagent(ctx, "services", "stop", "--json", cwd=tmp_path, FINAGENT_DATABASE_URL="", FINAGENT_REDIS_URL="",
                       FINAGENT_DATA_DIR=str(tmp_path / "empty"))
    assert stopped.returncode == 0 and json.loads(stopped.stdout) == {"stopped": []}


class Idle:
    """A dispatcher that sends nothing: the batch's jobs stay queued (and the command starts no worker)."""

    def start(self, job_id: str, batch: bool) -> None:
        pass

    def cancel(self, job) -> None:
        pass


def test_batch_list_and_cancel(ctx, sample_corpus, workers, tmp_path: Path):
    from agent import batches
    from agent.persistence import jobstore
    from agent.submission import cancel
    from tasks.dispatch import CeleryDispatcher

    name = f"cli-surface-{uuid.uuid4().hex[:8]}"
    lines = batches.parse_lines([QUESTION, "How did AAPL services revenue trend?"], "direct")
    batch_id = batches.create_batch(ctx, Idle(), name, lines)
    jobs = [i.job_id for i in batches.batch_items(ctx.pool, batch_id)]
    try:
        listed = json.loads(finagent(ctx, "batch", "list", "--limit", "5", "--json", cwd=tmp_path).stdout)
        mine = next(b for b in listed if b["name"] == name)
        assert (mine["batch_id"], mine["total"], mine["done"], mine["counts"]) == (batch_id, 2, 0, {"queued": 2})
        table = finagent(ctx, "batch", "list", cwd=tmp_path, COLUMNS="200")
        assert table.returncode == 0 and batch_id in table.stdout

        r = finagent(ctx, "batch", "cancel", name, "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        cancelled = json.loads(r.stdout)
        assert cancelled["batch_id"] == batch_id and sorted(cancelled["cancelled"]) == sorted(jobs)
        assert all(jobstore.load_job(ctx.pool, j).cancel_requested for j in jobs if j)
        assert finagent(ctx, "batch", "cancel", str(uuid.uuid4()), cwd=tmp_path).returncode == 1
    finally:  # the jobs end as cancelled, freeing their batch slots, whatever failed above
        workers.ensure()
        for job_id in filter(None, jobs):
            cancel(ctx, CeleryDispatcher(), job_id)
        deadline = time.monotonic() + 120
        while set(jobstore.statuses(ctx.pool, [j for j in jobs if j]).values()) != {"cancelled"}:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    again = finagent(ctx, "batch", "cancel", batch_id, cwd=tmp_path)
    assert again.returncode == 1 and "no unfinished job (2 finished)" in again.stderr
