"""Submit a job through the real Celery path and collect its events."""
from __future__ import annotations

from agent.pipeline import jobstore
from agent.pipeline.events import follow
from agent.pipeline.models import JobRequest


def run_job(ctx, timeout_s: float = 120, **request):
    from tasks.coordinator import create

    job_id, _ = create(JobRequest(**request))
    events = list(follow(ctx.redis, job_id, timeout_s=timeout_s))
    job = jobstore.load_job(ctx.pool, job_id)
    assert job.result is not None, f"job {job_id} did not finish: status={job.status} step={job.step} events={[e.type for e in events]}"
    return job, events
