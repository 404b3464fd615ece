"""Logs an operator can search: one setup for every process (the API, each worker, beat, the CLI), in text for a
terminal or JSON for a log store (settings `log_format`, `log_level`), and the ids of what a line is about.

The ids live in context variables: the API's request-id middleware binds the request id (api_stub/request_ids.py),
Celery's task_prerun binds the task id, its job id and the request id its message carried (workers/telemetry.py). A
filter on the handler copies them onto every record, so a line logged anywhere below (a provider, a store, a
library) carries them without passing them down. A line outside any request or task has none.

    {"time": "2025-01-31T12:00:00.123Z", "level": "INFO", "logger": "tasks.fanout", "message": "...",
     "request_id": "3f2a...", "job_id": "8c1e...", "task_id": "8c1e...:1:search:3"}
"""
from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]
IDS = ("request_id", "job_id", "task_id")
_VARS: dict[str, ContextVar[str | None]] = {name: ContextVar(f"finagent_{name}", default=None) for name in IDS}
# loggers that frameworks give handlers of their own: their lines go through the root handler instead, in one format
FRAMEWORK_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "celery.task", "celery.redirected")


def current_ids() -> dict[str, str]:
    """The ids bound in this context (only those that are set)."""
    return {name: value for name in IDS if (value := _VARS[name].get())}


def bind(**ids: str | None) -> list[Token[str | None]]:
    """Set ids for this context (None clears one); give the tokens to `unbind` to put back what was there."""
    unknown = set(ids) - set(IDS)
    if unknown:
        raise ValueError(f"unknown log ids {sorted(unknown)}; the ids are {IDS}")
    return [_VARS[name].set(value) for name, value in ids.items()]


def unbind(tokens: list[Token[str | None]]) -> None:
    for token in reversed(tokens):
        token.var.reset(token)


@contextmanager
def bound(**ids: str | None) -> Iterator[None]:
    tokens = bind(**ids)
    try:
        yield
    finally:
        unbind(tokens)


class ContextIds(logging.Filter):
    """Copies the bound ids onto each record (as `request_id`, `job_id`, `task_id`; None when unbound). An id the
    caller passed itself (`extra={"job_id": ...}`) is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name in IDS:
            if getattr(record, name, None) is None:
                setattr(record, name, _VARS[name].get())
        return True


def _ids(record: logging.LogRecord) -> dict[str, str]:
    return {name: str(value) for name in IDS if (value := getattr(record, name, None))}


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str | None:
    if record.exc_info:
        # agent/redact.py's record factory leaves the redacted traceback in exc_text
        return record.exc_text or formatter.formatException(record.exc_info)
    return record.exc_text or None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the ids that are set, and the
    exception's traceback or the stack when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {"time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        out.update(_ids(record))
        if exc := _exception_text(self, record):
            out["exception"] = exc
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def compact_ids(ids: dict[str, str]) -> str:
    """` [req=R task=T]` for the text format: a job's task ids start with the job id, so the job is shown only when
    no task of it is."""
    parts = []
    if req := ids.get("request_id"):
        parts.append(f"req={req}")
    task, job = ids.get("task_id"), ids.get("job_id")
    if job and not (task and task.startswith(f"{job}:")):
        parts.append(f"job={job}")
    if task:
        parts.append(f"task={task}")
    return f" [{' '.join(parts)}]" if parts else ""


class TextFormatter(logging.Formatter):
    """`2025-01-31 12:00:00,123 INFO tasks.fanout [req=R task=T]: message` for a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(finagent_ids)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.finagent_ids = compact_ids(_ids(record))
        return super().format(record)


class StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record is emitted, not the one it was created with (a test runner or
    a CLI runner swaps it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def make_handler(fmt: LogFormat, stream: TextIO | None = None, logfile: str | None = None) -> logging.Handler:
    handler: logging.Handler
    if logfile:
        from logging.handlers import WatchedFileHandler  # logrotate moves the file: reopen it, as Celery's own does

        handler = WatchedFileHandler(logfile, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream) if stream is not None else StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextIds())
    return handler


_HANDLER_MARK = "_finagent_handler"


def configure_logging(fmt: LogFormat, level: str, stream: TextIO | None = None, logfile: str | None = None) -> logging.Handler:
    """The process's logging: one root handler in `fmt` at `level` (stderr, or `logfile`), the frameworks' loggers
    routed through it, and secrets redacted. Called again, it replaces its own handler and leaves others'."""
    from agent.redact import install_log_redaction

    install_log_redaction()
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()
    handler = make_handler(fmt, stream, logfile)
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in FRAMEWORK_LOGGERS:
        framework = logging.getLogger(name)
        framework.handlers.clear()
        framework.propagate = True
        framework.setLevel(logging.NOTSET)
    return handler


def configure_from(settings: Any, *, level: str | None = None, logfile: str | None = None) -> logging.Handler:
    """configure_logging from the settings' log_format and log_level (or `level`)."""
    return configure_logging(settings.log_format, level or settings.log_level, logfile=logfile)


def command_level(settings: Any) -> str:
    """A command's level: the `log_level` setting when it is set, else WARNING, so that a command's output is not
    interleaved with the INFO lines a server logs."""
    return str(settings.log_level) if "log_level" in settings.model_fields_set else "WARNING"
