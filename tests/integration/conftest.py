"""The integration tier's fixtures live in tests/stack_fixtures.py, shared with tests/chaos; the served API's here."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.served_api import ServedApp, quick_runtime


@pytest.fixture(scope="module")
def api_url(ctx) -> Iterator[str]:
    """The API served over real HTTP (no keys) for one test module."""
    with ServedApp(quick_runtime(ctx.settings, api_keys=[])) as served:
        yield served.url
