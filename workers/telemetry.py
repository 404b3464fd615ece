"""Logs and traces in every Celery process (workers and beat), and the ids that follow a job across them.

- Logging: Celery's `setup_logging` signal hands the whole setup to agent/infra/logs.py (the settings' format and
  level, Celery's own loggers included), instead of Celery's format beside ours.
- Ids: while a task runs, its task id, its job id (a job's task ids start with it) and the request id of the HTTP
  request that started the job are bound for the log lines; every message published meanwhile carries the request id
  in a header, so it follows the job from the API through each of its tasks (a chord's body and a retry included).
- Traces (setting `tracing`): installed when the worker or beat starts, before any connection is made.

Imported by workers/app.py, so the API and the CLI get the publish side too. Connecting a handler starts nothing.
"""
from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from contextvars import Token
from typing import Any

from celery import signals

from agent.infra import logs
from agent.settings import get_settings

REQUEST_ID_HEADER = "finagent_request_id"

_bound = threading.local()  # task id -> the tokens its prerun bound (prerun and postrun run on the task's thread)


def job_id_of(task_id: str | None, args: Sequence[Any] | None = None) -> str | None:
    """The job a task works for: the part of its id before the first `:` (tasks/dispatch.py names every job task
    `{job}:...`), else a first argument that is a job id (the public contract's get_job, cancel_job, job_events)."""
    if task_id and ":" in task_id:
        return task_id.split(":", 1)[0]
    if args and isinstance(args[0], str):
        try:
            return str(uuid.UUID(args[0]))
        except ValueError:
            return None
    return None


@signals.setup_logging.connect(dispatch_uid="finagent-setup-logging")
def _setup_logging(logfile: Any = None, **_: Any) -> None:
    # connected, this replaces Celery's own setup (handlers, task format, stdout redirect): our format, our level
    logs.configure_from(get_settings(), logfile=logfile if isinstance(logfile, str) and logfile else None)


@signals.task_prerun.connect(dispatch_uid="finagent-log-ids-prerun")
def _bind_ids(task_id: str | None = None, task: Any = None, args: Sequence[Any] | None = None, **_: Any) -> None:
    if not task_id:
        return
    request_id = getattr(getattr(task, "request", None), REQUEST_ID_HEADER, None)
    tokens = logs.bind(task_id=task_id, job_id=job_id_of(task_id, args),
                       request_id=request_id if isinstance(request_id, str) else None)
    _tokens().setdefault(task_id, []).append(tokens)


@signals.task_postrun.connect(dispatch_uid="finagent-log-ids-postrun")
def _unbind_ids(task_id: str | None = None, **_: Any) -> None:
    stack = _tokens().get(task_id or "")
    if stack:
        logs.unbind(stack.pop())
        if not stack:
            del _tokens()[task_id or ""]


def _tokens() -> dict[str, list[list[Token[str | None]]]]:
    if not hasattr(_bound, "tokens"):
        _bound.tokens = {}
    tokens: dict[str, list[list[Token[str | None]]]] = _bound.tokens
    return tokens


@signals.before_task_publish.connect(dispatch_uid="finagent-request-id-header")
def _carry_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    request_id = logs.current_ids().get("request_id")
    if request_id and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


def _install_tracing(service: str) -> None:
    if get_settings().tracing:
        from agent.infra import tracing

        tracing.install(service)


@signals.worker_init.connect(dispatch_uid="finagent-tracing-worker")
def _trace_worker(**_: Any) -> None:
    _install_tracing("finagent-worker")


@signals.worker_process_init.connect(dispatch_uid="finagent-tracing-worker-process")
def _trace_worker_process(**_: Any) -> None:
    _install_tracing("finagent-worker")  # a prefork child: a no-op when the parent had installed it before the fork


@signals.beat_init.connect(dispatch_uid="finagent-tracing-beat")
def _trace_beat(**_: Any) -> None:
    _install_tracing("finagent-beat")
