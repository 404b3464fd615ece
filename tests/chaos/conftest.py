"""The chaos tier: real workers, real Redis and Postgres, and faults injected into them. Each scenario adds its
summary line (ops.chaos.ChaosTally.line) to CHAOS_LINES; they are printed together at the end of the run."""
from __future__ import annotations

import pytest

CHAOS_LINES: list[str] = []


@pytest.fixture
def report():
    def add(line: str) -> None:
        print(line)
        CHAOS_LINES.append(line)
    return add


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if CHAOS_LINES:
        terminalreporter.section("chaos summary")
        for line in CHAOS_LINES:
            terminalreporter.write_line(line)
