from pathlib import Path

import pytest

from tests.stack_fixtures import *  # noqa: F403  (the live-stack fixtures of the integration and chaos tiers)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA
