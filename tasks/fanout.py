"""What every fan-out task shares: retries by error class through Celery's own retry, and a chord
that always completes (a task that finally fails stores a FailedOutput under its key instead).

A failure the service's client already retried (the openai SDK, agent/infra/client_retries.py) is not retried again
here: one layer owns the retries, so an LLM request makes at most 1 + max_tool_retries HTTP attempts in all."""
from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

from agent.context import Context
from agent.infra.breaker import CircuitOpenError
from agent.infra.client_retries import retried_by_client, task_may_retry
from agent.infra.error_classes import classify_error, retry_after_s
from agent.infra.ratelimit import BATCH_CALL, RateLimitedError
from agent.models.steps import FailedOutput
from agent.persistence import jobstore
from agent.persistence.ledger import ATTEMPT_RETRIES
from agent.redact import redact, scrub_exception
from workers.deadlines import soft_limit_error
from workers.process_context import context
from workers.topology import Queue

log = logging.getLogger(__name__)
RETRYABLE = {"network", "rate_limit", "system", "unknown"}
# A call the shared LLM rate limit kept waiting is not failing: it gets more retries than a failing one.
THROTTLED_RETRIES = 8


class JobTask(Task):
    abstract = True
    acks_late = True
    max_retries = 2  # max_tool_retries
    # no STARTED state in the result backend: one Redis round trip less before every call, on the critical path.
    # Nothing reads it (recovery asks whether a task finished; Flower follows the task-started event)
    track_started = False
    # nor its result: every call stores its outcome in Postgres (a FailedOutput when it fails for good), which is what
    # recovery asks (tasks/recovery.py). Two Redis round trips less as each call ends (Celery reads the key before it
    # writes it), on the path to the chord's body, and no result key per call kept for a day. A chord still counts
    # each part: the backend records a part's return in the chord's own keys.
    ignore_result = True

    def run_call(self, job_id: str, iteration: int, call: Any, work: Callable[[Context, str, int, Any], Any]) -> Any:
        """Run `work(ctx, job_id, iteration, call)`; retry transient errors with exponential backoff and
        jitter; store the final failure under the call's output key."""
        ctx = context()
        key = call.output_key(iteration)
        retries = self.request.retries or 0
        token = ATTEMPT_RETRIES.set(retries)
        # every task of a batch job runs on the batch queue (topology.queue_for), and so do its retries
        batch_token = BATCH_CALL.set((self.request.delivery_info or {}).get("routing_key") == Queue.batch.value)
        try:
            return work(ctx, job_id, iteration, call)
        except Exception as exc:
            retried = retried_by_client(exc)  # read before the soft limit's conversion, which drops the client's mark
            exc = soft_time_limit_behind(exc, self.soft_time_limit) or exc  # a retryable timeout naming the limit
            scrub_exception(exc)  # before Celery stores it (retry state, task events) or anything logs it
            error_class = classify_error(exc)
            limit = THROTTLED_RETRIES if isinstance(exc, RateLimitedError) else min(self.max_retries, ctx.settings.max_tool_retries)
            if task_may_retry(error_class, retried, retries=retries, limit=limit, retryable=RETRYABLE):
                countdown = retry_countdown(exc, retries, ctx.settings.tool_retry_backoff_s)
                log.warning("%s failed (%s), retry %d in %.1fs", key, error_class, retries + 1, countdown)
                raise self.retry(exc=exc, countdown=countdown, max_retries=limit) from exc
            note = retried.note() if retried is not None else ""
            log.exception("%s failed for good (%s)%s", key, error_class, note)
            jobstore.put_output(ctx.pool, job_id, key, FailedOutput(
                error=redact(f"{type(exc).__name__}: {exc}")[:500 - len(note)] + note, error_class=error_class, retries=retries))
            return None
        finally:
            BATCH_CALL.reset(batch_token)
            ATTEMPT_RETRIES.reset(token)


def soft_time_limit_behind(exc: BaseException, soft_s: float | None) -> SoftTimeLimitExceeded | None:
    """The soft time limit that interrupted the call, also when a library turned it into its own error (the OpenAI SDK
    raises APIConnectionError from whatever broke off its request). Prefork's bare one becomes ours: a TimeoutError
    whose message names the limit (workers/deadlines.py)."""
    seen: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; a cycle must not hang the worker
        if seen is None or isinstance(seen, SoftTimeLimitExceeded):
            break
        seen = seen.__cause__ or seen.__context__
    if not isinstance(seen, SoftTimeLimitExceeded):
        return None
    return seen if isinstance(seen, TimeoutError) or not soft_s else soft_limit_error(soft_s)()


def retry_countdown(exc: BaseException, retries: int, base_s: float) -> float:
    """Exponential backoff with jitter (base, 2 x base, ...). A server that said when to come back (a 429's or 503's
    Retry-After on an error no client retried itself) is not asked again sooner: the wait is at least its Retry-After
    (capped at errors.MAX_RETRY_AFTER_S) plus jitter, so workers retrying together do not arrive at the same instant.
    A call refused by an open circuit breaker waits until the breaker lets a trial through, so the retries outlast a
    short provider outage. A call the rate limit kept waiting comes back when its slot should be free, not after a
    growing backoff."""
    if isinstance(exc, RateLimitedError):
        return exc.retry_after_s + random.uniform(0.5, 2.0)
    backoff = get_exponential_backoff_interval(factor=base_s, retries=retries, maximum=600, full_jitter=False)
    countdown = backoff * random.uniform(0.75, 1.25)
    if isinstance(exc, CircuitOpenError):
        countdown = max(countdown, exc.retry_after_s + random.uniform(0.5, 2.0))
    asked = retry_after_s(exc)
    if asked is not None:
        countdown = max(countdown, asked + random.uniform(0.1, 1.0))
    return countdown
