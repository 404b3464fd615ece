"""The log formats, the ids filter and the one setup every process uses (agent/infra/logs.py)."""
from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from agent import redact
from agent.infra import logs
from agent.redact import MASK
from agent.settings import Settings


@pytest.fixture
def root_restored():
    """configure_logging changes the root logger and the frameworks' loggers: put them back after the test."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    frameworks = {name: (list(lg.handlers), lg.propagate, lg.level) for name in logs.FRAMEWORK_LOGGERS
                  for lg in [logging.getLogger(name)]}
    yield
    for handler in [h for h in root.handlers if h not in saved[0]]:
        root.removeHandler(handler)
    root.setLevel(saved[1])
    for name, (handlers, propagate, level) in frameworks.items():
        lg = logging.getLogger(name)
        lg.handlers[:], lg.propagate, lg.level = handlers, propagate, level


def _record(msg: str = "hello %s", args: tuple = ("world",), level: int = logging.INFO, **extra) -> logging.LogRecord:
    record = logging.LogRecord("tasks.fanout", level, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def _filtered(record: logging.LogRecord) -> logging.LogRecord:
    assert logs.ContextIds().filter(record)
    return record


def test_a_json_line_has_time_level_logger_and_message_and_no_id_when_none_is_bound():
    line = json.loads(logs.JsonFormatter().format(_filtered(_record())))
    assert line.keys() == {"time", "level", "logger", "message"}
    assert (line["level"], line["logger"], line["message"]) == ("INFO", "tasks.fanout", "hello world")
    assert line["time"].endswith("Z") and "T" in line["time"]


def test_a_json_line_carries_every_bound_id():
    with logs.bound(request_id="req-1", job_id="job-9", task_id="job-9:1:search:3"):
        line = json.loads(logs.JsonFormatter().format(_filtered(_record())))
    assert {k: line[k] for k in logs.IDS} == {"request_id": "req-1", "job_id": "job-9", "task_id": "job-9:1:search:3"}
    # and only those bound
    with logs.bound(request_id="req-2"):
        line = json.loads(logs.JsonFormatter().format(_filtered(_record())))
    assert line["request_id"] == "req-2" and "job_id" not in line and "task_id" not in line


def test_the_filter_keeps_an_id_the_caller_passed():
    with logs.bound(job_id="bound-job"):
        record = _filtered(_record(job_id="explicit-job"))
    assert record.job_id == "explicit-job" and record.task_id is None  # type: ignore[attr-defined]


def test_a_json_line_carries_the_traceback():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = _record(exc_info=sys.exc_info())
    line = json.loads(logs.JsonFormatter().format(_filtered(record)))
    assert "RuntimeError: boom" in line["exception"] and "Traceback" in line["exception"]


def test_the_text_format_shows_the_ids_compactly():
    assert logs.compact_ids({}) == ""
    # a job's task id starts with the job id: the job is not repeated
    assert logs.compact_ids({"request_id": "r", "job_id": "J", "task_id": "J:1:search:3"}) == " [req=r task=J:1:search:3]"
    assert logs.compact_ids({"job_id": "J"}) == " [job=J]"
    assert logs.compact_ids({"job_id": "J", "task_id": "other-task"}) == " [job=J task=other-task]"
    with logs.bound(request_id="r7", job_id="J"):
        text = logs.TextFormatter().format(_filtered(_record()))
    assert text.endswith(" INFO tasks.fanout [req=r7 job=J]: hello world")
    assert logs.TextFormatter().format(_filtered(_record())).endswith(" INFO tasks.fanout: hello world")


def test_bind_and_unbind_restore_what_was_there():
    outer = logs.bind(job_id="outer")
    try:
        inner = logs.bind(job_id="inner", task_id="inner:0:start:0")
        assert logs.current_ids() == {"job_id": "inner", "task_id": "inner:0:start:0"}
        logs.unbind(inner)
        assert logs.current_ids() == {"job_id": "outer"}
    finally:
        logs.unbind(outer)
    assert logs.current_ids() == {}
    with pytest.raises(ValueError, match="unknown log ids"):
        logs.bind(user="x")


def test_configure_installs_one_handler_of_its_own_and_routes_the_frameworks_through_it(root_restored):
    root = logging.getLogger()
    foreign = logging.NullHandler()
    root.addHandler(foreign)
    stream = io.StringIO()
    logs.configure_logging("text", "info")
    handler = logs.configure_logging("json", "DEBUG", stream=stream)  # again: replaces its own, keeps the other
    ours = [h for h in root.handlers if getattr(h, "_finagent_handler", False)]
    assert ours == [handler] and foreign in root.handlers and root.level == logging.DEBUG
    uvicorn_access = logging.getLogger("uvicorn.access")
    assert uvicorn_access.handlers == [] and uvicorn_access.propagate
    with logs.bound(request_id="abc"):
        uvicorn_access.info("GET /v1/jobs 200")
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert (line["logger"], line["message"], line["request_id"]) == ("uvicorn.access", "GET /v1/jobs 200", "abc")
    root.removeHandler(foreign)


def test_configured_logs_are_redacted(root_restored, monkeypatch):
    monkeypatch.setattr(redact, "_active", None)  # restored after the test
    redact.configure(Settings(llm_api_key="sk-configured-secret-123"))
    stream = io.StringIO()
    logs.configure_logging("json", "INFO", stream=stream)
    logging.getLogger("agent.providers").warning("calling with key sk-configured-secret-123")
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert "sk-configured" not in line["message"] and MASK in line["message"]


def test_the_settings_choose_format_and_level(root_restored, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("FINAGENT_LOG_FORMAT", "json")
    monkeypatch.setenv("FINAGENT_LOG_LEVEL", "warning")  # any case
    settings = Settings()
    handler = logs.configure_from(settings)
    assert isinstance(handler.formatter, logs.JsonFormatter) and logging.getLogger().level == logging.WARNING
    assert logs.command_level(settings) == "WARNING"
    monkeypatch.delenv("FINAGENT_LOG_LEVEL")
    monkeypatch.delenv("FINAGENT_LOG_FORMAT")
    defaults = Settings()
    assert (defaults.log_format, defaults.log_level) == ("text", "INFO")
    assert isinstance(logs.configure_from(defaults).formatter, logs.TextFormatter)
    # a command logs warnings unless the level is set: its own output is not interleaved with INFO lines
    assert logs.command_level(defaults) == "WARNING" and logs.command_level(Settings(log_level="DEBUG")) == "DEBUG"
    with pytest.raises(ValueError, match="FINAGENT_LOG_LEVEL"):
        Settings(log_level="LOUD")


def test_the_stderr_handler_writes_to_the_stderr_of_the_moment(root_restored, capsys):
    logs.configure_logging("text", "INFO")
    logging.getLogger("x").warning("to whatever stderr is now")
    assert "WARNING x: to whatever stderr is now" in capsys.readouterr().err
