from pathlib import Path

import pytest

from tests.stack_fixtures import *  # noqa: F403  (the live-stack fixtures of the integration and chaos tiers)
from tests.stack_fixtures import CHAOS_PROPERTY

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The chaos scenarios' summary lines (tests/chaos/conftest.py::report), from this process or any xdist worker."""
    lines = [value for reports in terminalreporter.stats.values() for r in reports if getattr(r, "when", None) == "call"
             for key, value in getattr(r, "user_properties", ()) if key == CHAOS_PROPERTY]
    if lines:
        terminalreporter.section("chaos summary")
        for line in lines:
            terminalreporter.write_line(line)
