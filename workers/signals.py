"""Celery signals inside every worker process: the Prometheus metrics (and, with METRICS_PORT, the worker's own
/metrics endpoint), the scrape targets (the topology's queues, the dependencies behind a circuit breaker) that
`render_metrics(ctx)` reports on, liveness (a heartbeat per worker, a claim per running job task;
agent/infra/liveness.py says why), the queues each worker consumes (agent/infra/queue_consumers.py) and, on the
threads and solo pools, the tasks' time limits (workers/deadlines.py).

Imported by workers/app.py. Connecting a handler starts nothing: the metrics are set up on the first task a worker
runs, or at worker_ready with METRICS_PORT (agent/infra/metrics.py).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from celery import signals

from agent.infra import liveness, metrics, metrics_server, queue_consumers
from agent.redact import install_log_redaction
from agent.settings import Settings
from workers.deadlines import Deadline, DeadlineEnforcer, pool_ignores_limits
from workers.keyword_sync import consumed_queues
from workers.topology import Queue

log = logging.getLogger(__name__)


def _redis():
    from workers.process_context import context

    return context().redis


def _incarnation(hostname: str) -> str:
    """A worker restarted under the same node name (a supervisor, `finagent services start`) is a new incarnation:
    its heartbeat must not vouch for the claims of the process that died."""
    return f"{hostname}#{os.getpid()}"


def _job_task(task_id: str | None) -> bool:
    return bool(task_id) and ":" in (task_id or "")  # a job's task ids are `{job_id}:...`


@signals.celeryd_init.connect(dispatch_uid="finagent-log-redaction-worker")
@signals.after_setup_logger.connect(dispatch_uid="finagent-log-redaction-logger")
@signals.beat_init.connect(dispatch_uid="finagent-log-redaction-beat")
def _redact_logs(**_: Any) -> None:
    # no secret in a worker's log: a provider's error may echo its key (agent/redact.py)
    install_log_redaction()


def _expire_claim(deadline: Deadline) -> None:
    if _job_task(deadline.task_id) and deadline.node:
        liveness.expire(_redis(), deadline.task_id, deadline.node)


deadlines = DeadlineEnforcer(on_hard=_expire_claim)
_enforcing = threading.Event()  # set once this worker's pool turns out to ignore time limits


def _time_limits(task: Any) -> tuple[float | None, float | None]:
    """(soft, hard) as the worker applies them: the message's own, else the task's (prefork: Request.time_limits)."""
    hard, soft = task.request.timelimit or (None, None)
    return soft or task.soft_time_limit, hard or task.time_limit


@signals.task_prerun.connect(dispatch_uid="finagent-metrics-prerun")
def _task_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id and task is not None:
        metrics.task_started(task_id, task.name)
        if _enforcing.is_set():
            deadlines.register(task_id, task.name, *_time_limits(task), node=_incarnation(task.request.hostname or ""))
        if _job_task(task_id) and task.request.hostname:
            try:
                liveness.claim(_redis(), task_id, _incarnation(task.request.hostname))
            except Exception:
                log.warning("could not claim %s", task_id, exc_info=True)


@signals.task_postrun.connect(dispatch_uid="finagent-metrics-postrun")
def _task_postrun(task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any) -> None:
    if task_id and task is not None:
        deadlines.unregister(task_id)
        metrics.task_finished(task_id, task.name, state)
        if _job_task(task_id) and task.request.hostname:
            try:
                liveness.release(_redis(), task_id, _incarnation(task.request.hostname))
            except Exception:
                log.warning("could not release %s", task_id, exc_info=True)


@signals.worker_ready.connect(dispatch_uid="finagent-liveness-heartbeat")
def _start_heartbeat(sender: Any = None, **_: Any) -> None:
    hostname = getattr(sender, "hostname", None)
    if not hostname:
        return
    node = _incarnation(hostname)
    queues = sorted(consumed_queues(sender))

    def run() -> None:
        while True:
            try:
                liveness.beat(_redis(), node)
            except Exception:
                log.warning("heartbeat of %s failed", node, exc_info=True)
            try:  # the node name without the incarnation: a restarted worker replaces its own announcement
                queue_consumers.announce(_redis(), hostname, queues, liveness.HEARTBEAT_TTL_S)
            except Exception:
                log.warning("queue announcement of %s failed", node, exc_info=True)
            threading.Event().wait(liveness.HEARTBEAT_EVERY_S)

    threading.Thread(target=run, name="finagent-heartbeat", daemon=True).start()


@signals.worker_ready.connect(dispatch_uid="finagent-metrics-server")
def _serve_metrics(**_: Any) -> None:
    metrics_server.start()  # METRICS_PORT only; a worker serves its own metrics, the API the scrape-time ones


@signals.worker_ready.connect(dispatch_uid="finagent-time-limits")
def _start_deadlines(sender: Any = None, **_: Any) -> None:
    if sender is not None and pool_ignores_limits(getattr(sender, "pool", None)):
        _enforcing.set()
        deadlines.start()


@signals.beat_init.connect(dispatch_uid="finagent-embedded-beat-dies-with-worker")
def _embedded_beat_dies_with_its_worker(**_: Any) -> None:
    """A worker's embedded beat (`-B`) is a child process: when the worker is SIGKILLed it would live on, orphaned,
    and keep scheduling beside the beat of the worker started in its place. Ask the kernel to end it with its parent.
    SIGKILL: no handler can delay it, and the beat holds nothing a kill can lose (its schedule file is per node)."""
    import billiard.process  # Celery forks the embedded beat with billiard, which multiprocessing knows nothing of

    parent_pid = getattr(billiard.process.current_process(), "_parent_pid", None)
    if parent_pid is None or not sys.platform.startswith("linux"):
        return  # a standalone `celery beat` (docker-compose's beat service) is nobody's child
    try:
        import ctypes
        import signal as _signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, _signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        log.warning("could not tie the embedded beat to its worker", exc_info=True)
    if parent_pid != os.getppid():
        os._exit(0)  # the worker died before the tie was made


@signals.task_failure.connect(dispatch_uid="finagent-metrics-failure")
def _task_failure(sender: Any = None, exception: BaseException | None = None, **_: Any) -> None:
    if sender is not None:
        metrics.task_failed(sender.name, exception)


@signals.worker_shutdown.connect(dispatch_uid="finagent-metrics-worker-shutdown")
def _worker_shutdown(**_: Any) -> None:
    metrics.mark_process_dead(os.getpid())


@signals.worker_process_shutdown.connect(dispatch_uid="finagent-metrics-process-shutdown")
def _worker_process_shutdown(pid: int | None = None, **_: Any) -> None:
    # prefork children (the local and compose workers use threads, where only worker_shutdown fires)
    metrics.mark_process_dead(pid or os.getpid())


def scrape_targets(settings: Settings) -> metrics.ScrapeTargets:
    from agent.providers.llm.factory import llm_breaker_name
    from agent.providers.news import BREAKER_NAME

    return metrics.ScrapeTargets(queues=[q.value for q in Queue], breakers=[llm_breaker_name(settings), BREAKER_NAME])


metrics.set_scrape_targets(scrape_targets)
