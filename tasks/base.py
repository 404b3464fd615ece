"""What every fan-out task shares: retries by error class through Celery's own retry, and a
chord that always completes (a task that finally fails records an error output instead)."""
from __future__ import annotations

import logging

from celery import Task
from celery.utils.time import get_exponential_backoff_interval

from agent.pipeline import jobstore
from agent.pipeline.ledger import classify_error

log = logging.getLogger(__name__)
RETRYABLE = {"network", "rate_limit", "system", "unknown"}


class JobTask(Task):
    abstract = True
    acks_late = True
    max_retries = 2  # seed 002 max_tool_retries

    def guarded(self, ctx, job_id: str, output_key: str, fn, *args):
        """Run fn; retry transient errors with exponential backoff and jitter; record the final failure."""
        try:
            return fn(*args)
        except Exception as exc:
            error_class = classify_error(exc)
            retries = self.request.retries
            if error_class in RETRYABLE and retries < min(self.max_retries, ctx.settings.max_tool_retries):
                countdown = get_exponential_backoff_interval(factor=1, retries=retries, maximum=30, full_jitter=True)
                log.warning("%s failed (%s), retry %d in %.1fs", output_key, error_class, retries + 1, countdown)
                raise self.retry(exc=exc, countdown=countdown)
            log.exception("%s failed for good (%s)", output_key, error_class)
            jobstore.put_output(ctx.pool, job_id, output_key,
                                {"error": f"{type(exc).__name__}: {exc}"[:500], "error_class": error_class, "retries": retries})
            return None
