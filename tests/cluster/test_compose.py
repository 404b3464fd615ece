"""docker-compose.yml as the cluster harness reads it (bench/cluster_compose.py): compose's variable substitution and
the merged `x-app` / `x-worker` anchors. Pure: runs in the unit tier."""
from __future__ import annotations

import pytest

from bench.cluster_compose import InterpolationError, interpolate, load_services

ENV = {"POSTGRES_PASSWORD": "pw", "FINAGENT_API_KEYS": '["k"]', "FINAGENT_FLOWER_BASIC_AUTH": "ops:x"}


def test_substitution_forms():
    env = {"SET": "a", "EMPTY": ""}
    assert interpolate("${SET:-b}/${UNSET:-b}/${EMPTY:-b}/${EMPTY-b}", env) == "a/b/b/"
    assert interpolate("x$$HOSTNAME $SET", env) == "x$HOSTNAME a"
    assert interpolate("${UNSET:-p://u:${SET}@h}", env) == "p://u:a@h"


def test_required_variable_names_itself():
    with pytest.raises(InterpolationError, match="NEEDED: set it"):
        interpolate("${NEEDED:?set it}", {})


def test_services_carry_the_anchors_environment_and_volumes():
    services = load_services(ENV)
    worker = services["worker-search"]
    assert worker.is_worker and worker.command[:2] == ["finagent", "worker"]
    assert worker.environment["FINAGENT_DATABASE_URL"] == "postgresql://finagent:pw@postgres:5432/finagent"
    assert worker.environment["POSTGRES_PASSWORD"] == "pw"  # env_file
    assert worker.volumes == {"/data/keyword-index": "keywordindex"}
    assert services["api"].environment["FINAGENT_API_KEYS"] == '["k"]'
    assert not services["beat"].is_worker and services["beat"].volumes == {"/data": "beatdata"}


def test_an_env_value_overrides_a_compose_default():
    services = load_services({**ENV, "FINAGENT_REDIS_URL": "rediss://:p@redis:6379/0"}, only={"worker-llm"})
    assert services["worker-llm"].environment["FINAGENT_REDIS_URL"] == "rediss://:p@redis:6379/0"


def test_a_missing_required_variable_fails_like_compose():
    with pytest.raises(InterpolationError, match="POSTGRES_PASSWORD"):
        load_services({}, only={"postgres"})
