from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _metrics_dir(tmp_path_factory):
    """Prometheus metrics recorded in the unit tier go to a temporary directory, never under the default data_dir
    (agent/infra/metrics.py takes PROMETHEUS_MULTIPROC_DIR when it is set)."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(tmp_path_factory.mktemp("metrics")))
