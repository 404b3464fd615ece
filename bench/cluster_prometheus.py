"""Prometheus in the cluster (bench/cluster.py): Debian's `prometheus` on the API host, with the operators' own scrape
config (ops/prometheus/config/prometheus.yml) and alert rules (ops/prometheus/alerts.yml). The config names compose
services (`worker-search:9182`); here each becomes the cluster hosts that run the service, at the same port, so
a worker pool on two hosts is two targets, as operators.md says to list them. Scrapes and rule evaluations run every
SCRAPE_S so that an alert with `for: 15s` fires within a scenario.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

SCRAPE_S = 5
PORT = 9090


def binary() -> str:
    found = shutil.which("prometheus")
    if found is None:  # Debian's package (2.x): the binary and promtool
        subprocess.run(["apt-get", "install", "-y", "prometheus"], check=True, capture_output=True)
        found = shutil.which("prometheus")
    if found is None:
        raise RuntimeError("prometheus is not installed and apt-get did not install it")
    return found


def cluster_config(config: Path, hosts_of: dict[str, list[str]]) -> dict[str, Any]:
    """The operators' scrape config with every `service:port` target replaced by `host:port` for each host running
    that service (a service running nowhere is dropped), the rule files made absolute, and the cluster's intervals."""
    doc = yaml.safe_load(config.read_text())
    doc["global"] = {**doc.get("global", {}), "scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s",
                     "scrape_timeout": f"{SCRAPE_S - 1}s"}
    doc["rule_files"] = [str((config.parent / f).resolve()) for f in doc.get("rule_files", [])]
    for job in doc.get("scrape_configs", []):
        for static in job.get("static_configs", []):
            targets = []
            for target in static.get("targets", []):
                service, _, port = target.partition(":")
                targets += [f"{host}:{port}" for host in hosts_of.get(service, [])]
            static["targets"] = targets
    return doc


def write_config(config: Path, hosts_of: dict[str, list[str]], out: Path) -> Path:
    out.write_text(yaml.safe_dump(cluster_config(config, hosts_of), sort_keys=False))
    return out


def argv(config_file: Path, data_dir: Path, address: str) -> list[str]:
    return [binary(), f"--config.file={config_file}", f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address={address}:{PORT}", "--log.level=warn"]


def firing(alerts_json: str, name: str, instance_prefix: str | None = None) -> list[dict[str, Any]]:
    """The firing alerts named `name` (on an instance starting with `instance_prefix`) in /api/v1/alerts' answer."""
    alerts = json.loads(alerts_json).get("data", {}).get("alerts", [])
    return [a for a in alerts if a.get("state") == "firing" and a.get("labels", {}).get("alertname") == name
            and (instance_prefix is None or a.get("labels", {}).get("instance", "").startswith(instance_prefix))]
