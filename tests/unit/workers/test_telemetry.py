"""The Celery side of logs (workers/telemetry.py): Celery hands its logging setup to ours, a running task's ids are
bound for its log lines, and a message published meanwhile carries the request id on."""
from __future__ import annotations

import json
import logging
import os
import uuid
import warnings
from types import SimpleNamespace

import pytest
from celery.app.log import Logging

from agent.infra import logs
from agent.settings import get_settings
from workers import telemetry
from workers.app import app
from workers.telemetry import REQUEST_ID_HEADER, job_id_of


def test_a_tasks_job_is_the_head_of_its_id_or_its_job_argument():
    job = str(uuid.uuid4())
    assert job_id_of(f"{job}:1:search:3") == job and job_id_of(f"{job}:0:start:0", ["other"]) == job
    assert job_id_of(str(uuid.uuid4()), [job]) == job  # the public contract's get_job(job_id)
    assert job_id_of(str(uuid.uuid4()), ["What was revenue?"]) is None and job_id_of(None) is None


def _task(request_id: str | None = None) -> SimpleNamespace:
    request = SimpleNamespace(**({REQUEST_ID_HEADER: request_id} if request_id else {}))
    return SimpleNamespace(request=request, name="tasks.coordinator.advance")


def test_a_running_task_binds_its_ids_and_unbinds_them_when_it_ends():
    job = str(uuid.uuid4())
    task_id = f"{job}:1:advance:search"
    telemetry._bind_ids(task_id=task_id, task=_task("req-7"), args=[job, "1:search"])
    try:
        assert logs.current_ids() == {"request_id": "req-7", "job_id": job, "task_id": task_id}
        # a task run inside it (eagerly) binds its own ids, and the outer ones come back after it
        inner = f"{job}:1:search:0"
        telemetry._bind_ids(task_id=inner, task=_task(), args=[])
        assert logs.current_ids() == {"job_id": job, "task_id": inner}
        telemetry._unbind_ids(task_id=inner)
        assert logs.current_ids()["task_id"] == task_id
    finally:
        telemetry._unbind_ids(task_id=task_id)
    assert logs.current_ids() == {}
    telemetry._unbind_ids(task_id="never-bound")  # a postrun without its prerun changes nothing


def test_a_message_published_under_a_request_carries_its_id():
    headers: dict = {}
    telemetry._carry_request_id(headers=headers)
    assert headers == {}  # no request: no header
    with logs.bound(request_id="req-42"):
        telemetry._carry_request_id(headers=headers)
        kept = {REQUEST_ID_HEADER: "from-the-caller"}
        telemetry._carry_request_id(headers=kept)
    assert headers == {REQUEST_ID_HEADER: "req-42"} and kept == {REQUEST_ID_HEADER: "from-the-caller"}


@pytest.fixture
def celery_logging_restored(monkeypatch):
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    celery_logger = logging.getLogger("celery")
    saved_celery = (list(celery_logger.handlers), celery_logger.propagate)
    monkeypatch.setattr(Logging, "_setup", False)  # Celery sets its logging up once per process
    environ = dict(os.environ)  # it also records its log level and file there
    showwarning = warnings.showwarning
    yield
    os.environ.clear()
    os.environ.update(environ)
    logging.captureWarnings(False)
    warnings.showwarning = showwarning
    for handler in [h for h in root.handlers if h not in saved[0]]:
        root.removeHandler(handler)
    root.setLevel(saved[1])
    celery_logger.handlers[:], celery_logger.propagate = saved_celery


def test_celerys_logging_setup_is_ours_in_the_settings_format_and_level(celery_logging_restored, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("FINAGENT_LOG_FORMAT", "json")
    monkeypatch.setenv("FINAGENT_LOG_LEVEL", "DEBUG")
    # Celery's logging reads the app's configuration, which resolves a broker URL: one that is never dialled, so the
    # test does not depend on a test before it having loaded the configuration, nor on running servers
    monkeypatch.setenv("FINAGENT_REDIS_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("FINAGENT_DATABASE_URL", "postgresql://finagent@127.0.0.1:9/finagent")
    get_settings.cache_clear()
    try:
        # what `celery worker -l INFO` runs: the setting's level wins over the command line's
        app.log.setup(loglevel="INFO", logfile=None, redirect_stdouts=True)
    finally:
        get_settings.cache_clear()
    root = logging.getLogger()
    [ours] = [h for h in root.handlers if getattr(h, "_finagent_handler", False)]
    assert isinstance(ours.formatter, logs.JsonFormatter) and root.level == logging.DEBUG
    capsys.readouterr()
    with logs.bound(task_id="J:1:search:0", job_id="J"):
        logging.getLogger("celery.app.trace").info("Task tasks.quarter_search succeeded")
    [line] = [json.loads(x) for x in capsys.readouterr().err.splitlines()]
    assert (line["logger"], line["task_id"], line["job_id"]) == ("celery.app.trace", "J:1:search:0", "J")
