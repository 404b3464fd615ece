"""The per-process metrics mode (METRICS_PORT), in a child process of its own (the mode is chosen once a process): its
metrics in memory, served on its port, no file written even with PROMETHEUS_MULTIPROC_DIR inherited, nothing left
behind by a SIGKILL; the API's endpoint adds the scrape-time metrics, a worker's does not."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[4]

WORKER = """
import socket
import sys
from agent.infra import metrics, metrics_server

metrics.count_events(["search", "search", "planning"])
metrics.task_started("t-1", "tasks.x")
taken = int(sys.argv[1])
held = socket.socket()
held.bind(("0.0.0.0", taken))
held.listen()
print(metrics_server.start(port=taken), metrics_server.start(), metrics_server.start(), flush=True)
sys.stdin.read()
"""

API = """
import sys
import fakeredis
import psycopg
from agent.infra import metrics, metrics_server
from agent.settings import get_settings
import workers.signals  # the topology's queues and breakers, as the API imports them

class DownPool:
    def connection(self, timeout):
        raise psycopg.OperationalError("connection refused")

class Ctx:
    settings = get_settings()
    pool = DownPool()
    redis_one_attempt = fakeredis.FakeRedis(server=fakeredis.FakeServer())

Ctx.redis_one_attempt.lpush("llm", "m1", "m2")
metrics.count_events(["job_status"])
body, _ = metrics.render_metrics(Ctx())
sys.stdout.write(body.decode().replace("\\n", "\\\\n") + "\\n")
print(metrics_server.start(scrape=Ctx), flush=True)
sys.stdin.read()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def child(tmp_path):
    """Start `script` in a per-process child (METRICS_PORT set, and a multiprocess directory it must ignore)."""
    procs: list[subprocess.Popen] = []

    def start(script: str, *args: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
        env |= {"FINAGENT_METRICS_PORT": str(free_port()), "FINAGENT_DATA_DIR": str(tmp_path / "data"),
                "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "inherited")}
        (tmp_path / "inherited").mkdir(exist_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(30)


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def files(tmp_path: Path) -> list[Path]:
    return [p for p in tmp_path.rglob("*") if p.is_file()]


def test_a_worker_serves_its_own_metrics_from_memory_and_a_sigkill_leaves_nothing(child, tmp_path):
    taken = free_port()
    proc = child(WORKER, str(taken))
    assert proc.stdout is not None
    refused, port, again = proc.stdout.readline().split()
    assert refused == "None"  # a port already taken: logged, and the worker carries on without its endpoint
    assert again == port != "None"
    samples = scrape(int(port))
    assert samples[("finagent_events_published_total", (("type", "search"),))] == 2
    assert samples[("finagent_tasks_in_progress", (("task", "tasks.x"),))] == 1
    assert not [n for n, _ in samples if n.endswith("_created")]  # as in the files: no creation-time series
    # the cluster-wide gauges are the API's alone: a sum over every target counts them once
    scrape_time = {"finagent_jobs", "finagent_job_oldest_active_seconds", "finagent_queue_depth", "finagent_queue_consumers",
                   "finagent_circuit_breaker_state", "finagent_circuit_breaker_failures", "finagent_scrape_source_up"}
    assert not {n for n, _ in samples} & scrape_time
    assert files(tmp_path) == []  # not even with PROMETHEUS_MULTIPROC_DIR inherited
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert files(tmp_path) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_the_api_serves_its_own_metrics_with_the_scrape_time_ones(child, tmp_path):
    proc = child(API)
    assert proc.stdout is not None
    rendered = proc.stdout.readline().rstrip("\n").replace("\\n", "\n")
    port = int(proc.stdout.readline())
    for text in (rendered, httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text):  # GET /metrics, the port
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert {s.labels["type"]: s.value for s in families["finagent_events_published"].samples} == {"job_status": 1}
        assert {s.labels["queue"]: s.value for s in families["finagent_queue_depth"].samples}["llm"] == 2
        assert {s.labels["queue"] for s in families["finagent_queue_consumers"].samples} >= {"llm", "coordinator"}
        assert {s.labels["source"]: s.value for s in families["finagent_scrape_source_up"].samples} == {"postgres": 0, "redis": 1}
    assert files(tmp_path) == []
