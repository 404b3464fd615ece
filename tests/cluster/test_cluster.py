"""The cluster tier: finagent from docker-compose.yml's own definitions on five hosts made of network namespaces
(bench/cluster.py), over TCP with passwords and TLS. Jobs go through end to end from the three kinds of client (HTTP,
the Celery contract, `finagent batch run`), then the two short fault scenarios run with jobs in flight (Redis
restarted from its AOF, a worker host lost for good), and the harness leaves nothing behind. The two partitions (30 s
and 20 s of fault each) run in the full command, `python bench/cluster.py --json` (docs/operators.md).
Needs root and iproute2; Redis is Debian's redis-server (installed by the harness when missing)."""
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


def test_jobs_run_across_hosts_through_faults_and_nothing_is_left(can_run_cluster):
    report = run(jobs=1, timeout_s=300.0, root=DEFAULT_ROOT.with_name("fa-cluster-test"),
                 scenarios=["redis_restart", "worker_host_lost"], scenario_jobs=4)

    assert report.error is None, report.error
    assert report.by_client == {"http": 1, "celery": 1, "batch": 2}
    # one Redis user per role (ops/redis, compose's overrides): the contract's user may not push to an internal queue
    assert report.acl_refused_internal_push is True
    assert report.other_key_404 is True  # jobs belong to the API key that created them
    assert report.completed == report.jobs == 4 and report.lost == 0 and report.duplicated == 0
    worker_hosts = {h.name for h in HOSTS if h.name.startswith("fa-w")}
    assert set(report.worker_hosts_used) <= worker_hosts, "a job ran somewhere other than a worker host"
    assert report.worker_hosts_used, "the tool ledger names no worker host"
    for host, corpora in report.keyword_index.items():  # every searching host keeps its own BM25 index whole
        for corpus, index in corpora.items():
            if index["max_chunk_id"]:
                assert index["watermark"] == index["max_chunk_id"], (host, corpus, index)
                assert index["rare_words"] and index["rare_words_found"] == index["rare_words"], (host, corpus, index)
    assert set(report.keyword_index) == worker_hosts
    assert list(report.scenarios) == ["redis_restart", "worker_host_lost"]
    for name, scenario in report.scenarios.items():
        assert scenario["error"] is None, (name, scenario["error"])
        assert scenario["completed"] == scenario["jobs"] == 4, (name, scenario)
        assert scenario["lost"] == 0 and scenario["duplicated"] == 0, (name, scenario)
        assert scenario["recovery_s"] is not None, (name, "the jobs caught by the fault never moved on")
    assert report.services_lost and all(s.startswith("fa-w1/") for s in report.services_lost)
    # the cluster's Prometheus, with ops/prometheus's config and rules, fires FinagentWorkerDown for the lost host
    assert report.prometheus_alert_fired, report.prometheus_alerts
    assert all(a["instance"].startswith("fa-w1:") for a in report.prometheus_alerts)
    assert report.services_down == {}
    assert net.leftovers() == []
    assert not DEFAULT_ROOT.with_name("fa-cluster-test").exists()
