"""The chaos tier: real workers, real Redis and Postgres, and faults injected into them. Each scenario reports its
summary line (ops.chaos.audit.ChaosTally.line) as a user property of its test, so the line reaches the end of the run even
from a pytest-xdist worker; tests/conftest.py prints them together in a "chaos summary" section."""
from __future__ import annotations

import json

import pytest

from tests.stack_fixtures import CHAOS_PROPERTY


@pytest.fixture
def report(request):
    def add(line: str) -> None:
        print(line)
        request.node.user_properties.append((CHAOS_PROPERTY, line))
    return add


@pytest.fixture
def slow_scripted(workers_with, script_path):
    """Workers whose LLM calls take a second each (the scripted provider), so faults land mid-step."""
    script_path.write_text(json.dumps({}))
    env = dict(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), FINAGENT_LLM_LATENCY_S="1.0",
               FINAGENT_LLM_CACHE_TTL_S="0", FINAGENT_BATCH_CONCURRENCY="6")
    return workers_with(**env)
