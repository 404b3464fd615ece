"""The chaos tier: real workers, real Redis and Postgres, and faults injected into them. Each scenario reports its
summary line (ops.chaos.ChaosTally.line) as a user property of its test, so the line reaches the end of the run even
from a pytest-xdist worker; tests/conftest.py prints them together in a "chaos summary" section."""
from __future__ import annotations

import pytest

from tests.stack_fixtures import CHAOS_PROPERTY


@pytest.fixture
def report(request):
    def add(line: str) -> None:
        print(line)
        request.node.user_properties.append((CHAOS_PROPERTY, line))
    return add
