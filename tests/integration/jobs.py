"""Submit a job through the real Celery path and collect its events."""
from __future__ import annotations

from agent.models.job import JobRequest
from ops.cli.ask import submit_and_follow


def run_job(ctx, timeout_s: float = 120, **request):
    job, events = submit_and_follow(ctx, JobRequest(**request), timeout_s)
    assert job.result is not None, f"job {job.id} did not finish: status={job.status} step={job.step} events={[e.type for e in events]}"
    return job, events
