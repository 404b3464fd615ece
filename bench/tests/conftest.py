"""The bench tests run as the unit tier does (no services; `-m "not integration"`), with the same isolation."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _metrics_dir(tmp_path_factory):
    """Prometheus metrics recorded here go to a temporary directory, never under the default data_dir."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(tmp_path_factory.mktemp("metrics")))
