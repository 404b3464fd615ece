"""The cluster tier: finagent from docker-compose.yml's own definitions on five hosts made of network namespaces
(bench/cluster.py), over TCP with passwords and TLS. One job goes through end to end, and the harness leaves nothing
behind. Needs root and iproute2; Redis is Debian's redis-server (installed by the harness when missing)."""
from __future__ import annotations

import pytest

from bench import cluster_net as net
from bench.cluster import DEFAULT_ROOT, HOSTS, ClusterError, _redis_server, run

pytestmark = [pytest.mark.cluster, pytest.mark.integration]


@pytest.fixture(scope="module")
def can_run_cluster() -> None:
    why = net.netns_available()
    if why is not None:
        pytest.skip(f"the cluster tier {why}")
    try:
        _redis_server()
    except (ClusterError, OSError) as exc:
        pytest.skip(f"the cluster tier needs Debian's redis-server (TLS): {exc}")


def test_a_job_runs_across_hosts_and_nothing_is_left(can_run_cluster):
    report = run(jobs=1, timeout_s=300.0, root=DEFAULT_ROOT.with_name("fa-cluster-test"))

    assert report.error is None, report.error
    assert report.completed == 1 and report.lost == 0 and report.duplicated == 0
    assert set(report.worker_hosts_used) <= {h.name for h in HOSTS if h.name.startswith("fa-w")}
    assert report.worker_hosts_used, "the tool ledger names no worker host"
    assert report.services_down == {}
    assert net.leftovers() == []
    assert not DEFAULT_ROOT.with_name("fa-cluster-test").exists()
