"""ops/prometheus: the scrape config matches docker-compose.yml's metrics ports, the alert rules and every Grafana panel
name only metrics we export (read from agent/infra/metrics.py's definitions), and promtool, when it is installed
(Debian's `prometheus` package), accepts the config and the rules and passes the rules' unit tests."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agent.infra.metrics import exported_metrics

REPO = Path(__file__).resolve().parents[3]
PROM = REPO / "ops" / "prometheus"
CONFIG = PROM / "config" / "prometheus.yml"
RULES = PROM / "alerts.yml"
RULE_TESTS = PROM / "tests" / "alerts_test.yml"
DASHBOARD = PROM / "grafana-dashboard.json"
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())

PROMETHEUS_OWN = {"up"}  # series Prometheus itself writes for every target
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
# PromQL words that look like metric names: aggregation modifiers, binary operators, literals
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
            "inf", "nan"}


def series_names() -> set[str]:
    """Every series name a scrape of finagent can hold: each family's name with its type's suffixes."""
    return {name + suffix for name, kind in exported_metrics().items() for suffix in SUFFIXES[kind]}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions, keywords, label names,
    label values or durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values and string arguments
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)  # label lists
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range and subquery durations
    found = re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", expr)
    return {m.group(1) for m in found if not m.group(2) and m.group(1).lower() not in KEYWORDS}


def panels(node: dict) -> list[dict]:
    """Every panel of the dashboard, those inside collapsed rows too."""
    out = []
    for panel in node.get("panels", []):
        out.append(panel)
        out.extend(panels(panel))
    return out


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


# ---------- metric names ----------

def test_the_name_reader_finds_metrics_and_nothing_else():
    expr = ('histogram_quantile(0.95, sum by (le, task) (rate(finagent_task_duration_seconds_bucket{task=~"a|b"}[5m])))'
            ' / on (task) group_left sum without (instance) (up{job="x"} offset 1h) > bool 1e3 and nan_series')
    assert metric_names(expr) == {"finagent_task_duration_seconds_bucket", "up", "nan_series"}


def test_the_exported_names_come_from_the_definitions():
    names = series_names()
    assert {"finagent_jobs", "finagent_jobs_finished_total", "finagent_task_duration_seconds_bucket",
            "finagent_queue_consumers", "finagent_job_oldest_active_seconds"} <= names
    assert "finagent_jobs_finished" not in names and "finagent_jobs_total" not in names  # a counter's, a gauge's


def test_every_dashboard_expression_names_only_metrics_we_export():
    exprs = dashboard_exprs()
    assert exprs
    allowed = series_names() | PROMETHEUS_OWN
    for expr in exprs:
        named = metric_names(expr)
        assert named, f"no metric in {expr!r}"
        assert named <= allowed, f"{sorted(named - allowed)} in {expr!r} is not a metric finagent exports"


def test_the_dashboard_shows_what_an_operator_starts_from():
    used = {re.sub(r"_(total|bucket|sum|count)$", "", n) for e in dashboard_exprs() for n in metric_names(e)}
    wanted = {"finagent_jobs", "finagent_jobs_finished", "finagent_task_duration_seconds", "finagent_llm_calls",
              "finagent_llm_tokens", "finagent_llm_cost_usd", "finagent_llm_cache_hits", "finagent_llm_cache_misses",
              "finagent_queue_depth", "finagent_circuit_breaker_state"}
    assert wanted <= used, wanted - used
    task_panels = " ".join(dashboard_exprs())
    assert "histogram_quantile(0.5, sum by (le, task)" in task_panels and "histogram_quantile(0.95, sum by (le, task)" in task_panels


def test_a_dashboard_naming_a_metric_we_do_not_export_is_caught():
    assert not metric_names("sum(rate(finagent_jobs_finshed_total[5m]))") <= series_names()


def test_the_alert_rules_name_only_metrics_we_export_and_cover_the_failures_operators_watch():
    allowed = series_names() | PROMETHEUS_OWN
    rules = alert_rules()
    for rule in rules:
        assert metric_names(rule["expr"]) <= allowed, rule["alert"]
    names = {r["alert"] for r in rules}
    assert {"FinagentWorkerDown", "FinagentQueueWithoutConsumer", "FinagentJobsStuck", "FinagentCircuitBreakerOpen",
            "FinagentJobFailureRate"} <= names
    worker_down = next(r for r in rules if r["alert"] == "FinagentWorkerDown")
    assert worker_down["expr"] == 'up{job="finagent-workers"} == 0' and worker_down["for"] == "15s"


# ---------- the scrape config and docker-compose.yml ----------

def compose_metrics_ports() -> dict[str, int]:
    """Each compose service with a FINAGENT_METRICS_PORT: that port."""
    return {name: int(svc["environment"]["FINAGENT_METRICS_PORT"]) for name, svc in COMPOSE["services"].items()
            if "FINAGENT_METRICS_PORT" in (svc.get("environment") or {})}


def test_every_worker_service_and_the_api_serve_metrics_on_ports_of_their_own():
    ports = compose_metrics_ports()
    workers = {n for n in COMPOSE["services"] if n.startswith("worker-")}
    assert set(ports) == workers | {"api"}
    assert len(set(ports.values())) == len(ports)  # the pools of one host (the cluster's) do not collide
    assert "metrics" not in COMPOSE.get("volumes", {})  # no disk shared between the processes
    for svc in COMPOSE["services"].values():
        assert not any(str(p).split(":")[-1] == str(port) for p in svc.get("ports", []) for port in ports.values())


def test_the_scrape_config_scrapes_each_of_those_services_once_by_name_and_port():
    config = yaml.safe_load(CONFIG.read_text())
    jobs = {job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]] for job in config["scrape_configs"]}
    expected = {f"{name}:{port}" for name, port in compose_metrics_ports().items()}
    assert sorted(t for targets in jobs.values() for t in targets) == sorted(expected)
    assert jobs["finagent-api"] == [f"api:{compose_metrics_ports()['api']}"]  # the scrape-time gauges: one target
    pools = {sc["labels"]["pool"]: sc["targets"] for job in config["scrape_configs"] if job["job_name"] == "finagent-workers"
             for sc in job["static_configs"]}
    assert pools == {n.removeprefix("worker-"): [f"{n}:{p}"] for n, p in compose_metrics_ports().items() if n != "api"}
    assert (CONFIG.parent / config["rule_files"][0]).resolve() == RULES


# ---------- promtool ----------

def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not on PATH: apt-get install prometheus (Debian's package ships it)")
    return found


def run(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_promtool_accepts_every_rule_file_and_the_config():
    rule_files = sorted(PROM.glob("*.yml"))
    assert rule_files == [RULES]  # `promtool check rules ops/prometheus/*.yml` checks the rules and nothing else
    out = run("check", "rules", *rule_files)
    assert out.returncode == 0, out.stdout + out.stderr
    out = run("check", "config", CONFIG)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_runs_the_alert_rules_unit_tests():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    tested = {t["alertname"] for case in tests for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    assert {"FinagentWorkerDown", "FinagentQueueWithoutConsumer", "FinagentCircuitBreakerOpen"} <= tested
    out = run("test", "rules", RULE_TESTS)
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_promtool_fails_a_rule_test_whose_alert_does_not_fire(tmp_path):
    """The rule tests can fail: the worker-down test, expecting the alert while it is still pending."""
    broken = RULE_TESTS.read_text().replace("- eval_time: 45s\n        alertname: FinagentWorkerDown",
                                            "- eval_time: 30s\n        alertname: FinagentWorkerDown", 1)
    assert broken != RULE_TESTS.read_text()
    (tmp_path / "tests").mkdir()
    shutil.copy(RULES, tmp_path / "alerts.yml")
    (tmp_path / "tests" / "alerts_test.yml").write_text(broken)
    out = run("test", "rules", tmp_path / "tests" / "alerts_test.yml")
    assert out.returncode != 0 and "FinagentWorkerDown" in out.stdout + out.stderr


def test_promtool_parses_every_dashboard_expression(tmp_path):
    """Each panel's expression as a recording rule: promtool parses it as Prometheus would."""
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"finagent:panel_{i}", "expr": e}
                                                        for i, e in enumerate(dashboard_exprs())]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    out = run("check", "rules", tmp_path / "dashboard.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    (tmp_path / "broken.yml").write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "finagent:broken", "expr": "sum(rate(finagent_jobs_finished_total[5m])"}]}]}))
    assert run("check", "rules", tmp_path / "broken.yml").returncode != 0
