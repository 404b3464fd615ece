"""Which queues /readyz needs a consumer on: the `ready_queues` setting, by default the interactive ones."""
from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from agent.settings import INTERACTIVE_QUEUES, QueueName, Settings
from api_stub.health import missing_queues
from workers.topology import Queue


def test_the_setting_knows_exactly_the_topology_queues():
    assert set(typing.get_args(QueueName)) == {q.value for q in Queue}


def test_by_default_the_batch_pool_is_not_required(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert settings.ready_queues == list(INTERACTIVE_QUEUES) and "batch" not in settings.ready_queues
    interactive_only = {"coordinator", "celery", "search", "llm"}
    assert missing_queues(settings.ready_queues, interactive_only) == []
    assert missing_queues(settings.ready_queues, {"batch", "celery"}) == ["coordinator", "search", "llm"]


def test_an_operator_may_require_every_queue_or_none(tmp_path, monkeypatch):
    monkeypatch.setenv("FINAGENT_READY_QUEUES", '["coordinator", "celery", "search", "llm", "batch"]')
    every = Settings(data_dir=tmp_path).ready_queues
    assert missing_queues(every, {"coordinator", "celery", "search", "llm"}) == ["batch"]
    monkeypatch.setenv("FINAGENT_READY_QUEUES", "[]")
    assert missing_queues(Settings(data_dir=tmp_path).ready_queues, set()) == []


def test_an_unknown_queue_is_refused_naming_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("FINAGENT_READY_QUEUES", '["coordinator", "bulk"]')
    with pytest.raises(ValidationError, match="FINAGENT_READY_QUEUES"):
        Settings(data_dir=tmp_path)
