"""Liveness (/healthz: the process answers) and readiness (/readyz: Redis, Postgres at this code's schema, and a
worker on every queue of the `ready_queues` setting)."""
from __future__ import annotations

import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor, wait

from fastapi import APIRouter, Depends

from agent.db.migrate import pending_on, schema_behind_message
from api_stub.error_responses import error_response, error_responses
from api_stub.runtime import Runtime, runtime
from finagent.models import ErrorDetail, Health, Readiness
from workers.topology import Queue

router = APIRouter(tags=["health"])


def _redis(rt: Runtime) -> str:
    return "ok" if rt.ctx.redis_one_attempt.ping() else "no answer to PING"


def _postgres(rt: Runtime) -> str:
    with rt.ctx.pool.connection(timeout=rt.ready_deadline_s) as conn:
        pending = pending_on(conn)
    return "ok" if not pending else schema_behind_message(pending)


def consumed_queues(rt: Runtime) -> set[str]:
    """The queues at least one live worker consumes (Celery's broadcast inspect, waiting inspect_timeout_s)."""
    from tasks.dispatch import consumed_queues as consumed

    return consumed(rt.inspect_timeout_s)


def missing_queues(required: Collection[str], consumed: Collection[str]) -> list[str]:
    """The required queues no live worker consumes, in topology order."""
    return [q.value for q in Queue if q.value in required and q.value not in consumed]


def _queues(rt: Runtime) -> str:
    required = rt.settings.ready_queues
    if not required:
        return "ok"
    missing = missing_queues(required, consumed_queues(rt))
    return "ok" if not missing else "no worker consumes " + ", ".join(missing)


CHECKS = {"redis": _redis, "postgres": _postgres, "queues": _queues}


def _checked(check, rt: Runtime) -> str:
    try:
        return check(rt)
    except Exception as exc:  # any failure of a dependency is "not ready", named, never a 500
        return f"{type(exc).__name__}: {exc}".strip()[:300]


def run_checks(rt: Runtime) -> dict[str, str]:
    """Every check at once, each given until `ready_deadline_s`: a probe's own timeout is a second or two, and a check
    that meets a server down (Celery's broker connection retries, a pool waiting for a connection) can take longer.
    A check still running then is reported as such and left to end on its own."""
    pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="readyz")
    futures = {name: pool.submit(_checked, check, rt) for name, check in CHECKS.items()}
    done, _ = wait(futures.values(), timeout=rt.ready_deadline_s)
    pool.shutdown(wait=False, cancel_futures=True)
    return {name: f.result() if f in done else f"no answer within {rt.ready_deadline_s:g} s"
            for name, f in futures.items()}


def readiness(rt: Runtime) -> Readiness:
    """Cached for ready_cache_s: a load balancer polling every second must not broadcast an inspect each time."""
    with rt.lock:
        cached = rt.ready_cache
        if cached and time.monotonic() - cached[0] < rt.ready_cache_s:
            return cached[1]
        checks = run_checks(rt)
        result = Readiness(ready=all(v == "ok" for v in checks.values()), checks=checks)
        rt.ready_cache = (time.monotonic(), result)
        return result


@router.get("/healthz", response_model=Health, summary="The process is alive (no dependency checks)")
def healthz() -> Health:
    return Health()


@router.get("/readyz", response_model=Readiness, responses=error_responses(503),
            summary="Redis, Postgres at this code's schema, and a worker on every queue READY_QUEUES names")
def readyz(rt: Runtime = Depends(runtime)):
    ready = readiness(rt)
    if ready.ready:
        return ready
    failing = {k: v for k, v in ready.checks.items() if v != "ok"}
    return error_response(503, "not_ready", "not ready: " + "; ".join(f"{k}: {v}" for k, v in failing.items()),
                          [ErrorDetail(loc=[k], msg=v) for k, v in failing.items()])
