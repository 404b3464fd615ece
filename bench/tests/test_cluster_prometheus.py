"""The cluster's Prometheus config from the operators' one: compose service targets become the hosts running them."""
from __future__ import annotations

import json

from bench.cluster_prometheus import cluster_config, firing

CONFIG = """
global: {scrape_interval: 15s}
rule_files: [../alerts.yml]
scrape_configs:
  - job_name: finagent-api
    static_configs:
      - targets: ["api:9180"]
  - job_name: finagent-workers
    static_configs:
      - targets: ["worker-search:9182"]
        labels: {pool: search}
      - targets: ["worker-gpu:9199"]
"""


def test_each_service_target_becomes_its_hosts_at_the_same_port(tmp_path):
    (tmp_path / "config").mkdir()
    path = tmp_path / "config" / "prometheus.yml"
    path.write_text(CONFIG)
    doc = cluster_config(path, {"api": ["h-api"], "worker-search": ["h-w1", "h-w2"]})
    api, workers = doc["scrape_configs"]
    assert api["static_configs"][0]["targets"] == ["h-api:9180"]
    assert workers["static_configs"][0] == {"targets": ["h-w1:9182", "h-w2:9182"], "labels": {"pool": "search"}}
    assert workers["static_configs"][1]["targets"] == []  # a service that runs nowhere has no target
    assert doc["rule_files"] == [str((tmp_path / "alerts.yml").resolve())]
    assert doc["global"]["evaluation_interval"] == doc["global"]["scrape_interval"] == "5s"


def test_firing_picks_the_named_alert_on_the_instance():
    answer = json.dumps({"data": {"alerts": [
        {"state": "firing", "labels": {"alertname": "WorkerDown", "instance": "h-w1:9182"}},
        {"state": "pending", "labels": {"alertname": "WorkerDown", "instance": "h-w1:9183"}},
        {"state": "firing", "labels": {"alertname": "WorkerDown", "instance": "h-w2:9182"}},
        {"state": "firing", "labels": {"alertname": "Other", "instance": "h-w1:9182"}},
    ]}})
    assert [a["labels"]["instance"] for a in firing(answer, "WorkerDown", "h-w1:")] == ["h-w1:9182"]
    assert firing("{}", "WorkerDown") == []
