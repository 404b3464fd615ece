"""Cancelling a job whose calls are still queued: the job ends at once as `cancelled`, and the queued call is
revoked, so a worker that later takes it from the queue drops it instead of running it."""
from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from agent.models.job import JobRequest
from agent.persistence import jobstore
from agent.persistence.ledger import load_ledger
from agent.services import ServiceURLs
from agent.submission import cancel, create
from ops.local.worker_pool import stop_pids, wait_ready, worker_env
from tasks.dispatch import CeleryDispatcher
from workers.topology import Queue, WorkerSpec, worker_argv

pytestmark = pytest.mark.integration


def _start(ctx, name: str, queues: list[Queue]) -> subprocess.Popen:
    urls = ServiceURLs(database_url=ctx.database_url, redis_url=ctx.redis_url)
    node = f"{name}-{uuid.uuid4().hex[:6]}"
    log = open(ctx.settings.data_dir / f"{node}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "celery", *worker_argv(WorkerSpec(name=name, queues=queues, concurrency=2), node)],
                            env=worker_env(urls, ctx.settings.metrics_path()), stdout=log, stderr=subprocess.STDOUT)
    wait_ready(urls, [f"{node}@"], 60)
    return proc


def _until(predicate, timeout_s: float = 30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_a_cancel_revokes_the_queued_calls_and_ends_the_job_at_once(ctx, sample_corpus, workers):
    workers.stop()
    procs = [_start(ctx, "coord", [Queue.coordinator, Queue.public])]  # nobody consumes llm: the plan call waits there
    try:
        job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question="What was NVDA's revenue last quarter?", mode="direct"))
        _until(lambda: jobstore.load_job(ctx.pool, job_id).step == "0:plan" and ctx.redis.llen(Queue.llm.value) >= 1)
        assert cancel(ctx, CeleryDispatcher(), job_id) in ("running", "cancelled")
        job = _until(lambda: (j := jobstore.load_job(ctx.pool, job_id)).status == "cancelled" and j)
        assert job.result.status == "cancelled" and job.result.termination_reason == "cancelled by request before any answer"

        procs.append(_start(ctx, "llm", [Queue.llm]))  # learns the revoked ids from the running worker (mingle)
        _until(lambda: ctx.redis.llen(Queue.llm.value) == 0)
        time.sleep(2)
        assert [c for c in load_ledger(ctx.pool, job_id) if c["tool"].startswith("llm.")] == []  # the plan never ran
        assert cancel(ctx, CeleryDispatcher(), job_id) == "cancelled"  # a second cancel changes nothing
    finally:
        stop_pids([p.pid for p in procs])
        for p in procs:
            p.wait(30)
    workers.ensure()
